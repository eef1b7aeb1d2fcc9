/* How each op-table row lowers to MIL (shown by `aneforge ops`; a test fails for a
 * non-leaf row without an entry). Keep in step with mil_lower.c. */
#include "ane/opinfo.h"
#include "ir/ir.h"

#include <stddef.h>

static const char *const lowering[AF_OP_COUNT] = {
    [AF_OP_INPUT] = "function argument",
    [AF_OP_CONST] = "const",
    [AF_OP_ADD] = "add", [AF_OP_SUB] = "sub", [AF_OP_MUL] = "mul", [AF_OP_REAL_DIV] = "real_div",
    [AF_OP_MAXIMUM] = "maximum", [AF_OP_MINIMUM] = "minimum", [AF_OP_POW] = "pow",
    [AF_OP_GREATER] = "greater,cast", [AF_OP_LESS] = "less,cast", [AF_OP_EQUAL] = "equal,cast",
    [AF_OP_SELECT] = "not_equal,select",
    [AF_OP_ADDS] = "add", [AF_OP_MULS] = "mul", [AF_OP_NEG] = "mul",
    [AF_OP_ABS] = "abs", [AF_OP_SQUARE] = "square", [AF_OP_SQRT] = "sqrt", [AF_OP_RSQRT] = "rsqrt",
    [AF_OP_INVERSE] = "inverse", [AF_OP_EXP] = "exp", [AF_OP_LOG] = "log", [AF_OP_TANH] = "tanh",
    [AF_OP_SIGMOID] = "sigmoid", [AF_OP_RELU] = "relu", [AF_OP_GELU] = "gelu", [AF_OP_SILU] = "silu",
    [AF_OP_SIN] = "sin", [AF_OP_COS] = "cos", [AF_OP_ERF] = "erf",
    [AF_OP_MATMUL_W] = "linear", [AF_OP_MATMUL] = "matmul",
    [AF_OP_REDUCE_SUM] = "reduce_sum", [AF_OP_REDUCE_MEAN] = "reduce_mean",
    [AF_OP_REDUCE_MAX] = "reduce_max", [AF_OP_REDUCE_MIN] = "reduce_min",
    [AF_OP_SOFTMAX] = "softmax", [AF_OP_TRANSPOSE] = "transpose", [AF_OP_RESHAPE] = "reshape",
    [AF_OP_SLICE_BY_SIZE] = "slice_by_size", [AF_OP_CONCAT] = "concat", [AF_OP_SPLIT] = "slice_by_size",
    [AF_OP_RMS_NORM] = "decomposed: mul,reduce_mean,rsqrt,mul,mul",
    [AF_OP_LAYER_NORM] = "decomposed: layer_norm,mul,add",
    [AF_OP_CHANNEL_LAYER_NORM] = "decomposed: layer_norm,mul,add",
    [AF_OP_GROUP_NORM] = "decomposed: reshape,layer_norm,reshape,mul,add",
    [AF_OP_AVG_POOL] = "avg_pool", [AF_OP_MAX_POOL] = "max_pool",
    [AF_OP_CONV] = "conv", [AF_OP_CONV_TRANSPOSE] = "conv_transpose",
    [AF_OP_CAST] = "identity",
};

const char *af_mil_op_lowering(int op) { return op >= 0 && op < AF_OP_COUNT ? lowering[op] : NULL; }
