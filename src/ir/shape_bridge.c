/* Shape rules of the bridge kinds: attention (sdpa, and the CPU-only transformer pieces:
 * causal attention, rope, swiglu, softmax_xent) and the structural layers. */
#include "ir/ir.h"
#include "ir/op_cases.h"

#include <math.h>
#include <stdio.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return false; } while (0)

/* causal_attention: q, k, v [B, H, T, d] (layout 1: [B, T, H, d]), all one shape; its
 * gradient also takes dy of that shape and stacks dq, dk, dv as [3, ...that shape]. */
static bool infer_causal(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape q = src[0]->shape;
    if (a->mode != 0 && a->mode != 1) FAIL("layout %d: 0 is [batch, heads, seq, d], 1 is [batch, seq, heads, d]", a->mode);
    const char *lay = a->mode ? "[batch, seq, heads, d]" : "[batch, heads, seq, d]";
    if (q.rank != 4) FAIL("q must be %s (rank 4); got rank %d", lay, q.rank);
    for (int i = 1; i < nsrc; i++)
        if (!ir_shape_eq(src[i]->shape, q))
            FAIL("q, k, v%s must have one shape %s; repeat K/V heads first (af_repeat_kv_heads)",
                 nsrc > 3 ? " and dy" : "", lay);
    if (!isfinite(a->scalar) || a->scalar == 0) FAIL("the scale must be finite and non-zero (1/sqrt(d) usually)");
    *out = q;
    if (op == IR_OP_CAUSAL_ATTENTION_GRAD) *out = (af_shape){ .rank = 5, .dim = { 3, q.dim[0], q.dim[1], q.dim[2], q.dim[3] } };
    return true;
}

/* rope: x [..., seq, heads, head_size] (rank 3..5, even head_size), cos and sin
 * [seq, head_size / 2]. */
static bool infer_rope(af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape x = src[0]->shape, c = src[1]->shape, s = src[2]->shape;
    int r = x.rank;
    if (r < 3 || r > 5 || x.dim[r - 1] % 2)
        FAIL("x must be [..., seq, heads, head_size] with rank 3..5 and an even head_size");
    if (c.rank != 2 || c.dim[0] != x.dim[r - 3] || c.dim[1] != x.dim[r - 1] / 2 || !ir_shape_eq(c, s))
        FAIL("cos and sin must be [seq, head_size / 2] = [%lld, %lld]", (long long)x.dim[r - 3], (long long)x.dim[r - 1] / 2);
    if (a->mode != 0 && a->mode != 1) FAIL("mode %d: 0 turns forward, 1 back", a->mode);
    *out = x;
    return true;
}

/* swiglu: a and b (and dy) of one shape, no broadcasting. */
static bool infer_swiglu(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    for (int i = 1; i < nsrc; i++)
        if (!ir_shape_eq(src[i]->shape, src[0]->shape)) FAIL("a, b%s must have one shape", nsrc > 2 ? " and dy" : "");
    if (op == IR_OP_SWIGLU_GRAD && a->mode != 0 && a->mode != 1) FAIL("mode %d: 0 gives da, 1 db", a->mode);
    *out = src[0]->shape;
    return true;
}

/* softmax_xent: logits and targets [N, C] of one shape; its gradient also takes dy
 * [N, 1] or [1, 1] (one factor for every row). */
static bool infer_xent(ir_op op, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    af_shape z = src[0]->shape;
    if (z.rank != 2) FAIL("logits must be [rows, classes] (rank 2); got rank %d", z.rank);
    if (!ir_shape_eq(src[1]->shape, z)) FAIL("logits and targets must have one shape [rows, classes]");
    *out = (af_shape){ .rank = 2, .dim = { z.dim[0], 1 } };
    if (op == IR_OP_SOFTMAX_XENT) return true;
    af_shape d = src[2]->shape;
    if (d.rank != 2 || d.dim[1] != 1 || (d.dim[0] != 1 && d.dim[0] != z.dim[0]))
        FAIL("dy must be [%lld, 1] or [1, 1]", (long long)z.dim[0]);
    if (a->mode != 0 && a->mode != 1) FAIL("mode %d: 0 the exact gradient, 1 target sums taken as 1", a->mode);
    *out = z;
    return true;
}

bool ir_infer_attention(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    switch (op) {
    case IR_OP_ROPE: return infer_rope(src, a, out, err, errlen);
    case IR_OP_SWIGLU: case IR_OP_SWIGLU_GRAD: return infer_swiglu(op, nsrc, src, a, out, err, errlen);
    case IR_OP_SOFTMAX_XENT: case IR_OP_SOFTMAX_XENT_GRAD: return infer_xent(op, src, a, out, err, errlen);
    case IR_OP_CAUSAL_ATTENTION: case IR_OP_CAUSAL_ATTENTION_GRAD: return infer_causal(op, nsrc, src, a, out, err, errlen);
    case IR_OP_SDPA: break; /* below */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, ATTENTION, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    if (nsrc != 3 && nsrc != 4) FAIL("sdpa takes q, k, v and an optional mask; got %d sources", nsrc);
    af_shape q = src[0]->shape, k = src[1]->shape, v = src[2]->shape;
    if (q.rank != 4 || k.rank != 4 || v.rank != 4)
        FAIL("q, k and v must be [batch, heads, seq, d] (rank 4); got ranks %d, %d, %d", q.rank, k.rank, v.rank);
    if (q.dim[0] != k.dim[0] || q.dim[0] != v.dim[0] || q.dim[1] != k.dim[1] || q.dim[1] != v.dim[1])
        FAIL("q, k and v must share batch and heads; repeat K/V heads first (af_repeat_kv_heads)");
    if (q.dim[3] != k.dim[3]) FAIL("q's d (%lld) must equal k's (%lld)", (long long)q.dim[3], (long long)k.dim[3]);
    if (k.dim[2] != v.dim[2]) FAIL("k and v must have the same sequence length (%lld vs %lld)", (long long)k.dim[2], (long long)v.dim[2]);
    if (nsrc == 4) {
        af_shape m = src[3]->shape;
        if (m.rank != 3 || m.dim[0] != q.dim[2] || m.dim[1] != 1 || m.dim[2] != k.dim[2])
            FAIL("the mask must be [Sq, 1, Skv] = [%lld, 1, %lld] (additive, shared by batch and heads)",
                 (long long)q.dim[2], (long long)k.dim[2]);
    }
    if (!isfinite(a->scalar) || a->scalar == 0) FAIL("the scale must be finite and non-zero (1/sqrt(d) usually)");
    *out = q;
    out->dim[3] = v.dim[3];
    return true;
}

bool ir_infer_structural(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen) {
    (void)nsrc;
    af_shape x = src[0]->shape;
    int64_t count = af_shape_count(x);
    switch (op) {
    case IR_OP_FLATTEN:
        *out = (af_shape){.rank = 1, .dim = {count}};
        return true;
    case IR_OP_DROPOUT:
        if (a->scalar != 0)
            FAIL("dropout rate %g: only rate 0 is supported (the engine's Dropout layer is the inference-time "
                 "identity); for training-time dropout multiply by a random keep mask scaled by 1/(1-rate)",
                 (double)a->scalar);
        *out = x;
        return true;
    case IR_OP_BROADCAST: {
        int ax = ir_norm_axis(a->axis, x.rank);
        if (ax < 0) FAIL("axis %d is out of range for rank %d", a->axis, x.rank);
        if (x.dim[ax] != 1) FAIL("axis %d has length %lld; broadcast repeats a length-1 axis", ax, (long long)x.dim[ax]);
        if (a->ints[0] < 1) FAIL("size %lld must be >= 1", (long long)a->ints[0]);
        a->axis = ax;
        *out = x;
        out->dim[ax] = a->ints[0];
        return true;
    }
    case IR_OP_INPUT_VIEW:
        if (a->ints[0] < 0 || a->sizes[0] < 1 || a->ints[0] > count || a->sizes[0] > count - a->ints[0])
            FAIL("the view at offset %lld of size %lld is not inside the %lld values; need 0 <= offset and offset + size <= count",
                 (long long)a->ints[0], (long long)a->sizes[0], (long long)count);
        *out = (af_shape){.rank = 1, .dim = {a->sizes[0]}};
        return true;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, STRUCTURAL, id)
#include "ir/ops.def"
#undef X
        FAIL("op %s reached the shape rule of another kind", ir_ops[op].name);
    }
    return false;
}
