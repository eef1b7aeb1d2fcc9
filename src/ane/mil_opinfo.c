/* How each op-table row lowers to MIL (shown by `aneforge ops`; a test fails for a
 * non-leaf row without an entry). Keep in step with mil_lower.c. */
#include "ane/opinfo.h"
#include "ir/ir.h"

#include <stddef.h>

static const char *const lowering[IR_OP_COUNT] = {
    [IR_OP_INPUT] = "function argument",
    [IR_OP_CONST] = "const",
    [IR_OP_ADD] = "add", [IR_OP_SUB] = "sub", [IR_OP_MUL] = "mul", [IR_OP_REAL_DIV] = "real_div",
    [IR_OP_MAXIMUM] = "maximum", [IR_OP_MINIMUM] = "minimum", [IR_OP_POW] = "pow",
    [IR_OP_GREATER] = "greater,cast", [IR_OP_LESS] = "less,cast", [IR_OP_EQUAL] = "equal,cast",
    [IR_OP_SELECT] = "not_equal,select",
    [IR_OP_ADDS] = "add", [IR_OP_MULS] = "mul", [IR_OP_NEG] = "mul",
    [IR_OP_ABS] = "abs", [IR_OP_SQUARE] = "square", [IR_OP_SQRT] = "sqrt", [IR_OP_RSQRT] = "rsqrt",
    [IR_OP_INVERSE] = "inverse", [IR_OP_EXP] = "exp", [IR_OP_LOG] = "log", [IR_OP_TANH] = "tanh",
    [IR_OP_SIGMOID] = "sigmoid", [IR_OP_RELU] = "relu", [IR_OP_GELU] = "gelu", [IR_OP_SILU] = "silu",
    [IR_OP_SIN] = "sin", [IR_OP_COS] = "cos", [IR_OP_ERF] = "erf", [IR_OP_FLOOR] = "floor", [IR_OP_ATAN] = "atan", [IR_OP_ASIN] = "asin", [IR_OP_ACOS] = "acos", [IR_OP_ATANH] = "atanh",
    [IR_OP_MATMUL_W] = "linear", [IR_OP_MATMUL] = "matmul",
    [IR_OP_REDUCE_SUM] = "reduce_sum", [IR_OP_REDUCE_MEAN] = "reduce_mean",
    [IR_OP_REDUCE_MAX] = "reduce_max", [IR_OP_REDUCE_MIN] = "reduce_min",
    [IR_OP_SOFTMAX] = "softmax", [IR_OP_TRANSPOSE] = "transpose", [IR_OP_RESHAPE] = "reshape",
    [IR_OP_SLICE_BY_SIZE] = "slice_by_size", [IR_OP_CONCAT] = "concat", [IR_OP_SPLIT] = "slice_by_size",
    [IR_OP_RMS_NORM] = "decomposed: mul,reduce_mean,rsqrt,mul,mul",
    [IR_OP_LAYER_NORM] = "decomposed: layer_norm,mul,add",
    [IR_OP_CHANNEL_LAYER_NORM] = "decomposed: layer_norm,mul,add",
    [IR_OP_GROUP_NORM] = "decomposed: reshape,layer_norm,reshape,mul,add",
    [IR_OP_AVG_POOL] = "avg_pool", [IR_OP_MAX_POOL] = "max_pool",
    [IR_OP_CONV] = "conv", [IR_OP_CONV_TRANSPOSE] = "conv_transpose",
    [IR_OP_CAST] = "identity",
};

const char *mil_op_lowering(int op) { return op >= 0 && op < IR_OP_COUNT ? lowering[op] : NULL; }
