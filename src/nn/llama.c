/* The trainable llama2.c-architecture model (its model.py) as a graph: token embedding,
 * per layer RMSNorm -> q, k, v -> RoPE -> grouped KV heads -> causal softmax attention
 * -> wo -> residual, RMSNorm -> SwiGLU FFN -> residual; final RMSNorm; classifier (the
 * embedding when shared). Built from public ops only, so every backend and the
 * autograd see nothing new. */
#include "aneforge.h"
#include "aneforge_llama.h"
#include "ir/ir.h"
#include "nn/llama_graph.h"

#include <math.h>
#include <stdlib.h>

static const float LLAMA_EPS = 1e-5f; /* model.py's RMSNorm eps */

int af_llama_param_count(const af_llama_config *c) {
    if (!c || c->n_layers <= 0) return -1;
    return 2 + 9 * c->n_layers + (c->shared_classifier ? 0 : 1);
}

/* x [N, in] @ w[out, in]^T: nn.Linear without bias. */
static af_tensor *linear(af_tensor *x, af_tensor *w) { return af_matmul(x, w, 0, 1); }

/* Token embedding rows for ids [B, T] as [B * T, D]. On a graph told it runs on the CPU
 * (af_graph_set_target): the gather, whose gradient is a scatter-add. Otherwise, for a
 * vocab whose ids are exact in fp16 (<= 2048): a one-hot matmul, onehot(ids) @ table,
 * whose gradient onehot^T @ dy is a matmul too, because the engine has no scatter op
 * (its rule names this remedy). A larger vocab keeps the gather: comparing ids beyond
 * 2048 in fp16 would pick wrong rows silently, while the engine refuses the scatter
 * with a clear message. */
static af_tensor *embed(af_graph *g, af_tensor *table, af_tensor *ids, int64_t n, int vocab, int dim) {
    if (g->cpu_only || vocab > 2048) return af_reshape(af_embedding(table, ids), AF_SHAPE(n, dim));
    float *iota = malloc(sizeof(float) * (size_t)vocab);
    if (!iota) { ir_graph_fail(g, "af_llama: out of memory"); return NULL; }
    for (int v = 0; v < vocab; v++) iota[v] = (float)v;
    af_tensor *row = af_const(g, "vocab_ids", AF_SHAPE(1, vocab), iota);
    free(iota);
    af_tensor *onehot = af_equal(af_reshape(ids, AF_SHAPE(n, 1)), row);
    return af_matmul(onehot, table, 0, 0);
}

/* The FFN's gate silu(a) * b: one native node on a graph told it runs on the CPU (one
 * pass forward, one per operand backward, instead of the silu/mul chain and its VJP's
 * six elementwise nodes), the chain elsewhere. */
static af_tensor *ffn_gate(af_tensor *a, af_tensor *b) {
    if (a && b && a->g->cpu_only) return ir_swiglu(a, b);
    return af_mul(af_silu(a), b);
}

static bool shape_is(af_tensor *p, int64_t rows, int64_t cols) {
    af_shape s = af_tensor_shape(p);
    if (cols == 0) return s.rank == 1 && s.dim[0] == rows;
    return s.rank == 2 && s.dim[0] == rows && s.dim[1] == cols;
}

/* The layers of af_llama on x [B * T, D] (rows (b, t)) with params p in af_llama's order
 * (p[0], the embedding, is not read): what every llama graph shares. */
af_tensor *nn_llama_layers(const af_llama_config *c, af_tensor *x, af_tensor *const *p, int64_t B, int64_t T) {
    if (!x) return NULL;
    int L = c->n_layers, D = c->dim, H = c->n_heads, KV = c->n_kv_heads;
    int64_t hs = D / H;
    af_tensor *const *rms_att = p + 1, *const *wq = p + 1 + L, *const *wk = p + 1 + 2 * L, *const *wv = p + 1 + 3 * L,
                     *const *wo = p + 1 + 4 * L, *const *rms_ffn = p + 1 + 5 * L, *const *w1 = p + 1 + 6 * L,
                     *const *w2 = p + 1 + 7 * L, *const *w3 = p + 1 + 8 * L;
    const int to_heads[4] = { 0, 2, 1, 3 };                                  /* [B,T,H,hs] <-> [B,H,T,hs] */
    for (int l = 0; l < L; l++) {
        af_tensor *h = af_rms_norm(x, rms_att[l], LLAMA_EPS);
        af_tensor *q = af_rope(af_reshape(linear(h, wq[l]), AF_SHAPE(B, T, H, hs)), 0, 10000.0f);
        af_tensor *k = af_rope(af_reshape(linear(h, wk[l]), AF_SHAPE(B, T, KV, hs)), 0, 10000.0f);
        af_tensor *v = af_reshape(linear(h, wv[l]), AF_SHAPE(B, T, KV, hs));
        if (H != KV) {
            k = af_repeat_kv_heads(k, H / KV);
            v = af_repeat_kv_heads(v, H / KV);
        }
        /* On the CPU one node that skips the masked half, reading the projections' own
         * layout [B,T,H,hs]; elsewhere matmul/mask/softmax over [B,H,T,hs]. */
        af_tensor *att;
        if (h->g->cpu_only) {
            att = ir_causal_attention(q, k, v, 1.0f / sqrtf((float)hs), 1);
        } else {
            att = af_causal_attention(af_transpose(q, to_heads), af_transpose(k, to_heads), af_transpose(v, to_heads),
                                      1.0f / sqrtf((float)hs));
            att = af_transpose(att, to_heads);
        }
        att = af_reshape(att, AF_SHAPE(B * T, D));
        x = af_add(x, linear(att, wo[l]));
        h = af_rms_norm(x, rms_ffn[l], LLAMA_EPS);
        x = af_add(x, linear(ffn_gate(linear(h, w1[l]), linear(h, w3[l])), w2[l]));
    }
    return x;
}

af_tensor *af_llama(const af_llama_config *c, af_tensor *tokens, af_tensor *const *p) {
    if (!c || !tokens || !p) {
        ir_fail(AF_ERR_INVALID, "af_llama: config, tokens and params must not be NULL");
        return NULL;
    }
    af_graph *g = af_tensor_graph(tokens);
    af_shape ts = af_tensor_shape(tokens);
    int L = c->n_layers, D = c->dim, H = c->n_heads, KV = c->n_kv_heads, F = c->hidden_dim, V = c->vocab_size;
    if (L <= 0 || D <= 0 || H <= 0 || KV <= 0 || F <= 0 || V <= 0 || D % H || H % KV || (D / H) % 2) {
        ir_graph_fail(g, "af_llama: invalid config (need positive sizes, dim divisible by n_heads, n_heads by "
                         "n_kv_heads, an even head size); check it with af_llama_config_check");
        return NULL;
    }
    if (ts.rank != 2) {
        ir_graph_fail(g, "af_llama: tokens must be [batch, seq] (token ids as floats)");
        return NULL;
    }
    int64_t B = ts.dim[0], T = ts.dim[1], hs = D / H, kvd = (int64_t)KV * hs;
    int n = af_llama_param_count(c);
    for (int i = 0; i < n; i++)
        if (!p[i] || af_tensor_graph(p[i]) != g) {
            ir_graph_fail(g, "af_llama: param %d is NULL or in another graph than the tokens", i);
            return NULL;
        }
    /* llama2.c's order: emb, then each per-layer tensor over the layers, rms_final, cls. */
    af_tensor *const *rms_att = p + 1, *const *wq = p + 1 + L, *const *wk = p + 1 + 2 * L, *const *wv = p + 1 + 3 * L,
                     *const *wo = p + 1 + 4 * L, *const *rms_ffn = p + 1 + 5 * L, *const *w1 = p + 1 + 6 * L,
                     *const *w2 = p + 1 + 7 * L, *const *w3 = p + 1 + 8 * L;
    af_tensor *emb = p[0], *rms_final = p[1 + 9 * L], *cls = c->shared_classifier ? emb : p[2 + 9 * L];
    bool ok = shape_is(emb, V, D) && shape_is(rms_final, D, 0) && shape_is(cls, V, D);
    for (int l = 0; ok && l < L; l++)
        ok = shape_is(rms_att[l], D, 0) && shape_is(wq[l], D, D) && shape_is(wk[l], kvd, D) && shape_is(wv[l], kvd, D) &&
             shape_is(wo[l], D, D) && shape_is(rms_ffn[l], D, 0) && shape_is(w1[l], F, D) && shape_is(w2[l], D, F) &&
             shape_is(w3[l], F, D);
    if (!ok) {
        ir_graph_fail(g, "af_llama: a param's shape is not the config's (make them with af_llama_params_new)");
        return NULL;
    }
    af_tensor *x = nn_llama_layers(c, embed(g, emb, tokens, B * T, V, D), p, B, T); /* rows (b, t) */
    x = af_rms_norm(x, rms_final, LLAMA_EPS);
    return af_reshape(linear(x, cls), AF_SHAPE(B, T, V));
}
