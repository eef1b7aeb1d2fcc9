/* Seed 002's engine kernels for one llama2.c-architecture layer, as graphs: six per layer
 * (fwdAttn, fwdFFN, ffnBwd, sdpaBwd1, sdpaBwd2, qkvBwd) plus the classifier's two
 * (clsFwd with the final RMSNorm, clsBwd). Every activation is channel-first
 * [B, C, 1, S] (seed 002's [1, C, 1, S] with the batch on N) so no kernel transposes
 * between layers; every weight is an input, never a constant, so one compiled program
 * serves every layer and every step. The host does the rest (src/train/plan_pipeline.c):
 * embedding, residual adds, RMSNorm backward, dW GEMMs, softmax cross-entropy, Adam. */
#ifndef AF_NN_LLAMA_KERNELS_H
#define AF_NN_LLAMA_KERNELS_H
#include "ir/ir.h"

typedef enum {
    LK_FWD_ATTN, /* x, rms_att, wq, wk, wv, wo -> o, q, k (both rotated), v, att, xn */
    LK_FWD_FFN,  /* x2, rms_ffn, w1, w3, w2 -> ffn, h1, h3, gate, xn2 */
    LK_FFN_BWD,  /* dffn, h1, h3, w2, w1, w3 -> dxn2, dh1, dh3 */
    LK_SDPA_BWD1, /* q, k, v, dx2, wo -> dv (kv width), probs, dp ([B, H*S, 1, S]) */
    LK_SDPA_BWD2, /* probs, dp, q, k -> dq, dk (rotated; dk summed over each KV group) */
    LK_QKV_BWD,  /* dq, dk (rotated), dv, wq, wk, wv -> dxn, dq, dk (unrotated) */
    LK_CLS_FWD,  /* x, rms_final, wc (a block of classifier rows) -> logits, xn */
    LK_CLS_BWD,  /* dlogits, wc -> dx */
    LK_COUNT
} lk_kind;

enum { LK_MAXIO = 8 };

typedef struct {
    int dim, hidden, heads, kv_heads, seq, batch;
    int vocab_block; /* classifier rows per clsFwd/clsBwd run */
} lk_shape;

typedef struct {
    int nin, nout;
    af_tensor *in[LK_MAXIO], *out[LK_MAXIO];
} lk_program;

extern const char *const lk_names[LK_COUNT]; /* "fwdAttn" ... "clsBwd" */
/* The kind named s, or -1. */
int lk_parse(const char *s);
/* Builds kernel k in g with I/O dtype io (AF_F16 for engine targets). Inputs and
 * outputs carry the names above (the MIL argument and result names). The nodes are
 * vouched library kernels. Fails (status and af_error_message) on a bad shape. */
af_status lk_build(af_graph *g, lk_kind k, const lk_shape *s, af_dtype io, lk_program *p);
#define LK_RMS_EPS 1e-5f
#endif
