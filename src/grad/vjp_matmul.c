/* VJPs of matmuls. For C = op(A) op(B): d op(A) = G op(B)^T and d op(B) = op(A)^T G,
 * written with the transpose flags so no explicit transpose nodes are needed; operands
 * that broadcast over the batch get their products summed back to their own shape. */
#include "grad/grad.h"
#include "ir/op_cases.h"

#include <stdlib.h>

/* A baked weight's transpose as a new baked constant [K, N]. */
static af_tensor *transposed_const(af_tensor *wt) {
    int64_t n = wt->shape.dim[0], k = wt->shape.dim[1];
    float *d = malloc((size_t)(n * k) * sizeof *d);
    if (!d) { ir_graph_fail(wt->g, "matmul_w VJP: out of memory"); return NULL; }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) d[j * n + i] = wt->data[i * k + j];
    af_tensor *r = af_const(wt->g, NULL, AF_SHAPE(k, n), d);
    free(d);
    return r;
}

static void vjp_matmul_w(grad_ctx *c) {
    af_tensor *x = c->t->src[0], *wt = c->t->src[1], *g = c->g;
    int64_t n = wt->shape.dim[0], k = wt->shape.dim[1];
    if (c->need[0]) /* gx = g @ wt */
        c->dsrc[0] = wt->op == IR_OP_CONST ? af_matmul_w(g, transposed_const(wt))
                                           : af_reshape(af_matmul(af_reshape(g, AF_SHAPE(-1, n)), wt, 0, 0), x->shape);
    if (c->need[1]) /* gwt[N, K] = g^T x over all rows */
        c->dsrc[1] = af_matmul(af_reshape(g, AF_SHAPE(-1, n)), af_reshape(x, AF_SHAPE(-1, k)), 1, 0);
}

void grad_vjp_matmul(grad_ctx *c) {
    switch (c->t->op) {
    case IR_OP_MATMUL_W: vjp_matmul_w(c); return;
    case IR_OP_MATMUL: break; /* below */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, MATMUL, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(c->t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[c->t->op].name);
        return;
    }
    af_tensor *a = c->t->src[0], *b = c->t->src[1], *g = c->g;
    int ta = c->t->a.ta, tb = c->t->a.tb;
    if (c->need[0]) {
        af_tensor *da = ta ? af_matmul(b, g, tb, 1) : af_matmul(g, b, 0, !tb);
        c->dsrc[0] = grad_unbroadcast(da, a->shape);
    }
    if (c->need[1]) {
        af_tensor *db = tb ? af_matmul(g, a, 1, ta) : af_matmul(a, g, !ta, 0);
        c->dsrc[1] = grad_unbroadcast(db, b->shape);
    }
}
