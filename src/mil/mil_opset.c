/* Core ML's MIL op set, iOS 15 to iOS 18, as coremltools' MIL op definitions list it
 * (converters/mil/mil/ops/defs: iOS15 .. iOS18). `aneforge ops --mil` and docs/mil.md
 * table show which of them the reader maps (mil_op_supported); a program using one it
 * does not map is refused with the op's name, line and column. */
#include "mil/mil_ast.h"
#include "mil/opinfo.h"

#include <string.h>

const char *const mil_coreml_ops[] = {
    /* activation */
    "clamped_relu", "elu", "gelu", "leaky_relu", "linear_activation", "prelu", "relu", "relu6", "scaled_tanh",
    "sigmoid", "sigmoid_hard", "silu", "softplus", "softplus_parametric", "softmax", "softsign", "thresholded_relu",
    /* classify, control flow, lists */
    "classify", "cond", "const", "select", "while_loop", "make_list", "list_length", "list_write", "list_read",
    "list_gather", "list_scatter",
    /* conv */
    "conv", "conv_transpose",
    /* elementwise binary */
    "add", "equal", "floor_div", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
    "logical_xor", "maximum", "minimum", "mod", "mul", "not_equal", "pow", "real_div", "sub",
    /* elementwise unary */
    "abs", "acos", "asin", "atan", "atanh", "ceil", "clip", "cos", "cosh", "erf", "exp", "exp2", "floor", "inverse",
    "log", "logical_not", "round", "rsqrt", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "threshold", "cast",
    /* image resizing */
    "upsample_nearest_neighbor", "resize_nearest_neighbor", "upsample_bilinear", "resize_bilinear", "crop_resize",
    "crop", "affine", "resample", "resize",
    /* linear */
    "linear", "matmul", "einsum",
    /* normalization */
    "batch_norm", "instance_norm", "l2_norm", "layer_norm", "local_response_norm",
    /* pool */
    "avg_pool", "l2_pool", "max_pool",
    /* random */
    "random_bernoulli", "random_categorical", "random_normal", "random_uniform",
    /* recurrent */
    "gru", "lstm", "rnn",
    /* reduction */
    "reduce_argmax", "reduce_argmin", "reduce_l1_norm", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "reduce_sum_square",
    /* scatter / gather */
    "gather", "scatter", "gather_along_axis", "scatter_along_axis", "gather_nd", "scatter_nd",
    /* tensor operation */
    "band_part", "cumsum", "fill", "fill_like", "non_maximum_suppression", "non_zero", "one_hot", "pad", "range_1d",
    "tile", "argsort", "topk", "flatten2d", "shape", "concat", "split", "stack", "identity",
    /* tensor transformation */
    "depth_to_space", "expand_dims", "reshape", "reshape_like", "reverse", "reverse_sequence", "slice_by_index",
    "slice_by_size", "slice_update", "space_to_depth", "space_to_batch", "batch_to_space", "squeeze", "transpose",
    "pixel_shuffle", "pixel_unshuffle", "sliding_windows",
    /* quantization and compression (iOS 16..18) */
    "quantize", "dequantize", "constexpr_affine_dequantize", "constexpr_cast", "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense", "constexpr_blockwise_shift_scale", "constexpr_lut_to_sparse",
    "constexpr_sparse_blockwise_shift_scale",
    /* transformers and state (iOS 18) */
    "scaled_dot_product_attention", "read_state", "coreml_update_state",
    NULL,
};

bool mil_coreml_op_known(const char *name) {
    for (int i = 0; mil_coreml_ops[i]; i++)
        if (!strcmp(mil_coreml_ops[i], name)) return true;
    return false;
}
