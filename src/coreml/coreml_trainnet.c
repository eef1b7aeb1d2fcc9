/* af_coreml_net: an imported package as an af_net, so af_trainer (any plan, `aneforge
 * train`-style loops, the Python Trainer) fine-tunes it. A trainer builds its net
 * several times (per program, for evaluation), each time in a graph of its own, so the
 * package's graph is recorded once as a tape (ops, shapes, attributes, constants) and
 * replayed into each graph with the trainer's input and weights in place of the
 * package's input and matched constants. The tape is one allocation: af_net_free
 * releases it with free(ctx). */
#include "coreml/coreml.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_MAX_PARAMS 4096

typedef struct {
    ir_op op;
    af_dtype dtype;
    af_shape shape;
    ir_attrs a;
    unsigned flags;
    int nsrc, src_at;   /* sources: srcs[src_at ...] (record indices) */
    int64_t data_at;    /* CONST and params: values at data[data_at ...]; else -1 */
    int name_at;        /* params: the name at names[name_at]; else -1 */
    int param;          /* the param's index, -1 for other nodes; -2 for the input */
} tape_rec;

typedef struct {
    int n, nparams, out;
    tape_rec *rec;
    int *srcs;
    float *data;
    char *names;
} tape;

static int make_params(void *ctx, af_graph *g, af_tensor **params, int max) {
    const tape *t = ctx;
    if (t->nparams > max) { ir_fail(AF_ERR_INVALID, "af_coreml_net: %d params, room for %d", t->nparams, max); return -1; }
    for (int i = 0; i < t->n; i++) {
        const tape_rec *r = &t->rec[i];
        if (r->param < 0) continue;
        params[r->param] = af_parameter(g, t->names + r->name_at, r->shape, t->data + r->data_at);
        if (!params[r->param]) return -1;
    }
    return t->nparams;
}

static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    const tape *t = ctx;
    af_graph *g = x->g;
    af_tensor **map = calloc((size_t)t->n, sizeof *map), *y = NULL;
    if (!map) { ir_fail(AF_ERR_NOMEM, "af_coreml_net: out of memory"); return NULL; }
    bool ok = true;
    for (int i = 0; ok && i < t->n; i++) {
        const tape_rec *r = &t->rec[i];
        if (r->param == -2) {
            bool same = x->shape.rank == r->shape.rank;
            for (int d = 0; same && d < r->shape.rank; d++) same = x->shape.dim[d] == r->shape.dim[d];
            if (!same) {
                char a[120], b[120];
                ir_shape_str(x->shape, a, sizeof a);
                ir_shape_str(r->shape, b, sizeof b);
                ir_graph_fail(g, "af_coreml_net: the batch's input is %s but the package's is %s; set the trainer's "
                              "batch and eval_batch to the package's batch", a, b);
                ok = false;
            } else map[i] = x;
        } else if (r->param >= 0) map[i] = w[r->param];
        else if (r->op == IR_OP_CONST) {
            map[i] = af_const(g, NULL, r->shape, t->data + r->data_at);
            if (map[i]) map[i]->dtype = r->dtype, map[i]->flags |= r->flags & IR_TF_EXACT;
        } else {
            af_tensor *src[16];
            for (int k = 0; k < r->nsrc; k++) src[k] = map[t->srcs[r->src_at + k]];
            ir_attrs a = r->a;
            map[i] = ir_build(r->op, r->nsrc, src, &a);
            if (map[i]) map[i]->flags |= r->flags & (IR_TF_EXACT | IR_TF_CONV);
        }
        ok = ok && map[i];
    }
    if (ok) {
        y = map[t->out];
        if (y->shape.rank != 2) y = af_reshape(y, AF_SHAPE(y->shape.dim[0], af_shape_count(y->shape) / y->shape.dim[0]));
    }
    free(map);
    return y;
}

af_status af_coreml_net(const char *path, const char *pattern, af_net *net) {
    if (!net) return ir_fail(AF_ERR_INVALID, "af_coreml_net: net is NULL");
    memset(net, 0, sizeof *net);
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out, *params[NET_MAX_PARAMS];
    af_status st = af_coreml_load(path, &g, &nin, &in, &nout, &out);
    if (st) return st;
    int np = 0;
    if (nin != 1 || nout != 1)
        st = ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_net: %s has %d inputs and %d outputs; a net has one of each", path, nin, nout);
    else if (in[0]->shape.rank < 2)
        st = ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_net: %s's input has rank %d; a net's input is [batch, sample...]", path, in[0]->shape.rank);
    else if ((np = af_coreml_params(g, pattern, params, NET_MAX_PARAMS)) < 0) st = AF_ERR_INVALID;
    if (st) { af_graph_free(g); return st; }
    /* the nodes the output needs, in creation (topological) order */
    bool *need = calloc((size_t)g->n, sizeof *need);
    int n = 0, nsrc = 0;
    int64_t ndata = 0;
    size_t nnames = 0;
    if (need) need[out[0]->id] = true;
    for (int i = g->n - 1; need && i >= 0; i--)
        if (need[i])
            for (int k = 0; k < g->t[i]->nsrc; k++) need[g->t[i]->src[k]->id] = true;
    for (int i = 0; need && i < g->n; i++) {
        af_tensor *t = g->t[i];
        if (!need[i]) continue;
        n++;
        nsrc += t->nsrc;
        if (t->nsrc > 16) st = ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_net: op %s has %d sources", ir_ops[t->op].name, t->nsrc);
        if (t->op == IR_OP_CONST || (t->flags & IR_TF_PARAM)) ndata += af_shape_count(t->shape);
        if (t->flags & IR_TF_PARAM) nnames += strlen(t->name) + 1;
        if (t->op == IR_OP_INPUT && !(t->flags & IR_TF_PARAM) && t != in[0])
            st = ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_net: the output needs input %s besides the package's input", af_tensor_name(t));
    }
    size_t size = sizeof(tape) + sizeof(tape_rec) * (size_t)n + sizeof(int) * (size_t)nsrc + sizeof(float) * (size_t)ndata + nnames;
    tape *tp = need && !st ? malloc(size) : NULL;
    int *idx = need && !st ? malloc(sizeof *idx * (size_t)g->n) : NULL;
    if (!st && (!tp || !idx)) st = ir_fail(AF_ERR_NOMEM, "af_coreml_net: out of memory");
    if (!st) {
        tp->rec = (tape_rec *)(tp + 1);
        tp->data = (float *)(tp->rec + n); /* floats first: aligned */
        tp->srcs = (int *)(tp->data + ndata);
        tp->names = (char *)(tp->srcs + nsrc);
        tp->n = n;
        tp->nparams = np;
        int r = 0, s = 0;
        int64_t d = 0;
        size_t nm = 0;
        for (int i = 0; i < g->n; i++) {
            af_tensor *t = g->t[i];
            if (!need[i]) continue;
            tape_rec *q = &tp->rec[r];
            *q = (tape_rec){ .op = t->op, .dtype = t->dtype, .shape = t->shape, .a = t->a, .flags = t->flags,
                             .nsrc = t->nsrc, .src_at = s, .data_at = -1, .name_at = -1, .param = -1 };
            for (int k = 0; k < t->nsrc; k++) tp->srcs[s++] = idx[t->src[k]->id];
            if (t->op == IR_OP_CONST || (t->flags & IR_TF_PARAM)) {
                q->data_at = d;
                memcpy(tp->data + d, t->data, sizeof(float) * (size_t)af_shape_count(t->shape));
                d += af_shape_count(t->shape);
            }
            if (t->flags & IR_TF_PARAM) {
                for (int k = 0; k < np; k++)
                    if (params[k] == t) q->param = k;
                q->name_at = (int)nm;
                strcpy(tp->names + nm, t->name);
                nm += strlen(t->name) + 1;
            } else if (t == in[0]) q->param = -2;
            idx[i] = r++;
        }
        tp->out = idx[out[0]->id];
        net->ctx = tp;
        net->make_params = make_params;
        net->forward = forward;
        net->sample.rank = in[0]->shape.rank - 1;
        for (int k = 1; k < in[0]->shape.rank; k++) net->sample.dim[k - 1] = in[0]->shape.dim[k];
        net->out_dim = af_shape_count(out[0]->shape) / out[0]->shape.dim[0];
    } else free(tp);
    free(idx);
    free(need);
    af_graph_free(g);
    return st;
}
