/* Shape inference: one rule per op kind. Rules may normalise attributes (resolve
 * -1 sizes, negative axes) so later layers see canonical values. */
#include "ir/ir.h"
#include "ir/op_cases.h"

#include <stdio.h>
#include <string.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return false; } while (0)

static bool infer_matmul(af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape x = src[0]->shape, y = src[1]->shape;
    if (x.rank < 2 || y.rank < 2) FAIL("both operands need rank >= 2 (reshape a vector to [1,K] or [K,1])");
    int64_t m = a->ta ? x.dim[x.rank - 1] : x.dim[x.rank - 2];
    int64_t k = a->ta ? x.dim[x.rank - 2] : x.dim[x.rank - 1];
    int64_t k2 = a->tb ? y.dim[y.rank - 1] : y.dim[y.rank - 2];
    int64_t n = a->tb ? y.dim[y.rank - 2] : y.dim[y.rank - 1];
    if (k != k2) FAIL("inner dimensions differ (%lld vs %lld); transpose an operand or fix the layout", (long long)k, (long long)k2);
    af_shape bx = { .rank = x.rank - 2 }, by = { .rank = y.rank - 2 }, b;
    memcpy(bx.dim, x.dim, sizeof(int64_t) * (size_t)bx.rank);
    memcpy(by.dim, y.dim, sizeof(int64_t) * (size_t)by.rank);
    if (!ir_broadcast_shape(bx, by, &b)) FAIL("batch dimensions do not broadcast");
    if (b.rank + 2 > AF_MAX_RANK) FAIL("result rank exceeds %d", AF_MAX_RANK);
    *out = b;
    out->rank = b.rank + 2;
    out->dim[b.rank] = m;
    out->dim[b.rank + 1] = n;
    return true;
}

/* gamma/beta must hold exactly `c` values laid out along `axis` of x (all other dims 1). */
static bool check_affine(af_shape x, int axis, const af_tensor *p, const char *what, char *err, size_t errlen) {
    int64_t c = x.dim[axis];
    if (af_shape_count(p->shape) != c) {
        char s[64];
        ir_shape_str(p->shape, s, sizeof s);
        FAIL("%s has shape %s but needs %lld values (one per element of axis %d)", what, s, (long long)c, axis);
    }
    return true;
}

static bool infer_norm(ir_op op, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    switch (op) { /* the four the code below tells apart */
    case IR_OP_RMS_NORM: case IR_OP_LAYER_NORM: case IR_OP_CHANNEL_LAYER_NORM: case IR_OP_GROUP_NORM: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, NORM, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    af_shape x = src[0]->shape;
    int axis = x.rank - 1;
    if (op == IR_OP_CHANNEL_LAYER_NORM || op == IR_OP_GROUP_NORM) {
        if (x.rank < 2) FAIL("needs x of rank >= 2 laid out [N, C, ...]");
        axis = 1;
    } else if (x.rank < 1) {
        FAIL("needs x of rank >= 1");
    }
    if (op == IR_OP_GROUP_NORM && (a->groups <= 0 || x.dim[1] % a->groups))
        FAIL("groups = %d must be positive and divide the %lld channels", a->groups, (long long)x.dim[1]);
    if (!(a->eps >= 0)) FAIL("eps must be >= 0");
    if (!check_affine(x, axis, src[1], "gamma", err, errlen)) return false;
    if (op != IR_OP_RMS_NORM && !check_affine(x, axis, src[2], "beta", err, errlen)) return false;
    *out = x;
    return true;
}

/* A conv or pool output beyond AF_MAX_ELEMENTS comes from its attributes (the inputs
 * were bounded): say which, not only the result shape. */
static bool spatial_fits(af_shape out, const ir_attrs *a, char *err, size_t errlen) {
    if (af_shape_count(out) > 0) return true;
    FAIL("pad = (%d, %d), stride = (%d, %d) and dilation = (%d, %d) make the output [%lld, %lld, %lld, %lld] hold more "
         "than AF_MAX_ELEMENTS = 2^40 elements; lower the pad", a->pad[0], a->pad[1], a->stride[0], a->stride[1],
         a->dilation[0], a->dilation[1], (long long)out.dim[0], (long long)out.dim[1], (long long)out.dim[2],
         (long long)out.dim[3]);
}

static bool infer_pool(ir_op op, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    switch (op) { /* the gradients read dy below */
    case IR_OP_AVG_POOL: case IR_OP_MAX_POOL: case IR_OP_AVG_POOL_GRAD: case IR_OP_MAX_POOL_GRAD: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, POOL, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    af_shape x = src[0]->shape;
    if (x.rank != 4) FAIL("needs x laid out [N, C, H, W] (rank 4)");
    *out = x;
    for (int i = 0; i < 2; i++) {
        if (a->kernel[i] < 1 || a->stride[i] < 1 || a->pad[i] < 0) FAIL("kernel and stride must be >= 1 and pad >= 0");
        /* int64: 2 * pad overflows int at pad >= 2^30; dims <= 2^40 so in cannot wrap */
        int64_t pad2 = 2 * (int64_t)a->pad[i], in = x.dim[2 + i] + pad2;
        if (pad2 > a->kernel[i]) FAIL("pad %d is more than half the kernel %d", a->pad[i], a->kernel[i]);
        if (in < a->kernel[i]) FAIL("kernel %d is larger than the padded input %lld", a->kernel[i], (long long)in);
        out->dim[2 + i] = (in - a->kernel[i]) / a->stride[i] + 1;
    }
    if (op == IR_OP_AVG_POOL_GRAD || op == IR_OP_MAX_POOL_GRAD) { /* src[1] is dy, the pooled shape; out is x's */
        if (src[1]->shape.rank != 4 || !ir_shape_eq(src[1]->shape, *out)) FAIL("dy must have the pooled shape of x");
        *out = x;
    }
    return true;
}

static bool infer_conv(ir_op op, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    switch (op) { /* conv_transpose is the last branch below */
    case IR_OP_CONV: case IR_OP_CONV_TRANSPOSE: case IR_OP_CONV_WEIGHT_GRAD: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, CONV, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    af_shape x = src[0]->shape, w = src[1]->shape;
    if (x.rank != 4) FAIL("needs x laid out [N, C, H, W] (rank 4)");
    if (w.rank != 4) FAIL("needs a rank-4 weight");
    for (int i = 0; i < 2; i++)
        if (a->stride[i] < 1 || a->dilation[i] < 1 || a->pad[i] < 0) FAIL("stride and dilation must be >= 1 and pad >= 0");
    *out = x;
    if (op == IR_OP_CONV_WEIGHT_GRAD) { /* src[1] is dy [N, Cout, Ho, Wo]; out [Cout, Cin, kh, kw] */
        if (w.dim[0] != x.dim[0]) FAIL("dy has batch %lld but x has %lld", (long long)w.dim[0], (long long)x.dim[0]);
        for (int i = 0; i < 2; i++) {
            if (a->kernel[i] < 1) FAIL("kernel must be >= 1");
            int64_t span = (int64_t)a->dilation[i] * (a->kernel[i] - 1) + 1, in = x.dim[2 + i] + 2 * (int64_t)a->pad[i];
            if (in < span || (in - span) / a->stride[i] + 1 != w.dim[2 + i])
                FAIL("dy's spatial extent %lld does not match the conv of x (axis %d)", (long long)w.dim[2 + i], 2 + i);
        }
        *out = (af_shape){ .rank = 4, .dim = { w.dim[1], x.dim[1], a->kernel[0], a->kernel[1] } };
        return true;
    }
    if (op == IR_OP_CONV) {
        int g = a->groups;
        if (g < 1 || x.dim[1] % g || w.dim[0] % g) FAIL("groups = %d must divide Cin = %lld and Cout = %lld", g, (long long)x.dim[1], (long long)w.dim[0]);
        if (w.dim[1] != x.dim[1] / g) FAIL("weight expects %lld input channels but x has %lld (weight is [Cout, Cin/groups, kH, kW])", (long long)w.dim[1], (long long)(x.dim[1] / g));
        out->dim[1] = w.dim[0];
        for (int i = 0; i < 2; i++) {
            int64_t span, in = x.dim[2 + i] + 2 * (int64_t)a->pad[i];
            if (!ir_mul64(a->dilation[i], w.dim[2 + i] - 1, &span))
                FAIL("the kernel span dilation %d x (kernel %lld - 1) + 1 exceeds the padded input %lld (axis %d)",
                     a->dilation[i], (long long)w.dim[2 + i], (long long)in, 2 + i);
            if (++span > in) FAIL("kernel span %lld exceeds the padded input %lld", (long long)span, (long long)in);
            out->dim[2 + i] = (in - span) / a->stride[i] + 1;
        }
    } else {
        if (w.dim[0] != x.dim[1]) FAIL("weight expects %lld input channels but x has %lld (weight is [Cin, Cout, kH, kW])", (long long)w.dim[0], (long long)x.dim[1]);
        out->dim[1] = w.dim[1];
        for (int i = 0; i < 2; i++) {
            int64_t grown, span;
            if (!ir_mul64(x.dim[2 + i] - 1, a->stride[i], &grown) || !ir_mul64(a->dilation[i], w.dim[2 + i] - 1, &span) ||
                grown > AF_MAX_ELEMENTS || span > AF_MAX_ELEMENTS)
                FAIL("stride %d or dilation %d makes the output extent on axis %d exceed AF_MAX_ELEMENTS = 2^40",
                     a->stride[i], a->dilation[i], 2 + i);
            int64_t o = grown - 2 * (int64_t)a->pad[i] + span + 1;
            if (o < 1) FAIL("output extent %lld < 1: pad %d too large (axis %d)", (long long)o, a->pad[i], 2 + i);
            out->dim[2 + i] = o;
        }
    }
    return spatial_fits(*out, a, err, errlen);
}

static bool infer_layout(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape x = src[0]->shape;
    switch (op) {
    case IR_OP_TRANSPOSE: {
        bool seen[AF_MAX_RANK] = { 0 };
        *out = x;
        for (int i = 0; i < x.rank; i++) {
            int64_t p = a->ints[i];
            if (p < 0 || p >= x.rank || seen[p]) FAIL("perm is not a permutation of 0..%d", x.rank - 1);
            seen[p] = true;
            out->dim[i] = x.dim[p];
        }
        return true;
    }
    case IR_OP_RESHAPE: {
        int r = a->naxes, neg = -1;
        if (r < 0 || r > AF_MAX_RANK) FAIL("target rank %d is out of range 0..%d", r, AF_MAX_RANK);
        int64_t known = 1;
        for (int i = 0; i < r; i++) {
            if (a->sizes[i] == -1) {
                if (neg >= 0) FAIL("only one dimension may be -1");
                neg = i;
            } else if (a->sizes[i] < 0) {
                FAIL("dimension %d is %lld", i, (long long)a->sizes[i]);
            } else if (a->sizes[i] > 0 && known > AF_MAX_ELEMENTS / a->sizes[i]) {
                FAIL("the target shape holds more than AF_MAX_ELEMENTS = 2^40 elements");
            } else {
                known *= a->sizes[i];
            }
        }
        int64_t total = af_shape_count(x);
        if (neg >= 0) {
            if (known == 0 || total % known) FAIL("cannot infer the -1 dimension: %lld elements into groups of %lld", (long long)total, (long long)known);
            a->sizes[neg] = total / known;
            known = total;
        }
        if (known != total) FAIL("element counts differ (%lld vs %lld)", (long long)total, (long long)known);
        out->rank = r;
        memcpy(out->dim, a->sizes, sizeof(int64_t) * (size_t)r);
        return true;
    }
    case IR_OP_SLICE_BY_SIZE:
        *out = x;
        for (int i = 0; i < x.rank; i++) {
            int64_t b = a->ints[i], s = a->sizes[i];
            if (b < 0 || b > x.dim[i]) FAIL("begin %lld is outside axis %d of extent %lld", (long long)b, i, (long long)x.dim[i]);
            if (s == -1) s = x.dim[i] - b;
            if (s < 1 || s > x.dim[i] - b) FAIL("size %lld from begin %lld overruns axis %d of extent %lld", (long long)s, (long long)b, i, (long long)x.dim[i]);
            a->sizes[i] = s;
            out->dim[i] = s;
        }
        return true;
    case IR_OP_SPLIT: {
        int ax = a->axis;
        if (ax < 0 || ax >= x.rank) FAIL("axis out of range");
        if (a->ints[0] < 0 || a->sizes[0] < 1 || a->ints[0] > x.dim[ax] || a->sizes[0] > x.dim[ax] - a->ints[0])
            FAIL("the part [%lld, +%lld) overruns axis %d of extent %lld", (long long)a->ints[0], (long long)a->sizes[0], ax,
                 (long long)x.dim[ax]);
        *out = x;
        out->dim[ax] = a->sizes[0];
        return true;
    }
    case IR_OP_CONCAT: {
        int ax = ir_norm_axis(a->axis, x.rank);
        if (ax < 0) FAIL("axis %d is out of range for rank %d", a->axis, x.rank);
        a->axis = ax;
        *out = x;
        for (int k = 1; k < nsrc; k++) {
            af_shape y = src[k]->shape;
            if (y.rank != x.rank) FAIL("operand %d has rank %d, operand 0 has rank %d", k, y.rank, x.rank);
            for (int i = 0; i < x.rank; i++)
                if (i != ax && y.dim[i] != x.dim[i]) FAIL("operand %d differs from operand 0 on axis %d (%lld vs %lld); only the concat axis may differ", k, i, (long long)y.dim[i], (long long)x.dim[i]);
            out->dim[ax] += y.dim[ax];
        }
        return true;
    }
    case IR_OP_EMBEDDING: { /* table [V, ...] by ids [I...] -> [I..., ...] */
        af_shape ids = src[1]->shape;
        if (x.rank < 1) FAIL("the table must have rank >= 1 (rows along axis 0)");
        if (ids.rank + x.rank - 1 > AF_MAX_RANK) FAIL("the ids' rank plus the table's rank - 1 is above %d", AF_MAX_RANK);
        out->rank = ids.rank + x.rank - 1;
        for (int i = 0; i < ids.rank; i++) out->dim[i] = ids.dim[i];
        for (int i = 1; i < x.rank; i++) out->dim[ids.rank + i - 1] = x.dim[i];
        return true;
    }
    case IR_OP_EMBEDDING_GRAD: { /* dy [I..., ...] into rows of ids [I...] -> [V, ...], V in ints[0] */
        af_shape ids = src[1]->shape;
        if (a->ints[0] < 1) FAIL("vocab is %lld; it must be >= 1", (long long)a->ints[0]);
        if (x.rank < ids.rank) FAIL("dy has rank %d, below the ids' rank %d", x.rank, ids.rank);
        for (int i = 0; i < ids.rank; i++)
            if (x.dim[i] != ids.dim[i]) FAIL("dy's axis %d is %lld but the ids' is %lld; dy must be [ids..., row...]", i, (long long)x.dim[i], (long long)ids.dim[i]);
        if (x.rank - ids.rank + 1 > AF_MAX_RANK) FAIL("the result's rank is above %d", AF_MAX_RANK);
        out->rank = x.rank - ids.rank + 1;
        out->dim[0] = a->ints[0];
        for (int i = ids.rank; i < x.rank; i++) out->dim[i - ids.rank + 1] = x.dim[i];
        return true;
    }
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, LAYOUT, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}

bool ir_infer_shape(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out,
                    char *err, size_t errlen) {
    switch (ir_ops[op].kind) {
    case IR_KIND_LEAF:
        FAIL("leaves have no inferred shape");
    case IR_KIND_BINARY:
        if (!ir_broadcast_shape(src[0]->shape, src[1]->shape, out)) FAIL("shapes do not broadcast (NumPy rules: trailing dims must match or be 1)");
        return true;
    case IR_KIND_SELECT: {
        af_shape t;
        if (!ir_broadcast_shape(src[0]->shape, src[1]->shape, &t) || !ir_broadcast_shape(t, src[2]->shape, out))
            FAIL("cond, a and b do not broadcast together");
        return true;
    }
    case IR_KIND_SCALAR:
    case IR_KIND_UNARY:
    case IR_KIND_CAST:
        *out = src[0]->shape;
        return true;
    case IR_KIND_MATMUL:
        switch (op) { /* matmul_w below, else matmul */
        case IR_OP_MATMUL_W: case IR_OP_MATMUL: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, MATMUL, id)
#include "ir/ops.def"
#undef X
            FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
        }
        if (op == IR_OP_MATMUL_W) {
            af_shape x = src[0]->shape, w = src[1]->shape;
            if (w.rank != 2) FAIL("the baked weight must be [N, K] (stored transposed)");
            if (x.rank < 1 || x.dim[x.rank - 1] != w.dim[1]) FAIL("x's last axis must equal the weight's K = %lld", (long long)w.dim[1]);
            *out = x;
            out->dim[x.rank - 1] = w.dim[0];
            return true;
        }
        return infer_matmul(src, a, out, err, errlen);
    case IR_KIND_REDUCE: {
        af_shape x = src[0]->shape;
        unsigned mask = (unsigned)a->ints[0];
        out->rank = 0;
        for (int i = 0; i < x.rank; i++) {
            if (mask & (1u << i)) {
                if (a->keep_dims) out->dim[out->rank++] = 1;
            } else {
                out->dim[out->rank++] = x.dim[i];
            }
        }
        return true;
    }
    case IR_KIND_SOFTMAX: {
        int ax = ir_norm_axis(a->axis, src[0]->shape.rank);
        if (ax < 0) FAIL("axis %d is out of range for rank %d", a->axis, src[0]->shape.rank);
        a->axis = ax;
        *out = src[0]->shape;
        return true;
    }
    case IR_KIND_LAYOUT:
        return infer_layout(op, nsrc, src, a, out, err, errlen);
    case IR_KIND_NORM:
        return infer_norm(op, src, a, out, err, errlen);
    case IR_KIND_POOL:
        return infer_pool(op, src, a, out, err, errlen);
    case IR_KIND_CONV:
        return infer_conv(op, src, a, out, err, errlen);
    case IR_KIND_RANK: case IR_KIND_REARRANGE: case IR_KIND_GEOMETRY: case IR_KIND_BNORM: case IR_KIND_EINSUM:
        return ir_infer_bridge(op, nsrc, src, a, out, err, errlen);
    case IR_KIND_ATTENTION:
        return ir_infer_attention(op, nsrc, src, a, out, err, errlen);
    case IR_KIND_STRUCTURAL:
        return ir_infer_structural(op, nsrc, src, a, out, err, errlen);
    case IR_KIND_COUNT:
        break;
    }
    FAIL("unknown op kind");
}
