/* The Hugging Face decoder as a graph from public ops (LlamaForCausalLM, Qwen2, Qwen3):
 * per layer RMSNorm -> q, k, v (+ biases) -> [q/k RMSNorm per head] -> half-split RoPE
 * -> grouped KV heads -> causal attention -> o_proj -> residual, RMSNorm -> SwiGLU ->
 * residual; final RMSNorm; lm_head or the tied embedding. Its RoPE is Hugging Face's
 * (rotate_half: pair (i, i + head_dim / 2)) on tables computed here, so rope_theta and
 * Llama 3's scaled frequencies need no new op, and the weights are used as stored. */
#include "hf/hf.h"

#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>

void hf_rope_table(const hf_config *c, int T, float *cos_out, float *sin_out) {
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        /* transformers: 1 / base ** (arange(0, dim, 2) / dim), in float32 */
        float inv = (float)(1.0 / pow(c->theta, (double)(2 * i) / c->head_dim));
        if (c->rope_llama3) { /* _compute_llama3_parameters */
            double orig = c->rope_orig_max_pos, wavelen = 2 * 3.14159265358979323846 / inv;
            double low_wl = orig / c->low_freq_factor, high_wl = orig / c->high_freq_factor;
            double f = inv;
            if (wavelen > low_wl) f = inv / c->rope_factor;
            else if (wavelen >= high_wl) {
                double smooth = (orig / wavelen - c->low_freq_factor) / (c->high_freq_factor - c->low_freq_factor);
                f = (1 - smooth) * inv / c->rope_factor + smooth * inv;
            }
            inv = (float)f;
        }
        for (int t = 0; t < T; t++) {
            float a = (float)t * inv; /* float32 product, as transformers' freqs */
            cos_out[(size_t)t * half + i] = cosf(a);
            sin_out[(size_t)t * half + i] = sinf(a);
        }
    }
}

/* x [B, T, heads, hd] turned by Hugging Face's rotate_half convention. */
static af_tensor *rope_half(af_tensor *x, af_tensor *cs, af_tensor *sn, int64_t half) {
    const int64_t b1[4] = { 0, 0, 0, 0 }, s1[4] = { -1, -1, -1, half };
    const int64_t b2[4] = { 0, 0, 0, half }, s2[4] = { -1, -1, -1, -1 };
    af_tensor *x1 = af_slice(x, b1, s1), *x2 = af_slice(x, b2, s2);
    af_tensor *parts[2] = { af_sub(af_mul(x1, cs), af_mul(x2, sn)), af_add(af_mul(x2, cs), af_mul(x1, sn)) };
    return af_concat(2, parts, 3);
}

static af_tensor *linear(af_tensor *x, af_tensor *w, af_tensor *b) {
    af_tensor *y = af_matmul(x, w, 0, 1);
    return b ? af_add(y, b) : y;
}

/* The adapters of one layer, walked in HF_Q.. order as the projections are built. */
typedef struct {
    const hf_lora_cfg *lora;
    af_tensor *const *ad;
    int k;
} lora_walk;

/* linear(), plus (alpha / rank) (x A^T) B^T when projection `proj` is targeted */
static af_tensor *proj_linear(lora_walk *lw, int proj, af_tensor *x, af_tensor *w, af_tensor *b) {
    af_tensor *y = linear(x, w, b);
    if (!lw->lora || lw->lora->rank <= 0 || !(lw->lora->targets >> proj & 1u)) return y;
    af_tensor *A = lw->ad[lw->k++], *B = lw->ad[lw->k++];
    af_tensor *d = af_matmul(af_matmul(x, A, 0, 1), B, 0, 1);
    return af_add(y, af_muls(d, (float)(lw->lora->alpha / lw->lora->rank)));
}

static af_tensor *embed(af_graph *g, af_tensor *table, af_tensor *ids, int64_t n, int vocab, int dim) {
    /* as af_llama: a gather on the CPU, a one-hot matmul where ids are exact in fp16 */
    if (g->cpu_only || vocab > 2048) return af_reshape(af_embedding(table, ids), AF_SHAPE(n, dim));
    float *iota = malloc(sizeof(float) * (size_t)vocab);
    if (!iota) { ir_graph_fail(g, "af_hf_forward: out of memory"); return NULL; }
    for (int v = 0; v < vocab; v++) iota[v] = (float)v;
    af_tensor *row = af_const(g, "vocab_ids", AF_SHAPE(1, vocab), iota);
    free(iota);
    return af_matmul(af_equal(af_reshape(ids, AF_SHAPE(n, 1)), row), table, 0, 0);
}

af_tensor *hf_forward(const hf_config *c, const hf_lora_cfg *lora, af_tensor *tokens, af_tensor *const *p,
                      af_tensor *const *ad) {
    lora_walk lw = { lora, ad, 0 };
    af_graph *g = af_tensor_graph(tokens);
    af_shape ts = af_tensor_shape(tokens);
    if (ts.rank != 2) { ir_graph_fail(g, "af_hf_forward: tokens must be [batch, seq] (token ids as floats)"); return NULL; }
    int64_t B = ts.dim[0], T = ts.dim[1], D = c->hidden, H = c->heads, KV = c->kv_heads, hd = c->head_dim;
    if (T > c->max_pos) {
        ir_graph_fail(g, "af_hf_forward: seq %lld is longer than max_position_embeddings %d", (long long)T, c->max_pos);
        return NULL;
    }
    int64_t half = hd / 2;
    float *cs = malloc(sizeof(float) * (size_t)(T * half)), *sn = malloc(sizeof(float) * (size_t)(T * half));
    if (!cs || !sn) { free(cs); free(sn); ir_graph_fail(g, "af_hf_forward: out of memory"); return NULL; }
    hf_rope_table(c, (int)T, cs, sn);
    af_tensor *cos_t = af_const(g, "rope_cos", AF_SHAPE(T, 1, half), cs), *sin_t = af_const(g, "rope_sin", AF_SHAPE(T, 1, half), sn);
    free(cs);
    free(sn);
    int k = 0;
    af_tensor *emb = p[k++];
    af_tensor *x = embed(g, emb, tokens, B * T, c->vocab, (int)D);
    const int to_heads[4] = { 0, 2, 1, 3 };
    float eps = (float)c->eps;
    for (int l = 0; l < c->layers; l++) {
        af_tensor *in_norm = p[k++], *wq = p[k++], *bq = c->qkv_bias ? p[k++] : NULL;
        af_tensor *wk = p[k++], *bk = c->qkv_bias ? p[k++] : NULL, *wv = p[k++], *bv = c->qkv_bias ? p[k++] : NULL;
        af_tensor *qn = c->qk_norm ? p[k++] : NULL, *kn = c->qk_norm ? p[k++] : NULL;
        af_tensor *wo = p[k++], *bo = c->o_bias ? p[k++] : NULL, *post = p[k++];
        af_tensor *wg = p[k++], *wu = p[k++], *wd = p[k++];
        af_tensor *h = af_rms_norm(x, in_norm, eps);
        af_tensor *q = af_reshape(proj_linear(&lw, HF_Q, h, wq, bq), AF_SHAPE(B, T, H, hd));
        af_tensor *kk = af_reshape(proj_linear(&lw, HF_K, h, wk, bk), AF_SHAPE(B, T, KV, hd));
        af_tensor *v = af_reshape(proj_linear(&lw, HF_V, h, wv, bv), AF_SHAPE(B, T, KV, hd));
        if (qn) { q = af_rms_norm(q, qn, eps); kk = af_rms_norm(kk, kn, eps); }
        q = rope_half(q, cos_t, sin_t, half);
        kk = rope_half(kk, cos_t, sin_t, half);
        if (H != KV) { kk = af_repeat_kv_heads(kk, (int)(H / KV)); v = af_repeat_kv_heads(v, (int)(H / KV)); }
        af_tensor *att = af_causal_attention(af_transpose(q, to_heads), af_transpose(kk, to_heads), af_transpose(v, to_heads),
                                             1.0f / sqrtf((float)hd));
        att = af_reshape(af_transpose(att, to_heads), AF_SHAPE(B * T, H * hd));
        x = af_add(x, proj_linear(&lw, HF_O, att, wo, bo));
        h = af_rms_norm(x, post, eps);
        af_tensor *a = proj_linear(&lw, HF_GATE, h, wg, NULL), *u = proj_linear(&lw, HF_UP, h, wu, NULL);
        af_tensor *gate = a && u && g->cpu_only ? ir_swiglu(a, u) : af_mul(af_silu(a), u);
        x = af_add(x, proj_linear(&lw, HF_DOWN, gate, wd, NULL));
    }
    x = af_rms_norm(x, p[k++], eps);
    af_tensor *head = c->tie ? emb : p[k++];
    return af_reshape(linear(x, head, NULL), AF_SHAPE(B, T, c->vocab));
}
