/* The forward pass of llama2.c's run.c, one token at a time with a KV cache, in fp32.
 * It does run.c's arithmetic in run.c's order (each dot product summed left to right,
 * RoPE's angles in float, the same forms of RMSNorm, softmax and SwiGLU), so its logits
 * are run.c's bit for bit where the compilers agree, and a seed samples run.c's tokens.
 * Generation is matrix-vector bound: rows split over the pool (a row's sum never
 * depends on the split, so results do not depend on the thread count), four rows at a
 * time so four independent sums hide the adds' latency. */
#include "llama/llama.h"
#include "aneforge_llama.h"
#include "cpu/pool.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct af_llama_gen {
    const af_llama_weights *w;
    af_llama_config c;
    int head_size, kv_dim, pos;
    float *x, *xb, *xb2, *hb, *hb2, *q, *att, *logits;
    float *key_cache, *value_cache; /* [layer][seq_len][kv_dim] */
    float *rope_cos, *rope_sin;     /* [seq_len][head_size / 2] */
    float *arena;
    cpu_pool *pool;
};

static float dot(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

typedef struct { float *out; const float *w, *x; int n; } matvec_job;

static void matvec_rows(void *ctx, int64_t b, int64_t e) {
    const matvec_job *j = ctx;
    const int n = j->n;
    const float *x = j->x;
    int64_t r = b;
    for (; r + 4 <= e; r += 4) {
        const float *w0 = j->w + r * n, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int i = 0; i < n; i++) {
            s0 += w0[i] * x[i];
            s1 += w1[i] * x[i];
            s2 += w2[i] * x[i];
            s3 += w3[i] * x[i];
        }
        j->out[r] = s0, j->out[r + 1] = s1, j->out[r + 2] = s2, j->out[r + 3] = s3;
    }
    for (; r < e; r++) j->out[r] = dot(j->w + r * n, x, n);
}

/* out[d] = W[d, n] x[n] */
static void matvec(cpu_pool *pool, float *out, const float *w, const float *x, int n, int d) {
    matvec_job j = { out, w, x, n };
    int64_t min_rows = 16384 / n + 1;
    cpu_pool_for(pool, d, min_rows, matvec_rows, &j);
}

static void rmsnorm(float *o, const float *x, const float *weight, int n) {
    float ss = dot(x, x, n);
    float scale = 1.0f / sqrtf(ss / (float)n + 1e-5f);
    for (int i = 0; i < n; i++) o[i] = weight[i] * (scale * x[i]);
}

static void softmax(float *x, int n) {
    float max = x[0], sum = 0;
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < n; i++) sum += x[i] = expf(x[i] - max);
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* Rotates the pairs (2i, 2i+1) of each head of vec (n floats) by position pos's angles. */
static void rope(const af_llama_gen *g, float *vec, int n) {
    const int half = g->head_size / 2;
    const float *cs = g->rope_cos + (size_t)g->pos * half, *sn = g->rope_sin + (size_t)g->pos * half;
    for (int i = 0; i < n; i += 2) {
        int k = (i % g->head_size) / 2;
        float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * cs[k] - v1 * sn[k];
        vec[i + 1] = v0 * sn[k] + v1 * cs[k];
    }
}

static const float *tensor(const af_llama_gen *g, af_llama_tensor t, int layer) {
    int64_t off = 0;
    af_llama_tensor_at(&g->c, t, layer, &off, NULL, NULL);
    return g->w->data + off;
}

/* Attention of every query head over positions [0, pos], into xb. */
static void attention(af_llama_gen *g, int layer) {
    const af_llama_config *c = &g->c;
    const int hs = g->head_size, group = c->n_heads / c->n_kv_heads;
    const size_t loff = (size_t)layer * c->seq_len * g->kv_dim;
    const float root = sqrtf((float)hs);
    for (int h = 0; h < c->n_heads; h++) {
        const float *q = g->q + h * hs;
        const size_t kvh = (size_t)(h / group) * hs; /* consecutive query heads share a KV head */
        float *att = g->att;
        for (int t = 0; t <= g->pos; t++)
            att[t] = dot(q, g->key_cache + loff + (size_t)t * g->kv_dim + kvh, hs) / root;
        softmax(att, g->pos + 1);
        float *out = g->xb + h * hs;
        memset(out, 0, (size_t)hs * sizeof(float));
        for (int t = 0; t <= g->pos; t++) {
            const float *v = g->value_cache + loff + (size_t)t * g->kv_dim + kvh;
            for (int i = 0; i < hs; i++) out[i] += att[t] * v[i];
        }
    }
}

af_status af_llama_gen_feed(af_llama_gen *g, int32_t token) {
    if (!g) return ir_fail(AF_ERR_INVALID, "af_llama_gen_feed: generator is NULL");
    const af_llama_config *c = &g->c;
    if (token < 0 || token >= c->vocab_size)
        return ir_fail(AF_ERR_INVALID, "af_llama_gen_feed: token %d is outside the vocabulary [0, %d)", token,
                       c->vocab_size);
    if (g->pos >= c->seq_len)
        return ir_fail(AF_ERR_INVALID, "af_llama_gen_feed: the KV cache is full (seq_len %d positions): reset the "
                       "generator or use a model with a longer seq_len", c->seq_len);
    const int dim = c->dim, hidden = c->hidden_dim, kv_dim = g->kv_dim;
    memcpy(g->x, tensor(g, AF_LLAMA_TOKEN_EMBEDDING, 0) + (size_t)token * dim, (size_t)dim * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        rmsnorm(g->xb, g->x, tensor(g, AF_LLAMA_RMS_ATT, l), dim);
        const size_t at = ((size_t)l * c->seq_len + g->pos) * kv_dim;
        float *k = g->key_cache + at, *v = g->value_cache + at;
        matvec(g->pool, g->q, tensor(g, AF_LLAMA_WQ, l), g->xb, dim, dim);
        matvec(g->pool, k, tensor(g, AF_LLAMA_WK, l), g->xb, dim, kv_dim);
        matvec(g->pool, v, tensor(g, AF_LLAMA_WV, l), g->xb, dim, kv_dim);
        rope(g, g->q, dim);
        rope(g, k, kv_dim);
        attention(g, l);
        matvec(g->pool, g->xb2, tensor(g, AF_LLAMA_WO, l), g->xb, dim, dim);
        for (int i = 0; i < dim; i++) g->x[i] += g->xb2[i];

        rmsnorm(g->xb, g->x, tensor(g, AF_LLAMA_RMS_FFN, l), dim);
        matvec(g->pool, g->hb, tensor(g, AF_LLAMA_W1, l), g->xb, dim, hidden);
        matvec(g->pool, g->hb2, tensor(g, AF_LLAMA_W3, l), g->xb, dim, hidden);
        for (int i = 0; i < hidden; i++) { /* SwiGLU: silu(w1 x) * (w3 x) */
            float a = g->hb[i];
            a *= 1.0f / (1.0f + expf(-a));
            g->hb[i] = a * g->hb2[i];
        }
        matvec(g->pool, g->xb, tensor(g, AF_LLAMA_W2, l), g->hb, hidden, dim);
        for (int i = 0; i < dim; i++) g->x[i] += g->xb[i];
    }
    rmsnorm(g->x, g->x, tensor(g, AF_LLAMA_RMS_FINAL, 0), dim);
    matvec(g->pool, g->logits, tensor(g, AF_LLAMA_CLASSIFIER, 0), g->x, dim, c->vocab_size);
    g->pos++;
    return AF_OK;
}

af_llama_gen *af_llama_gen_new(const af_llama_weights *w, int threads) {
    if (!w) {
        ir_fail(AF_ERR_INVALID, "af_llama_gen_new: weights are NULL");
        return NULL;
    }
    if (af_llama_config_check(&w->cfg)) return NULL;
    const af_llama_config *c = &w->cfg;
    af_llama_gen *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->w = w;
    g->c = *c;
    g->head_size = c->dim / c->n_heads;
    g->kv_dim = g->head_size * c->n_kv_heads;
    /* One allocation: activations, scores, logits, the KV cache and the RoPE table. */
    const uint64_t cache = (uint64_t)c->n_layers * c->seq_len * g->kv_dim;
    const uint64_t sizes[] = { c->dim, c->dim, c->dim, c->hidden_dim, c->hidden_dim, c->dim, c->seq_len,
                               c->vocab_size, cache, cache, (uint64_t)c->seq_len * g->head_size / 2,
                               (uint64_t)c->seq_len * g->head_size / 2 };
    float **slots[] = { &g->x, &g->xb, &g->xb2, &g->hb, &g->hb2, &g->q, &g->att,
                        &g->logits, &g->key_cache, &g->value_cache, &g->rope_cos, &g->rope_sin };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    if (total > SIZE_MAX / sizeof(float)) goto nomem;
    g->arena = calloc((size_t)total, sizeof(float));
    if (!g->arena) goto nomem;
    float *p = g->arena;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *slots[i] = p;
        p += sizes[i];
    }
    /* run.c's angles: pos * 10000^(-2i / head_size), in float. */
    for (int pos = 0; pos < c->seq_len; pos++)
        for (int i = 0; i < g->head_size / 2; i++) {
            float freq = 1.0f / powf(10000.0f, (float)(2 * i) / (float)g->head_size);
            float angle = (float)pos * freq;
            g->rope_cos[(size_t)pos * (g->head_size / 2) + i] = cosf(angle);
            g->rope_sin[(size_t)pos * (g->head_size / 2) + i] = sinf(angle);
        }
    if (threads != 1 && !(g->pool = cpu_pool_shared(threads))) goto nomem;
    return g;
nomem:
    af_llama_gen_free(g);
    ir_fail(AF_ERR_NOMEM, "af_llama_gen_new: out of memory for the KV cache (%d layers x %d positions x %d)",
            c->n_layers, c->seq_len, c->dim / c->n_heads * c->n_kv_heads);
    return NULL;
}

void af_llama_gen_free(af_llama_gen *g) {
    if (!g) return;
    cpu_pool_release(g->pool);
    free(g->arena);
    free(g);
}

const float *af_llama_gen_logits(const af_llama_gen *g) { return g && g->pos > 0 ? g->logits : NULL; }

int af_llama_gen_pos(const af_llama_gen *g) { return g ? g->pos : 0; }

void af_llama_gen_reset(af_llama_gen *g) {
    if (g) g->pos = 0;
}
