/* Corpus rows for matmul, reductions, softmax and the layout ops. */
#include "support/corpus_case.h"

const corpus_case corpus_tensor[] = {
    /* matmul_w: x[..., K] @ wt[N, K]^T with a baked weight. */
    { CASE("matrix", matmul_w, MATMUL_W), .s = { SH(7, 13), SH(33, 13) } },
    { CASE("vector", matmul_w, MATMUL_W), .s = { SH(13), SH(5, 13) } },
    { CASE("rank3", matmul_w, MATMUL_W), .s = { SH(2, 3, 16), SH(9, 16) } },
    { CASE("1x1", matmul_w, MATMUL_W), .s = { SH(1, 1), SH(1, 1) } },
    { CASE("large", matmul_w, MATMUL_W), .s = { SH(64, 128), SH(96, 128) } },

    /* matmul: transpose flags, broadcast batches, and the shared 2-D right operand that
     * becomes one tall GEMM (the fast path) next to variants that must not take it. */
    { CASE("plain", matmul, MATMUL), .s = { SH(7, 13), SH(13, 33) } },
    { CASE("ta", matmul, MATMUL), .s = { SH(13, 7), SH(13, 33) }, .p = { 1, 0 } },
    { CASE("tb", matmul, MATMUL), .s = { SH(7, 13), SH(33, 13) }, .p = { 0, 1 } },
    { CASE("ta-tb", matmul, MATMUL), .s = { SH(13, 7), SH(33, 13) }, .p = { 1, 1 } },
    { CASE("batched", matmul, MATMUL), .s = { SH(3, 7, 13), SH(3, 13, 5) } },
    { CASE("batched-ta-tb", matmul, MATMUL), .s = { SH(3, 13, 7), SH(3, 5, 13) }, .p = { 1, 1 } },
    { CASE("shared-right", matmul, MATMUL), .s = { SH(4, 7, 13), SH(13, 33) } },
    { CASE("shared-right-tb", matmul, MATMUL), .s = { SH(2, 3, 7, 13), SH(33, 13) }, .p = { 0, 1 } },
    { CASE("shared-right-ta", matmul, MATMUL), .s = { SH(4, 13, 7), SH(13, 33) }, .p = { 1, 0 } },
    { CASE("shared-right-batch1", matmul, MATMUL), .s = { SH(4, 7, 13), SH(1, 13, 5) } },
    { CASE("shared-right-rank4", matmul, MATMUL), .s = { SH(5, 7, 13), SH(1, 1, 13, 9) } },
    { CASE("shared-right-const", matmul, MATMUL), .s = { SH(5, 7, 13), SH(13, 9) }, .p = { 0, 0, 1 } },
    { CASE("shared-right-m1", matmul, MATMUL), .s = { SH(8, 1, 13), SH(13, 5) } },
    { CASE("shared-left", matmul, MATMUL), .s = { SH(7, 13), SH(4, 13, 5) } },
    { CASE("shared-left-tb", matmul, MATMUL), .s = { SH(7, 13), SH(4, 5, 13) }, .p = { 0, 1 } },
    { CASE("bcast-both", matmul, MATMUL), .s = { SH(2, 1, 7, 13), SH(3, 13, 5) } },
    { CASE("bcast-cross", matmul, MATMUL), .s = { SH(3, 1, 4, 6), SH(1, 2, 6, 5) } },
    { CASE("bcast-cross-tb", matmul, MATMUL), .s = { SH(3, 1, 4, 6), SH(1, 2, 5, 6) }, .p = { 0, 1 } },
    { CASE("rank5", matmul, MATMUL), .s = { SH(2, 1, 3, 4, 5), SH(1, 2, 1, 5, 3) } },
    { CASE("rank6", matmul, MATMUL), .s = { SH(2, 1, 2, 1, 3, 4), SH(2, 1, 2, 4, 2) }, .p = { 0, 0 } },
    { CASE("dot", matmul, MATMUL), .s = { SH(1, 13), SH(13, 1) } },
    { CASE("outer", matmul, MATMUL), .s = { SH(7, 1), SH(1, 9) } },
    { CASE("large-shared", matmul, MATMUL), .s = { SH(4, 64, 96), SH(96, 80) } },
    { CASE("large-batched-ta", matmul, MATMUL), .s = { SH(4, 96, 64), SH(4, 96, 80) }, .p = { 1, 0 } },
    { CASE("long-k", matmul, MATMUL), .s = { SH(3, 1024), SH(1024, 4) } },

    /* Reductions (every reduce op): keep_dims on and off, negative and unsorted axes,
     * non-contiguous axes, a size-1 axis between reduced ones, full reductions to rank 0. */
    { CASE("mid", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(3, 7, 5) }, .p = { 0, 1, 1 } },
    { CASE("mid-keep", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(3, 7, 5) }, .p = { 1, 1, 1 } },
    { CASE("last-neg", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(3, 7, 5) }, .p = { 0, 1, -1 } },
    { CASE("first", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(13, 7, 5) }, .p = { 1, 1, 0 } },
    { CASE("gap", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(4, 5, 6) }, .p = { 0, 2, 0, 2 } },
    { CASE("gap-keep", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(4, 5, 6) }, .p = { 1, 2, 2, 0 } },
    { CASE("gap-size1", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(3, 1, 5) }, .p = { 0, 2, 0, 2 } },
    { CASE("rank5-gaps", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(2, 3, 4, 5, 3) }, .p = { 1, 2, 1, 3 } },
    { CASE("rank5-neg", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(2, 3, 4, 5, 3) }, .p = { 0, 3, -1, 2, -2 } },
    { CASE("rank6-alt", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(2, 3, 2, 3, 2, 3) }, .p = { 0, 3, 0, 2, 4 } },
    { CASE("vector", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(33) }, .p = { 0, 1, 0 } },
    { CASE("all", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(7, 13) }, .p = { 0, 2, 0, 1 } },
    { CASE("all-keep", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(7, 13) }, .p = { 1, 2, 1, 0 } },
    { CASE("size1-axis", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(2, 1, 6) }, .p = { 0, 1, 1 } },
    { CASE("single", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(1) }, .p = { 1, 1, 0 } },
    /* Long reductions (thousands of terms, through the kernel's double and float paths). */
    { CASE("long", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(4096) }, .p = { 0, 1, 0 } },
    { CASE("long-rows", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(3, 3000) }, .p = { 0, 1, 1 } },
    { CASE("long-cols", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(1500, 6) }, .p = { 0, 1, 0 } },
    { CASE("long-gap", reduce, REDUCE_SUM), .sweep = 1, .s = { SH(40, 3, 50) }, .p = { 0, 2, 0, 2 } },

    /* Softmax over each axis position, a size-1 axis, and threaded sizes. */
    { CASE("last", softmax, SOFTMAX), .s = { SH(7, 13) }, .p = { -1 } },
    { CASE("first", softmax, SOFTMAX), .s = { SH(7, 13) }, .p = { 0 } },
    { CASE("middle", softmax, SOFTMAX), .s = { SH(3, 5, 7) }, .p = { 1 } },
    { CASE("neg3", softmax, SOFTMAX), .s = { SH(2, 3, 4, 5) }, .p = { -3 } },
    { CASE("vector", softmax, SOFTMAX), .s = { SH(33) }, .p = { 0 } },
    { CASE("size1", softmax, SOFTMAX), .s = { SH(5, 1) }, .p = { 1 } },
    { CASE("wide-values", softmax, SOFTMAX), .s = { SH(4, 9) }, .p = { 1 }, .dom = { DU(-20, 20) } },
    { CASE("large-rows", softmax, SOFTMAX), .s = { SH(64, 300) }, .p = { 1 } },
    { CASE("large-mid", softmax, SOFTMAX), .s = { SH(8, 1000, 4) }, .p = { 1 }, .dom = { DU(-8, 8) } },

    /* Transpose, ranks 0 to 6. */
    { CASE("matrix", transpose, TRANSPOSE), .s = { SH(7, 13) }, .p = { 1, 0 } },
    { CASE("rank3-rot", transpose, TRANSPOSE), .s = { SH(2, 3, 4) }, .p = { 2, 0, 1 } },
    { CASE("rank3-inner", transpose, TRANSPOSE), .s = { SH(2, 3, 4) }, .p = { 0, 2, 1 } },
    { CASE("rank3-outer", transpose, TRANSPOSE), .s = { SH(2, 3, 4) }, .p = { 1, 0, 2 } },
    { CASE("rank4", transpose, TRANSPOSE), .s = { SH(2, 3, 4, 5) }, .p = { 3, 1, 0, 2 } },
    { CASE("rank5", transpose, TRANSPOSE), .s = { SH(2, 3, 1, 5, 4) }, .p = { 4, 2, 0, 3, 1 } },
    { CASE("rank6-reverse", transpose, TRANSPOSE), .s = { SH(2, 1, 3, 2, 2, 3) }, .p = { 5, 4, 3, 2, 1, 0 } },
    { CASE("identity", transpose, TRANSPOSE), .s = { SH(33) }, .p = { 0 } },
    { CASE("scalar", transpose, TRANSPOSE), .s = { SH0 } },

    /* Reshape, with -1 and rank 0 both ways. */
    { CASE("infer", reshape, RESHAPE), .s = { SH(2, 3, 4), SH(4, -1) } },
    { CASE("flatten", reshape, RESHAPE), .s = { SH(2, 3, 4), SH(24) } },
    { CASE("unit-axes", reshape, RESHAPE), .s = { SH(6), SH(1, 2, 1, 3) } },
    { CASE("to-scalar", reshape, RESHAPE), .s = { SH(1), SH0 } },
    { CASE("from-scalar", reshape, RESHAPE), .s = { SH0, SH(1, 1) } },
    { CASE("infer-flat", reshape, RESHAPE), .s = { SH(7, 13), SH(-1) } },

    /* slice_by_size: begin p[], sizes s[1] (-1 to the end). */
    { CASE("matrix", slice, SLICE_BY_SIZE), .s = { SH(7, 13), SH(5, -1) }, .p = { 1, 2 } },
    { CASE("rank4", slice, SLICE_BY_SIZE), .s = { SH(3, 4, 5, 6), SH(3, 2, -1, 1) }, .p = { 0, 1, 2, 3 } },
    { CASE("last-one", slice, SLICE_BY_SIZE), .s = { SH(33), SH(1) }, .p = { 32 } },
    { CASE("outer", slice, SLICE_BY_SIZE), .s = { SH(2, 3, 4), SH(1, 3, 4) }, .p = { 1, 0, 0 } },
    { CASE("rank5", slice, SLICE_BY_SIZE), .s = { SH(2, 3, 4, 5, 6), SH(1, 2, 3, -1, 4) }, .p = { 1, 1, 1, 1, 1 } },
    { CASE("scalar", slice, SLICE_BY_SIZE), .s = { SH0, SH0 } },

    /* Concat: 3+ operands on every axis, negative axes, up to 6 operands. */
    { CASE("axis0", concat, CONCAT), .s = { SH(2, 3, 4), SH(1, 3, 4), SH(3, 3, 4) }, .p = { 0, 3 } },
    { CASE("axis1-four", concat, CONCAT), .s = { SH(2, 1, 4), SH(2, 3, 4), SH(2, 2, 4), SH(2, 5, 4) }, .p = { 1, 4 } },
    { CASE("axis2", concat, CONCAT), .s = { SH(2, 3, 1), SH(2, 3, 4), SH(2, 3, 2) }, .p = { 2, 3 } },
    { CASE("axis-1", concat, CONCAT), .s = { SH(2, 3, 5), SH(2, 3, 1), SH(2, 3, 2) }, .p = { -1, 3 } },
    { CASE("axis-3", concat, CONCAT), .s = { SH(1, 3, 2), SH(2, 3, 2), SH(1, 3, 2) }, .p = { -3, 3 } },
    { CASE("vectors", concat, CONCAT), .s = { SH(3), SH(5), SH(7) }, .p = { 0, 3 } },
    { CASE("rank4-last", concat, CONCAT), .s = { SH(2, 2, 3, 1), SH(2, 2, 3, 4), SH(2, 2, 3, 2) }, .p = { 3, 3 } },
    { CASE("rank4-axis2", concat, CONCAT), .s = { SH(2, 2, 1, 3), SH(2, 2, 4, 3), SH(2, 2, 2, 3) }, .p = { 2, 3 } },
    { CASE("two", concat, CONCAT), .s = { SH(7, 13), SH(7, 20) }, .p = { 1, 2 } },
    { CASE("six", concat, CONCAT), .s = { SH(1, 3), SH(2, 3), SH(3, 3), SH(1, 3), SH(4, 3), SH(2, 3) }, .p = { 0, 6 } },

    /* Split: unequal sizes, negative axes, equal parts (NULL sizes). */
    { CASE("vector", split, SPLIT), .s = { SH(7) }, .p = { 0, 3, 2, 4, 1 } },
    { CASE("middle", split, SPLIT), .s = { SH(2, 13, 3) }, .p = { 1, 3, 1, 5, 7 } },
    { CASE("equal-last", split, SPLIT), .s = { SH(3, 4, 6) }, .p = { -1, 3 } },
    { CASE("first", split, SPLIT), .s = { SH(6, 2) }, .p = { 0, 2, 5, 1 } },
    { CASE("rank4", split, SPLIT), .s = { SH(2, 3, 4, 5) }, .p = { 2, 3, 1, 1, 2 } },
    { CASE("neg2", split, SPLIT), .s = { SH(4, 9) }, .p = { -2, 2, 1, 3 } },
    { CASE("one-part", split, SPLIT), .s = { SH(3, 5) }, .p = { 1, 1, 5 } },
    { CASE("tokens", embedding, EMBEDDING), .s = { SH(11, 6), SH(2, 5) }, .dom = { {0}, DI(0, 10) } },
    { CASE("vector-ids", embedding, EMBEDDING), .s = { SH(7, 3, 2), SH(9) }, .dom = { {0}, DI(0, 6) } },
    { CASE("baked-ids", embedding, EMBEDDING), .s = { SH(5, 4), SH(3, 2) }, .dom = { {0}, DI(0, 4) }, .p = { 0, 1 } },
    { CASE("repeats", embedding, EMBEDDING_GRAD), .s = { SH(4, 6, 5), SH(4, 6) }, .dom = { {0}, DI(0, 3) }, .p = { 7 } },
    { CASE("scalar-rows", embedding, EMBEDDING_GRAD), .s = { SH(12), SH(12) }, .dom = { {0}, DI(0, 4) }, .p = { 5 } },
    { CASE("baked-ids", embedding, EMBEDDING_GRAD), .s = { SH(3, 2, 4), SH(3, 2) }, .dom = { {0}, DI(0, 2) }, .p = { 3, 1 } },

    /* Multi-node graphs (corpus_b_chain): the memory plan and the executor's dtype handling. */
    { CASE("ln-matmul-softmax", chain, SOFTMAX), .p = { 0 } },
    { CASE("concat-self-reduce", chain, CONCAT), .p = { 1 } },
    { CASE("reshape-transpose-slice", chain, SLICE_BY_SIZE), .p = { 2 } },
    { CASE("split-concat", chain, CONCAT), .p = { 3 } },
    { CASE("f16-island", chain, CAST), .p = { 4 } },
    { CASE("input-as-output", chain, RELU), .p = { 5 } },
    { CASE("conv-block", chain, AVG_POOL), .p = { 6 } },
    { CASE("llama-attention", chain, EMBEDDING), .p = { 8 } },
    { CASE("const-only", chain, RELU), .p = { 7 } },
};
const int corpus_tensor_count = (int)(sizeof corpus_tensor / sizeof corpus_tensor[0]);
