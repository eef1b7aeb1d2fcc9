/* Corpus rows for the elementwise families: binary, select, scalar, unary, cast.
 * Rows with .sweep run once per op of the family, each op in its default domain. */
#include "support/corpus_case.h"

const corpus_case corpus_elementwise[] = {
    /* Binary: broadcasting in both directions, size-1 axes, scalars, rank 6, and sizes
     * above the kernel's threading threshold (16384 elements per chunk). */
    { CASE("same", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH(7, 13) } },
    { CASE("row-bcast", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH(13) } },
    { CASE("bcast-left", binary, ADD), .sweep = 1, .s = { SH(13), SH(7, 13) } },
    { CASE("outer", binary, ADD), .sweep = 1, .s = { SH(7, 1), SH(1, 13) } },
    { CASE("mixed-ranks", binary, ADD), .sweep = 1, .s = { SH(3, 1, 5), SH(4, 1) } },
    { CASE("scalar-right", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH0 } },
    { CASE("scalar-left", binary, ADD), .sweep = 1, .s = { SH0, SH(2, 3, 5) } },
    { CASE("scalars", binary, ADD), .sweep = 1, .s = { SH0, SH0 } },
    { CASE("rank1", binary, ADD), .sweep = 1, .s = { SH(33), SH(33) } },
    { CASE("size1", binary, ADD), .sweep = 1, .s = { SH(1, 1), SH(1) } },
    { CASE("leading-ones", binary, ADD), .sweep = 1, .s = { SH(1, 1, 7, 13), SH(13) } },
    { CASE("mid-bcast", binary, ADD), .sweep = 1, .s = { SH(5, 6, 7), SH(5, 1, 7) } },
    { CASE("inner-one", binary, ADD), .sweep = 1, .s = { SH(7, 1, 13), SH(7, 1, 13) } },
    { CASE("rank6", binary, ADD), .sweep = 1, .s = { SH(2, 1, 3, 1, 5, 2), SH(1, 4, 1, 3, 1, 1) } },
    { CASE("col-bcast-large", binary, ADD), .sweep = 1, .s = { SH(64, 33, 17), SH(33, 1) } },
    { CASE("flat-large", binary, ADD), .sweep = 1, .s = { SH(36001), SH(36001) } },
    { CASE("scalar-large", binary, ADD), .sweep = 1, .s = { SH0, SH(36001) } },
    { CASE("const-right", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH(13) }, .p = { 1 } },
    { CASE("const-left", binary, ADD), .sweep = 1, .s = { SH(13), SH(5, 13) }, .p = { 2 } },
    { CASE("same-operand", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH(7, 13) }, .p = { 3 } },
    { CASE("fp16-dtype", binary, ADD), .sweep = 1, .s = { SH(7, 13), SH(7, 1) }, .p = { 0, 1 } },
    { CASE("fp16-dtype-const-left", binary, ADD), .sweep = 1, .s = { SH(1, 13), SH(7, 13) }, .p = { 2, 1 } },
    /* Comparisons on continuous values too (the sweep uses integers, for ties). */
    { CASE("uniform", binary, GREATER), .s = { SH(5, 7), SH(5, 7) }, .dom = { DU(-2, 2), DU(-2, 2) } },
    { CASE("uniform", binary, LESS), .s = { SH(5, 7), SH(7) }, .dom = { DU(-2, 2), DU(-2, 2) } },
    { CASE("uniform", binary, EQUAL), .s = { SH(5, 7), SH(5, 1) }, .dom = { DU(-2, 2), DU(-2, 2) } },
    { CASE("ties", binary, MAXIMUM), .s = { SH(6, 9), SH(9) }, .dom = { DI(-2, 2), DI(-2, 2) } },
    { CASE("ties", binary, MINIMUM), .s = { SH(6, 9), SH(6, 1) }, .dom = { DI(-2, 2), DI(-2, 2) } },
    { CASE("integer-exponent", binary, POW), .s = { SH(4, 9), SH(9) }, .dom = { DU(0.5f, 2), DI(-3, 3) } },

    /* Select: cond != 0 picks a; cond, a and b broadcast together. */
    { CASE("same", select, SELECT), .s = { SH(7, 13), SH(7, 13), SH(7, 13) } },
    { CASE("bcast", select, SELECT), .s = { SH(7, 1), SH(13), SH(7, 13) } },
    { CASE("scalar-cond", select, SELECT), .s = { SH0, SH(5, 6), SH(6) } },
    { CASE("three-way", select, SELECT), .s = { SH(2, 1, 4), SH(3, 1), SH(1) } },
    { CASE("zero-one", select, SELECT), .s = { SH(33), SH(33), SH0 }, .dom = { DI(0, 1) } },
    { CASE("uniform-cond", select, SELECT), .s = { SH(4, 5), SH(4, 5), SH(4, 5) }, .dom = { DU(-1, 1) } },
    { CASE("large", select, SELECT), .s = { SH(33, 17), SH(64, 33, 17), SH0 } },

    /* Scalar ops. */
    { CASE("matrix", scalar, ADDS), .sweep = 1, .s = { SH(7, 13) }, .f = 0.75f },
    { CASE("negative", scalar, ADDS), .sweep = 1, .s = { SH(33) }, .f = -2.5f },
    { CASE("scalar", scalar, ADDS), .sweep = 1, .s = { SH0 }, .f = 3.0f },
    { CASE("large", scalar, ADDS), .sweep = 1, .s = { SH(64, 33, 17) }, .f = 1.25f },

    /* Unary math over ranks 0 to 5 and a threaded size. */
    { CASE("matrix", unary, NEG), .sweep = 1, .s = { SH(7, 13) } },
    { CASE("scalar", unary, NEG), .sweep = 1, .s = { SH0 } },
    { CASE("rank1", unary, NEG), .sweep = 1, .s = { SH(33) } },
    { CASE("rank5", unary, NEG), .sweep = 1, .s = { SH(2, 3, 1, 5, 7) } },
    { CASE("large", unary, NEG), .sweep = 1, .s = { SH(64, 33, 17) } },
    { CASE("tanh-form", unary, GELU), .s = { SH(7, 13) }, .p = { AF_GELU_TANH }, .dom = { DU(-6, 6) } },
    { CASE("tanh-form-large", unary, GELU), .s = { SH(64, 33, 17) }, .p = { AF_GELU_TANH } },
    { CASE("tanh-form-scalar", unary, GELU), .s = { SH0 }, .p = { AF_GELU_TANH } },
    { CASE("exact-wide", unary, GELU), .s = { SH(5, 11) }, .p = { AF_GELU_EXACT }, .dom = { DU(-6, 6) } },
    { CASE("zeros", unary, RELU), .s = { SH(9, 5) }, .dom = { DI(-2, 2) } },
    { CASE("zeros", unary, ABS), .s = { SH(9, 5) }, .dom = { DI(-2, 2) } },
    { CASE("wide", unary, TANH), .s = { SH(9, 5) }, .dom = { DU(-12, 12) } },
    { CASE("wide", unary, SIGMOID), .s = { SH(9, 5) }, .dom = { DU(-12, 12) } },

    /* Cast: fp32 <-> fp16 dtype, identity, a round trip; wide values show the rounding. */
    { CASE("to-f16", cast, CAST), .s = { SH(7, 13) }, .p = { AF_F32, AF_F16 }, .dom = { DU(-100, 100) } },
    { CASE("from-f16", cast, CAST), .s = { SH(7, 13) }, .p = { AF_F16, AF_F32 }, .dom = { DU(-100, 100) } },
    { CASE("identity", cast, CAST), .s = { SH(33) }, .p = { AF_F32, AF_F32 }, .dom = { DU(-100, 100) } },
    { CASE("f16-f16", cast, CAST), .s = { SH0 }, .p = { AF_F16, AF_F16 }, .dom = { DU(-100, 100) } },
    { CASE("round-trip", cast, CAST), .s = { SH(5, 7) }, .p = { AF_F32, AF_F16, 1 }, .dom = { DU(-3, 3) } },
    { CASE("large", cast, CAST), .s = { SH(64, 33, 17) }, .p = { AF_F32, AF_F16 }, .dom = { DU(-10, 10) } },
};
const int corpus_elementwise_count = (int)(sizeof corpus_elementwise / sizeof corpus_elementwise[0]);
