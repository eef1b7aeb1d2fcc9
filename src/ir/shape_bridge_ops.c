/* Shape rules of the bridge ops (seed 004): the rank, rearrange, geometry, normalization
 * and einsum blocks of ops.def. Engine-only limits (index ranges, C <= 15, batch 1) are
 * not here: they are the engine gates' (src/netplist/bridge_gates.c). */
#include "ir/ir.h"
#include "ir/op_cases.h"

#include <stdio.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return false; } while (0)
#define LL(v) ((long long)(v))

static bool infer_rank(ir_op op, af_shape x, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    *out = x;
    switch (op) {
    case IR_OP_SORT: case IR_OP_TOPK: {
        if (x.rank < 2) FAIL("needs x of rank >= 2 laid out [..., C, W] (reshape a vector to [1, W])");
        int64_t c = x.dim[x.rank - 2], w = x.dim[x.rank - 1];
        if (a->ints[0] < 0 || a->ints[0] >= c) FAIL("key_lane %lld is not a channel of the %lld in x; use 0..%lld", LL(a->ints[0]), LL(c), LL(c - 1));
        int64_t k = w;
        if (op == IR_OP_TOPK) {
            k = a->ints[3];
            if (k < 1 || k > w) FAIL("k = %lld must be in 1..%lld (the W extent)", LL(k), LL(w));
        }
        if (a->ints[2]) { /* the order: [..., k] */
            out->rank = x.rank - 1;
            out->dim[out->rank - 1] = k;
        } else {
            out->dim[x.rank - 1] = k;
        }
        return true;
    }
    case IR_OP_ARGMINMAX:
        if (x.rank < 3) FAIL("needs x of rank >= 3 laid out [..., C, H, W]");
        if (a->ints[0]) out->dim[x.rank - 3] = 1;
        else out->dim[x.rank - 2] = out->dim[x.rank - 1] = 1;
        return true;
    case IR_OP_GLOBAL_ARGMINMAX: {
        int ax = ir_norm_axis(a->axis, x.rank);
        if (ax < 0) FAIL("axis %d is out of range for rank %d", a->axis, x.rank);
        a->axis = ax;
        out->dim[ax] = 1;
        return true;
    }
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, RANK, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}

static bool infer_rearrange(ir_op op, af_shape x, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    int64_t fy = a->kernel[0], fx = a->kernel[1], f = fy * fx;
    if (x.rank != 4) FAIL("needs x laid out [N, C, H, W] (rank 4)");
    if (fy < 1 || fx < 1) FAIL("factors fy = %lld and fx = %lld must be >= 1", LL(fy), LL(fx));
    int64_t n = x.dim[0], c = x.dim[1], h = x.dim[2], w = x.dim[3], hf = 0, wf = 0, cf = 0, nf = 0;
    *out = x;
    /* fy, fx < 2^31 and dims <= 2^40: f fits, the products may not */
    bool grows = op == IR_OP_PIXEL_SHUFFLE || op == IR_OP_CHANNEL_TO_SPACE || op == IR_OP_BATCH_TO_SPACE;
    if (grows && (!ir_mul64(h, fy, &hf) || !ir_mul64(w, fx, &wf) || hf > AF_MAX_ELEMENTS || wf > AF_MAX_ELEMENTS))
        FAIL("factors fy = %lld and fx = %lld make H x fy or W x fx exceed AF_MAX_ELEMENTS = 2^40", LL(fy), LL(fx));
    if (!grows && (!ir_mul64(c, f, &cf) || !ir_mul64(n, f, &nf) || cf > AF_MAX_ELEMENTS || nf > AF_MAX_ELEMENTS))
        FAIL("factors fy = %lld and fx = %lld make C x fy x fx exceed AF_MAX_ELEMENTS = 2^40", LL(fy), LL(fx));
    switch (op) {
    case IR_OP_PIXEL_SHUFFLE: case IR_OP_CHANNEL_TO_SPACE:
        if (c % f) FAIL("C = %lld does not divide by fy * fx = %lld; give x C = (output channels) * fy * fx", LL(c), LL(f));
        *out = (af_shape){ .rank = 4, .dim = { n, c / f, hf, wf } };
        return true;
    case IR_OP_PIXEL_UNSHUFFLE: case IR_OP_SPACE_TO_CHANNEL: case IR_OP_SPACE_TO_BATCH:
        if (h % fy || w % fx)
            FAIL("H = %lld and W = %lld must divide by fy = %lld and fx = %lld; pad or crop x first", LL(h), LL(w), LL(fy), LL(fx));
        if (op == IR_OP_SPACE_TO_BATCH) *out = (af_shape){ .rank = 4, .dim = { nf, c, h / fy, w / fx } };
        else *out = (af_shape){ .rank = 4, .dim = { n, cf, h / fy, w / fx } };
        return true;
    case IR_OP_BATCH_TO_SPACE:
        if (n % f) FAIL("the batch %lld does not divide by fy * fx = %lld (it must hold fy * fx blocks per image)", LL(n), LL(f));
        *out = (af_shape){ .rank = 4, .dim = { n / f, c, hf, wf } };
        return true;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, REARRANGE, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}

static bool infer_geometry(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape x = src[0]->shape, y = nsrc > 1 ? src[1]->shape : x;
    switch (op) {
    case IR_OP_CROSS_PRODUCT:
        if (!ir_shape_eq(x, y)) FAIL("a and b must have the same shape");
        if (x.rank < 1 || x.dim[x.rank - 1] != 3) FAIL("the last axis must hold 3-vectors (extent 3)");
        *out = x;
        return true;
    case IR_OP_CROSS_CORRELATION:
        if (x.rank != 2 || y.rank != 2) FAIL("needs x [H, W] and the template [Th, Tw] (rank 2 each)");
        if (y.dim[0] > x.dim[0] || y.dim[1] > x.dim[1]) FAIL("the template is larger than x; the correlation is valid-only");
        *out = (af_shape){ .rank = 2, .dim = { x.dim[0] - y.dim[0] + 1, x.dim[1] - y.dim[1] + 1 } };
        return true;
    case IR_OP_COST_VOLUME: {
        int64_t r = a->ints[0];
        if (x.rank != 1 || y.rank != 1) FAIL("needs aux [Wa] and ref [Wr] (rank 1 each)");
        if (r < 0) FAIL("max_disparity %lld must be >= 0", LL(r));
        if (r > y.dim[0] - x.dim[0])
            FAIL("ref has %lld values but needs Wa + max_disparity = %.0f; shorten aux or lower max_disparity", LL(y.dim[0]),
                 (double)x.dim[0] + (double)r);
        *out = (af_shape){ .rank = 2, .dim = { r + 1, x.dim[0] } };
        return true;
    }
    case IR_OP_FPS: {
        int64_t k = a->ints[0];
        if (x.rank != 2 || x.dim[1] != 3) FAIL("needs points [N, 3]");
        if (k < 1 || k > x.dim[0]) FAIL("k = %lld must be in 1..%lld (the number of points)", LL(k), LL(x.dim[0]));
        *out = a->ints[1] ? (af_shape){ .rank = 1, .dim = { k } } : (af_shape){ .rank = 2, .dim = { k, 3 } };
        return true;
    }
    case IR_OP_RADIUS_SEARCH:
        if (x.rank != 2 || x.dim[1] != 3 || y.rank != 2 || y.dim[1] != 3) FAIL("needs points [N, 3] and centroids [M, 3]");
        if (!(a->scalar >= 0)) FAIL("radius must be >= 0");
        *out = (af_shape){ .rank = 2, .dim = { x.dim[0], y.dim[0] } };
        return true;
    case IR_OP_DYNAMIC_SLICE: {
        int ax = ir_norm_axis(a->axis, x.rank);
        if (ax < 0) FAIL("axis %d is out of range for rank %d", a->axis, x.rank);
        if (af_shape_count(y) != 1) FAIL("start must hold exactly one value");
        if (a->sizes[0] < 1 || a->sizes[0] > x.dim[ax]) FAIL("size %lld must be in 1..%lld (the axis extent)", LL(a->sizes[0]), LL(x.dim[ax]));
        a->axis = ax;
        *out = x;
        out->dim[ax] = a->sizes[0];
        return true;
    }
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, GEOMETRY, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}

static bool infer_bnorm(ir_op op, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape x = src[0]->shape;
    *out = x;
    switch (op) {
    case IR_OP_LRN:
        if (x.rank < 3) FAIL("needs x of rank >= 3 laid out [..., C, H, W]");
        if (!(a->eps >= 0) || !(a->scalar >= 0)) FAIL("k and alpha must be >= 0");
        return true;
    case IR_OP_MINMAX_NORM: {
        int ax = ir_norm_axis(a->axis, x.rank);
        if (x.rank < 2) FAIL("needs x of rank >= 2 (H and W)");
        if (ax != x.rank - 1 && ax != x.rank - 2)
            FAIL("axis %d is not W (-1) or H (-2): the engine rejects the channel dimension; transpose that axis to W first", a->axis);
        if (!(a->eps >= 0)) FAIL("eps must be >= 0");
        a->axis = ax;
        return true;
    }
    case IR_OP_SCALED_ELEMENTWISE:
        if (!ir_shape_eq(x, src[1]->shape)) FAIL("x and z must have the same shape");
        if (a->mode == 1) FAIL("Sub is rejected by the engine's compiler; use af_muls(af_sub(x, z), scale)");
        if (a->mode == 2) FAIL("the engine ignores the scale of Mult; use af_muls(af_mul(x, z), scale)");
        if (a->mode != 0 && a->mode != 3 && a->mode != 4) FAIL("op %d is not AF_SEW_ADD, AF_SEW_MIN or AF_SEW_MAX", a->mode);
        return true;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BNORM, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}

/* The native "nchw,nwhu->nchu": a [N, C, H, W] and b [N, W, H, U] to [N, C, H, U]. */
static bool infer_einsum(af_shape x, af_shape y, af_shape *out, char *err, size_t errlen) {
    if (x.rank != 4 || y.rank != 4) FAIL("the native layer takes a [N, C, H, W] and b [N, W, H, U]; use af_einsum for other forms");
    if (x.dim[0] != y.dim[0] || x.dim[2] != y.dim[2] || x.dim[3] != y.dim[1])
        FAIL("a [N, C, H, W] and b [N, W, H, U] must agree on N, H and W");
    *out = (af_shape){ .rank = 4, .dim = { x.dim[0], x.dim[1], x.dim[2], y.dim[3] } };
    return true;
}

bool ir_infer_bridge(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    switch (ir_ops[op].kind) {
    case IR_KIND_RANK: return infer_rank(op, src[0]->shape, a, out, err, errlen);
    case IR_KIND_REARRANGE: return infer_rearrange(op, src[0]->shape, a, out, err, errlen);
    case IR_KIND_GEOMETRY: return infer_geometry(op, nsrc, src, a, out, err, errlen);
    case IR_KIND_BNORM: return infer_bnorm(op, src, a, out, err, errlen);
    case IR_KIND_EINSUM: return infer_einsum(src[0]->shape, src[1]->shape, out, err, errlen);
    case IR_KIND_LEAF: case IR_KIND_BINARY: case IR_KIND_SELECT: case IR_KIND_SCALAR: case IR_KIND_UNARY: case IR_KIND_MATMUL:
    case IR_KIND_REDUCE: case IR_KIND_SOFTMAX: case IR_KIND_LAYOUT: case IR_KIND_NORM: case IR_KIND_POOL: case IR_KIND_CONV:
    case IR_KIND_CAST: case IR_KIND_ATTENTION: case IR_KIND_STRUCTURAL: case IR_KIND_COUNT:
        break;
    }
    FAIL("op %s is not a bridge op of these kinds", ir_ops[op].name);
}

void ir_lrn_window(int64_t ch, int64_t C, int64_t *lo, int64_t *hi) {
    *lo = ch - (C - 1) / 2 > 0 ? ch - (C - 1) / 2 : 0;
    *hi = ch + C / 2 + 1 < C ? ch + C / 2 + 1 : C;
}
