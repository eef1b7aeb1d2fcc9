/* The CPU kernel table, generated from the op table: each op runs its kind's kernel
 * (CPU_KIND_<KIND>; a kind without one does not compile). Kinds whose ops need different
 * loops dispatch on the op. Leaves have no kernel: they are fed or baked. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

#include <stddef.h>

static void kind_matmul(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_MATMUL_W: cpu_k_matmul_w(c); break;
    case IR_OP_MATMUL: cpu_k_matmul(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, MATMUL, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
static void kind_conv(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_CONV_TRANSPOSE: cpu_k_conv_transpose(c); break;
    case IR_OP_CONV_WEIGHT_GRAD: cpu_k_conv_weight_grad(c); break;
    case IR_OP_CONV: cpu_k_conv(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, CONV, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
static void kind_pool(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_AVG_POOL: case IR_OP_MAX_POOL: cpu_k_pool(c); break;
    case IR_OP_AVG_POOL_GRAD: case IR_OP_MAX_POOL_GRAD: cpu_k_pool_grad(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, POOL, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
static void kind_layout(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_TRANSPOSE: cpu_k_transpose(c); break;
    case IR_OP_CONCAT: cpu_k_concat(c); break;
    case IR_OP_SLICE_BY_SIZE: case IR_OP_SPLIT: cpu_k_slice(c); break;
    case IR_OP_EMBEDDING: cpu_k_embedding(c); break;
    case IR_OP_EMBEDDING_GRAD: cpu_k_embedding_grad(c); break;
    case IR_OP_RESHAPE: cpu_k_copy(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, LAYOUT, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}

#define CPU_KIND_LEAF NULL
#define CPU_KIND_BINARY cpu_k_binary
#define CPU_KIND_SELECT cpu_k_select
#define CPU_KIND_SCALAR cpu_k_scalar
#define CPU_KIND_UNARY cpu_k_unary
#define CPU_KIND_MATMUL kind_matmul
#define CPU_KIND_REDUCE cpu_k_reduce
#define CPU_KIND_SOFTMAX cpu_k_softmax
#define CPU_KIND_LAYOUT kind_layout
#define CPU_KIND_NORM cpu_k_norm
#define CPU_KIND_POOL kind_pool
#define CPU_KIND_CONV kind_conv
#define CPU_KIND_CAST cpu_k_cast
#define CPU_KIND_RANK cpu_k_rank
#define CPU_KIND_REARRANGE cpu_k_rearrange
#define CPU_KIND_GEOMETRY cpu_k_geometry
#define CPU_KIND_BNORM cpu_k_bnorm
#define CPU_KIND_EINSUM cpu_k_einsum
#define CPU_KIND_ATTENTION cpu_k_attention
#define CPU_KIND_STRUCTURAL cpu_k_structural

const cpu_kernel_fn cpu_kernels[IR_OP_COUNT] = {
#define X(id, name, arity, kind, ...) [IR_OP_##id] = CPU_KIND_##kind,
#include "ir/ops.def"
#undef X
};

int64_t cpu_scratch_floats(const af_tensor *t, int threads) {
    if (t->op == IR_OP_CONV_WEIGHT_GRAD) { /* per thread: one image's patches and a partial dW */
        int64_t per, all;
        if (!ir_add64(cpu_conv_scratch(t), af_shape_count(t->shape), &per) || !ir_mul64(per, threads > 1 ? threads : 1, &all))
            return INT64_MAX; /* refused by the memory plan */
        return all;
    }
    if (t->op == IR_OP_CONV || t->op == IR_OP_CONV_TRANSPOSE) {
        int64_t all;
        return ir_mul64(cpu_conv_scratch(t), threads > 1 ? threads : 1, &all) ? all : INT64_MAX;
    }
    if (t->op == IR_OP_MATMUL) return cpu_matmul_scratch(t);
    if (t->op == IR_OP_SDPA) return t->src[1]->shape.dim[2]; /* one row of attention weights */
    if (t->op == IR_OP_CAUSAL_ATTENTION || t->op == IR_OP_CAUSAL_ATTENTION_GRAD) return cpu_attention_scratch(t, threads);
    return cpu_bridge_scratch(t);
}
