/* llama2.c <-> Hugging Face Llama. The two apply the same rotation to different pairs:
 * llama2.c (and af_rope) turns pairs (2i, 2i + 1) of each head, Hugging Face turns
 * (i, i + head_dim / 2) (rotate_half), each by position * theta^(-2i / head_dim). So a
 * head's q and k rows are permuted between the orders, as transformers'
 * convert_llama_weights_to_hf.py does: HF row i <- llama2.c row 2i, HF row
 * i + head_dim / 2 <- llama2.c row 2i + 1. q . k is unchanged by permuting both alike,
 * so v, o and everything else are copied. */
#include "hf/hf.h"

#include "ir/ir.h"
#include "llama/llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* rows of w [heads * hd, cols]: interleaved -> half-split (to_hf) or back */
static void permute_heads(const float *src, float *dst, int heads, int hd, int64_t cols, bool to_hf) {
    int half = hd / 2;
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < half; i++)
            for (int j = 0; j < 2; j++) {
                int64_t inter = (int64_t)h * hd + 2 * i + j, split = (int64_t)h * hd + i + j * half;
                const float *from = src + (to_hf ? inter : split) * cols;
                float *to = dst + (to_hf ? split : inter) * cols;
                memcpy(to, from, sizeof(float) * (size_t)cols);
            }
}

/* slot index of a per-layer tensor (plain Llama layout: 9 slots per layer) */
enum { S_IN, S_Q, S_K, S_V, S_O, S_POST, S_GATE, S_UP, S_DOWN };

/* Copies every tensor between llama2.c's layout (data, laid out by lc) and the model's
 * slots (m->w, in af_hf_param order: embedding, 9 per layer, final norm, classifier),
 * permuting q's and k's rows between the two RoPE conventions; to_hf: llama2.c -> m. */
static af_status copy_weights(const af_llama_config *lc, float *data, af_hf_model *m, bool to_hf) {
    static const af_llama_tensor per_layer[9] = { AF_LLAMA_RMS_ATT, AF_LLAMA_WQ, AF_LLAMA_WK, AF_LLAMA_WV, AF_LLAMA_WO,
                                                  AF_LLAMA_RMS_FFN, AF_LLAMA_W1, AF_LLAMA_W3, AF_LLAMA_W2 };
    const hf_config *c = &m->c;
    for (int i = 0; i < m->n; i++) {
        af_llama_tensor t;
        int layer = 0, k = -1;
        if (i == 0) t = AF_LLAMA_TOKEN_EMBEDDING;
        else if (i <= 9 * c->layers) { layer = (i - 1) / 9; k = (i - 1) % 9; t = per_layer[k]; }
        else if (i == 9 * c->layers + 1) t = AF_LLAMA_RMS_FINAL;
        else t = AF_LLAMA_CLASSIFIER;
        int64_t off;
        int rows, cols;
        af_status st = af_llama_tensor_at(lc, t, layer, &off, &rows, &cols);
        if (st) return st;
        float *l = data + off, *h = m->w[i];
        if (k == S_Q || k == S_K)
            permute_heads(to_hf ? l : h, to_hf ? h : l, k == S_Q ? c->heads : c->kv_heads, c->head_dim, cols, to_hf);
        else
            memcpy(to_hf ? h : l, to_hf ? l : h, sizeof(float) * (size_t)rows * (size_t)cols);
    }
    return AF_OK;
}

af_hf_model *af_hf_from_llama(const af_llama_weights *w) {
    if (!w) { ir_fail(AF_ERR_INVALID, "af_hf_from_llama: weights are NULL"); return NULL; }
    const af_llama_config *lc = &w->cfg;
    hf_config c = { 0 };
    c.arch = HF_LLAMA;
    c.vocab = lc->vocab_size;
    c.hidden = lc->dim;
    c.inter = lc->hidden_dim;
    c.layers = lc->n_layers;
    c.heads = lc->n_heads;
    c.kv_heads = lc->n_kv_heads;
    c.head_dim = lc->dim / lc->n_heads;
    c.max_pos = lc->seq_len;
    c.eps = 1e-5; /* af_llama's RMSNorm */
    c.theta = 10000;
    c.tie = lc->shared_classifier;
    af_hf_model *m = hf_model_alloc(&c);
    if (!m) { ir_fail(AF_ERR_NOMEM, "af_hf_from_llama: out of memory"); return NULL; }
    if (copy_weights(lc, (float *)w->data, m, true)) { /* only read in this direction */
        af_hf_free(m);
        return NULL;
    }
    return m;
}

af_status hf_llama_fits(const hf_config *c) {
    char why[160] = "";
    if (c->arch != HF_LLAMA) snprintf(why, sizeof why, "architecture %s (it holds LlamaForCausalLM only)", hf_arch_name(c->arch));
    else if (c->qkv_bias || c->o_bias) snprintf(why, sizeof why, "attention_bias (it has no biases)");
    else if (c->rope_llama3) snprintf(why, sizeof why, "rope_scaling (it has plain RoPE)");
    else if (c->theta != 10000) snprintf(why, sizeof why, "rope_theta %g (it uses 10000)", c->theta);
    else if (fabs(c->eps - 1e-5) > 1e-12) snprintf(why, sizeof why, "rms_norm_eps %g (it uses 1e-5)", c->eps);
    else if (c->head_dim * c->heads != c->hidden)
        snprintf(why, sizeof why, "head_dim %d (it uses hidden_size / num_attention_heads = %d)", c->head_dim, c->hidden / c->heads);
    if (why[0])
        return ir_fail(AF_ERR_UNSUPPORTED, "af_hf_to_llama: llama2.c's format cannot hold this model's %s; train it as a "
                                           "Hugging Face model instead (aneforge hf train, af_net_hf)", why);
    return AF_OK;
}

af_status af_hf_check_llama(const char *dir) {
    if (!dir) return ir_fail(AF_ERR_INVALID, "af_hf_check_llama: dir is NULL");
    hf_config c;
    af_status st = hf_read_config(dir, &c);
    return st ? st : hf_llama_fits(&c);
}

af_llama_weights *af_hf_to_llama(const af_hf_model *m) {
    if (!m) { ir_fail(AF_ERR_INVALID, "af_hf_to_llama: model is NULL"); return NULL; }
    const hf_config *c = &m->c;
    if (hf_llama_fits(c)) return NULL;
    af_llama_config lc = { 0 };
    lc.dim = c->hidden;
    lc.hidden_dim = c->inter;
    lc.n_layers = c->layers;
    lc.n_heads = c->heads;
    lc.n_kv_heads = c->kv_heads;
    lc.vocab_size = c->vocab;
    lc.seq_len = c->max_pos;
    lc.shared_classifier = c->tie;
    af_llama_weights *w = af_llama_weights_new(&lc);
    if (!w) return NULL;
    if (copy_weights(&lc, w->data, (af_hf_model *)m, false)) { /* m is only read in this direction */
        af_llama_weights_free(w);
        return NULL;
    }
    return w;
}
