/* VJPs of the bridge ops, built from ordinary ops so backward graphs hold no bridge:
 * sdpa's through its decomposed attention (recomputing the weights), the structural
 * layers' as the matching reshape, sum or zero padding. causal_attention (CPU only) has
 * its native gradient node; rope's is rope turning back; swiglu's a swiglu_grad node per
 * operand; softmax_xent's a softmax_xent_grad node. */
#include "grad/grad.h"
#include "ir/op_cases.h"

/* s = q k^T * scale + mask, p = softmax(s), y = p v:
 * dv = p^T dy, dp = dy v^T, ds = p (dp - sum(dp p)), dq = ds k * scale,
 * dk = ds^T q * scale, dmask = ds summed over batch and heads. */
/* causal_attention: one native gradient node gives dq, dk, dv stacked; each is a slice. */
static void causal_attention_vjp(grad_ctx *c) {
    af_tensor *t = c->t, *q = t->src[0];
    af_tensor *stacked = ir_causal_attention_grad(q, t->src[1], t->src[2], c->g, t->a.scalar, t->a.mode);
    af_shape s = q->shape;
    for (int i = 0; i < 3; i++) {
        if (!c->need[i]) continue;
        int64_t begin[5] = { i, 0, 0, 0, 0 }, size[5] = { 1, s.dim[0], s.dim[1], s.dim[2], s.dim[3] };
        c->dsrc[i] = af_reshape(af_slice(stacked, begin, size), s);
    }
}

/* softmax_xent: the logits' gradient is one native node; the targets' (rare: targets are
 * usually fed) is (logsumexp(z) - z) dy from ordinary ops. */
static void xent_vjp(grad_ctx *c) {
    af_tensor *z = c->t->src[0], *y = c->t->src[1];
    if (c->need[0]) c->dsrc[0] = ir_softmax_xent_grad(z, y, c->g, false);
    if (c->need[1]) {
        int ax = 1;
        af_tensor *mx = af_reduce_max(z, 1, &ax, 1);
        af_tensor *lse = af_add(af_log(af_reduce_sum(af_exp(af_sub(z, mx)), 1, &ax, 1)), mx);
        c->dsrc[1] = af_mul(af_sub(lse, z), c->g);
    }
}

void grad_vjp_attention(grad_ctx *c) {
    switch (c->t->op) {
    case IR_OP_ROPE: /* a rotation: its gradient turns back (cos and sin are constants) */
        if (c->need[0]) c->dsrc[0] = ir_rope(c->g, c->t->src[1], c->t->src[2], c->t->a.mode == 0);
        return;
    case IR_OP_SWIGLU: /* one native node per operand */
        for (int i = 0; i < 2; i++)
            if (c->need[i]) c->dsrc[i] = ir_swiglu_grad(c->t->src[0], c->t->src[1], c->g, i == 1);
        return;
    case IR_OP_SOFTMAX_XENT: xent_vjp(c); return;
    case IR_OP_CAUSAL_ATTENTION: causal_attention_vjp(c); return;
    case IR_OP_SDPA: break; /* below */
    case IR_OP_CAUSAL_ATTENTION_GRAD: case IR_OP_SWIGLU_GRAD: case IR_OP_SOFTMAX_XENT_GRAD: return; /* OPF_NODIFF: af_backward refuses them first */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, ATTENTION, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *t = c->t, *g = c->g, *q = t->src[0], *k = t->src[1], *v = t->src[2];
    af_tensor *mask = t->nsrc > 3 ? t->src[3] : NULL;
    float scale = t->a.scalar;
    af_tensor *s = af_muls(af_matmul(q, k, 0, 1), scale);
    if (mask) s = af_add(s, af_reshape(mask, AF_SHAPE(mask->shape.dim[0], mask->shape.dim[2])));
    af_tensor *p = af_softmax(s, -1);
    if (c->need[2]) c->dsrc[2] = af_matmul(p, g, 1, 0);
    if (!c->need[0] && !c->need[1] && !(mask && c->need[3])) return;
    af_tensor *dp = af_matmul(g, v, 0, 1);
    int last = 3;
    af_tensor *ds = af_mul(p, af_sub(dp, af_reduce_sum(af_mul(dp, p), 1, &last, 1)));
    if (c->need[0]) c->dsrc[0] = af_muls(af_matmul(ds, k, 0, 0), scale);
    if (c->need[1]) c->dsrc[1] = af_muls(af_matmul(ds, q, 1, 0), scale);
    if (mask && c->need[3]) {
        int bh[2] = {0, 1};
        c->dsrc[3] = af_reshape(af_reduce_sum(ds, 2, bh, 0), mask->shape);
    }
}

void grad_vjp_structural(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g, *x = t->src[0];
    switch (t->op) {
    case IR_OP_BROADCAST: {
        int ax = t->a.axis;
        c->dsrc[0] = af_reduce_sum(g, 1, &ax, 1);
        return;
    }
    case IR_OP_INPUT_VIEW: { /* the window's gradient, zeros elsewhere */
        int64_t n = af_shape_count(x->shape), off = t->a.ints[0], size = t->a.sizes[0];
        af_tensor *parts[3];
        int np = 0;
        if (off > 0) parts[np++] = grad_zeros(t->g, AF_SHAPE(off));
        parts[np++] = g;
        if (off + size < n) parts[np++] = grad_zeros(t->g, AF_SHAPE(n - off - size));
        c->dsrc[0] = af_reshape(np > 1 ? af_concat(np, parts, 0) : g, x->shape);
        return;
    }
    case IR_OP_FLATTEN: case IR_OP_DROPOUT: /* dropout runs at rate 0 only */
        c->dsrc[0] = af_reshape(g, x->shape);
        return;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, STRUCTURAL, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        return;
    }
}
