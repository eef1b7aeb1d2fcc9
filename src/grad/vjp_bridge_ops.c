/* VJPs of the bridge ops (seed 004), built from graph ops. Rearranges take their
 * inverse; sort, top_k and furthest point sampling pass the gradient back to the
 * gathered positions through a one-hot matrix of their own indices (an engine has no
 * scatter); a dynamic slice does the same with a one-hot of its run-time start. */
#include "grad/grad.h"
#include "ir/op_cases.h"

#include <stdlib.h>

/* A constant [rows, cols] holding f(i, j). */
static af_tensor *table(af_graph *g, int64_t rows, int64_t cols, float (*f)(int64_t, int64_t, int64_t), int64_t arg) {
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    if (!v) { ir_graph_fail(g, "af_backward: out of memory"); return NULL; }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) v[i * cols + j] = f(i, j, arg);
    af_tensor *t = af_const(g, NULL, AF_SHAPE(rows, cols), v);
    free(v);
    return t;
}
static float col_index(int64_t i, int64_t j, int64_t arg) { (void)i; (void)arg; return (float)j; }
static float row_minus_col(int64_t i, int64_t j, int64_t arg) { (void)arg; return (float)(i - j); }
static float anti_identity(int64_t i, int64_t j, int64_t n) { return i + j == n - 1 ? 1.0f : 0.0f; }
static float lrn_band(int64_t c, int64_t j, int64_t C) {
    int64_t lo, hi;
    ir_lrn_window(c, C, &lo, &hi);
    return j >= lo && j < hi ? 1.0f : 0.0f;
}

/* onehot[..., k, n] = (idx[..., k] == n) for indices idx [..., k] into an axis of n. */
static af_tensor *one_hot(af_tensor *idx, int64_t n) {
    if (!idx) return NULL;
    af_shape s = idx->shape;
    s.dim[s.rank++] = 1;
    return af_equal(af_reshape(idx, s), table(idx->g, 1, n, col_index, 0));
}

/* The node t rebuilt with indices = 1 (attribute slot `slot`): the order it gathered. */
static af_tensor *indices_of(af_tensor *t, int slot) {
    ir_attrs a = t->a;
    a.ints[slot] = 1;
    return ir_build(t->op, t->nsrc, t->src, &a);
}

void grad_vjp_rank(grad_ctx *c) {
    switch (c->t->op) { /* sort and top_k gather back below */
    case IR_OP_SORT: case IR_OP_TOPK: break;
    case IR_OP_ARGMINMAX: case IR_OP_GLOBAL_ARGMINMAX: return; /* OPF_ZEROGRAD: never differentiated */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, RANK, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *t = c->t, *x = t->src[0];
    if (t->a.ints[2]) return; /* indices: whole numbers, no gradient */
    /* y[..., ch, j] = x[..., ch, order[j]]: dx = g @ onehot(order). */
    c->dsrc[0] = af_matmul(c->g, one_hot(indices_of(t, 2), x->shape.dim[x->shape.rank - 1]), 0, 0);
}

void grad_vjp_rearrange(grad_ctx *c) {
    af_tensor *t = c->t;
    ir_op inv = IR_OP_COUNT;
    switch (t->op) {
    case IR_OP_PIXEL_SHUFFLE: inv = IR_OP_PIXEL_UNSHUFFLE; break;
    case IR_OP_PIXEL_UNSHUFFLE: inv = IR_OP_PIXEL_SHUFFLE; break;
    case IR_OP_CHANNEL_TO_SPACE: inv = IR_OP_SPACE_TO_CHANNEL; break;
    case IR_OP_SPACE_TO_CHANNEL: inv = IR_OP_CHANNEL_TO_SPACE; break;
    case IR_OP_SPACE_TO_BATCH: inv = IR_OP_BATCH_TO_SPACE; break;
    case IR_OP_BATCH_TO_SPACE: inv = IR_OP_SPACE_TO_BATCH; break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, REARRANGE, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        return;
    }
    ir_attrs a = { .kernel = { t->a.kernel[0], t->a.kernel[1] } };
    c->dsrc[0] = ir_build(inv, 1, &c->g, &a);
}

/* g inside zeros: `before` and `after` zero rows/columns around it along axis. */
static af_tensor *pad_axis(af_tensor *g, int axis, int64_t before, int64_t after) {
    if (!g) return NULL;
    af_tensor *parts[3];
    int n = 0;
    af_shape zs = g->shape;
    if (before > 0) { zs.dim[axis] = before; parts[n++] = grad_zeros(g->g, zs); }
    parts[n++] = g;
    if (after > 0) { zs.dim[axis] = after; parts[n++] = grad_zeros(g->g, zs); }
    return n == 1 ? g : af_concat(n, parts, axis);
}

static void vjp_cross_correlation(grad_ctx *c) {
    af_tensor *x = c->t->src[0], *tm = c->t->src[1], *g = c->g;
    int64_t th = tm->shape.dim[0], tw = tm->shape.dim[1];
    if (c->need[1]) c->dsrc[1] = af_cross_correlation(x, g); /* dt[u, v] = sum g[i, j] x[i+u, j+v] */
    if (c->need[0]) { /* the full correlation of g with the flipped template */
        af_tensor *flip = af_matmul(af_matmul(table(x->g, th, th, anti_identity, th), tm, 0, 0),
                                    table(x->g, tw, tw, anti_identity, tw), 0, 0);
        c->dsrc[0] = af_cross_correlation(pad_axis(pad_axis(g, 0, th - 1, th - 1), 1, tw - 1, tw - 1), flip);
    }
}

/* y[d, x] = |aux[x] - ref[x + d]|: the sign of each difference routes g to both. */
static void vjp_cost_volume(grad_ctx *c) {
    af_tensor *aux = c->t->src[0], *ref = c->t->src[1], *g = c->g;
    int64_t D = c->t->shape.dim[0], wa = aux->shape.dim[0], wr = ref->shape.dim[0];
    af_tensor **rows = calloc((size_t)D, sizeof *rows);
    if (!rows) { ir_graph_fail(aux->g, "af_backward: out of memory"); return; }
    for (int64_t d = 0; d < D; d++) {
        int64_t b = d, s = wa;
        rows[d] = af_reshape(af_slice(ref, &b, &s), AF_SHAPE(1, wa));
    }
    af_tensor *diff = af_sub(af_reshape(aux, AF_SHAPE(1, wa)), D == 1 ? rows[0] : af_concat((int)D, rows, 0));
    free(rows);
    af_tensor *zero = grad_zeros_like(diff);
    af_tensor *h = af_mul(g, af_sub(af_greater(diff, zero), af_less(diff, zero)));
    if (c->need[0]) c->dsrc[0] = af_reduce_sum(h, 1, (int[]){ 0 }, 0);
    if (c->need[1]) {
        af_tensor *acc = NULL;
        for (int64_t d = 0; d < D; d++) {
            int64_t b[2] = { d, 0 }, s[2] = { 1, wa };
            af_tensor *row = pad_axis(af_reshape(af_slice(h, b, s), AF_SHAPE(wa)), 0, d, wr - wa - d);
            acc = acc ? af_add(acc, row) : row;
        }
        c->dsrc[1] = af_neg(acc); /* d|a - r| / dr = -sign(a - r) */
    }
}

/* x's gradient scattered into the window a dynamic_slice read: along the axis moved
 * last, dx = g @ M^T with M[e, j] = (e - j == s) and s the start as the kernel rounds
 * and clamps it (cpu_dynamic_slice_start). */
static void vjp_dynamic_slice(grad_ctx *c) {
    af_tensor *t = c->t, *x = t->src[0], *g = c->g;
    if (!c->need[0]) return;
    int ax = t->a.axis, r = x->shape.rank;
    int64_t ext = x->shape.dim[ax], size = t->a.sizes[0];
    af_tensor *half_up = af_adds(af_reshape(t->src[1], AF_SHAPE(1, 1)), 0.5f);
    af_tensor *s = ir_build(IR_OP_FLOOR, 1, &half_up, NULL);
    s = af_minimum(af_maximum(s, af_const_fill(x->g, AF_SHAPE(1, 1), 0.0f)), af_const_fill(x->g, AF_SHAPE(1, 1), (float)(ext - size)));
    af_tensor *m = af_equal(table(x->g, ext, size, row_minus_col, 0), s); /* [ext, size] */
    int perm[AF_MAX_RANK], inv[AF_MAX_RANK], k = 0;
    for (int i = 0; i < r; i++)
        if (i != ax) perm[k++] = i;
    perm[r - 1] = ax;
    for (int i = 0; i < r; i++) inv[perm[i]] = i;
    af_tensor *gt = af_transpose(g, perm);
    af_shape ts = gt ? gt->shape : x->shape;
    af_tensor *dx = af_matmul(af_reshape(gt, AF_SHAPE(-1, size)), m, 0, 1); /* [rows, ext] */
    ts.dim[r - 1] = ext;
    c->dsrc[0] = af_transpose(af_reshape(dx, ts), inv);
}

/* The rows of an fps: y[j] = points[idx[j]], so dpoints = onehot(idx)^T @ g. */
static void vjp_fps(grad_ctx *c) {
    af_tensor *t = c->t;
    if (t->a.ints[1]) return;
    c->dsrc[0] = af_matmul(one_hot(indices_of(t, 1), t->src[0]->shape.dim[0]), c->g, 1, 0);
}

void grad_vjp_geometry(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g;
    switch (t->op) {
    case IR_OP_CROSS_PRODUCT: /* <g, a x b> = <a, b x g> = <b, g x a> */
        if (c->need[0]) c->dsrc[0] = af_cross_product(t->src[1], g);
        if (c->need[1]) c->dsrc[1] = af_cross_product(g, t->src[0]);
        break;
    case IR_OP_CROSS_CORRELATION: vjp_cross_correlation(c); break;
    case IR_OP_COST_VOLUME: vjp_cost_volume(c); break;
    case IR_OP_FPS: vjp_fps(c); break;
    case IR_OP_DYNAMIC_SLICE: vjp_dynamic_slice(c); break;
    case IR_OP_RADIUS_SEARCH: break; /* OPF_ZEROGRAD: never differentiated */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, GEOMETRY, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        break;
    }
}

/* y = x D^-beta with D = k + alpha * (M @ x^2), M the channel window band:
 * dx = g D^-beta - 2 alpha beta x (M^T @ (g x D^(-beta-1))). */
static void vjp_lrn(grad_ctx *c) {
    af_tensor *t = c->t, *x = t->src[0];
    af_graph *gr = x->g;
    af_shape xs = x->shape;
    int r = xs.rank;
    int64_t C = xs.dim[r - 3], HW = xs.dim[r - 2] * xs.dim[r - 1];
    af_shape s3 = AF_SHAPE(af_shape_count(xs) / (C * HW), C, HW);
    af_tensor *X = af_reshape(x, s3), *G = af_reshape(c->g, s3), *band = table(gr, C, C, lrn_band, C);
    af_tensor *D = af_adds(af_muls(af_matmul(band, af_square(X), 0, 0), t->a.scalar), t->a.eps);
    af_tensor *pb = af_pow(D, af_const_fill(gr, AF_SHAPE(1), -t->a.beta));
    af_tensor *pb1 = af_pow(D, af_const_fill(gr, AF_SHAPE(1), -t->a.beta - 1.0f));
    af_tensor *h = af_mul(af_mul(G, X), pb1);
    af_tensor *back = af_mul(X, af_matmul(band, h, 1, 0));
    c->dsrc[0] = af_reshape(af_add(af_mul(G, pb), af_muls(back, -2.0f * t->a.scalar * t->a.beta)), xs);
}

/* y = (x - mn) r with r = 1 / (mx - mn + eps): dmn = r (sum g y - sum g), dmx = -r sum g y,
 * routed to every position equal to the extreme (as reduce_min/max's VJP does). */
static void vjp_minmax(grad_ctx *c) {
    af_tensor *t = c->t, *x = t->src[0], *g = c->g;
    int ax = t->a.axis;
    af_tensor *mn = af_reduce_min(x, 1, &ax, 1), *mx = af_reduce_max(x, 1, &ax, 1);
    af_tensor *rr = af_inverse(af_adds(af_sub(mx, mn), t->a.eps));
    af_tensor *y = af_mul(af_sub(x, mn), rr);
    af_tensor *gy = af_reduce_sum(af_mul(g, y), 1, &ax, 1), *gs = af_reduce_sum(g, 1, &ax, 1);
    af_tensor *dmn = af_mul(rr, af_sub(gy, gs)), *dmx = af_neg(af_mul(rr, gy));
    c->dsrc[0] = af_add(af_add(af_mul(g, rr), af_mul(af_equal(x, mn), dmn)), af_mul(af_equal(x, mx), dmx));
}

static void vjp_scaled_elementwise(grad_ctx *c) {
    af_tensor *t = c->t, *x = t->src[0], *z = t->src[1];
    af_tensor *sg = af_muls(c->g, t->a.scalar);
    if (t->a.mode == 0) { /* add */
        c->dsrc[0] = c->need[0] ? sg : NULL;
        c->dsrc[1] = c->need[1] ? sg : NULL;
        return;
    }
    /* min picks x where x < z, max where x > z; z wins ties, as the kernel does */
    af_tensor *pick_x = t->a.mode == 3 ? af_less(x, z) : af_greater(x, z), *zero = grad_zeros_like(sg);
    if (c->need[0]) c->dsrc[0] = af_select(pick_x, sg, zero);
    if (c->need[1]) c->dsrc[1] = af_select(pick_x, zero, sg);
}

void grad_vjp_bnorm(grad_ctx *c) {
    switch (c->t->op) {
    case IR_OP_LRN: vjp_lrn(c); break;
    case IR_OP_MINMAX_NORM: vjp_minmax(c); break;
    case IR_OP_SCALED_ELEMENTWISE: vjp_scaled_elementwise(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BNORM, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        break;
    }
}

/* With H moved beside N, the layer is a batched matmul [N,H,C,W] @ [N,H,W,U]. */
void grad_vjp_einsum(grad_ctx *c) {
    static const int swap12[4] = { 0, 2, 1, 3 };
    af_tensor *a = af_transpose(c->t->src[0], swap12), *b = af_transpose(c->t->src[1], swap12), *g = af_transpose(c->g, swap12);
    if (c->need[0]) c->dsrc[0] = af_transpose(af_matmul(g, b, 0, 1), swap12);
    if (c->need[1]) c->dsrc[1] = af_transpose(af_matmul(a, g, 1, 0), swap12);
}
