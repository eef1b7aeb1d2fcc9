/* The CPU kernel table, indexed by op. Leaves have no kernel (they are fed or baked);
 * test_optable checks every other row has one. */
#include "cpu/kernels.h"

const cpu_kernel_fn cpu_kernels[IR_OP_COUNT] = {
    [IR_OP_ADD] = cpu_k_binary, [IR_OP_SUB] = cpu_k_binary, [IR_OP_MUL] = cpu_k_binary,
    [IR_OP_REAL_DIV] = cpu_k_binary, [IR_OP_MAXIMUM] = cpu_k_binary, [IR_OP_MINIMUM] = cpu_k_binary,
    [IR_OP_POW] = cpu_k_binary, [IR_OP_GREATER] = cpu_k_binary, [IR_OP_LESS] = cpu_k_binary,
    [IR_OP_EQUAL] = cpu_k_binary,
    [IR_OP_SELECT] = cpu_k_select,
    [IR_OP_ADDS] = cpu_k_scalar, [IR_OP_MULS] = cpu_k_scalar,
    [IR_OP_NEG] = cpu_k_unary, [IR_OP_ABS] = cpu_k_unary, [IR_OP_SQUARE] = cpu_k_unary,
    [IR_OP_SQRT] = cpu_k_unary, [IR_OP_RSQRT] = cpu_k_unary, [IR_OP_INVERSE] = cpu_k_unary,
    [IR_OP_EXP] = cpu_k_unary, [IR_OP_LOG] = cpu_k_unary, [IR_OP_TANH] = cpu_k_unary,
    [IR_OP_SIGMOID] = cpu_k_unary, [IR_OP_RELU] = cpu_k_unary, [IR_OP_GELU] = cpu_k_unary,
    [IR_OP_SILU] = cpu_k_unary, [IR_OP_SIN] = cpu_k_unary, [IR_OP_COS] = cpu_k_unary, [IR_OP_ERF] = cpu_k_unary, [IR_OP_FLOOR] = cpu_k_unary,
    [IR_OP_ATAN] = cpu_k_unary, [IR_OP_ASIN] = cpu_k_unary, [IR_OP_ACOS] = cpu_k_unary, [IR_OP_ATANH] = cpu_k_unary,
    [IR_OP_MATMUL_W] = cpu_k_matmul_w, [IR_OP_MATMUL] = cpu_k_matmul,
    [IR_OP_REDUCE_SUM] = cpu_k_reduce, [IR_OP_REDUCE_MEAN] = cpu_k_reduce,
    [IR_OP_REDUCE_MAX] = cpu_k_reduce, [IR_OP_REDUCE_MIN] = cpu_k_reduce,
    [IR_OP_SOFTMAX] = cpu_k_softmax,
    [IR_OP_TRANSPOSE] = cpu_k_transpose, [IR_OP_RESHAPE] = cpu_k_copy,
    [IR_OP_SLICE_BY_SIZE] = cpu_k_slice, [IR_OP_CONCAT] = cpu_k_concat, [IR_OP_SPLIT] = cpu_k_slice,
    [IR_OP_RMS_NORM] = cpu_k_norm, [IR_OP_LAYER_NORM] = cpu_k_norm,
    [IR_OP_CHANNEL_LAYER_NORM] = cpu_k_norm, [IR_OP_GROUP_NORM] = cpu_k_norm,
    [IR_OP_AVG_POOL] = cpu_k_pool, [IR_OP_MAX_POOL] = cpu_k_pool,
    [IR_OP_CONV] = cpu_k_conv, [IR_OP_CONV_TRANSPOSE] = cpu_k_conv_transpose,
    [IR_OP_CAST] = cpu_k_cast,
};

int64_t cpu_scratch_floats(const af_tensor *t, int threads) {
    if (t->op == IR_OP_CONV || t->op == IR_OP_CONV_TRANSPOSE) return cpu_conv_scratch(t) * (threads > 1 ? threads : 1);
    if (t->op == IR_OP_MATMUL) return cpu_matmul_scratch(t);
    return 0;
}
