/* The op corpus: a table of small graphs, each built through the public builders and
 * checked by tests/test_ops.c against the reference evaluator (support/ref.h) in fp32
 * and fp16 numerics. A case names a builder and fills the fields that builder reads. */
#ifndef AF_TEST_CORPUS_CASE_H
#define AF_TEST_CORPUS_CASE_H
#include "ir/ir.h"
#include "support/check.h"

#define CORPUS_MAX_IO 8

/* How an input's values are drawn. All-zero means "the op's default domain", which
 * keeps every op inside its legal domain (positive for log, away from 0 for inverse). */
typedef enum {
    DOM_DEFAULT = 0,
    DOM_UNIFORM, /* uniform in [lo, hi] */
    DOM_INT,     /* integers in [lo, hi]: gives ties for equal, maximum, select */
    DOM_SIGNMAG  /* +-uniform[lo, hi]: away from zero */
} corpus_dom_kind;
typedef struct { corpus_dom_kind kind; float lo, hi; } corpus_dom;

/* A built case: its graph, the inputs with the values to feed, the outputs to check. */
typedef struct {
    af_graph *g;
    test_rng rng;
    int nin, nout;
    af_tensor *in[CORPUS_MAX_IO];
    float *data[CORPUS_MAX_IO];
    af_tensor *out[CORPUS_MAX_IO];
} corpus_graph;

typedef struct corpus_case corpus_case;
typedef void (*corpus_build_fn)(corpus_graph *cg, const corpus_case *c);

struct corpus_case {
    const char *label;
    corpus_build_fn build;
    ir_op op;
    int sweep;           /* run once for every op of op's family (binary, unary, ...) */
    af_shape s[6];       /* operand shapes (meaning per builder) */
    corpus_dom dom[3];   /* per-operand domains */
    int p[12];           /* op parameters (meaning per builder) */
    float f;             /* scalar or eps */
    double tol32;        /* fp32 tolerance relative to the output scale; 0 = 1e-5 */
};

/* Shapes as constant initializers: SH(7, 13), SH0 for a scalar. */
#define SH(...) { .rank = (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), .dim = { __VA_ARGS__ } }
#define SH0 { .rank = 0 }
#define SH_(...) ((af_shape)SH(__VA_ARGS__)) /* the same as an expression */
#define DU(lo, hi) { DOM_UNIFORM, lo, hi }
#define DI(lo, hi) { DOM_INT, lo, hi }
#define DM(lo, hi) { DOM_SIGNMAG, lo, hi }
/* The head of a table row: label, builder and op. */
#define CASE(lbl, fn, o) .label = lbl, .build = corpus_b_##fn, .op = IR_OP_##o

/* Builders (support/corpus_build.c). Parameters each one reads:
 *   binary    s[0] a, s[1] b; p[0]: 1 = b is a const, 2 = a is a const, 3 = b is a; p[1]: fp16 dtype inputs
 *   select    s[0] cond, s[1] a, s[2] b
 *   scalar    s[0]; f the scalar               unary   s[0]; p[0] gelu mode
 *   cast      s[0]; p[0] input dtype, p[1] target dtype; p[2]: cast back to fp32 after
 *   matmul_w  s[0] x, s[1] wt [N, K] (const)
 *   matmul    s[0] a, s[1] b; p[0] ta, p[1] tb; p[2]: b is a const
 *   reduce    s[0]; p[0] keep_dims, p[1] naxes, p[2..] axes
 *   softmax   s[0]; p[0] axis                  transpose s[0]; p[0..] perm
 *   reshape   s[0] -> s[1] (may hold one -1)   slice   s[0]; p[0..] begin, s[1] sizes (-1 = to the end)
 *   concat    s[0..p[1]) operands; p[0] axis   split   s[0]; p[0] axis, p[1] parts, p[2..] sizes (0: equal)
 *   norm      s[0] x, s[1] gamma, s[2] beta; p[0] groups; p[1]: NULL gamma/beta; p[2]: consts; f eps
 *   pool      s[0]; p[0..1] kernel, p[2..3] stride (0: NULL), p[4..5] pad; p[6]: NULL pad; the
 *             pool gradients (CPU only) also feed dy [N, C, Ho, Wo]
 *   conv      s[0] x, s[1] w (const); p[0..1] stride, p[2..3] pad, p[4..5] dilation (0: NULL), p[6] groups
 *   conv_t    s[0] x, s[1] w (const); p[0..1] stride, p[2..3] pad, p[4..5] dilation (0: NULL)
 *   embedding s[0] table (or dy), s[1] ids drawn from dom[1]; p[0] vocab (embedding_grad); p[1]: ids baked
 *   conv_wgrad s[0] x, s[1] dy (both fed); p[0..1] kernel, p[2..3] stride, p[4..5] pad, p[6..7] dilation
 *             (0: NULL)
 *   chain     p[0] selects one of the fixed multi-node graphs in corpus_build.c
 *   bridge    s[0] x, s[1] the second operand (rank 0: none), both fed; p[] the builder's int
 *             arguments in order (lrn: beta = p[0] / 100, k = p[1] / 100), f its float
 *             (lrn's alpha, radius, eps, scale)
 *   sdpa      s[0] q, s[1] k, s[2] v, s[3] mask (rank 0: none); p[0]: mask baked; f scale (0: 1/sqrt(d))
 *   causal_attention s[0] the shape of q, k, v (and dy); p[0]: the gradient node; p[1]: layout; f scale (0: 1/sqrt(d))
 *   rope      s[0] x, s[1] cos and sin [seq, hs/2] (fed); p[0] mode
 *   swiglu    s[0] the shape of a, b (and dy); p[0]: 0 swiglu, 1 its gradient for a, 2 for b
 *   xent      s[0] logits and targets [N, C] (targets in [0, 1], p[1] 1: one-hot rows); p[0]: 0 softmax_xent,
 *             1 its gradient with dy [N, 1], 2 mode 1 with dy [1, 1]; f: logits in [-f, f] (0: 4)
 *   structural s[0]; flatten, dropout (f rate), broadcast (p[0] axis, p[1] size), input_view (p[0] offset,
 *             p[1] size)
 */
void corpus_b_binary(corpus_graph *cg, const corpus_case *c);
void corpus_b_select(corpus_graph *cg, const corpus_case *c);
void corpus_b_scalar(corpus_graph *cg, const corpus_case *c);
void corpus_b_unary(corpus_graph *cg, const corpus_case *c);
void corpus_b_cast(corpus_graph *cg, const corpus_case *c);
void corpus_b_matmul_w(corpus_graph *cg, const corpus_case *c);
void corpus_b_matmul(corpus_graph *cg, const corpus_case *c);
void corpus_b_reduce(corpus_graph *cg, const corpus_case *c);
void corpus_b_softmax(corpus_graph *cg, const corpus_case *c);
void corpus_b_transpose(corpus_graph *cg, const corpus_case *c);
void corpus_b_reshape(corpus_graph *cg, const corpus_case *c);
void corpus_b_slice(corpus_graph *cg, const corpus_case *c);
void corpus_b_concat(corpus_graph *cg, const corpus_case *c);
void corpus_b_split(corpus_graph *cg, const corpus_case *c);
void corpus_b_norm(corpus_graph *cg, const corpus_case *c);
void corpus_b_pool(corpus_graph *cg, const corpus_case *c);
void corpus_b_conv(corpus_graph *cg, const corpus_case *c);
void corpus_b_conv_transpose(corpus_graph *cg, const corpus_case *c);
void corpus_b_embedding(corpus_graph *cg, const corpus_case *c);
void corpus_b_conv_wgrad(corpus_graph *cg, const corpus_case *c);
void corpus_b_chain(corpus_graph *cg, const corpus_case *c);
void corpus_b_bridge(corpus_graph *cg, const corpus_case *c);
void corpus_b_sdpa(corpus_graph *cg, const corpus_case *c);
void corpus_b_causal_attention(corpus_graph *cg, const corpus_case *c);
void corpus_b_rope(corpus_graph *cg, const corpus_case *c);
void corpus_b_swiglu(corpus_graph *cg, const corpus_case *c);
void corpus_b_xent(corpus_graph *cg, const corpus_case *c);
void corpus_b_structural(corpus_graph *cg, const corpus_case *c);

/* Frees the case's graph and input data. */
void corpus_graph_free(corpus_graph *cg);

/* The tables, one per file. */
extern const corpus_case corpus_elementwise[];
extern const int corpus_elementwise_count;
extern const corpus_case corpus_tensor[];
extern const int corpus_tensor_count;
extern const corpus_case corpus_nn[];
extern const int corpus_nn_count;

#endif
