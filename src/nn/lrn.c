/* PyTorch's local response norm from fused ops (no graph cut), beside the engine's
 * lrn bridge op: the squares summed over `size` neighbouring channels by an average
 * pool along the channel axis, zero-padded size/2 before and (size-1)/2 after. */
#include "ir/ir.h"

af_tensor *af_local_response_norm(af_tensor *x, int size, float alpha, float beta, float k) {
    if (!x) { ir_fail(AF_ERR_INVALID, "af_local_response_norm: x is NULL"); return NULL; }
    if (x->g->error) return NULL;
    af_shape xs = x->shape;
    if (xs.rank < 3 || size < 1) {
        ir_graph_fail(x->g, "af_local_response_norm: needs x [..., C, H, W] (rank >= 3) and size >= 1 (got rank %d, size %d)", xs.rank, size);
        return NULL;
    }
    int64_t C = xs.dim[xs.rank - 3], HW = xs.dim[xs.rank - 2] * xs.dim[xs.rank - 1];
    af_shape s4 = AF_SHAPE(af_shape_count(xs) / (C * HW), 1, C, HW);
    af_tensor *parts[3], *sq = af_reshape(af_square(x), s4);
    int n = 0;
    int64_t before = size / 2, after = (size - 1) / 2;
    if (before) parts[n++] = af_const_fill(x->g, AF_SHAPE(s4.dim[0], 1, before, HW), 0.0f);
    parts[n++] = sq;
    if (after) parts[n++] = af_const_fill(x->g, AF_SHAPE(s4.dim[0], 1, after, HW), 0.0f);
    af_tensor *padded = n == 1 ? sq : af_concat(n, parts, 2);
    int kernel[2] = { size, 1 }, stride[2] = { 1, 1 }, pad[2] = { 0, 0 };
    af_tensor *avg = af_reshape(af_avg_pool(padded, kernel, stride, pad), xs);
    af_tensor *den = af_pow(af_adds(af_muls(avg, alpha), k), af_const_fill(x->g, AF_SHAPE(1), beta));
    return af_div(x, den);
}
