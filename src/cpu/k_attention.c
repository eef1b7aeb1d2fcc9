/* Causal softmax attention (causal_attention) and its gradient on the CPU, rope and swiglu.
 *
 * Per batch and head, the query rows go in blocks of ATT_ROWS; the block ending at row r
 * needs keys 0..r only, so the masked half of every product (about half the work at
 * seq 256) is never computed, and each block's scores, weights and score gradients stay
 * in a per-thread scratch of ATT_ROWS x seq floats instead of [B, H, seq, seq] arrays
 * in memory. The (batch, head) pairs are split over the threads; every product inside
 * runs on its thread alone (cpu_sgemm without a pool).
 *
 * Forward, block rows i: p = softmax(q_i k^T * scale) over keys j <= i (masked weights
 * are exactly 0, as softmax gives them after af_causal_mask's -1e4), y_i = p v.
 * Gradient, recomputing p (nothing of the forward is kept): dv += p^T dy_i,
 * dp = dy_i v^T, ds = p (dp - rowsum(p dp)) * scale, dq_i = ds k, dk += ds^T q_i.
 * Under AF_PRECISION_BF16 the same four products run on bf16 operands (bf_head_*). */
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "ir/op_cases.h"
#include "cpu/kernels.h"
#include "cpu/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATT_ROWS 32
/* Row blocks of the bf16 path: each bf16 product packs its operands (and allocates), so
 * fewer, larger products pay that less often; the masked work grows with the block. */
#define BF_ROWS 64

/* One head's operands: T rows of d values, row i at x + i * ld (ld = d in the [B, heads,
 * seq, d] layout, heads * d in [B, seq, heads, d]). */
typedef struct { int64_t T, d, ld; float scale; } head_geom;

/* In fp32 a head's k and v are packed once for the micro-kernel (cpu_sgemm_pack_b), and
 * every block's products read a leading part of the packing: k^T and v^T [d, T] for the
 * scores and dp, k and v [T, d] for dq and y. Repacking them per block was a fifth of the
 * llama b step's packing (seq 512: each block packed keys 0..r again). */
typedef struct { float *kt, *vt, *kn, *vn; } head_packs;

/* A thread's scratch: the block's p (and dp), then the packings its direction uses. */
static int64_t slot_floats(int64_t T, int64_t d, bool grad) {
    int64_t t = cpu_sgemm_packed_b_floats(d, T), n = cpu_sgemm_packed_b_floats(T, d);
    return (int64_t)ATT_ROWS * T * (grad ? 2 : 1) + (grad ? 2 * t + n : t + n);
}

int64_t cpu_attention_scratch(const af_tensor *t, int threads) {
    int64_t H, T;
    ir_attention_dims(t, &H, &T);
    return slot_floats(T, t->src[0]->shape.dim[3], t->op == IR_OP_CAUSAL_ATTENTION_GRAD) * (threads > 1 ? threads : 1);
}

/* Packs a head's x as B transposed (tb: [d, T]) or as stored ([T, d]) into dst; NULL when
 * it cannot (products go to BLAS): the blocks multiply by cpu_sgemm from x itself. */
static float *pack_head(int tb, const float *x, const head_geom *g, float *dst) {
    return cpu_sgemm_pack_b(tb, tb ? g->d : g->T, tb ? g->T : g->d, x, g->ld, dst) ? dst : NULL;
}

/* C = A op(B) with op(B) the leading K x N block of x^T (tb) or x [T, d], from its packing
 * pk when there is one. */
static void mm_head(const float *pk, int tb, const head_geom *g, int64_t M, int64_t N, int64_t K, const float *A,
                    int64_t lda, const float *x, float *C, int64_t ldc) {
    if (pk && cpu_sgemm_pb(0, M, N, K, A, lda, pk, tb ? g->d : g->T, false, C, ldc)) return;
    cpu_sgemm(NULL, 0, tb, M, N, K, 1.0f, A, lda, x, g->ld, 0.0f, C, ldc);
}

/* Row i of a block: softmax over its first n entries (the keys it sees), zeros after.
 * The softmax runs over n rounded up to 16 (the widest vector), the entries past n set to
 * -inf: exp(-inf) is 0, and no pass has a scalar remainder of varying length; the rest of
 * the row is zeroed. The vectors past that point added exact zeros to the sum when the
 * softmax ran over the whole row, so the values are the same bits; a block of 64 rows
 * computed a fifth fewer exps at seq 256. */
static void softmax_prefix(float *row, int64_t n, int64_t e) {
    int64_t w = (n + 15) / 16 * 16;
    if (w > e) w = e;
    for (int64_t j = n; j < w; j++) row[j] = -INFINITY;
    cpu_softmax_row(row, row, w);
    if (w < e) memset(row + w, 0, (size_t)(e - w) * sizeof *row);
}

/* The scores p [m, e] of query rows [r0, r0 + m) (e = r0 + m keys) to their weights: row
 * i scaled over the keys it sees, then softmax_prefix. */
static void weights_of_scores(float *p, int64_t r0, int64_t m, float scale) {
    int64_t e = r0 + m;
    for (int64_t i = 0; i < m; i++) {
        float *row = p + i * e;
        for (int64_t j = 0; j <= r0 + i; j++) row[j] *= scale;
        softmax_prefix(row, r0 + i + 1, e);
    }
}

/* The weights p [m, r0 + m] of query rows [r0, r0 + m) of one head (kt: k^T's packing). */
static void block_weights(const float *q, const float *k, const float *kt, const head_geom *g, int64_t r0, int64_t m,
                          float *p) {
    int64_t e = r0 + m;
    mm_head(kt, 1, g, m, e, g->d, q + r0 * g->ld, g->ld, k, p, e);
    weights_of_scores(p, r0, m, g->scale);
}

/* ds = p (dp - rowsum(p dp)) * scale, in place of dp. */
CPU_VECTOR_CLONES static void score_grad(const float *p, float *dp, int64_t m, int64_t e, float scale) {
    for (int64_t i = 0; i < m; i++) {
        const float *pr = p + i * e;
        float *dr = dp + i * e, dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < e; j++) dot += pr[j] * dr[j];
        for (int64_t j = 0; j < e; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
    }
}

static void head_forward(const float *q, const float *k, const float *v, float *y, const head_geom *g, float *p,
                         head_packs h) {
    const int64_t ld = g->ld;
    const float *kt = pack_head(1, k, g, h.kt), *vn = pack_head(0, v, g, h.vn);
    for (int64_t r0 = 0; r0 < g->T; r0 += ATT_ROWS) {
        int64_t m = g->T - r0 < ATT_ROWS ? g->T - r0 : ATT_ROWS, e = r0 + m;
        block_weights(q, k, kt, g, r0, m, p);
        mm_head(vn, 0, g, m, g->d, e, p, e, v, y + r0 * ld, ld);
    }
}

/* x[0, e) += a^T b for a block's a [m, e] and b [m, d] (rows ld apart): rows [0, r0), which
 * earlier blocks wrote, accumulate; rows [r0, e) are the block's own first touch and are
 * stored, so dk and dv need no zeroing pass (per-row memsets in the [B, T, H, d] layout
 * were a twelfth of Stories110M's attention gradient). */
static void add_block_t(const float *a, int64_t m, int64_t e, int64_t r0, const float *b, const head_geom *g,
                        float *x) {
    if (r0 > 0) cpu_sgemm(NULL, 1, 0, r0, g->d, m, 1.0f, a, e, b, g->ld, 1.0f, x, g->ld);
    cpu_sgemm(NULL, 1, 0, e - r0, g->d, m, 1.0f, a + r0, e, b, g->ld, 0.0f, x + r0 * g->ld, g->ld);
}

static void head_backward(const float *q, const float *k, const float *v, const float *dy, float *dq, float *dk,
                          float *dv, const head_geom *g, float *p, float *dp, head_packs h) {
    const int64_t ld = g->ld, d = g->d;
    const float *kt = pack_head(1, k, g, h.kt), *vt = pack_head(1, v, g, h.vt), *kn = pack_head(0, k, g, h.kn);
    for (int64_t r0 = 0; r0 < g->T; r0 += ATT_ROWS) {
        int64_t m = g->T - r0 < ATT_ROWS ? g->T - r0 : ATT_ROWS, e = r0 + m;
        const float *dyb = dy + r0 * ld;
        block_weights(q, k, kt, g, r0, m, p);
        add_block_t(p, m, e, r0, dyb, g, dv);                     /* dv[0, e) += p^T dy_i */
        mm_head(vt, 1, g, m, e, d, dyb, ld, v, dp, e);            /* dp = dy_i v[0, e)^T */
        score_grad(p, dp, m, e, g->scale);
        mm_head(kn, 0, g, m, d, e, dp, e, k, dq + r0 * ld, ld);   /* dq_i = ds k */
        add_block_t(dp, m, e, r0, q + r0 * ld, g, dk);            /* dk[0, e) += ds^T q_i */
    }
}

/* Under AF_PRECISION_BF16 the four products of each block run through the bf16 GEMM
 * (operands rounded to bf16 as they are packed, fp32 sums), as autocast runs attention's
 * matmuls; the softmax and its gradient stay fp32. Blocks of BF_ROWS query rows; p and dp
 * are BF_ROWS x T, acc (for the products that add into dk and dv) T x d, all per thread. */
typedef struct {
    cpu_bf16_path path;
    float *p, *dp, *acc;
    /* k and v packed once per head (cpu_bf16_pack_b), each block taking a leading part:
     * as B transposed (q k^T, dy v^T: [d, T]) and as stored (p v, ds k: [T, d]); NULL
     * or failed: the block packs its own */
    uint16_t *kt, *kn, *vt, *vn;
    bool kt_ok, kn_ok, vt_ok, vn_ok;
} bf_ws;

/* x[0, e) += a^T b for a block's a [m, e] and b [m, d], through w->acc (e x d fits): as
 * add_block_t, rows [0, r0), which earlier blocks wrote, accumulate, and rows [r0, e),
 * the block's first touch, are stored (plus 0, so a -0 is stored as the +0 that adding
 * it to zeros gave), so dk and dv need no zeroing pass (the memsets were 7% of llama a's
 * bf16 attention). One product for both parts: each packs its own B. */
static void bf_add_block_t(const bf_ws *w, const float *a, int64_t m, int64_t e, int64_t r0, const float *b,
                           const head_geom *g, float *x) {
    const int64_t d = g->d;
    if (!cpu_sgemm_bf16_t(NULL, w->path, 1, 0, e, d, m, a, e, b, g->ld, w->acc, d)) {
        add_block_t(a, m, e, r0, b, g, x);
        return;
    }
    for (int64_t i = 0; i < e; i++) {
        float *xr = x + i * g->ld;
        const float *ar = w->acc + i * d;
        if (i < r0)
            for (int64_t j = 0; j < d; j++) xr[j] += ar[j];
        else
            for (int64_t j = 0; j < d; j++) xr[j] = ar[j] + 0.0f;
    }
}

/* C = A op(B) with op(B) the leading K x N block of a head's packing of x (T x d rows),
 * as B transposed (tb: [d, T]) or as stored ([T, d]); without the packing, a bf16 product
 * that packs its own; fp32 when the bf16 GEMM cannot run (its buffers not allocated). */
static void bf_mm_head(const bf_ws *w, int tb, const uint16_t *packed, bool ok, const head_geom *g, int64_t M,
                       int64_t N, int64_t K, const float *A, int64_t lda, const float *x, float *C, int64_t ldc) {
    if (ok && cpu_sgemm_bf16_pb(NULL, w->path, 0, M, N, K, A, lda, packed, tb ? g->d : g->T, tb ? g->T : g->d, C, ldc))
        return;
    if (!cpu_sgemm_bf16_t(NULL, w->path, 0, tb, M, N, K, A, lda, x, g->ld, C, ldc))
        cpu_sgemm(NULL, 0, tb, M, N, K, 1.0f, A, lda, x, g->ld, 0.0f, C, ldc);
}

/* Packs a head's x as B transposed or as stored into dst (and, transposed, x as stored
 * into other unless NULL, in the same pass); false: the blocks pack their own. */
static bool bf_pack_head(const bf_ws *w, int tb, const float *x, const head_geom *g, uint16_t *dst, uint16_t *other) {
    return dst && cpu_bf16_pack_b(NULL, w->path, tb, tb ? g->d : g->T, tb ? g->T : g->d, x, g->ld, dst, other);
}

/* bf16 block_weights: the scores' product in bf16, the scale and softmax in fp32. */
static void bf_block_weights(const bf_ws *w, const float *q, const float *k, const head_geom *g, int64_t r0,
                             int64_t m) {
    int64_t e = r0 + m;
    bf_mm_head(w, 1, w->kt, w->kt_ok, g, m, e, g->d, q + r0 * g->ld, g->ld, k, w->p, e);
    weights_of_scores(w->p, r0, m, g->scale);
}

static void bf_head_forward(bf_ws *w, const float *q, const float *k, const float *v, float *y, const head_geom *g) {
    w->kt_ok = bf_pack_head(w, 1, k, g, w->kt, NULL);
    w->vn_ok = bf_pack_head(w, 0, v, g, w->vn, NULL);
    for (int64_t r0 = 0; r0 < g->T; r0 += BF_ROWS) {
        int64_t m = g->T - r0 < BF_ROWS ? g->T - r0 : BF_ROWS, e = r0 + m;
        bf_block_weights(w, q, k, g, r0, m);
        bf_mm_head(w, 0, w->vn, w->vn_ok, g, m, g->d, e, w->p, e, v, y + r0 * g->ld, g->ld);
    }
}

static void bf_head_backward(bf_ws *w, const float *q, const float *k, const float *v, const float *dy, float *dq,
                             float *dk, float *dv, const head_geom *g) {
    const int64_t ld = g->ld, d = g->d;
    w->kt_ok = w->kn_ok = bf_pack_head(w, 1, k, g, w->kt, w->kn); /* k^T and k, one pass over k */
    w->vt_ok = bf_pack_head(w, 1, v, g, w->vt, NULL);
    for (int64_t r0 = 0; r0 < g->T; r0 += BF_ROWS) {
        int64_t m = g->T - r0 < BF_ROWS ? g->T - r0 : BF_ROWS, e = r0 + m;
        const float *dyb = dy + r0 * ld;
        bf_block_weights(w, q, k, g, r0, m);
        bf_add_block_t(w, w->p, m, e, r0, dyb, g, dv);                               /* dv[0, e) += p^T dy_i */
        bf_mm_head(w, 1, w->vt, w->vt_ok, g, m, e, d, dyb, ld, v, w->dp, e);         /* dp = dy_i v[0, e)^T */
        score_grad(w->p, w->dp, m, e, g->scale);
        bf_mm_head(w, 0, w->kn, w->kn_ok, g, m, d, e, w->dp, e, k, dq + r0 * ld, ld); /* dq_i = ds k */
        bf_add_block_t(w, w->dp, m, e, r0, q + r0 * ld, g, dk);                      /* dk[0, e) += ds^T q_i */
    }
}

/* rope: rows are (outer, position) pairs of x [..., seq, heads, hs]; each turns its
 * heads' pairs by the position's angles. Each product is its own statement, so no
 * compiler fuses them into an FMA: the values are af_rope's (and run.c's) elsewhere. */
typedef struct { const cpu_call *c; int64_t seq, heads, half; float sign; } rope_ctx;

static void rope_rows(void *ctx, int64_t r0, int64_t r1) {
    const rope_ctx *x = ctx;
    const float *cs = x->c->in[1], *sn = x->c->in[2];
    for (int64_t r = r0; r < r1; r++) {
        const float *c = cs + (r % x->seq) * x->half, *s = sn + (r % x->seq) * x->half;
        const float *in = x->c->in[0] + r * x->heads * 2 * x->half;
        float *out = x->c->out + r * x->heads * 2 * x->half;
        for (int64_t h = 0; h < x->heads; h++, in += 2 * x->half, out += 2 * x->half)
            for (int64_t i = 0; i < x->half; i++) {
                float v0 = in[2 * i], v1 = in[2 * i + 1], si = x->sign * s[i];
                float a = v0 * c[i], b = v1 * si, e = v0 * si, f = v1 * c[i];
                out[2 * i] = a - b;
                out[2 * i + 1] = e + f;
            }
    }
}

static void cpu_k_rope(const cpu_call *c) {
    af_shape s = c->t->shape;
    int r = s.rank;
    rope_ctx x = { c, s.dim[r - 3], s.dim[r - 2], s.dim[r - 1] / 2, c->t->a.mode ? -1.0f : 1.0f };
    if (af_shape_count(s) == 0) return; /* an empty axis: nothing to turn */
    int64_t rows = af_shape_count(s) / (x.heads * 2 * x.half);
    cpu_pool_for(c->pool, rows, 1 + 16384 / (x.heads * 2 * x.half + 1), rope_rows, &x);
}

/* swiglu: silu(a) * b; its gradient da = dy b s (1 + a (1 - s)) with s = sigmoid(a), or
 * db = dy silu(a). Each rounding step is its own statement, in the order of the nodes
 * the llama builds elsewhere (silu, mul and silu's VJP), so the values are theirs. */
CPU_VECTOR_CLONES static void swiglu_loop(const float *a, const float *b, float *o, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] / (1.0f + cpu_vexpf(-a[i]));
        o[i] = s * b[i];
    }
}

CPU_VECTOR_CLONES static void swiglu_da_loop(const float *a, const float *b, const float *g, float *o, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + cpu_vexpf(-a[i])), gb = g[i] * b[i];
        float t = -s + 1.0f, u = a[i] * t, w = u + 1.0f, z = s * w;
        o[i] = gb * z;
    }
}

CPU_VECTOR_CLONES static void swiglu_db_loop(const float *a, const float *g, float *o, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] / (1.0f + cpu_vexpf(-a[i]));
        o[i] = g[i] * s;
    }
}

static void swiglu_range(void *ctx, int64_t i0, int64_t i1) {
    const cpu_call *c = ctx;
    const float *a = c->in[0] + i0, *b = c->in[1] + i0;
    float *o = c->out + i0;
    if (c->t->op == IR_OP_SWIGLU) swiglu_loop(a, b, o, i1 - i0);
    else if (c->t->a.mode == 0) swiglu_da_loop(a, b, c->in[2] + i0, o, i1 - i0);
    else swiglu_db_loop(a, c->in[2] + i0, o, i1 - i0);
}

typedef struct {
    const cpu_call *c;
    int64_t heads, groups, H; /* heads: batch x heads; H: heads per batch */
    int layout;               /* the op's mode */
    head_geom g;
} att_ctx;

/* Where head hb (batch b = hb / H, head hb % H) starts in q, k, v, dy and each gradient. */
static int64_t head_offset(const att_ctx *x, int64_t hb) {
    if (!x->layout) return hb * x->g.T * x->g.d;
    return (hb / x->H) * x->g.T * x->g.ld + (hb % x->H) * x->g.d;
}

/* Group gi: heads [heads * gi / groups, heads * (gi + 1) / groups) with scratch slot gi. */
static void att_groups(void *ctx, int64_t g0, int64_t g1) {
    const att_ctx *x = ctx;
    const cpu_call *c = x->c;
    const head_geom *g = &x->g;
    int64_t n = x->heads * g->T * g->d; /* one of the stacked gradients */
    bool grad = c->t->op == IR_OP_CAUSAL_ATTENTION_GRAD;
    /* The bf16 path's workspace, per chunk of groups; without it the chunk runs in fp32. */
    bf_ws w = { .path = (cpu_bf16_path)c->bf16 };
    float *ws = c->bf16 ? malloc(sizeof(float) * (size_t)(2 * BF_ROWS * g->T + g->T * g->d)) : NULL;
    if (ws) w.p = ws, w.dp = ws + BF_ROWS * g->T, w.acc = w.dp + BF_ROWS * g->T;
    size_t bpk = c->bf16 ? cpu_bf16_packed_size(g->T, g->d) : 0; /* [d, T] and [T, d] pad alike */
    uint16_t *packs = bpk ? aligned_alloc(64, (4 * bpk * 2 + 63) & ~(size_t)63) : NULL;
    if (packs) w.kt = packs, w.kn = packs + bpk, w.vt = packs + 2 * bpk, w.vn = packs + 3 * bpk;
    int64_t pt = cpu_sgemm_packed_b_floats(g->d, g->T); /* one [d, T] packing */
    for (int64_t gi = g0; gi < g1; gi++) {
        float *p = c->scratch + gi * slot_floats(g->T, g->d, grad), *dp = p + ATT_ROWS * g->T;
        float *fpk = p + (grad ? 2 : 1) * ATT_ROWS * g->T; /* as slot_floats lays them out */
        head_packs hp = grad ? (head_packs){ .kt = fpk, .vt = fpk + pt, .kn = fpk + 2 * pt }
                             : (head_packs){ .kt = fpk, .vn = fpk + pt };
        for (int64_t h = x->heads * gi / x->groups; h < x->heads * (gi + 1) / x->groups; h++) {
            int64_t o = head_offset(x, h);
            const float *q = c->in[0] + o, *k = c->in[1] + o, *v = c->in[2] + o;
            if (ws && grad)
                bf_head_backward(&w, q, k, v, c->in[3] + o, c->out + o, c->out + n + o, c->out + 2 * n + o, g);
            else if (ws)
                bf_head_forward(&w, q, k, v, c->out + o, g);
            else if (grad)
                head_backward(q, k, v, c->in[3] + o, c->out + o, c->out + n + o, c->out + 2 * n + o, g, p, dp, hp);
            else
                head_forward(q, k, v, c->out + o, g, p, hp);
        }
    }
    free(ws);
    free(packs);
}

void cpu_k_attention(const cpu_call *c) {
    const af_tensor *t = c->t;
    switch (t->op) {
    case IR_OP_SDPA: cpu_k_sdpa(c); return;
    case IR_OP_ROPE: cpu_k_rope(c); return;
    case IR_OP_SWIGLU: case IR_OP_SWIGLU_GRAD:
        cpu_pool_for(c->pool, af_shape_count(t->shape), 16384, swiglu_range, (void *)c);
        return;
    case IR_OP_SOFTMAX_XENT: case IR_OP_SOFTMAX_XENT_GRAD: cpu_k_xent(c); return;
    case IR_OP_CAUSAL_ATTENTION: case IR_OP_CAUSAL_ATTENTION_GRAD: break; /* below */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, ATTENTION, id)
#include "ir/ops.def"
#undef X
        return; /* another kind's op: never dispatched here */
    }
    af_shape s = t->src[0]->shape;
    int layout = t->a.mode;
    int64_t H, T;
    ir_attention_dims(t, &H, &T);
    int64_t heads = s.dim[0] * H, d = s.dim[3];
    int threads = cpu_pool_threads(c->pool);
    att_ctx x = { c, heads, threads < heads ? threads : heads, H, layout,
                  { T, d, layout ? H * d : d, t->a.scalar } };
    if (x.groups < 1) return; /* no heads */
    cpu_pool_for(c->pool, x.groups, 1, att_groups, &x);
}
