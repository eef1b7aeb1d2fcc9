/* Generation with a Hugging Face model (aneforge_hf.h): one token at a time with a KV
 * cache, in fp32, the same arithmetic as the graph of graph.c (half-split RoPE on the
 * tables of hf_rope_table, biases, q/k norms, grouped KV heads, LoRA adapters added to
 * their projections). The cache and the RoPE table grow by doubling up to
 * max_position_embeddings, so a short generation from a 40k-position model holds only
 * what it uses. Matrix-vector products split their rows over the CPU pool. */
#include "hf/hf.h"

#include "cpu/cpu_features.h"
#include "cpu/pool.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct af_hf_gen {
    const af_hf_model *m;
    const hf_config *c;
    int pos, cap;          /* positions fed; positions the cache and the table hold */
    int q_dim, kv_dim;
    const float **layer;   /* per layer, the slots of graph.c's order (below) */
    float *x, *h, *q, *k, *v, *att, *o, *g, *u, *r, *logits;
    float **kc, **vc;      /* per layer [cap][kv_dim] */
    float *cos, *sin;      /* [cap][head_dim / 2] */
    float *scores;         /* [cap]: one head's attention weights */
    cpu_pool *pool;
};

/* A layer's tensors, in the slot order of hf_slots and graph.c. */
enum { L_IN, L_WQ, L_BQ, L_WK, L_BK, L_WV, L_BV, L_QN, L_KN, L_WO, L_BO, L_POST, L_WG, L_WU, L_WD, L_N };

typedef struct { float *out; const float *w, *x; int n; } mv_job;

/* Rows b..e of W x; a row's sum may be reordered (vector lanes), never split across
 * threads, so the result does not depend on the thread count. */
CPU_VECTOR_CLONES static void mv_rows(void *ctx, int64_t b, int64_t e) {
    const mv_job *j = ctx;
    const float *x = j->x;
    const int n = j->n;
    for (int64_t r = b; r < e; r++) {
        const float *w = j->w + r * n;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < n; i++) s += w[i] * x[i];
        j->out[r] = s;
    }
}

/* out[d] = W[d, n] x[n] (+ bias) */
static void matvec(cpu_pool *pool, float *out, const float *w, const float *x, int n, int d, const float *bias) {
    mv_job j = { out, w, x, n };
    cpu_pool_for(pool, d, 16384 / n + 1, mv_rows, &j);
    for (int i = 0; bias && i < d; i++) out[i] += bias[i];
}

static void rmsnorm(float *o, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) o[i] = w[i] * (x[i] * scale);
}

/* rotate_half on each head of v (heads x hd) at the position's row of the table. */
static void rope(float *v, int heads, int hd, const float *cs, const float *sn) {
    int half = hd / 2;
    for (int h = 0; h < heads; h++) {
        float *p = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            float a = p[i], b = p[i + half];
            p[i] = a * cs[i] - b * sn[i];
            p[i + half] = b * cs[i] + a * sn[i];
        }
    }
}

/* The LoRA term of one projection: out += alpha / rank * B (A x). */
static void lora_add(af_hf_gen *g, int layer, int proj, const float *x, int in, int outd, float *out) {
    const af_hf_model *m = g->m;
    if (m->lora.rank <= 0 || !(m->lora.targets >> proj & 1u)) return;
    int k = 0; /* the adapter's index: per layer, per target in HF_Q.. order, A then B */
    int per_layer = 0;
    for (int p = 0; p < HF_NPROJ; p++) per_layer += (m->lora.targets >> p & 1u) ? 2 : 0;
    for (int p = 0; p < proj; p++) k += (m->lora.targets >> p & 1u) ? 2 : 0;
    const float *A = m->a[layer * per_layer + k], *B = m->a[layer * per_layer + k + 1];
    int rank = m->lora.rank;
    float *t = g->r; /* rank floats: room for the largest rank kept in g->r */
    matvec(g->pool, t, A, x, in, rank, NULL);
    float s = (float)(m->lora.alpha / rank);
    for (int i = 0; i < rank; i++) t[i] *= s;
    for (int o = 0; o < outd; o++) {
        float acc = 0;
        for (int i = 0; i < rank; i++) acc += B[(size_t)o * rank + i] * t[i];
        out[o] += acc;
    }
}

static void proj(af_hf_gen *g, int layer, int which, float *out, const float *w, const float *x, int in, int outd,
                 const float *bias) {
    matvec(g->pool, out, w, x, in, outd, bias);
    lora_add(g, layer, which, x, in, outd, out);
}

void af_hf_gen_free(af_hf_gen *g) {
    if (!g) return;
    for (int l = 0; g->kc && l < g->c->layers; l++) free(g->kc[l]);
    for (int l = 0; g->vc && l < g->c->layers; l++) free(g->vc[l]);
    free(g->kc);
    free(g->vc);
    free(g->layer);
    free(g->x);
    free(g->cos);
    free(g->sin);
    free(g->scores);
    cpu_pool_release(g->pool);
    free(g);
}

af_hf_gen *af_hf_gen_new(const af_hf_model *m, int threads) {
    if (!m) { ir_fail(AF_ERR_INVALID, "af_hf_gen_new: model is NULL"); return NULL; }
    const hf_config *c = &m->c;
    af_hf_gen *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->m = m, g->c = c;
    g->q_dim = c->heads * c->head_dim, g->kv_dim = c->kv_heads * c->head_dim;
    int big = c->hidden > g->q_dim ? c->hidden : g->q_dim;
    size_t n = (size_t)c->hidden * 2 + (size_t)g->q_dim * 2 + (size_t)g->kv_dim * 2 + (size_t)big +
               (size_t)c->inter * 2 + (size_t)(m->lora.rank > 0 ? m->lora.rank : 1) + (size_t)c->vocab;
    g->layer = calloc((size_t)c->layers * L_N, sizeof *g->layer);
    g->kc = calloc((size_t)c->layers, sizeof *g->kc);
    g->vc = calloc((size_t)c->layers, sizeof *g->vc);
    g->x = calloc(n, sizeof(float));
    if (!g->layer || !g->kc || !g->vc || !g->x) goto nomem;
    float *p = g->x + c->hidden;
    g->h = p, p += c->hidden;
    g->q = p, p += g->q_dim;
    g->att = p, p += g->q_dim; /* the heads' outputs */
    g->k = p, p += g->kv_dim;
    g->v = p, p += g->kv_dim;
    g->o = p, p += big;
    g->g = p, p += c->inter;
    g->u = p, p += c->inter;
    g->r = p, p += m->lora.rank > 0 ? m->lora.rank : 1;
    g->logits = p;
    int k = 1; /* after the embedding */
    for (int l = 0; l < c->layers; l++) {
        const float **t = g->layer + (size_t)l * L_N;
        t[L_IN] = m->w[k++], t[L_WQ] = m->w[k++], t[L_BQ] = c->qkv_bias ? m->w[k++] : NULL;
        t[L_WK] = m->w[k++], t[L_BK] = c->qkv_bias ? m->w[k++] : NULL;
        t[L_WV] = m->w[k++], t[L_BV] = c->qkv_bias ? m->w[k++] : NULL;
        t[L_QN] = c->qk_norm ? m->w[k++] : NULL, t[L_KN] = c->qk_norm ? m->w[k++] : NULL;
        t[L_WO] = m->w[k++], t[L_BO] = c->o_bias ? m->w[k++] : NULL, t[L_POST] = m->w[k++];
        t[L_WG] = m->w[k++], t[L_WU] = m->w[k++], t[L_WD] = m->w[k++];
    }
    if (threads != 1 && !(g->pool = cpu_pool_shared(threads))) goto nomem;
    return g;
nomem:
    af_hf_gen_free(g);
    ir_fail(AF_ERR_NOMEM, "af_hf_gen_new: out of memory");
    return NULL;
}

/* Room for position pos: the cache and the RoPE table doubled as needed. */
static af_status grow(af_hf_gen *g, int pos) {
    if (pos < g->cap) return AF_OK;
    const hf_config *c = g->c;
    int cap = g->cap ? g->cap : 64;
    while (cap <= pos) cap *= 2;
    if (cap > c->max_pos) cap = c->max_pos;
    int half = c->head_dim / 2;
    float *cs = malloc(sizeof(float) * (size_t)cap * half), *sn = malloc(sizeof(float) * (size_t)cap * half);
    if (!cs || !sn) { free(cs); free(sn); return ir_fail(AF_ERR_NOMEM, "af_hf_gen: out of memory for %d positions", cap); }
    float *sc = realloc(g->scores, sizeof(float) * (size_t)cap);
    if (!sc) { free(cs); free(sn); return ir_fail(AF_ERR_NOMEM, "af_hf_gen: out of memory for %d positions", cap); }
    g->scores = sc;
    hf_rope_table(c, cap, cs, sn);
    free(g->cos);
    free(g->sin);
    g->cos = cs, g->sin = sn;
    for (int l = 0; l < c->layers; l++) {
        float *kk = realloc(g->kc[l], sizeof(float) * (size_t)cap * g->kv_dim);
        if (kk) g->kc[l] = kk;
        float *vv = kk ? realloc(g->vc[l], sizeof(float) * (size_t)cap * g->kv_dim) : NULL;
        if (vv) g->vc[l] = vv;
        if (!kk || !vv) return ir_fail(AF_ERR_NOMEM, "af_hf_gen: out of memory for a KV cache of %d positions", cap);
    }
    g->cap = cap;
    return AF_OK;
}

af_status af_hf_gen_feed(af_hf_gen *g, int32_t token) {
    if (!g) return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: generator is NULL");
    const hf_config *c = g->c;
    const af_hf_model *m = g->m;
    if (token < 0 || token >= c->vocab) return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: token %d is outside the vocab of %d", token, c->vocab);
    if (g->pos >= c->max_pos)
        return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: the sequence is full: %d tokens is the model's max_position_embeddings", c->max_pos);
    af_status st = grow(g, g->pos);
    if (st) return st;
    const int D = c->hidden, H = c->heads, KV = c->kv_heads, hd = c->head_dim, half = hd / 2, pos = g->pos;
    const float eps = (float)c->eps, *cs = g->cos + (size_t)pos * half, *sn = g->sin + (size_t)pos * half;
    const float scale = 1.0f / sqrtf((float)hd);
    memcpy(g->x, m->w[0] + (size_t)token * D, sizeof(float) * (size_t)D);
    for (int l = 0; l < c->layers; l++) {
        const float **t = g->layer + (size_t)l * L_N;
        rmsnorm(g->h, g->x, t[L_IN], D, eps);
        proj(g, l, HF_Q, g->q, t[L_WQ], g->h, D, g->q_dim, t[L_BQ]);
        proj(g, l, HF_K, g->k, t[L_WK], g->h, D, g->kv_dim, t[L_BK]);
        proj(g, l, HF_V, g->v, t[L_WV], g->h, D, g->kv_dim, t[L_BV]);
        if (t[L_QN]) {
            for (int h = 0; h < H; h++) rmsnorm(g->q + (size_t)h * hd, g->q + (size_t)h * hd, t[L_QN], hd, eps);
            for (int h = 0; h < KV; h++) rmsnorm(g->k + (size_t)h * hd, g->k + (size_t)h * hd, t[L_KN], hd, eps);
        }
        rope(g->q, H, hd, cs, sn);
        rope(g->k, KV, hd, cs, sn);
        memcpy(g->kc[l] + (size_t)pos * g->kv_dim, g->k, sizeof(float) * (size_t)g->kv_dim);
        memcpy(g->vc[l] + (size_t)pos * g->kv_dim, g->v, sizeof(float) * (size_t)g->kv_dim);
        for (int h = 0; h < H; h++) { /* causal attention of this position over 0..pos */
            const float *q = g->q + (size_t)h * hd;
            int kvh = h / (H / KV);
            float *out = g->att + (size_t)h * hd, *s = g->scores;
            float mx = -INFINITY, sum = 0;
            for (int p = 0; p <= pos; p++) {
                const float *kk = g->kc[l] + (size_t)p * g->kv_dim + (size_t)kvh * hd;
                float d = 0;
                for (int i = 0; i < hd; i++) d += q[i] * kk[i];
                s[p] = d * scale;
                mx = s[p] > mx ? s[p] : mx;
            }
            for (int p = 0; p <= pos; p++) sum += s[p] = expf(s[p] - mx);
            memset(out, 0, sizeof(float) * (size_t)hd);
            for (int p = 0; p <= pos; p++) {
                const float *vv = g->vc[l] + (size_t)p * g->kv_dim + (size_t)kvh * hd, w = s[p] / sum;
                for (int i = 0; i < hd; i++) out[i] += w * vv[i];
            }
        }
        proj(g, l, HF_O, g->o, t[L_WO], g->att, g->q_dim, D, t[L_BO]);
        for (int i = 0; i < D; i++) g->x[i] += g->o[i];
        rmsnorm(g->h, g->x, t[L_POST], D, eps);
        proj(g, l, HF_GATE, g->g, t[L_WG], g->h, D, c->inter, NULL);
        proj(g, l, HF_UP, g->u, t[L_WU], g->h, D, c->inter, NULL);
        for (int i = 0; i < c->inter; i++) g->g[i] = g->g[i] / (1.0f + expf(-g->g[i])) * g->u[i];
        proj(g, l, HF_DOWN, g->o, t[L_WD], g->g, c->inter, D, NULL);
        for (int i = 0; i < D; i++) g->x[i] += g->o[i];
    }
    int k = m->n - (c->tie ? 1 : 2); /* the final norm, then lm_head when not tied */
    rmsnorm(g->h, g->x, m->w[k], D, eps);
    matvec(g->pool, g->logits, c->tie ? m->w[0] : m->w[k + 1], g->h, D, c->vocab, NULL);
    g->pos++;
    return AF_OK;
}

const float *af_hf_gen_logits(const af_hf_gen *g) { return g && g->pos ? g->logits : NULL; }
