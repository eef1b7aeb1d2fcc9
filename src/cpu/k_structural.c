/* The structural bridge layers on the CPU: flatten and dropout (rate 0) copy, broadcast
 * repeats a length-1 axis, input_view copies a contiguous window. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

#include <string.h>

static void broadcast(const cpu_call *c) {
    const af_tensor *t = c->t;
    int ax = t->a.axis;
    int64_t outer = 1, inner = 1, size = t->shape.dim[ax];
    for (int i = 0; i < ax; i++) outer *= t->shape.dim[i];
    for (int i = ax + 1; i < t->shape.rank; i++) inner *= t->shape.dim[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < size; s++)
            memcpy(c->out + (o * size + s) * inner, c->in[0] + o * inner, (size_t)inner * sizeof(float));
}

void cpu_k_structural(const cpu_call *c) {
    const af_tensor *t = c->t;
    switch (t->op) {
    case IR_OP_BROADCAST: broadcast(c); return;
    case IR_OP_INPUT_VIEW:
        memcpy(c->out, c->in[0] + t->a.ints[0], (size_t)t->a.sizes[0] * sizeof(float));
        return;
    case IR_OP_FLATTEN: case IR_OP_DROPOUT: /* dropout at rate 0: the values unchanged */
        memcpy(c->out, c->in[0], (size_t)af_shape_count(t->shape) * sizeof(float));
        return;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, STRUCTURAL, id)
#include "ir/ops.def"
#undef X
        return; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
