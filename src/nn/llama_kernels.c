/* Seed 002's per-layer engine kernels as graphs (llama_kernels.h). Formulas, with
 * activations channel-first [B, C, S] inside (the [B, C, 1, S] ports reshaped):
 *   RMSNorm over channels  xn = x * (mean_c x^2 + eps)^-1/2 * w
 *   linear                 y = W @ x  (W [out, in] broadcast over the batch)
 *   attention per head     P = softmax(causal(Q K^T / sqrt(hs))), att = P V
 *   SwiGLU                 gate = silu(h1) * h3, h1 = W1 xn, h3 = W3 xn
 *   its backward           dh1 = dgate h3 s (1 + h1 (1 - s)), s = sigmoid(h1); dh3 = dgate silu(h1)
 *   softmax backward       dS = P (dP - sum_k P dP) / sqrt(hs)
 * RoPE is llama2.c's (af_rope); its inverse, J rope(J x) with J negating every odd
 * lane, turns the rotated dq, dk back (J R(t) J = R(-t) on each pair, exact in fp16). */
#include "nn/llama_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const lk_names[LK_COUNT] = { "fwdAttn", "fwdFFN", "ffnBwd", "sdpaBwd1", "sdpaBwd2", "qkvBwd", "clsFwd", "clsBwd" };

int lk_parse(const char *s) {
    for (int k = 0; s && k < LK_COUNT; k++)
        if (!strcmp(s, lk_names[k])) return k;
    return -1;
}

typedef struct {
    af_graph *g;
    const lk_shape *s;
    af_dtype io;
    lk_program *p;
    int64_t B, S, D, F, H, KV, hs, kvd;
} kb;

static af_tensor *in_port(kb *k, const char *name, af_shape sh) { return k->p->in[k->p->nin++] = af_input(k->g, name, k->io, sh); }
static af_tensor *act_in(kb *k, const char *name, int64_t c) { return in_port(k, name, AF_SHAPE(k->B, c, 1, k->S)); }
static af_tensor *weight_in(kb *k, const char *name, int64_t rows, int64_t cols) { return in_port(k, name, AF_SHAPE(rows, cols)); }
static af_tensor *norm_in(kb *k, const char *name) { return in_port(k, name, AF_SHAPE(1, k->D, 1, 1)); }

/* [B, C, S] -> the [B, C, 1, S] output port named name. */
static void out_port(kb *k, const char *name, af_tensor *x3) {
    af_tensor *t = x3 ? af_reshape(x3, AF_SHAPE(k->B, x3->shape.dim[1], 1, k->S)) : NULL;
    if (t) {
        char *n = ir_strdup(name);
        if (n) { free(t->name); t->name = n; }
    }
    k->p->out[k->p->nout++] = t;
}

static af_tensor *flat3(kb *k, af_tensor *x4) { return af_reshape(x4, AF_SHAPE(k->B, x4->shape.dim[1], k->S)); }

/* RMSNorm over the channel axis of x [B, C, S], weight port [1, C, 1, 1]. */
static af_tensor *rms_norm_c(af_tensor *x, af_tensor *w4) {
    int ax = 1;
    af_tensor *r = af_rsqrt(af_adds(af_reduce_mean(af_square(x), 1, &ax, 1), LK_RMS_EPS));
    return af_mul(af_mul(x, r), af_reshape(w4, AF_SHAPE(x->shape.dim[1], 1)));
}

static af_tensor *lin(af_tensor *w, af_tensor *x) { return af_matmul(w, x, 0, 0); }   /* W x */
static af_tensor *lin_t(af_tensor *w, af_tensor *x) { return af_matmul(w, x, 1, 0); } /* W^T x */

/* [B, n*hs, S] -> [B, S, n, hs] (af_rope's layout) and back. */
static af_tensor *to_seq_heads(kb *k, af_tensor *x, int64_t n) {
    static const int perm[4] = { 0, 3, 1, 2 };
    return af_transpose(af_reshape(x, AF_SHAPE(k->B, n, k->hs, k->S)), perm);
}
static af_tensor *from_seq_heads(kb *k, af_tensor *x, int64_t n) {
    static const int perm[4] = { 0, 2, 3, 1 };
    return af_reshape(af_transpose(x, perm), AF_SHAPE(k->B, n * k->hs, k->S));
}
/* [B, S, n, hs] <-> [B, n, S, hs] (attention's layout; the permutation is its own inverse). */
static af_tensor *swap12(af_tensor *x) {
    static const int perm[4] = { 0, 2, 1, 3 };
    return af_transpose(x, perm);
}
/* [B, n*hs, S] -> [B, n, S, hs] and back. */
static af_tensor *heads(kb *k, af_tensor *x, int64_t n) { return swap12(to_seq_heads(k, x, n)); }
static af_tensor *unheads(kb *k, af_tensor *x, int64_t n) { return from_seq_heads(k, swap12(x), n); }

/* KV heads [B, KV, S, hs] -> [B, H, S, hs], query head h reading KV head h / n_rep. */
static af_tensor *repeat_kv(kb *k, af_tensor *x) {
    if (k->H == k->KV) return x;
    return swap12(af_repeat_kv_heads(swap12(x), (int)(k->H / k->KV)));
}
/* The gradient of repeat_kv: [B, H, S, hs] summed over each group -> [B, KV, S, hs]. */
static af_tensor *reduce_kv(kb *k, af_tensor *x) {
    if (k->H == k->KV) return x;
    int ax = 2;
    return af_reduce_sum(af_reshape(x, AF_SHAPE(k->B, k->KV, k->H / k->KV, k->S, k->hs)), 1, &ax, 0);
}

/* llama2.c's rotation of channel-first x [B, n*hs, S]. */
static af_tensor *rope_c(kb *k, af_tensor *x, int64_t n) { return from_seq_heads(k, af_rope(to_seq_heads(k, x, n), 0, 10000.0f), n); }

/* The inverse rotation of channel-first x [B, n*hs, S]: J rope(J x). */
static af_tensor *unrope_c(kb *k, af_tensor *x, int64_t n) {
    float *j = malloc(sizeof(float) * (size_t)k->hs);
    if (!j) { ir_graph_fail(k->g, "llama kernels: out of memory"); return NULL; }
    for (int64_t i = 0; i < k->hs; i++) j[i] = i % 2 ? -1.0f : 1.0f;
    af_tensor *jc = af_const(k->g, "rope_flip", AF_SHAPE(k->hs), j);
    free(j);
    af_tensor *sh = to_seq_heads(k, x, n);
    return from_seq_heads(k, af_mul(af_rope(af_mul(sh, jc), 0, 10000.0f), jc), n);
}

/* Causal attention probabilities from rotated q [B, D, S] and k [B, KVD, S]: [B, H, S, S]. */
static af_tensor *probs_of(kb *k, af_tensor *qh, af_tensor *kh) {
    af_tensor *scores = af_muls(af_matmul(qh, repeat_kv(k, kh), 0, 1), 1.0f / sqrtf((float)k->hs));
    return af_softmax(af_causal_mask(scores, 0), -1);
}

static af_tensor *sc_flat(kb *k, af_tensor *x) { return af_reshape(x, AF_SHAPE(k->B, k->H * k->S, k->S)); }
static af_tensor *sc_heads(kb *k, af_tensor *x4) { return af_reshape(x4, AF_SHAPE(k->B, k->H, k->S, k->S)); }

static void fwd_attn(kb *k) {
    af_tensor *x = flat3(k, act_in(k, "x", k->D)), *rms = norm_in(k, "rms_att");
    af_tensor *wq = weight_in(k, "wq", k->D, k->D), *wk = weight_in(k, "wk", k->kvd, k->D);
    af_tensor *wv = weight_in(k, "wv", k->kvd, k->D), *wo = weight_in(k, "wo", k->D, k->D);
    af_tensor *xn = rms_norm_c(x, rms);
    af_tensor *q = rope_c(k, lin(wq, xn), k->H), *kk = rope_c(k, lin(wk, xn), k->KV), *v = lin(wv, xn);
    af_tensor *p = probs_of(k, heads(k, q, k->H), heads(k, kk, k->KV));
    af_tensor *att = unheads(k, af_matmul(p, repeat_kv(k, heads(k, v, k->KV)), 0, 0), k->H);
    out_port(k, "o", lin(wo, att));
    out_port(k, "q", q);
    out_port(k, "k", kk);
    out_port(k, "v", v);
    out_port(k, "att", att);
    out_port(k, "xn", xn);
}

static void fwd_ffn(kb *k) {
    af_tensor *x = flat3(k, act_in(k, "x2", k->D)), *rms = norm_in(k, "rms_ffn");
    af_tensor *w1 = weight_in(k, "w1", k->F, k->D), *w3 = weight_in(k, "w3", k->F, k->D), *w2 = weight_in(k, "w2", k->D, k->F);
    af_tensor *xn = rms_norm_c(x, rms);
    af_tensor *h1 = lin(w1, xn), *h3 = lin(w3, xn);
    af_tensor *gate = af_mul(af_silu(h1), h3);
    out_port(k, "ffn", lin(w2, gate));
    out_port(k, "h1", h1);
    out_port(k, "h3", h3);
    out_port(k, "gate", gate);
    out_port(k, "xn2", xn);
}

static void ffn_bwd(kb *k) {
    af_tensor *dy = flat3(k, act_in(k, "dffn", k->D)), *h1 = flat3(k, act_in(k, "h1", k->F)), *h3 = flat3(k, act_in(k, "h3", k->F));
    af_tensor *w2 = weight_in(k, "w2", k->D, k->F), *w1 = weight_in(k, "w1", k->F, k->D), *w3 = weight_in(k, "w3", k->F, k->D);
    af_tensor *dgate = lin_t(w2, dy), *sg = af_sigmoid(h1), *silu = af_mul(h1, sg);
    af_tensor *dsilu = af_mul(sg, af_adds(af_mul(h1, af_sub(af_const_fill(k->g, AF_SHAPE(1), 1.0f), sg)), 1.0f));
    af_tensor *dh1 = af_mul(af_mul(dgate, h3), dsilu), *dh3 = af_mul(dgate, silu);
    out_port(k, "dxn2", af_add(lin_t(w1, dh1), lin_t(w3, dh3)));
    out_port(k, "dh1", dh1);
    out_port(k, "dh3", dh3);
}

static void sdpa_bwd1(kb *k) {
    af_tensor *q = flat3(k, act_in(k, "q", k->D)), *kk = flat3(k, act_in(k, "k", k->kvd)), *v = flat3(k, act_in(k, "v", k->kvd));
    af_tensor *dx2 = flat3(k, act_in(k, "dx2", k->D)), *wo = weight_in(k, "wo", k->D, k->D);
    af_tensor *dah = heads(k, lin_t(wo, dx2), k->H); /* d att per head [B, H, S, hs] */
    af_tensor *p = probs_of(k, heads(k, q, k->H), heads(k, kk, k->KV));
    af_tensor *dv = reduce_kv(k, af_matmul(p, dah, 1, 0));
    af_tensor *dp = af_matmul(dah, repeat_kv(k, heads(k, v, k->KV)), 0, 1);
    out_port(k, "dv", unheads(k, dv, k->KV));
    out_port(k, "probs", sc_flat(k, p));
    out_port(k, "dp", sc_flat(k, dp));
}

static void sdpa_bwd2(kb *k) {
    af_tensor *p = sc_heads(k, act_in(k, "probs", k->H * k->S)), *dp = sc_heads(k, act_in(k, "dp", k->H * k->S));
    af_tensor *q = flat3(k, act_in(k, "q", k->D)), *kk = flat3(k, act_in(k, "k", k->kvd));
    int ax = 3;
    af_tensor *ds = af_muls(af_mul(p, af_sub(dp, af_reduce_sum(af_mul(p, dp), 1, &ax, 1))), 1.0f / sqrtf((float)k->hs));
    af_tensor *dq = af_matmul(ds, repeat_kv(k, heads(k, kk, k->KV)), 0, 0);
    af_tensor *dk = reduce_kv(k, af_matmul(ds, heads(k, q, k->H), 1, 0));
    out_port(k, "dq", unheads(k, dq, k->H));
    out_port(k, "dk", unheads(k, dk, k->KV));
}

static void qkv_bwd(kb *k) {
    af_tensor *dqr = flat3(k, act_in(k, "dq", k->D)), *dkr = flat3(k, act_in(k, "dk", k->kvd)), *dv = flat3(k, act_in(k, "dv", k->kvd));
    af_tensor *wq = weight_in(k, "wq", k->D, k->D), *wk = weight_in(k, "wk", k->kvd, k->D), *wv = weight_in(k, "wv", k->kvd, k->D);
    af_tensor *dq = unrope_c(k, dqr, k->H), *dk = unrope_c(k, dkr, k->KV);
    out_port(k, "dxn", af_add(af_add(lin_t(wq, dq), lin_t(wk, dk)), lin_t(wv, dv)));
    out_port(k, "dq_lin", dq);
    out_port(k, "dk_lin", dk);
}

static void cls_fwd(kb *k) {
    af_tensor *x = flat3(k, act_in(k, "x", k->D)), *rms = norm_in(k, "rms_final");
    af_tensor *wc = weight_in(k, "wc", k->s->vocab_block, k->D);
    af_tensor *xn = rms_norm_c(x, rms);
    out_port(k, "logits", lin(wc, xn));
    out_port(k, "xn", xn);
}

static void cls_bwd(kb *k) {
    af_tensor *dl = flat3(k, act_in(k, "dlogits", k->s->vocab_block)), *wc = weight_in(k, "wc", k->s->vocab_block, k->D);
    out_port(k, "dx", lin_t(wc, dl));
}

af_status lk_build(af_graph *g, lk_kind kind, const lk_shape *s, af_dtype io, lk_program *p) {
    if (!g || !s || !p || (unsigned)kind >= LK_COUNT) return ir_fail(AF_ERR_INVALID, "lk_build: bad arguments");
    int D = s->dim, H = s->heads, KV = s->kv_heads;
    if (D <= 0 || s->hidden <= 0 || H <= 0 || KV <= 0 || s->seq <= 0 || s->batch <= 0 || D % H || H % KV || (D / H) % 2 ||
        ((kind == LK_CLS_FWD || kind == LK_CLS_BWD) && s->vocab_block <= 0))
        return ir_fail(AF_ERR_INVALID, "llama kernel %s: bad shape (dim %d, hidden %d, heads %d, kv_heads %d, seq %d, batch %d, "
                                       "vocab block %d): need positive sizes, dim divisible by heads, heads by kv_heads, an even head size",
                       lk_names[kind], D, s->hidden, H, KV, s->seq, s->batch, s->vocab_block);
    memset(p, 0, sizeof *p);
    kb k = { g, s, io, p, s->batch, s->seq, D, s->hidden, H, KV, D / H, (int64_t)KV * (D / H) };
    static void (*const build[LK_COUNT])(kb *) = { fwd_attn, fwd_ffn, ffn_bwd, sdpa_bwd1, sdpa_bwd2, qkv_bwd, cls_fwd, cls_bwd };
    g->vouching++;
    build[kind](&k);
    g->vouching--;
    for (int i = 0; i < p->nin && !g->error; i++)
        if (!p->in[i]) ir_graph_fail(g, "llama kernel %s: an input failed", lk_names[kind]);
    for (int i = 0; i < p->nout && !g->error; i++)
        if (!p->out[i]) ir_graph_fail(g, "llama kernel %s: an output failed", lk_names[kind]);
    if (g->error) return ir_fail(AF_ERR_INVALID, "llama kernel %s: %s", lk_names[kind], g->error);
    return AF_OK;
}
