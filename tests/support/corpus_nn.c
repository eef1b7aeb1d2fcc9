/* Corpus rows for norms, pools and convolutions. */
#include "support/corpus_case.h"

const corpus_case corpus_nn[] = {
    /* rms_norm / layer_norm over the last axis; gamma/beta as inputs, consts, NULL,
     * and shaped [1,1,D] (only the count matters). */
    { CASE("matrix", norm, RMS_NORM), .s = { SH(4, 33), SH(33) }, .f = 1e-5f },
    { CASE("rank3-shaped-gamma", norm, RMS_NORM), .s = { SH(2, 3, 13), SH(1, 1, 13) }, .f = 1e-5f },
    { CASE("vector", norm, RMS_NORM), .s = { SH(33), SH(33) }, .f = 1e-6f },
    { CASE("default-gamma", norm, RMS_NORM), .s = { SH(5, 7) }, .p = { 0, 1 }, .f = 1e-5f },
    { CASE("const-gamma", norm, RMS_NORM), .s = { SH(3, 16), SH(16) }, .p = { 0, 0, 1 }, .f = 1e-5f },
    { CASE("large-eps", norm, RMS_NORM), .s = { SH(3, 8), SH(8) }, .f = 0.5f },
    { CASE("matrix", norm, LAYER_NORM), .s = { SH(4, 33), SH(33), SH(33) }, .f = 1e-5f },
    { CASE("rank3", norm, LAYER_NORM), .s = { SH(2, 3, 13), SH(13), SH(1, 13) }, .f = 1e-5f },
    { CASE("vector", norm, LAYER_NORM), .s = { SH(7), SH(7), SH(7) }, .f = 1e-5f },
    { CASE("defaults", norm, LAYER_NORM), .s = { SH(5, 7) }, .p = { 0, 1 }, .f = 1e-5f },
    { CASE("consts", norm, LAYER_NORM), .s = { SH(3, 16), SH(16), SH(16) }, .p = { 0, 0, 1 }, .f = 1e-5f },
    { CASE("offset-data", norm, LAYER_NORM), .s = { SH(6, 10), SH(10), SH(10) }, .dom = { DU(3, 5) }, .f = 1e-5f },
    { CASE("large-eps", norm, LAYER_NORM), .s = { SH(3, 8), SH(8), SH(8) }, .f = 0.5f },
    { CASE("wide", norm, LAYER_NORM), .s = { SH(16, 257), SH(257), SH(257) }, .f = 1e-5f },

    /* channel_layer_norm over axis 1 of [N, C, ...]. */
    { CASE("nchw", norm, CHANNEL_LAYER_NORM), .s = { SH(2, 5, 3, 4), SH(5), SH(5) }, .f = 1e-5f },
    { CASE("rank2", norm, CHANNEL_LAYER_NORM), .s = { SH(3, 7), SH(7), SH(7) }, .f = 1e-5f },
    { CASE("rank5-shaped", norm, CHANNEL_LAYER_NORM), .s = { SH(2, 4, 3, 2, 3), SH(1, 4, 1, 1, 1), SH(4, 1, 1) }, .f = 1e-5f },
    { CASE("defaults", norm, CHANNEL_LAYER_NORM), .s = { SH(1, 6, 5, 5) }, .p = { 0, 1 }, .f = 1e-5f },
    { CASE("consts", norm, CHANNEL_LAYER_NORM), .s = { SH(2, 3, 8), SH(3), SH(3) }, .p = { 0, 0, 1 }, .f = 1e-3f },

    /* group_norm: G groups of C/G channels x spatial, per-channel gamma/beta. */
    { CASE("g2", norm, GROUP_NORM), .s = { SH(2, 6, 3, 5), SH(6), SH(6) }, .p = { 2 }, .f = 1e-5f },
    { CASE("g3", norm, GROUP_NORM), .s = { SH(2, 6, 3, 5), SH(6), SH(6) }, .p = { 3 }, .f = 1e-5f },
    { CASE("g1", norm, GROUP_NORM), .s = { SH(2, 6, 3, 5), SH(6), SH(6) }, .p = { 1 }, .f = 1e-5f },
    { CASE("instance", norm, GROUP_NORM), .s = { SH(2, 6, 3, 5), SH(6), SH(6) }, .p = { 6 }, .f = 1e-5f },
    { CASE("rank2", norm, GROUP_NORM), .s = { SH(3, 8), SH(8), SH(8) }, .p = { 4 }, .f = 1e-5f },
    { CASE("defaults", norm, GROUP_NORM), .s = { SH(2, 4, 5) }, .p = { 2, 1 }, .f = 1e-5f },
    { CASE("rank5", norm, GROUP_NORM), .s = { SH(1, 4, 2, 3, 2), SH(4), SH(4) }, .p = { 2, 0, 1 }, .f = 1e-5f },

    /* Pools (avg and max): stride != kernel, asymmetric kernels, padding, defaults. */
    { CASE("k3s2p1", pool, AVG_POOL), .sweep = 1, .s = { SH(2, 3, 9, 11) }, .p = { 3, 3, 2, 2, 1, 1 } },
    { CASE("k2x3s1x2p1x0", pool, AVG_POOL), .sweep = 1, .s = { SH(2, 3, 9, 11) }, .p = { 2, 3, 1, 2, 1, 0 } },
    { CASE("k3x2s3x1p0x1", pool, AVG_POOL), .sweep = 1, .s = { SH(2, 3, 9, 11) }, .p = { 3, 2, 3, 1, 0, 1 } },
    { CASE("default-stride", pool, AVG_POOL), .sweep = 1, .s = { SH(1, 2, 8, 7) }, .p = { 2, 2, 0, 0, 0, 0, 1 } },
    { CASE("global", pool, AVG_POOL), .sweep = 1, .s = { SH(2, 3, 9, 11) }, .p = { 9, 11 } },
    { CASE("k1s2", pool, AVG_POOL), .sweep = 1, .s = { SH(1, 2, 7, 7) }, .p = { 1, 1, 2, 2 } },
    { CASE("k5s2x3p2", pool, AVG_POOL), .sweep = 1, .s = { SH(1, 2, 7, 7) }, .p = { 5, 5, 2, 3, 2, 2 } },
    { CASE("single-row", pool, AVG_POOL), .sweep = 1, .s = { SH(1, 2, 1, 9) }, .p = { 1, 3, 1, 2, 0, 1 } },
    { CASE("large", pool, AVG_POOL), .sweep = 1, .s = { SH(2, 8, 32, 32) }, .p = { 3, 3, 2, 2, 1, 1 } },

    /* Conv: weight [Cout, Cin/groups, kH, kW]; stride/pad/dilation/groups and the 1x1
     * pointwise case (which skips im2col) next to a strided 1x1 (which does not). */
    { CASE("3x3", conv, CONV), .s = { SH(2, 4, 9, 11), SH(6, 4, 3, 3) } },
    { CASE("stride2-pad1", conv, CONV), .s = { SH(2, 4, 9, 11), SH(6, 4, 3, 3) }, .p = { 2, 2, 1, 1 } },
    { CASE("dilation2-pad2", conv, CONV), .s = { SH(2, 4, 9, 11), SH(6, 4, 3, 3) }, .p = { 1, 1, 2, 2, 2, 2 } },
    { CASE("groups2", conv, CONV), .s = { SH(2, 4, 9, 11), SH(6, 2, 3, 3) }, .p = { 1, 1, 1, 1, 0, 0, 2 } },
    { CASE("groups2-stride2", conv, CONV), .s = { SH(1, 6, 8, 9), SH(4, 3, 3, 2) }, .p = { 2, 2, 1, 0, 0, 0, 2 } },
    { CASE("depthwise", conv, CONV), .s = { SH(2, 4, 7, 6), SH(4, 1, 3, 3) }, .p = { 1, 1, 1, 1, 0, 0, 4 } },
    { CASE("pointwise", conv, CONV), .s = { SH(2, 4, 9, 11), SH(8, 4, 1, 1) } },
    { CASE("pointwise-groups2", conv, CONV), .s = { SH(2, 4, 5, 3), SH(6, 2, 1, 1) }, .p = { 0, 0, 0, 0, 0, 0, 2 } },
    { CASE("1x1-stride2", conv, CONV), .s = { SH(2, 4, 9, 11), SH(5, 4, 1, 1) }, .p = { 2, 2 } },
    { CASE("1x1-pad1", conv, CONV), .s = { SH(1, 3, 4, 5), SH(2, 3, 1, 1) }, .p = { 1, 1, 1, 1 } },
    { CASE("asymmetric", conv, CONV), .s = { SH(2, 4, 9, 11), SH(5, 4, 2, 3) }, .p = { 2, 1, 1, 0, 1, 2 } },
    { CASE("k5x3", conv, CONV), .s = { SH(1, 3, 13, 7), SH(7, 3, 5, 3) }, .p = { 2, 2, 2, 1 } },
    { CASE("kernel-fills-input", conv, CONV), .s = { SH(2, 3, 3, 3), SH(4, 3, 3, 3) } },
    { CASE("large", conv, CONV), .s = { SH(2, 16, 16, 16), SH(32, 16, 3, 3) }, .p = { 1, 1, 1, 1 } },

    /* Conv transpose: weight [Cin, Cout, kH, kW], out = (H-1)s - 2p + d(k-1) + 1. */
    /* conv_weight_grad (CPU only): x [N, Cin, H, W] and dy [N, Cout, Ho, Wo] -> [Cout, Cin, kH, kW];
     * padding, stride, dilation and the built-in CNN's shapes. */
    { CASE("3x3-pad1", conv_wgrad, CONV_WEIGHT_GRAD), .s = { SH(2, 3, 7, 6), SH(2, 5, 7, 6) }, .p = { 3, 3, 0, 0, 1, 1 } },
    { CASE("3x2-nopad", conv_wgrad, CONV_WEIGHT_GRAD), .s = { SH(3, 2, 6, 5), SH(3, 4, 4, 4) }, .p = { 3, 2 } },
    { CASE("stride2-dilation2", conv_wgrad, CONV_WEIGHT_GRAD), .s = { SH(1, 3, 9, 8), SH(1, 2, 4, 2) }, .p = { 3, 3, 2, 2, 1, 0, 2, 2 } },
    { CASE("1x1", conv_wgrad, CONV_WEIGHT_GRAD), .s = { SH(2, 4, 5, 3), SH(2, 6, 5, 3) }, .p = { 1, 1 } },
    { CASE("cnn-conv2", conv_wgrad, CONV_WEIGHT_GRAD), .s = { SH(4, 16, 14, 14), SH(4, 32, 14, 14) }, .p = { 3, 3, 0, 0, 1, 1 } },

    { CASE("stride1", conv_transpose, CONV_TRANSPOSE), .s = { SH(2, 4, 5, 6), SH(4, 3, 3, 3) } },
    { CASE("stride1-pad1", conv_transpose, CONV_TRANSPOSE), .s = { SH(2, 4, 5, 6), SH(4, 3, 3, 3) }, .p = { 1, 1, 1, 1 } },
    { CASE("stride2", conv_transpose, CONV_TRANSPOSE), .s = { SH(2, 4, 5, 6), SH(4, 3, 3, 3) }, .p = { 2, 2 } },
    { CASE("stride2-pad1", conv_transpose, CONV_TRANSPOSE), .s = { SH(2, 4, 5, 6), SH(4, 3, 3, 3) }, .p = { 2, 2, 1, 1 } },
    { CASE("stride2-dilation2", conv_transpose, CONV_TRANSPOSE), .s = { SH(1, 3, 4, 5), SH(3, 2, 3, 3) }, .p = { 2, 2, 1, 1, 2, 2 } },
    { CASE("asymmetric-dilation", conv_transpose, CONV_TRANSPOSE), .s = { SH(1, 3, 4, 5), SH(3, 2, 3, 2) }, .p = { 1, 2, 1, 0, 1, 2 } },
    { CASE("asymmetric", conv_transpose, CONV_TRANSPOSE), .s = { SH(2, 4, 5, 6), SH(4, 3, 2, 4) }, .p = { 2, 3, 0, 1 } },
    { CASE("1x1-stride2", conv_transpose, CONV_TRANSPOSE), .s = { SH(1, 4, 3, 5), SH(4, 5, 1, 1) }, .p = { 2, 2 } },
    { CASE("upsample", conv_transpose, CONV_TRANSPOSE), .s = { SH(1, 8, 7, 7), SH(8, 16, 4, 4) }, .p = { 2, 2, 1, 1 } },
    /* Bridge ops (seed 004): integer-valued keys give ties, which must break to the
     * lower index; rearranges at unequal factors and batch > 1; starts past both ends
     * of a dynamic slice (clamped). */
    { CASE("rows", bridge, SORT), .s = { SH(3, 9) }, .dom = { DI(-3, 3) }, .p = { 1, 0, 0 } },
    { CASE("desc-batched", bridge, SORT), .s = { SH(2, 2, 7) }, .dom = { DI(-2, 2) }, .p = { 0, 1, 0 } },
    { CASE("indices", bridge, SORT), .s = { SH(2, 11) }, .dom = { DI(-4, 4) }, .p = { 1, 1, 1 } },
    { CASE("largest", bridge, TOPK), .s = { SH(3, 10) }, .dom = { DI(-3, 3) }, .p = { 5, 2, 1, 0 } },
    { CASE("smallest-indices", bridge, TOPK), .s = { SH(2, 2, 9) }, .dom = { DI(-3, 3) }, .p = { 2, 0, 0, 1 } },
    { CASE("spatial-max", bridge, ARGMINMAX), .s = { SH(2, 3, 4, 5) }, .dom = { DI(-3, 3) }, .p = { 0, 1 } },
    { CASE("channel-min", bridge, ARGMINMAX), .s = { SH(5, 3, 4) }, .dom = { DI(-3, 3) }, .p = { 1, 0 } },
    { CASE("width-max", bridge, GLOBAL_ARGMINMAX), .s = { SH(3, 4, 6) }, .dom = { DI(-3, 3) }, .p = { -1, 1 } },
    { CASE("channel-min", bridge, GLOBAL_ARGMINMAX), .s = { SH(5, 2, 3) }, .dom = { DI(-3, 3) }, .p = { -3, 0 } },
    { CASE("2x3", bridge, PIXEL_SHUFFLE), .s = { SH(2, 12, 3, 2) }, .p = { 2, 3 } },
    { CASE("3x2", bridge, PIXEL_UNSHUFFLE), .s = { SH(2, 2, 6, 4) }, .p = { 3, 2 } },
    { CASE("2x3", bridge, CHANNEL_TO_SPACE), .s = { SH(2, 12, 3, 2) }, .p = { 2, 3 } },
    { CASE("3x2", bridge, SPACE_TO_CHANNEL), .s = { SH(2, 2, 6, 4) }, .p = { 3, 2 } },
    { CASE("2x2-batch2", bridge, SPACE_TO_BATCH), .s = { SH(2, 3, 4, 6) }, .p = { 2, 3 } },
    { CASE("2x3", bridge, BATCH_TO_SPACE), .s = { SH(12, 2, 3, 2) }, .p = { 2, 3 } },
    /* batch 1, the engine's rearranges (the rows above, batch 2, are refused there) */
    { CASE("batch1", bridge, PIXEL_SHUFFLE), .s = { SH(1, 12, 3, 2) }, .p = { 2, 3 } },
    { CASE("batch1", bridge, PIXEL_UNSHUFFLE), .s = { SH(1, 2, 6, 4) }, .p = { 3, 2 } },
    { CASE("batch1", bridge, CHANNEL_TO_SPACE), .s = { SH(1, 12, 3, 2) }, .p = { 2, 3 } },
    { CASE("batch1", bridge, SPACE_TO_CHANNEL), .s = { SH(1, 2, 6, 4) }, .p = { 3, 2 } },
    { CASE("batch1", bridge, SPACE_TO_BATCH), .s = { SH(1, 3, 4, 6) }, .p = { 2, 3 } },
    { CASE("batch1", bridge, BATCH_TO_SPACE), .s = { SH(6, 2, 3, 2) }, .p = { 2, 3 } },
    { CASE("rows", bridge, CROSS_PRODUCT), .s = { SH(4, 3), SH(4, 3) } },
    { CASE("5x7-2x3", bridge, CROSS_CORRELATION), .s = { SH(5, 7), SH(2, 3) } },
    { CASE("disparity3", bridge, COST_VOLUME), .s = { SH(6), SH(10) }, .p = { 3 } },
    { CASE("points", bridge, FPS), .s = { SH(40, 3) }, .p = { 7, 0 } },
    { CASE("indices", bridge, FPS), .s = { SH(25, 3) }, .p = { 25, 1 } },
    { CASE("ball", bridge, RADIUS_SEARCH), .s = { SH(30, 3), SH(4, 3) }, .f = 1.5f },
    { CASE("axis1", bridge, DYNAMIC_SLICE), .s = { SH(3, 8, 2), SH(1) }, .dom = { {0}, DI(-2, 9) }, .p = { 1, 3 } },
    { CASE("last", bridge, DYNAMIC_SLICE), .s = { SH(2, 4), SH(1) }, .dom = { {0}, DI(0, 2) }, .p = { -1, 2 } },
    { CASE("c5", bridge, LRN), .s = { SH(2, 5, 3, 2) }, .f = 0.3f, .p = { 75, 100 } },
    { CASE("c4-rank3", bridge, LRN), .s = { SH(4, 2, 3) }, .f = 0.1f, .p = { 50, 200 } },
    { CASE("width", bridge, MINMAX_NORM), .s = { SH(1, 3, 4, 6) }, .f = 0.01f, .p = { -1 } },
    { CASE("height", bridge, MINMAX_NORM), .s = { SH(1, 3, 5, 2) }, .f = 0.001f, .p = { -2 } },
    { CASE("add", bridge, SCALED_ELEMENTWISE), .s = { SH(3, 5), SH(3, 5) }, .f = 0.75f, .p = { AF_SEW_ADD } },
    { CASE("min", bridge, SCALED_ELEMENTWISE), .s = { SH(3, 5), SH(3, 5) }, .dom = { DI(-2, 2), DI(-2, 2) }, .f = -1.5f, .p = { AF_SEW_MIN } },
    { CASE("max", bridge, SCALED_ELEMENTWISE), .s = { SH(3, 5), SH(3, 5) }, .dom = { DI(-2, 2), DI(-2, 2) }, .f = 2.0f, .p = { AF_SEW_MAX } },
    { CASE("native", bridge, EINSUM), .s = { SH(2, 3, 4, 5), SH(2, 5, 4, 6) } },
    /* bridge ops: structural and attention */
    { CASE("self", sdpa, SDPA), .s = { SH(2, 3, 6, 8), SH(2, 3, 6, 8), SH(2, 3, 6, 8), SH0 } },
    { CASE("decode-masked", sdpa, SDPA), .s = { SH(1, 2, 1, 16), SH(1, 2, 9, 16), SH(1, 2, 9, 5), SH(1, 1, 9) }, .f = 0.3f },
    /* causal_attention (CPU only) and its gradient: one block (seq < 32), blocks with a
     * partial last one, one head; the gradient stacks dq, dk, dv. */
    { CASE("one-block", causal_attention, CAUSAL_ATTENTION), .s = { SH(2, 3, 7, 8) } },
    { CASE("blocks", causal_attention, CAUSAL_ATTENTION), .s = { SH(1, 2, 70, 16) }, .f = 0.3f },
    { CASE("one-head", causal_attention, CAUSAL_ATTENTION), .s = { SH(1, 1, 33, 4) } },
    { CASE("one-block", causal_attention, CAUSAL_ATTENTION_GRAD), .s = { SH(2, 3, 7, 8) }, .p = { 1 } },
    { CASE("blocks", causal_attention, CAUSAL_ATTENTION_GRAD), .s = { SH(1, 2, 70, 16) }, .p = { 1 }, .f = 0.3f },
    { CASE("one-head", causal_attention, CAUSAL_ATTENTION_GRAD), .s = { SH(1, 1, 33, 4) }, .p = { 1 } },
    /* layout 1, [B, T, H, d] (the llama's): heads' rows H * d apart */
    { CASE("seq-major", causal_attention, CAUSAL_ATTENTION), .s = { SH(2, 37, 3, 8) }, .p = { 0, 1 } },
    { CASE("seq-major", causal_attention, CAUSAL_ATTENTION_GRAD), .s = { SH(2, 37, 3, 8) }, .p = { 1, 1 }, .f = 0.3f },
    /* rope (CPU only): [batch, seq, heads, hs], rank 3 and 5, turning back. */
    { CASE("llama", rope, ROPE), .s = { SH(2, 9, 3, 8), SH(9, 4) } },
    { CASE("rank3", rope, ROPE), .s = { SH(5, 2, 6), SH(5, 3) } },
    { CASE("rank5-back", rope, ROPE), .s = { SH(2, 2, 7, 2, 4), SH(7, 2) }, .p = { 1 } },
    /* swiglu (CPU only) and its gradients: a over [-6, 6], a vector and a llama-like matrix. */
    { CASE("matrix", swiglu, SWIGLU), .s = { SH(16, 96) } },
    { CASE("vector", swiglu, SWIGLU), .s = { SH(37) } },
    { CASE("da", swiglu, SWIGLU_GRAD), .s = { SH(16, 96) }, .p = { 1 } },
    { CASE("db", swiglu, SWIGLU_GRAD), .s = { SH(16, 96) }, .p = { 2 } },
    /* softmax_xent (CPU only) and its gradient: soft and one-hot targets, rows longer than
     * the kernel's 512-float sum blocks, logits of 3e4 (exp of them would overflow). */
    { CASE("soft", xent, SOFTMAX_XENT), .s = { SH(5, 37) } },
    { CASE("one-hot-long", xent, SOFTMAX_XENT), .s = { SH(3, 1300) }, .p = { 0, 1 } },
    { CASE("large", xent, SOFTMAX_XENT), .s = { SH(4, 50) }, .p = { 0, 1 }, .f = 30000.0f },
    { CASE("soft", xent, SOFTMAX_XENT_GRAD), .s = { SH(5, 37) }, .p = { 1 } },
    { CASE("seed-long", xent, SOFTMAX_XENT_GRAD), .s = { SH(3, 1300) }, .p = { 2, 1 } },
    { CASE("large", xent, SOFTMAX_XENT_GRAD), .s = { SH(4, 50) }, .p = { 1, 1 }, .f = 30000.0f },
    { CASE("causal-baked-mask", sdpa, SDPA), .s = { SH(1, 4, 7, 8), SH(1, 4, 7, 8), SH(1, 4, 7, 8), SH(7, 1, 7) }, .p = { 1 } },
    { CASE("chw", structural, FLATTEN), .s = { SH(3, 4, 5) } },
    { CASE("rate0", structural, DROPOUT), .s = { SH(2, 3, 4) } },
    { CASE("channel", structural, BROADCAST), .s = { SH(1, 5, 4) }, .p = { 0, 3 } },
    { CASE("width", structural, BROADCAST), .s = { SH(2, 3, 1) }, .p = { 2, 6 } },
    { CASE("window", structural, INPUT_VIEW), .s = { SH(4, 6) }, .p = { 5, 11 } },
};
const int corpus_nn_count = (int)(sizeof corpus_nn / sizeof corpus_nn[0]);
