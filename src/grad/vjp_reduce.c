/* VJPs of reductions, softmax and the norms. Broadcasting the reduced gradient back
 * uses g * const_like(x, c), the tensor-tensor form that is wall-proof on the engine. */
#include "grad/grad.h"
#include "ir/op_cases.h"

/* g reshaped to the keep_dims shape of a reduction of x. */
static af_tensor *keep_dims_shape(af_tensor *g, af_tensor *t) {
    if (t->a.keep_dims) return g;
    af_shape s = t->src[0]->shape;
    unsigned mask = (unsigned)t->a.ints[0];
    for (int i = 0; i < s.rank; i++)
        if (mask & (1u << i)) s.dim[i] = 1;
    return af_reshape(g, s);
}

void grad_vjp_reduce(grad_ctx *c) {
    af_tensor *t = c->t, *x = t->src[0];
    af_tensor *gk = keep_dims_shape(c->g, t);
    int64_t n = af_shape_count(x->shape) / af_shape_count(t->shape);
    switch (t->op) {
    case IR_OP_REDUCE_SUM: c->dsrc[0] = af_mul(gk, grad_const_like(x, 1.0f)); break;
    case IR_OP_REDUCE_MEAN: c->dsrc[0] = af_mul(gk, grad_const_like(x, 1.0f / (float)n)); break;
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: /* every position equal to the extreme gets the gradient */
        c->dsrc[0] = af_mul(af_equal(x, keep_dims_shape(t, t)), gk);
        break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, REDUCE, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        break;
    }
}

void grad_vjp_softmax(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g;
    int ax = t->a.axis;
    af_tensor *dot = af_reduce_sum(af_mul(g, t), 1, &ax, 1);
    c->dsrc[0] = af_mul(t, af_sub(g, dot));
}

/* Normalised values and 1/std over `axes` (keep_dims). */
static void norm_stats(af_tensor *x, int naxes, const int *axes, float eps, bool center, af_tensor **xhat,
                       af_tensor **r) {
    af_tensor *xc = center ? af_sub(x, af_reduce_mean(x, naxes, axes, 1)) : x;
    *r = af_rsqrt(af_adds(af_reduce_mean(af_square(xc), naxes, axes, 1), eps));
    *xhat = af_mul(xc, *r);
}

/* dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); without centering the
 * mean(dxhat) term drops out. */
static af_tensor *norm_dx(af_tensor *dxhat, af_tensor *xhat, af_tensor *r, int naxes, const int *axes, bool center) {
    af_tensor *proj = af_mul(xhat, af_reduce_mean(af_mul(dxhat, xhat), naxes, axes, 1));
    af_tensor *d = af_sub(dxhat, proj);
    if (center) d = af_sub(d, af_reduce_mean(dxhat, naxes, axes, 1));
    return af_mul(d, r);
}

/* Sums v over every axis except `axis` and lays the result out like p. */
static af_tensor *param_grad(af_tensor *v, int axis, af_tensor *p) {
    int axes[AF_MAX_RANK], n = 0;
    for (int i = 0; i < v->shape.rank; i++)
        if (i != axis) axes[n++] = i;
    af_tensor *s = n ? af_reduce_sum(v, n, axes, 1) : v;
    return af_reshape(s, p->shape);
}

void grad_vjp_norm(grad_ctx *c) {
    switch (c->t->op) { /* the four the code below tells apart */
    case IR_OP_RMS_NORM: case IR_OP_LAYER_NORM: case IR_OP_CHANNEL_LAYER_NORM: case IR_OP_GROUP_NORM: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, NORM, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *t = c->t, *x = t->src[0], *gamma = t->src[1], *g = c->g;
    int rank = x->shape.rank;
    bool center = t->op != IR_OP_RMS_NORM;
    int axis = (t->op == IR_OP_CHANNEL_LAYER_NORM || t->op == IR_OP_GROUP_NORM) ? 1 : rank - 1;
    af_tensor *gam = grad_along_axis(gamma, rank, axis);
    af_tensor *xhat, *r, *dxhat = af_mul(g, gam);
    if (t->op == IR_OP_GROUP_NORM) {
        /* Statistics over each group: view x as [N, G, C/G * spatial]. */
        int64_t nb = x->shape.dim[0], grp = t->a.groups;
        af_shape s3 = AF_SHAPE(nb, grp, af_shape_count(x->shape) / (nb * grp));
        int ax2 = 2;
        af_tensor *xh3, *r3;
        norm_stats(af_reshape(x, s3), 1, &ax2, t->a.eps, true, &xh3, &r3);
        xhat = af_reshape(xh3, x->shape);
        if (c->need[0]) c->dsrc[0] = af_reshape(norm_dx(af_reshape(dxhat, s3), xh3, r3, 1, &ax2, true), x->shape);
    } else {
        norm_stats(x, 1, &axis, t->a.eps, center, &xhat, &r);
        if (c->need[0]) c->dsrc[0] = norm_dx(dxhat, xhat, r, 1, &axis, center);
    }
    if (c->need[1]) c->dsrc[1] = param_grad(af_mul(g, xhat), axis, gamma);
    if (t->nsrc > 2 && c->need[2]) c->dsrc[2] = param_grad(g, axis, t->src[2]);
}
