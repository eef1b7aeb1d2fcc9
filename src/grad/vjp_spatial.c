/* VJPs of pools and convolutions. Pool gradients are separable matmuls with baked
 * 0/1 (or 1/k) matrices, so they need no strided scatter (on the CPU target, one native
 * pool-gradient node instead); conv's input gradient is a
 * transposed conv with the forward weight. */
#include "grad/grad.h"
#include "ir/op_cases.h"

#include <stdlib.h>

/* P[o, i] = v when input i lies in pool window o (size k, stride s, pad p). */
static af_tensor *window_matrix(af_graph *g, int64_t out, int64_t in, int k, int s, int p, float v, bool transpose) {
    float *m = calloc((size_t)(out * in), sizeof *m);
    if (!m) { ir_graph_fail(g, "pool VJP: out of memory"); return NULL; }
    for (int64_t o = 0; o < out; o++)
        for (int u = 0; u < k; u++) {
            int64_t i = o * s - p + u;
            if (i >= 0 && i < in) m[transpose ? i * out + o : o * in + i] = v;
        }
    af_tensor *r = transpose ? af_const(g, NULL, AF_SHAPE(in, out), m) : af_const(g, NULL, AF_SHAPE(out, in), m);
    free(m);
    return r;
}

/* Ph^T y Pw: spreads [N,C,Ho,Wo] back over [N,C,H,W] through the windows. */
static af_tensor *spread(af_tensor *y, af_shape xs, const ir_attrs *a, float vh, float vw) {
    af_graph *g = y->g;
    af_tensor *pht = window_matrix(g, y->shape.dim[2], xs.dim[2], a->kernel[0], a->stride[0], a->pad[0], vh, true);
    af_tensor *pw = window_matrix(g, y->shape.dim[3], xs.dim[3], a->kernel[1], a->stride[1], a->pad[1], vw, false);
    return af_matmul(af_matmul(pht, y, 0, 0), pw, 0, 0);
}

void grad_vjp_pool(grad_ctx *c) {
    switch (c->t->op) { /* avg_pool below, else max_pool */
    case IR_OP_AVG_POOL: case IR_OP_MAX_POOL: break;
    case IR_OP_AVG_POOL_GRAD: case IR_OP_MAX_POOL_GRAD: return; /* OPF_NODIFF: af_backward refuses them first */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, POOL, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *t = c->t, *x = t->src[0];
    const ir_attrs *a = &t->a;
    if (x->g->cpu_only) { /* the CPU target: one native node, any window layout */
        c->dsrc[0] = ir_pool_grad(t->op == IR_OP_AVG_POOL ? IR_OP_AVG_POOL_GRAD : IR_OP_MAX_POOL_GRAD, x, c->g, a);
        return;
    }
    if (t->op == IR_OP_AVG_POOL) {
        c->dsrc[0] = spread(c->g, x->shape, a, 1.0f / (float)a->kernel[0], 1.0f / (float)a->kernel[1]);
        return;
    }
    bool disjoint = a->stride[0] == a->kernel[0] && a->stride[1] == a->kernel[1] && a->pad[0] == 0 && a->pad[1] == 0 &&
                    x->shape.dim[2] % a->kernel[0] == 0 && x->shape.dim[3] % a->kernel[1] == 0;
    if (!disjoint) {
        ir_graph_fail(x->g, "max_pool VJP: needs non-overlapping windows that tile the input (stride == kernel, pad 0, "
                            "H and W divisible by the kernel); got kernel %dx%d stride %dx%d pad %dx%d. Use avg_pool, "
                            "or crop the input", a->kernel[0], a->kernel[1], a->stride[0], a->stride[1], a->pad[0], a->pad[1]);
        return;
    }
    /* The gradient goes to every position equal to its window's max. */
    af_tensor *mask = af_equal(x, spread(t, x->shape, a, 1.0f, 1.0f));
    c->dsrc[0] = af_mul(mask, spread(c->g, x->shape, a, 1.0f, 1.0f));
}

/* The weight gradient of a stride-1 conv with a computed weight (a CPU-target conv:
 * engines need baked conv weights): one GEMM of the output gradient laid out
 * [Cout, N*L] against im2col patches of x laid out [Cin*kh*kw, N*L], built from the
 * batch-major transposes so the whole batch is summed inside the product. Graphs
 * targeted at the CPU get the native conv_weight_grad node instead. */
static af_tensor *conv_weight_grad(af_tensor *x, af_tensor *g, af_tensor *w, const ir_attrs *a) {
    if (x->g->cpu_only) /* the CPU target: one native node (im2col into scratch + GEMM per image) */
        return ir_conv_weight_grad(x, g, (int)w->shape.dim[2], (int)w->shape.dim[3], a->stride, a->pad, a->dilation);
    int perm[4] = { 1, 0, 2, 3 };
    int64_t cout = g->shape.dim[1];
    af_tensor *pk = grad_im2col_wide(x, (int)w->shape.dim[2], (int)w->shape.dim[3], a->pad[0], a->pad[1]);
    af_tensor *gk = af_reshape(af_transpose(g, perm), AF_SHAPE(cout, -1)); /* [Cout, N*L] */
    return af_reshape(af_matmul(gk, pk, 0, 1), w->shape);
}

void grad_vjp_conv(grad_ctx *c) {
    switch (c->t->op) { /* conv and its transpose below */
    case IR_OP_CONV: case IR_OP_CONV_TRANSPOSE: break;
    case IR_OP_CONV_WEIGHT_GRAD: return; /* OPF_NODIFF: af_backward refuses it first */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, CONV, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *t = c->t, *w = t->src[1];
    const ir_attrs *a = &t->a;
    bool unit = a->stride[0] == 1 && a->stride[1] == 1 && a->groups == 1;
    if (c->need[1] && (t->op != IR_OP_CONV || !unit || a->dilation[0] != 1 || a->dilation[1] != 1)) {
        ir_graph_fail(t->g, "%s VJP: a weight gradient needs a conv with stride 1, dilation 1 and groups 1; for a "
                            "trainable weight use af_conv_param with af_conv2d", ir_ops[t->op].name);
        return;
    }
    if (c->need[1]) c->dsrc[1] = conv_weight_grad(t->src[0], c->g, w, a);
    if (!c->need[0]) return;
    if (t->op == IR_OP_CONV_TRANSPOSE) { /* its adjoint is the forward conv */
        c->dsrc[0] = af_conv(c->g, w, a->stride, a->pad, a->dilation, 1);
        return;
    }
    if (!unit) {
        ir_graph_fail(t->g, "conv VJP: stride %dx%d, groups %d: the input gradient needs stride 1 and groups 1 "
                            "(conv_transpose lacks output_padding); downsample with avg_pool instead",
                      a->stride[0], a->stride[1], a->groups);
        return;
    }
    c->dsrc[0] = af_conv_transpose(c->g, w, a->stride, a->pad, a->dilation);
}
