/* Case labels generated from the op table, so a switch over the ops of one kind needs no
 * default: it lists its own ops' cases, then every other op through
 *
 *     #define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, UNARY, id)
 *     #include "ir/ops.def"
 *     #undef X
 *         (what a call with an op of another kind does: unreachable through the kind's entry)
 *
 * which expands to `case IR_OP_<id>:` for each op whose kind is not UNARY. A new op of
 * that kind without its own case is then a compile error (-Werror=switch), not a silent
 * default. Every kind in kinds.def needs its IR_SAME_KIND_ line below (ir.c checks). */
#ifndef AF_IR_OP_CASES_H
#define AF_IR_OP_CASES_H

#define IR_SAME_KIND_LEAF_LEAF ~, 1
#define IR_SAME_KIND_BINARY_BINARY ~, 1
#define IR_SAME_KIND_SELECT_SELECT ~, 1
#define IR_SAME_KIND_SCALAR_SCALAR ~, 1
#define IR_SAME_KIND_UNARY_UNARY ~, 1
#define IR_SAME_KIND_MATMUL_MATMUL ~, 1
#define IR_SAME_KIND_REDUCE_REDUCE ~, 1
#define IR_SAME_KIND_SOFTMAX_SOFTMAX ~, 1
#define IR_SAME_KIND_LAYOUT_LAYOUT ~, 1
#define IR_SAME_KIND_NORM_NORM ~, 1
#define IR_SAME_KIND_POOL_POOL ~, 1
#define IR_SAME_KIND_CONV_CONV ~, 1
#define IR_SAME_KIND_CAST_CAST ~, 1
#define IR_SAME_KIND_RANK_RANK ~, 1
#define IR_SAME_KIND_REARRANGE_REARRANGE ~, 1
#define IR_SAME_KIND_GEOMETRY_GEOMETRY ~, 1
#define IR_SAME_KIND_BNORM_BNORM ~, 1
#define IR_SAME_KIND_EINSUM_EINSUM ~, 1
#define IR_SAME_KIND_ATTENTION_ATTENTION ~, 1
#define IR_SAME_KIND_STRUCTURAL_STRUCTURAL ~, 1

/* IR_KIND_EQ(A, B): 1 when the kind tokens A and B are the same, else 0 (the second
 * element of IR_SAME_KIND_A_B's expansion when it is defined, else the 0 after it). */
#define IR_2ND_(a, b, ...) b
#define IR_PROBE_(...) IR_2ND_(__VA_ARGS__, 0, ~)
#define IR_KIND_EQ_(x) IR_PROBE_(x)
#define IR_KIND_EQ(A, B) IR_KIND_EQ_(IR_SAME_KIND_##A##_##B)

#define IR_CASE_IF_0_(id) case IR_OP_##id:
#define IR_CASE_IF_1_(id)
#define IR_CASE_IF_00_(id) case IR_OP_##id:
#define IR_CASE_IF_01_(id)
#define IR_CASE_IF_10_(id)
#define IR_CASE_IF_000_(id) case IR_OP_##id:
#define IR_CASE_IF_001_(id)
#define IR_CASE_IF_010_(id)
#define IR_CASE_IF_100_(id)
#define IR_CASE_SEL_(eq, id) IR_CASE_IF_##eq##_(id)
#define IR_CASE_SEL(eq, id) IR_CASE_SEL_(eq, id)
#define IR_CASE_SEL2_(e1, e2, id) IR_CASE_IF_##e1##e2##_(id)
#define IR_CASE_SEL2(e1, e2, id) IR_CASE_SEL2_(e1, e2, id)
#define IR_CASE_UNLESS_KIND(kind, K, id) IR_CASE_SEL(IR_KIND_EQ(kind, K), id)
/* The same for a switch over the ops of two or three distinct kinds. */
#define IR_CASE_UNLESS_KIND2(kind, K1, K2, id) IR_CASE_SEL2(IR_KIND_EQ(kind, K1), IR_KIND_EQ(kind, K2), id)
#define IR_CASE_SEL3_(e1, e2, e3, id) IR_CASE_IF_##e1##e2##e3##_(id)
#define IR_CASE_SEL3(e1, e2, e3, id) IR_CASE_SEL3_(e1, e2, e3, id)
#define IR_CASE_UNLESS_KIND3(kind, K1, K2, K3, id) \
    IR_CASE_SEL3(IR_KIND_EQ(kind, K1), IR_KIND_EQ(kind, K2), IR_KIND_EQ(kind, K3), id)

#endif
