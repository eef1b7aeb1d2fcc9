/* VJPs of layout ops: the exact inverse re-arrangement. Slices scatter their gradient
 * back by concatenating zero blocks around it (the engine has no scatter op). */
#include "grad/grad.h"
#include "ir/op_cases.h"

/* Places g at offset begin[] inside a zero tensor of shape full, axis by axis. */
static af_tensor *pad_with_zeros(af_tensor *g, af_shape full, const int64_t *begin) {
    af_tensor *cur = g;
    for (int i = 0; i < full.rank && cur; i++) {
        int64_t before = begin[i], after = full.dim[i] - begin[i] - cur->shape.dim[i];
        if (before == 0 && after == 0) continue;
        af_tensor *parts[3];
        int n = 0;
        af_shape zs = cur->shape;
        if (before > 0) { zs.dim[i] = before; parts[n++] = grad_zeros(g->g, zs); }
        parts[n++] = cur;
        if (after > 0) { zs.dim[i] = after; parts[n++] = grad_zeros(g->g, zs); }
        cur = af_concat(n, parts, i);
    }
    return cur;
}

void grad_vjp_layout(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g, *x = t->src[0];
    switch (t->op) {
    case IR_OP_TRANSPOSE: {
        int inv[AF_MAX_RANK];
        for (int i = 0; i < t->shape.rank; i++) inv[t->a.ints[i]] = i;
        c->dsrc[0] = af_transpose(g, inv);
        break;
    }
    case IR_OP_RESHAPE: c->dsrc[0] = af_reshape(g, x->shape); break;
    case IR_OP_SLICE_BY_SIZE: c->dsrc[0] = pad_with_zeros(g, x->shape, t->a.ints); break;
    case IR_OP_SPLIT: {
        int64_t begin[AF_MAX_RANK] = { 0 };
        begin[t->a.axis] = t->a.ints[0];
        c->dsrc[0] = pad_with_zeros(g, x->shape, begin);
        break;
    }
    case IR_OP_CONCAT: {
        int64_t begin[AF_MAX_RANK] = { 0 }, size[AF_MAX_RANK];
        for (int k = 0; k < t->nsrc; k++) {
            af_shape s = t->src[k]->shape;
            if (c->need[k]) {
                for (int i = 0; i < s.rank; i++) size[i] = s.dim[i];
                c->dsrc[k] = af_slice(g, begin, size);
            }
            begin[t->a.axis] += s.dim[t->a.axis];
        }
        break;
    }
    /* The ids are whole numbers: no gradient. On the engine the table's gradient would
     * be one-hot(ids)^T @ dy (it has no scatter); the CPU row is an exact scatter-add. */
    case IR_OP_EMBEDDING: c->dsrc[0] = af_embedding_grad(g, t->src[1], x->shape.dim[0]); break;
    case IR_OP_EMBEDDING_GRAD: c->dsrc[0] = af_embedding(g, t->src[1]); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, LAYOUT, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        break;
    }
}
