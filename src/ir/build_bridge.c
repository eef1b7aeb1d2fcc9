/* Builders of the bridge ops (OPF_BRIDGE rows): sdpa and the structural layers. */
#include "ir/ir.h"

#include <math.h>

/* The reliability bounds of the native SDPA layer (seed 004): outside them af_sdpa
 * builds the same attention from ordinary ops. */
static bool sdpa_native_ok(int64_t sq, int64_t skv) {
    int64_t longest = sq > skv ? sq : skv, shortest = sq < skv ? sq : skv;
    return longest <= AF_SDPA_NATIVE_MAX_SEQ && shortest < AF_SDPA_NATIVE_MIN_BOTH;
}

af_tensor *ir_sdpa_decomposed(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *mask, float scale) {
    af_tensor *s = af_muls(af_matmul(q, k, 0, 1), scale);
    if (mask) {
        af_shape ms = af_tensor_shape(mask);
        s = af_add(s, af_reshape(mask, AF_SHAPE(ms.dim[0], ms.dim[2])));
    }
    return af_matmul(af_softmax(s, -1), v, 0, 0);
}

af_tensor *af_sdpa(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *mask, float scale) {
    af_tensor *src[4] = {q, k, v, mask};
    int nsrc = mask ? 4 : 3;
    if (q && scale == 0 && q->shape.rank == 4) scale = 1.0f / sqrtf((float)q->shape.dim[3]);
    ir_attrs a = {.scalar = scale};
    af_tensor *t = ir_build(IR_OP_SDPA, nsrc, src, &a); /* checks the shapes either way */
    if (!t || sdpa_native_ok(q->shape.dim[2], k->shape.dim[2])) return t;
    /* outside the bounds: the node stays unused (no plan needs it) */
    return ir_sdpa_decomposed(q, k, v, mask, scale);
}

af_tensor *af_flatten(af_tensor *x) { return ir_build(IR_OP_FLATTEN, 1, &x, NULL); }

af_tensor *af_dropout(af_tensor *x, float rate) {
    ir_attrs a = {.scalar = rate};
    return ir_build(IR_OP_DROPOUT, 1, &x, &a);
}

af_tensor *af_broadcast(af_tensor *x, int axis, int64_t size) {
    ir_attrs a = {.axis = axis};
    a.ints[0] = size;
    return ir_build(IR_OP_BROADCAST, 1, &x, &a);
}

af_tensor *af_input_view(af_tensor *x, int64_t offset, int64_t size) {
    ir_attrs a = {0};
    a.ints[0] = offset;
    a.sizes[0] = size;
    return ir_build(IR_OP_INPUT_VIEW, 1, &x, &a);
}
