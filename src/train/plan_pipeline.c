/* The `pipeline` plan for af_net_llama (seed 002): the eight kernels of
 * src/nn/llama_kernels.c compiled once with every weight an input, shared by all layers
 * and every step; the host does what seed 002's host does: the embedding and its
 * scatter-add, the residual adds, every RMSNorm backward, the dW GEMMs (cpu_sgemm), the
 * softmax cross-entropy over the classifier's row blocks, and Adam (the host optimizer,
 * host_opt.c). Per step: 6 dispatches per layer plus 2 per classifier block.
 *
 * Activations live on the host channel-first, [B, C, S] fp32, exactly the kernels'
 * [B, C, 1, S] ports, so nothing is transposed between kernels. The classifier is cut
 * into row blocks of at most the family's W/H limit (16384 before A16), so a 32000-row
 * vocabulary runs as two blocks of 16000 through the same two programs. */
#include "engine/family.h"
#include "aneforge_llama.h"
#include "cpu/gemm.h"
#include "cpu/norm_bwd.h"
#include "cpu/pool.h"
#include "nn/llama_kernels.h"
#include "train/dist.h"
#include "train/host_opt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PER_LAYER = 11 }; /* saved activations per layer, in this order: */
enum { A_XIN, A_X2, A_Q, A_K, A_V, A_ATT, A_XN, A_H1, A_H3, A_GATE, A_XN2 };

typedef struct {
    af_llama_config c;
    int B, S, L, D, F, KVD, HS; /* HS: heads * seq, the score channels */
    int nblk, vblk;             /* classifier row blocks and rows per block */
    af_model *prog[LK_COUNT];
    float **act;                /* [L * PER_LAYER] */
    float *h, *o, *xf, *xfn, *logits, *dlog, *wpad;
    float *dy, *dx2, *dxn, *tmp, *dh1, *dh3, *probs, *dp, *dqr, *dkr, *dv, *dq, *dk;
    float *rms_scratch;         /* [2, B, S]: RMSNorm backward's r and k per position */
    int *ids, *tgt;
} tr_pipe;

/* Param indices in af_llama's order. */
static int p_emb(void) { return 0; }
static int p_of(const tr_pipe *p, int slot, int l) { return 1 + slot * p->L + l; } /* slot 0 rms_att .. 8 w3 */
enum { S_RMS_ATT, S_WQ, S_WK, S_WV, S_WO, S_RMS_FFN, S_W1, S_W2, S_W3 };
static int p_final(const tr_pipe *p) { return 1 + 9 * p->L; }
static int p_cls(const tr_pipe *p) { return p->c.shared_classifier ? 0 : 2 + 9 * p->L; }

static size_t fl(int64_t n) { return (size_t)n * sizeof(float); }

static void pipeline_free(af_trainer *t) {
    tr_pipe *p = t->ps;
    if (!p) return;
    for (int k = 0; k < LK_COUNT; k++) af_model_free(p->prog[k]);
    for (int i = 0; p->act && i < p->L * PER_LAYER; i++) free(p->act[i]);
    free(p->act);
    float *bufs[] = { p->h, p->o, p->xf, p->xfn, p->logits, p->dlog, p->wpad, p->dy, p->dx2, p->dxn, p->tmp,
                      p->dh1, p->dh3, p->probs, p->dp, p->dqr, p->dkr, p->dv, p->dq, p->dk, p->rms_scratch };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(p->ids);
    free(p->tgt);
    free(p);
}

/* Rows per classifier block: one block when the vocabulary fits the target's W/H
 * limit, else equal blocks within it. */
static void vocab_blocks(const af_trainer *t, int V, int *nblk, int *vblk) {
    int64_t lim = V;
    if (t->engine) {
        const ane_family_info *fi = ane_family_info_of(t->o.compile.family); /* resolved by af_trainer_new */
        if (fi && fi->max_spatial < lim) lim = fi->max_spatial;
    }
    *nblk = (int)((V + lim - 1) / lim);
    *vblk = (V + *nblk - 1) / *nblk;
}

static af_status alloc_all(tr_pipe *p) {
    int64_t bs = (int64_t)p->B * p->S, D = p->D, F = p->F, K = p->KVD;
    static const char sizes_of[PER_LAYER] = { 'D', 'D', 'D', 'K', 'K', 'D', 'D', 'F', 'F', 'F', 'D' };
    bool ok = (p->act = calloc((size_t)p->L * PER_LAYER, sizeof *p->act)) != NULL;
    for (int i = 0; ok && i < p->L * PER_LAYER; i++) {
        char c = sizes_of[i % PER_LAYER];
        ok = (p->act[i] = malloc(fl(bs * (c == 'D' ? D : c == 'F' ? F : K)))) != NULL;
    }
    float **d[] = { &p->h, &p->o, &p->xf, &p->xfn, &p->dy, &p->dx2, &p->dxn, &p->tmp, &p->dq };
    for (size_t i = 0; ok && i < sizeof d / sizeof d[0]; i++) ok = (*d[i] = malloc(fl(bs * D))) != NULL;
    float **kv[] = { &p->dkr, &p->dv, &p->dk };
    for (size_t i = 0; ok && i < sizeof kv / sizeof kv[0]; i++) ok = (*kv[i] = malloc(fl(bs * K))) != NULL;
    ok = ok && (p->dqr = malloc(fl(bs * D))) && (p->dh1 = malloc(fl(bs * F))) && (p->dh3 = malloc(fl(bs * F)));
    ok = ok && (p->probs = malloc(fl(bs * p->HS))) && (p->dp = malloc(fl(bs * p->HS)));
    ok = ok && (p->logits = malloc(fl(bs * p->nblk * (int64_t)p->vblk))) && (p->dlog = malloc(fl(bs * p->nblk * (int64_t)p->vblk)));
    ok = ok && (p->wpad = calloc((size_t)p->vblk * (size_t)D, sizeof(float))) && (p->rms_scratch = malloc(fl(2 * bs)));
    ok = ok && (p->ids = malloc(sizeof(int) * (size_t)bs)) && (p->tgt = malloc(sizeof(int) * (size_t)bs));
    return ok ? AF_OK : ir_fail(AF_ERR_NOMEM, "trainer (pipeline plan): out of memory for the activations");
}

static af_status pipeline_build(af_trainer *t) {
    const af_llama_config *cfg = t->net.llama_config;
    if (!cfg)
        return ir_fail(AF_ERR_INVALID, "trainer: the pipeline plan trains llama2.c models (af_net_llama) only; use the host, "
                                       "device, resident or unrolled plan for other nets");
    tr_pipe *p = calloc(1, sizeof *p);
    if (!p) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    t->ps = p;
    p->c = *cfg;
    p->B = t->o.batch;
    p->S = (int)t->net.sample.dim[0];
    p->L = p->c.n_layers;
    p->D = p->c.dim;
    p->F = p->c.hidden_dim;
    p->KVD = p->c.n_kv_heads * (p->c.dim / p->c.n_heads);
    p->HS = p->c.n_heads * p->S;
    vocab_blocks(t, p->c.vocab_size, &p->nblk, &p->vblk);
    af_status st = alloc_all(p);
    lk_shape sh = { p->D, p->F, p->c.n_heads, p->c.n_kv_heads, p->S, p->B, p->vblk };
    af_dtype io = tr_io_dtype(t);
    for (int k = 0; k < LK_COUNT && !st; k++) {
        lk_program pr;
        if ((st = lk_build(t->g, (lk_kind)k, &sh, io, &pr))) break;
        if (!(p->prog[k] = tr_compile(t, pr.nin, pr.in, pr.nout, pr.out)))
            st = ir_fail(AF_ERR_INVALID, "trainer (pipeline plan): kernel %s: %s", lk_names[k], af_error_message());
    }
    return st;
}

/* ------------------------------------------------------------------ host pieces */

static af_status pl_run(af_trainer *t, lk_kind k, const af_buffer *in, af_buffer *out) {
    af_status st = tr_run(t, ((tr_pipe *)t->ps)->prog[k], in, out);
    return st ? ir_fail(st, "trainer (pipeline plan): kernel %s: %s", lk_names[k], af_error_message()) : AF_OK;
}

static af_buffer pl_master(af_trainer *t, int i) { return AF_BUF_F32(t->master[i], t->count[i]); }
static af_buffer pl_buf(const float *x, int64_t n) { return AF_BUF_F32(x, n); }

/* dW [out, in] += sum over the batch of dy_b [out, S] @ x_b^T [S, in]. */
static void dw_gemm(af_trainer *t, float *dw, const float *dy, const float *x, int64_t out, int64_t in) {
    tr_pipe *p = t->ps;
    int64_t S = p->S;
    for (int b = 0; b < p->B; b++)
        cpu_sgemm(tr_pool(t), 0, 1, out, in, S, 1.0f, dy + b * out * S, S, x + b * in * S, S, 1.0f, dw, in);
    t->host_flops += 2 * p->B * out * in * S;
}

/* RMSNorm backward over channels, per position: with r = (mean_c x^2 + eps)^-1/2 and
 * g = dy * w, dx = r g - x r^3 (sum_c g x) / C; dw += dy x r. out = resid + dx (resid may
 * be NULL). Vectorised along the positions (src/cpu/k_norm.c), as seed 002's vDSP one. */
static void rms_bwd(af_trainer *t, const float *x, const float *dy, const float *w, const float *resid, float *out, float *dw) {
    tr_pipe *p = t->ps;
    cpu_rms_norm_bwd_cf(tr_pool(t), p->B, p->D, p->S, LK_RMS_EPS, x, dy, w, resid, out, dw, p->rms_scratch);
    t->host_flops += 10 * p->B * (int64_t)p->D * p->S;
}

static void pl_add(af_trainer *t, float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    t->host_flops += n;
}

/* Classifier rows of block c ([vblk, D]); the last block is zero-padded when the
 * vocabulary does not divide evenly. */
static const float *cls_block(af_trainer *t, int c, int *rows) {
    tr_pipe *p = t->ps;
    int V = p->c.vocab_size;
    *rows = V - c * p->vblk < p->vblk ? V - c * p->vblk : p->vblk;
    const float *w = t->master[p_cls(p)] + (int64_t)c * p->vblk * p->D;
    if (*rows == p->vblk) return w;
    memcpy(p->wpad, w, fl((int64_t)*rows * p->D));
    memset(p->wpad + (int64_t)*rows * p->D, 0, fl((int64_t)(p->vblk - *rows) * p->D));
    return p->wpad;
}

/* Embedding, the layers and the classifier for the ids in p->ids: fills the saved
 * activations and p->logits ([nblk][B][vblk][S]). */
static af_status pl_forward(af_trainer *t) {
    tr_pipe *p = t->ps;
    int64_t bs = (int64_t)p->B * p->S, D = p->D, S = p->S;
    const float *emb = t->master[p_emb()];
    for (int b = 0; b < p->B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t d = 0; d < D; d++) p->h[(b * D + d) * S + s] = emb[(int64_t)p->ids[b * S + s] * D + d];
    af_status st = AF_OK;
    for (int l = 0; l < p->L && !st; l++) {
        float **a = p->act + l * PER_LAYER;
        memcpy(a[A_XIN], p->h, fl(bs * D));
        af_buffer in[6] = { pl_buf(a[A_XIN], bs * D), pl_master(t, p_of(p, S_RMS_ATT, l)), pl_master(t, p_of(p, S_WQ, l)),
                            pl_master(t, p_of(p, S_WK, l)), pl_master(t, p_of(p, S_WV, l)), pl_master(t, p_of(p, S_WO, l)) };
        af_buffer out[6] = { pl_buf(p->o, bs * D), pl_buf(a[A_Q], bs * D), pl_buf(a[A_K], bs * p->KVD), pl_buf(a[A_V], bs * p->KVD),
                             pl_buf(a[A_ATT], bs * D), pl_buf(a[A_XN], bs * D) };
        if ((st = pl_run(t, LK_FWD_ATTN, in, out))) break;
        pl_add(t, a[A_X2], a[A_XIN], p->o, bs * D);
        af_buffer fin[5] = { pl_buf(a[A_X2], bs * D), pl_master(t, p_of(p, S_RMS_FFN, l)), pl_master(t, p_of(p, S_W1, l)),
                             pl_master(t, p_of(p, S_W3, l)), pl_master(t, p_of(p, S_W2, l)) };
        af_buffer fout[5] = { pl_buf(p->o, bs * D), pl_buf(a[A_H1], bs * p->F), pl_buf(a[A_H3], bs * p->F), pl_buf(a[A_GATE], bs * p->F),
                              pl_buf(a[A_XN2], bs * D) };
        if ((st = pl_run(t, LK_FWD_FFN, fin, fout))) break;
        pl_add(t, p->h, a[A_X2], p->o, bs * D);
    }
    memcpy(p->xf, p->h, fl(bs * D));
    for (int c = 0; c < p->nblk && !st; c++) {
        int rows;
        const float *wc = cls_block(t, c, &rows);
        af_buffer in[3] = { pl_buf(p->xf, bs * D), pl_master(t, p_final(p)), pl_buf(wc, (int64_t)p->vblk * D) };
        af_buffer out[2] = { pl_buf(p->logits + c * bs * p->vblk, bs * p->vblk), pl_buf(p->xfn, bs * D) };
        st = pl_run(t, LK_CLS_FWD, in, out);
    }
    return st;
}

/* Logit of vocabulary row v at (b, s) in the block layout. */
static int64_t logit_at(const tr_pipe *p, int b, int64_t s, int v) {
    int c = v / p->vblk, r = v % p->vblk;
    return (((int64_t)c * p->B + b) * p->vblk + r) * p->S + s;
}

/* Mean cross-entropy over the B*S positions in fp32/double on the host, and the
 * seed dlogits = (softmax - onehot) * scale / (B*S) in the block layout. */
static double loss_and_seed(af_trainer *t) {
    tr_pipe *p = t->ps;
    int V = p->c.vocab_size;
    float g = t->scale / (float)(p->B * p->S);
    double total = 0;
    memset(p->dlog, 0, fl((int64_t)p->nblk * p->B * p->vblk * p->S));
    for (int b = 0; b < p->B; b++)
        for (int64_t s = 0; s < p->S; s++) {
            double mx = -INFINITY, se = 0;
            for (int v = 0; v < V; v++) mx = fmax(mx, p->logits[logit_at(p, b, s, v)]);
            for (int v = 0; v < V; v++) se += exp(p->logits[logit_at(p, b, s, v)] - mx);
            double lse = mx + log(se);
            int y = p->tgt[b * p->S + s];
            total += lse - p->logits[logit_at(p, b, s, y)];
            for (int v = 0; v < V; v++) {
                int64_t i = logit_at(p, b, s, v);
                p->dlog[i] = (float)(exp(p->logits[i] - lse) - (v == y)) * g;
            }
        }
    t->host_flops += 6 * (int64_t)p->B * p->S * V;
    return total / (double)(p->B * p->S);
}

static af_status pl_backward(af_trainer *t) {
    tr_pipe *p = t->ps;
    int64_t bs = (int64_t)p->B * p->S, D = p->D, F = p->F, K = p->KVD;
    af_status st = AF_OK;
    /* Classifier: dW on the host, dx from each block summed. */
    memset(p->dy, 0, fl(bs * D));
    for (int c = 0; c < p->nblk && !st; c++) {
        int rows;
        const float *wc = cls_block(t, c, &rows);
        float *dl = p->dlog + c * bs * p->vblk;
        af_buffer in[2] = { pl_buf(dl, bs * p->vblk), pl_buf(wc, (int64_t)p->vblk * D) };
        af_buffer out = pl_buf(p->tmp, bs * D);
        if ((st = pl_run(t, LK_CLS_BWD, in, &out))) break;
        pl_add(t, p->dy, p->dy, p->tmp, bs * D);
        float *dwc = t->grad[p_cls(p)] + (int64_t)c * p->vblk * D;
        for (int b = 0; b < p->B; b++) /* only the block's real rows */
            cpu_sgemm(tr_pool(t), 0, 1, rows, D, p->S, 1.0f, dl + (int64_t)b * p->vblk * p->S, p->S, p->xfn + b * D * p->S, p->S,
                      1.0f, dwc, D);
        t->host_flops += 2 * bs * rows * D;
    }
    if (st) return st;
    rms_bwd(t, p->xf, p->dy, t->master[p_final(p)], NULL, p->tmp, t->grad[p_final(p)]);
    for (int l = p->L - 1; l >= 0 && !st; l--) {
        float **a = p->act + l * PER_LAYER;
        memcpy(p->dy, p->tmp, fl(bs * D)); /* d x_next */
        af_buffer in[6] = { pl_buf(p->dy, bs * D), pl_buf(a[A_H1], bs * F), pl_buf(a[A_H3], bs * F), pl_master(t, p_of(p, S_W2, l)),
                            pl_master(t, p_of(p, S_W1, l)), pl_master(t, p_of(p, S_W3, l)) };
        af_buffer out[3] = { pl_buf(p->dxn, bs * D), pl_buf(p->dh1, bs * F), pl_buf(p->dh3, bs * F) };
        if ((st = pl_run(t, LK_FFN_BWD, in, out))) break;
        dw_gemm(t, t->grad[p_of(p, S_W2, l)], p->dy, a[A_GATE], D, F);
        dw_gemm(t, t->grad[p_of(p, S_W1, l)], p->dh1, a[A_XN2], F, D);
        dw_gemm(t, t->grad[p_of(p, S_W3, l)], p->dh3, a[A_XN2], F, D);
        rms_bwd(t, a[A_X2], p->dxn, t->master[p_of(p, S_RMS_FFN, l)], p->dy, p->dx2, t->grad[p_of(p, S_RMS_FFN, l)]);
        dw_gemm(t, t->grad[p_of(p, S_WO, l)], p->dx2, a[A_ATT], D, D);
        af_buffer bin[5] = { pl_buf(a[A_Q], bs * D), pl_buf(a[A_K], bs * K), pl_buf(a[A_V], bs * K), pl_buf(p->dx2, bs * D),
                             pl_master(t, p_of(p, S_WO, l)) };
        af_buffer bout[3] = { pl_buf(p->dv, bs * K), pl_buf(p->probs, bs * p->HS), pl_buf(p->dp, bs * p->HS) };
        if ((st = pl_run(t, LK_SDPA_BWD1, bin, bout))) break;
        af_buffer cin[4] = { pl_buf(p->probs, bs * p->HS), pl_buf(p->dp, bs * p->HS), pl_buf(a[A_Q], bs * D), pl_buf(a[A_K], bs * K) };
        af_buffer cout[2] = { pl_buf(p->dqr, bs * D), pl_buf(p->dkr, bs * K) };
        if ((st = pl_run(t, LK_SDPA_BWD2, cin, cout))) break;
        af_buffer qin[6] = { pl_buf(p->dqr, bs * D), pl_buf(p->dkr, bs * K), pl_buf(p->dv, bs * K), pl_master(t, p_of(p, S_WQ, l)),
                             pl_master(t, p_of(p, S_WK, l)), pl_master(t, p_of(p, S_WV, l)) };
        af_buffer qout[3] = { pl_buf(p->dxn, bs * D), pl_buf(p->dq, bs * D), pl_buf(p->dk, bs * K) };
        if ((st = pl_run(t, LK_QKV_BWD, qin, qout))) break;
        dw_gemm(t, t->grad[p_of(p, S_WQ, l)], p->dq, a[A_XN], D, D);
        dw_gemm(t, t->grad[p_of(p, S_WK, l)], p->dk, a[A_XN], K, D);
        dw_gemm(t, t->grad[p_of(p, S_WV, l)], p->dv, a[A_XN], K, D);
        rms_bwd(t, a[A_XIN], p->dxn, t->master[p_of(p, S_RMS_ATT, l)], p->dx2, p->tmp, t->grad[p_of(p, S_RMS_ATT, l)]);
        for (int slot = S_RMS_ATT; slot <= S_W3; slot++) tr_dist_grad_ready(t, p_of(p, slot, l)); /* data-parallel: overlaps layer l - 1 */
    }
    if (st) return st;
    /* The embedding's scatter-add (seed 002 keeps it on the host: the engine has no scatter). */
    float *gemb = t->grad[p_emb()];
    for (int b = 0; b < p->B; b++)
        for (int64_t s = 0; s < p->S; s++)
            for (int64_t d = 0; d < D; d++) gemb[(int64_t)p->ids[b * p->S + s] * D + d] += p->tmp[(b * D + d) * p->S + s];
    t->host_flops += bs * D;
    return AF_OK;
}

/* One batch: x token ids [B, S], y one-hot next tokens [B, S * V]. Writes every
 * gradient (scaled by the loss scale) to t->grad and the mean cross-entropy to info. */
static af_status pipeline_grads(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    double t0 = tr_now_s();
    tr_pipe *p = t->ps;
    int V = p->c.vocab_size;
    int64_t bs = (int64_t)p->B * p->S;
    for (int64_t i = 0; i < bs; i++) {
        float id = x[i];
        if (!(id >= 0 && id < (float)V)) return ir_fail(AF_ERR_INVALID, "trainer (pipeline plan): token id %g at %lld is outside the vocab of %d", (double)id, (long long)i, V);
        p->ids[i] = (int)id;
        const float *row = y + i * V; /* the one-hot target */
        int arg = -1;
        for (int v = 0; v < V && arg < 0; v++)
            if (row[v] > 0.5f) arg = v;
        if (arg < 0) return ir_fail(AF_ERR_INVALID, "trainer (pipeline plan): target row %lld is not one-hot", (long long)i);
        p->tgt[i] = arg;
    }
    tr_pool(t); /* the GEMMs and norms run on it */
    for (int i = 0; i < t->np; i++) memset(t->grad[i], 0, fl(t->count[i]));
    af_status st = pl_forward(t);
    if (st) return st;
    info->loss = loss_and_seed(t);
    st = pl_backward(t);
    t->phase_s[TR_PHASE_FWD_BWD] += tr_now_s() - t0;
    return st;
}

/* Logits [n, S * V] for n windows of ids, through the same forward kernels. */
static af_status pipeline_predict(af_trainer *t, int64_t n, const float *x, float *out) {
    tr_pipe *p = t->ps;
    int V = p->c.vocab_size;
    int64_t S = p->S;
    for (int64_t b0 = 0; b0 < n; b0 += p->B) {
        int m = (int)(n - b0 < p->B ? n - b0 : p->B);
        for (int64_t i = 0; i < (int64_t)p->B * S; i++) {
            float id = i < m * S ? x[b0 * S + i] : 0.0f; /* pad the last chunk with token 0 */
            if (!(id >= 0 && id < (float)V)) return ir_fail(AF_ERR_INVALID, "af_trainer_predict: token id %g is outside the vocab of %d", (double)id, V);
            p->ids[i] = (int)id;
        }
        af_status st = pl_forward(t);
        if (st) return st;
        for (int b = 0; b < m; b++)
            for (int64_t s = 0; s < S; s++)
                for (int v = 0; v < V; v++) out[((b0 + b) * S + s) * V + v] = p->logits[logit_at(p, b, s, v)];
    }
    return AF_OK;
}

const tr_plan tr_plan_pipeline = {
    .name = "pipeline",
    .id = AF_PLAN_PIPELINE,
    .caps = TR_HOST_OPTIMIZER | TR_HOST_METRICS | TR_HOST_LOSS,
    .build = pipeline_build,
    .step = tr_host_opt_step,
    .grads = pipeline_grads,
    .predict = pipeline_predict,
    .free = pipeline_free,
};
