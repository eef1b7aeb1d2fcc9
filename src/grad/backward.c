/* The backward driver: walks the graph in reverse creation order (a reverse
 * topological order), calling each node's VJP and summing gradient contributions. */
#include "grad/grad.h"

#include <stdlib.h>
#include <string.h>

/* Each op's VJP is its kind's (GRAD_VJP_<KIND>; a kind without one does not compile).
 * Leaves have none; ops flagged OPF_ZEROGRAD are never asked for theirs. */
#define GRAD_VJP_LEAF NULL
#define GRAD_VJP_BINARY grad_vjp_binary
#define GRAD_VJP_SELECT grad_vjp_select
#define GRAD_VJP_SCALAR grad_vjp_unary
#define GRAD_VJP_UNARY grad_vjp_unary
#define GRAD_VJP_MATMUL grad_vjp_matmul
#define GRAD_VJP_REDUCE grad_vjp_reduce
#define GRAD_VJP_SOFTMAX grad_vjp_softmax
#define GRAD_VJP_LAYOUT grad_vjp_layout
#define GRAD_VJP_NORM grad_vjp_norm
#define GRAD_VJP_POOL grad_vjp_pool
#define GRAD_VJP_CONV grad_vjp_conv
#define GRAD_VJP_CAST grad_vjp_cast
#define GRAD_VJP_RANK grad_vjp_rank
#define GRAD_VJP_REARRANGE grad_vjp_rearrange
#define GRAD_VJP_GEOMETRY grad_vjp_geometry
#define GRAD_VJP_BNORM grad_vjp_bnorm
#define GRAD_VJP_EINSUM grad_vjp_einsum
#define GRAD_VJP_ATTENTION grad_vjp_attention
#define GRAD_VJP_STRUCTURAL grad_vjp_structural

const grad_vjp_fn grad_vjps[IR_OP_COUNT] = {
#define X(id, name, arity, kind, ...) [IR_OP_##id] = GRAD_VJP_##kind,
#include "ir/ops.def"
#undef X
};

int af_op_has_vjp(int op) {
    if ((unsigned)op >= IR_OP_COUNT) return 0;
    unsigned f = ir_ops[op].flags;
    return (f & (OPF_LEAF | OPF_ZEROGRAD)) || ((f & OPF_DIFF) && grad_vjps[op]);
}

static af_status backward_impl(af_tensor *seed, af_tensor *root, int n, af_tensor *const *params,
                               af_tensor **grads, int nstop, af_tensor *const *stop) {
    af_graph *g = root->g;
    int n0 = g->n; /* nodes added below are gradient nodes, never walked */
    bool *dep = calloc((size_t)n0, sizeof *dep), *cut = calloc((size_t)n0, sizeof *cut);
    af_tensor **acc = calloc((size_t)n0, sizeof *acc);
    if (!dep || !cut || !acc) {
        free(dep); free(cut); free(acc);
        return ir_fail(AF_ERR_NOMEM, "af_backward: out of memory");
    }
    /* dep: gradient arriving here reaches some param. It flows through a frontier
     * tensor only when that tensor is itself a param (then it stops there). */
    bool *param = calloc((size_t)n0, sizeof *param);
    if (!param) {
        free(dep); free(cut); free(acc);
        return ir_fail(AF_ERR_NOMEM, "af_backward: out of memory");
    }
    for (int i = 0; i < n; i++) dep[params[i]->id] = param[params[i]->id] = true;
    for (int i = 0; i < nstop; i++) cut[stop[i]->id] = true;
    for (int id = 0; id < n0; id++) {
        af_tensor *t = g->t[id];
        for (int k = 0; k < t->nsrc && !dep[id]; k++) {
            int s = t->src[k]->id;
            if (dep[s] && (!cut[s] || param[s])) dep[id] = true;
        }
    }
    free(param);
    acc[root->id] = seed;
    for (int id = root->id; id >= 0 && !g->error; id--) {
        af_tensor *t = g->t[id];
        if (!acc[id] || !dep[id] || t->nsrc == 0) continue;
        if (cut[id] && id != root->id) continue;
        bool need[AF_MAX_RANK * 8] = { 0 };
        af_tensor *dsrc_small[64] = { 0 };
        af_tensor **dsrc = t->nsrc <= 64 ? dsrc_small : calloc((size_t)t->nsrc, sizeof *dsrc);
        bool *needp = t->nsrc <= (int)(sizeof need / sizeof need[0]) ? need : calloc((size_t)t->nsrc, sizeof *needp);
        if (!dsrc || !needp) {
            ir_graph_fail(g, "af_backward: out of memory");
            break;
        }
        bool any = false;
        for (int k = 0; k < t->nsrc; k++) any |= needp[k] = dep[t->src[k]->id];
        /* A repeated source must get its contribution once per use: each slot is summed. */
        if (any && !(ir_ops[t->op].flags & OPF_ZEROGRAD)) {
            if (ir_ops[t->op].flags & OPF_NODIFF) {
                ir_graph_fail(g, "af_backward: op %s is made only inside backward graphs and is not differentiable; "
                                 "take higher-order gradients on a graph without af_graph_set_target(g, AF_TARGET_CPU), "
                                 "whose backward keeps the portable construction", ir_ops[t->op].name);
            } else if (!grad_vjps[t->op]) {
                ir_graph_fail(g, "af_backward: op %s has no VJP rule", ir_ops[t->op].name);
            } else {
                grad_ctx c = { .t = t, .g = acc[id], .need = needp, .dsrc = dsrc };
                grad_vjps[t->op](&c);
                for (int k = 0; k < t->nsrc && !g->error; k++) {
                    int sid = t->src[k]->id;
                    if (!needp[k] || !dsrc[k]) continue;
                    acc[sid] = acc[sid] ? af_add(acc[sid], dsrc[k]) : dsrc[k];
                }
            }
        }
        if (dsrc != dsrc_small) free(dsrc);
        if (needp != need) free(needp);
    }
    for (int i = 0; i < n && !g->error; i++) {
        af_tensor *gr = acc[params[i]->id];
        grads[i] = gr ? gr : grad_zeros_like(params[i]);
    }
    free(dep);
    free(cut);
    free(acc);
    if (g->error) {
        for (int i = 0; i < n; i++) grads[i] = NULL;
        return ir_fail(AF_ERR_INVALID, "%s", g->error);
    }
    return AF_OK;
}

static af_status check_args(const char *fn, af_graph *g, int n, af_tensor *const *params, af_tensor **grads,
                            int nstop, af_tensor *const *stop) {
    if (!g) return ir_fail(AF_ERR_INVALID, "%s: the loss or root is NULL (an earlier builder failed?)", fn);
    if (g->error) return ir_fail(AF_ERR_INVALID, "%s: the graph has an error: %s", fn, g->error);
    if (n < 1 || !params || !grads) return ir_fail(AF_ERR_INVALID, "%s: pass at least one param and room for its gradient", fn);
    for (int i = 0; i < n; i++) {
        grads[i] = NULL;
        if (!params[i] || params[i]->g != g)
            return ir_fail(AF_ERR_INVALID, "%s: param %d is NULL or from another graph", fn, i);
    }
    if (nstop < 0 || (nstop > 0 && !stop)) return ir_fail(AF_ERR_INVALID, "%s: nstop = %d but stop is NULL", fn, nstop);
    for (int i = 0; i < nstop; i++)
        if (!stop[i] || stop[i]->g != g) return ir_fail(AF_ERR_INVALID, "%s: stop tensor %d is NULL or from another graph", fn, i);
    return AF_OK;
}

/* Both entry points share the options: loss_scale 0 means 1, no stop list means the params. */
static af_status backward_with(af_tensor *seed, af_tensor *root, int n, af_tensor *const *params, af_tensor **grads,
                               const af_backward_opts *o) {
    if (o->nstop == 0) return backward_impl(seed, root, n, params, grads, n, params);
    return backward_impl(seed, root, n, params, grads, o->nstop, o->stop);
}

af_status af_backward_from(af_tensor *seed, af_tensor *root, int n, af_tensor *const *params, af_tensor **grads,
                           const af_backward_opts *opts) {
    af_backward_opts o = opts ? *opts : (af_backward_opts){ 0 };
    af_status st = check_args("af_backward_from", root ? root->g : NULL, n, params, grads, o.nstop, o.stop);
    if (st) return st;
    if (!seed || seed->g != root->g) return ir_fail(AF_ERR_INVALID, "af_backward_from: seed is NULL or from another graph");
    if (!ir_shape_eq(seed->shape, root->shape)) {
        char a[100], b[100];
        ir_shape_str(seed->shape, a, sizeof a);
        ir_shape_str(root->shape, b, sizeof b);
        return ir_fail(AF_ERR_SHAPE, "af_backward_from: seed shape %s differs from root shape %s", a, b);
    }
    if (o.loss_scale != 0.0f && o.loss_scale != 1.0f) seed = af_muls(seed, o.loss_scale);
    if (!seed) return ir_fail(AF_ERR_INVALID, "af_backward_from: %s", root->g->error ? root->g->error : "could not scale the seed");
    return backward_with(seed, root, n, params, grads, &o);
}

af_status af_backward(af_loss *loss, int n, af_tensor *const *params, af_tensor **grads, const af_backward_opts *opts) {
    af_backward_opts o = opts ? *opts : (af_backward_opts){ 0 };
    float scale = o.loss_scale == 0.0f ? 1.0f : o.loss_scale;
    af_status st = check_args("af_backward", loss ? loss->g : NULL, n, params, grads, o.nstop, o.stop);
    if (st) return st;
    af_tensor *seed;
    if (loss->kind == AF_LOSS_CE) {
        /* Analytic and fp16-stable (no log): (softmax(z) - y) * (scale / N). */
        af_tensor *z = loss->root;
        float rows = (float)(af_shape_count(z->shape) / z->shape.dim[z->shape.rank - 1]);
        float k = scale / rows;
        if (z->g->cpu_only && z->shape.rank == 2) /* one native node: softmax - y, scaled, a pass per row */
            seed = ir_softmax_xent_grad(z, loss->target, af_const_fill(z->g, AF_SHAPE(1, 1), k), true);
        else
            seed = af_muls(af_sub(af_softmax(z, -1), loss->target), k);
    } else {
        seed = grad_const_like(loss->root, scale); /* dL/dloss folded into the constant */
    }
    if (!seed) return ir_fail(AF_ERR_INVALID, "af_backward: %s", loss->g->error ? loss->g->error : "could not build the seed");
    return backward_with(seed, loss->root, n, params, grads, &o);
}
