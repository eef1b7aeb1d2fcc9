/* The CPU kernel table, indexed by op. Leaves have no kernel (they are fed or baked);
 * test_optable checks every other row has one. */
#include "cpu/kernels.h"

const cpu_kernel_fn cpu_kernels[AF_OP_COUNT] = {
    [AF_OP_ADD] = cpu_k_binary, [AF_OP_SUB] = cpu_k_binary, [AF_OP_MUL] = cpu_k_binary,
    [AF_OP_REAL_DIV] = cpu_k_binary, [AF_OP_MAXIMUM] = cpu_k_binary, [AF_OP_MINIMUM] = cpu_k_binary,
    [AF_OP_POW] = cpu_k_binary, [AF_OP_GREATER] = cpu_k_binary, [AF_OP_LESS] = cpu_k_binary,
    [AF_OP_EQUAL] = cpu_k_binary,
    [AF_OP_SELECT] = cpu_k_select,
    [AF_OP_ADDS] = cpu_k_scalar, [AF_OP_MULS] = cpu_k_scalar,
    [AF_OP_NEG] = cpu_k_unary, [AF_OP_ABS] = cpu_k_unary, [AF_OP_SQUARE] = cpu_k_unary,
    [AF_OP_SQRT] = cpu_k_unary, [AF_OP_RSQRT] = cpu_k_unary, [AF_OP_INVERSE] = cpu_k_unary,
    [AF_OP_EXP] = cpu_k_unary, [AF_OP_LOG] = cpu_k_unary, [AF_OP_TANH] = cpu_k_unary,
    [AF_OP_SIGMOID] = cpu_k_unary, [AF_OP_RELU] = cpu_k_unary, [AF_OP_GELU] = cpu_k_unary,
    [AF_OP_SILU] = cpu_k_unary, [AF_OP_SIN] = cpu_k_unary, [AF_OP_COS] = cpu_k_unary, [AF_OP_ERF] = cpu_k_unary,
    [AF_OP_MATMUL_W] = cpu_k_matmul_w, [AF_OP_MATMUL] = cpu_k_matmul,
    [AF_OP_REDUCE_SUM] = cpu_k_reduce, [AF_OP_REDUCE_MEAN] = cpu_k_reduce,
    [AF_OP_REDUCE_MAX] = cpu_k_reduce, [AF_OP_REDUCE_MIN] = cpu_k_reduce,
    [AF_OP_SOFTMAX] = cpu_k_softmax,
    [AF_OP_TRANSPOSE] = cpu_k_transpose, [AF_OP_RESHAPE] = cpu_k_copy,
    [AF_OP_SLICE_BY_SIZE] = cpu_k_slice, [AF_OP_CONCAT] = cpu_k_concat, [AF_OP_SPLIT] = cpu_k_slice,
    [AF_OP_RMS_NORM] = cpu_k_norm, [AF_OP_LAYER_NORM] = cpu_k_norm,
    [AF_OP_CHANNEL_LAYER_NORM] = cpu_k_norm, [AF_OP_GROUP_NORM] = cpu_k_norm,
    [AF_OP_AVG_POOL] = cpu_k_pool, [AF_OP_MAX_POOL] = cpu_k_pool,
    [AF_OP_CONV] = cpu_k_conv, [AF_OP_CONV_TRANSPOSE] = cpu_k_conv_transpose,
    [AF_OP_CAST] = cpu_k_cast,
};

int64_t cpu_scratch_floats(const af_tensor *t, int threads) {
    if (t->op == AF_OP_CONV || t->op == AF_OP_CONV_TRANSPOSE) return cpu_conv_scratch(t) * (threads > 1 ? threads : 1);
    if (t->op == AF_OP_MATMUL) return cpu_matmul_scratch(t);
    return 0;
}
