/* llama2.c's model config: presets, the rules a config must follow, and where each
 * tensor lies in the flat weight array (run.c's order). */
#include "llama/llama.h"
#include "aneforge_llama.h"
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

/* Bounds that keep every size computation far from overflow; the largest Llama 2 (70B:
 * dim 8192, hidden 28672, 80 layers, vocab 32000, seq 4096) is well inside them. */
enum { MAX_DIM = 1 << 16, MAX_HIDDEN = 1 << 20, MAX_LAYERS = 1 << 12, MAX_VOCAB = 1 << 24, MAX_SEQ = 1 << 20 };

static const struct {
    const char *name;
    int dim, hidden, layers, heads, kv_heads, seq;
} presets[] = {
    { "tiny", 64, 172, 2, 4, 2, 128 },
    { "stories15m", 288, 768, 6, 6, 6, 256 },
    { "stories42m", 512, 1376, 8, 8, 8, 1024 },
    { "stories110m", 768, 2048, 12, 12, 12, 1024 },
};

af_status af_llama_preset(const char *name, int vocab_size, af_llama_config *out) {
    if (!name || !out) return ir_fail(AF_ERR_INVALID, "af_llama_preset: name or out is NULL");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name)) continue;
        af_llama_config c = { presets[i].dim, presets[i].hidden, presets[i].layers, presets[i].heads,
                              presets[i].kv_heads, vocab_size, presets[i].seq, 1 };
        if (vocab_size < 1 || vocab_size > MAX_VOCAB)
            return ir_fail(AF_ERR_INVALID, "af_llama_preset %s: vocab_size %d (must be 1..%d: the tokenizer's size)",
                           name, vocab_size, MAX_VOCAB);
        *out = c;
        return AF_OK;
    }
    return ir_fail(AF_ERR_INVALID, "unknown llama preset '%s' (tiny, stories15m, stories42m, stories110m)", name);
}

const char *llama_config_problem(const af_llama_config *c, char *why, size_t cap) {
    if (!c) return snprintf(why, cap, "the config is NULL"), why;
    const struct { const char *name; int v, max; } f[] = {
        { "dim", c->dim, MAX_DIM }, { "hidden_dim", c->hidden_dim, MAX_HIDDEN },
        { "n_layers", c->n_layers, MAX_LAYERS }, { "n_heads", c->n_heads, MAX_DIM },
        { "n_kv_heads", c->n_kv_heads, MAX_DIM }, { "vocab_size", c->vocab_size, MAX_VOCAB },
        { "seq_len", c->seq_len, MAX_SEQ },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > f[i].max)
            return snprintf(why, cap, "%s = %d (must be 1..%d)", f[i].name, f[i].v, f[i].max), why;
    if (c->dim % c->n_heads)
        return snprintf(why, cap, "dim %d is not a multiple of n_heads %d", c->dim, c->n_heads), why;
    if ((c->dim / c->n_heads) % 2)
        return snprintf(why, cap, "head size dim / n_heads = %d is odd (RoPE rotates pairs)", c->dim / c->n_heads), why;
    if (c->n_heads % c->n_kv_heads)
        return snprintf(why, cap, "n_heads %d is not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads), why;
    if (c->shared_classifier != 0 && c->shared_classifier != 1)
        return snprintf(why, cap, "shared_classifier = %d (must be 0 or 1)", c->shared_classifier), why;
    return NULL;
}

af_status af_llama_config_check(const af_llama_config *c) {
    char why[256];
    if (llama_config_problem(c, why, sizeof why)) return ir_fail(AF_ERR_INVALID, "llama config: %s", why);
    return AF_OK;
}

/* Rows and columns of one layer's (or the unlayered) tensor t, and whether it is per layer. */
static void tensor_shape(const af_llama_config *c, af_llama_tensor t, int64_t *rows, int64_t *cols, int *layered) {
    const int64_t d = c->dim, kv = (int64_t)c->dim / c->n_heads * c->n_kv_heads, h = c->hidden_dim;
    static const int per_layer[] = { 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0 };
    const int64_t shape[][2] = { { c->vocab_size, d }, { 1, d }, { d, d }, { kv, d }, { kv, d }, { d, d },
                                 { 1, d }, { h, d }, { d, h }, { h, d }, { 1, d }, { c->vocab_size, d } };
    *rows = shape[t][0];
    *cols = shape[t][1];
    *layered = per_layer[t];
}

int64_t af_llama_weight_count(const af_llama_config *c) {
    char why[256];
    if (llama_config_problem(c, why, sizeof why)) return -1;
    int64_t n = 0;
    for (int t = AF_LLAMA_TOKEN_EMBEDDING; t <= AF_LLAMA_CLASSIFIER; t++) {
        if (t == AF_LLAMA_CLASSIFIER && c->shared_classifier) break;
        int64_t r, k;
        int layered;
        tensor_shape(c, (af_llama_tensor)t, &r, &k, &layered);
        n += r * k * (layered ? c->n_layers : 1);
    }
    return n;
}

af_status af_llama_tensor_at(const af_llama_config *c, af_llama_tensor t, int layer, int64_t *offset,
                             int *rows, int *cols) {
    char why[256];
    if (llama_config_problem(c, why, sizeof why)) return ir_fail(AF_ERR_INVALID, "af_llama_tensor_at: %s", why);
    if ((int)t < AF_LLAMA_TOKEN_EMBEDDING || t > AF_LLAMA_CLASSIFIER)
        return ir_fail(AF_ERR_INVALID, "af_llama_tensor_at: tensor %d is not an af_llama_tensor", (int)t);
    if (t == AF_LLAMA_CLASSIFIER && c->shared_classifier) t = AF_LLAMA_TOKEN_EMBEDDING;
    int64_t r, k, off = 0;
    int layered;
    tensor_shape(c, t, &r, &k, &layered);
    if (layered && (layer < 0 || layer >= c->n_layers))
        return ir_fail(AF_ERR_INVALID, "af_llama_tensor_at %s: layer %d (the model has %d)", af_llama_tensor_name(t),
                       layer, c->n_layers);
    for (int u = AF_LLAMA_TOKEN_EMBEDDING; u < (int)t; u++) {
        int64_t ur, uk;
        int ul;
        tensor_shape(c, (af_llama_tensor)u, &ur, &uk, &ul);
        off += ur * uk * (ul ? c->n_layers : 1);
    }
    if (layered) off += (int64_t)layer * r * k;
    if (offset) *offset = off;
    if (rows) *rows = (int)r;
    if (cols) *cols = (int)k;
    return AF_OK;
}

const char *af_llama_tensor_name(af_llama_tensor t) {
    static const char *names[] = { "token_embedding", "rms_att", "wq", "wk", "wv", "wo",
                                   "rms_ffn", "w1", "w2", "w3", "rms_final", "classifier" };
    return (int)t >= 0 && (int)t < (int)(sizeof names / sizeof names[0]) ? names[t] : "?";
}
