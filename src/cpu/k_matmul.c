/* Matmul kernels: baked-weight matmul and broadcast batched matmul, both on GEMM. */
#include "cpu/gemm.h"
#include "cpu/kernels.h"

#include <stdlib.h>
#include <string.h>

static bool matmul_wt_bf16(const cpu_call *c, int64_t M, int64_t N, int64_t K, const float *X, int64_t ldx,
                           const float *W, int64_t ldw);

void cpu_k_matmul_w(const cpu_call *c) {
    const af_tensor *t = c->t;
    int64_t n = t->src[1]->shape.dim[0], k = t->src[1]->shape.dim[1];
    int64_t m = af_shape_count(t->src[0]->shape) / k;
    if (c->bf16 && n >= 256 && matmul_wt_bf16(c, m, n, k, c->in[0], k, c->in[1], k)) return;
    cpu_kgemm(c, c->pool, 0, 1, m, n, k, c->in[0], k, c->in[1], k, 0.0f, c->out, n, c->ep);
}

/* Offset of batch `i` (a flat index into the output batch dims) within an operand
 * whose own batch dims broadcast to the output's. */
static int64_t batch_offset(af_shape out, af_shape opnd, int64_t i, int64_t mat) {
    int ob = out.rank - 2, pb = opnd.rank - 2;
    int64_t off = 0, stride = mat;
    for (int d = ob - 1; d >= 0; d--) {
        int64_t idx = i % out.dim[d];
        i /= out.dim[d];
        int pd = d - (ob - pb);
        if (pd < 0) continue;
        if (opnd.dim[pd] != 1) off += idx * stride;
        stride *= opnd.dim[pd];
    }
    return off;
}

/* A shared left operand against a batch of right ones (a conv's weight against its
 * im2col patches, a pool gradient's window matrix against every plane): lay the batch
 * side by side, [K, batches * N], and run one wide GEMM instead of many small ones. */
static bool left_shared(const af_tensor *t, int64_t *batches) {
    af_shape sa = t->src[0]->shape, sb = t->src[1]->shape, so = t->shape;
    int64_t mat_a = sa.dim[sa.rank - 1] * sa.dim[sa.rank - 2], mat_b = sb.dim[sb.rank - 1] * sb.dim[sb.rank - 2];
    int64_t b = af_shape_count(so) / (so.dim[so.rank - 2] * so.dim[so.rank - 1]);
    *batches = b;
    return b > 1 && af_shape_count(sa) == mat_a && af_shape_count(sb) == mat_b * b && !t->a.tb;
}

int64_t cpu_matmul_scratch(const af_tensor *t) {
    int64_t batches;
    if (t->op != IR_OP_MATMUL || !left_shared(t, &batches)) return 0;
    af_shape sa = t->src[0]->shape, sb = t->src[1]->shape, so = t->shape;
    int64_t k = t->a.ta ? sa.dim[sa.rank - 2] : sa.dim[sa.rank - 1];
    if (so.dim[so.rank - 2] * so.dim[so.rank - 1] * k >= (1 << 16)) return 0;
    return batches * (sb.dim[sb.rank - 2] + so.dim[so.rank - 2]) * so.dim[so.rank - 1];
}

static void matmul_left_shared(const cpu_call *c, int64_t batches) {
    const af_tensor *t = c->t;
    af_shape sa = t->src[0]->shape, so = t->shape;
    int64_t m = so.dim[so.rank - 2], n = so.dim[so.rank - 1];
    int64_t k = t->a.ta ? sa.dim[sa.rank - 2] : sa.dim[sa.rank - 1], wide = batches * n;
    float *bt = c->scratch, *ct = c->scratch + k * wide;
    for (int64_t i = 0; i < batches; i++)
        for (int64_t r = 0; r < k; r++) memcpy(bt + r * wide + i * n, c->in[1] + (i * k + r) * n, (size_t)n * sizeof(float));
    cpu_kgemm(c, c->pool, t->a.ta, 0, m, wide, k, c->in[0], sa.dim[sa.rank - 1], bt, wide, 0.0f, ct, wide, NULL);
    for (int64_t i = 0; i < batches; i++)
        for (int64_t r = 0; r < m; r++) memcpy(c->out + (i * m + r) * n, ct + r * wide + i * n, (size_t)n * sizeof(float));
}

typedef struct {
    const cpu_call *c;
    af_shape sa, sb, so;
    int64_t m, n, k, lda, ldb, mat_a, mat_b;
} batch_ctx;

static void batch_range(void *p, int64_t b0, int64_t b1) {
    const batch_ctx *x = p;
    const af_tensor *t = x->c->t;
    for (int64_t i = b0; i < b1; i++) {
        const float *a = x->c->in[0] + batch_offset(x->so, x->sa, i, x->mat_a);
        const float *b = x->c->in[1] + batch_offset(x->so, x->sb, i, x->mat_b);
        /* Each worker runs whole products on one thread: the pool is not re-entrant. */
        cpu_kgemm(x->c, NULL, t->a.ta, t->a.tb, x->m, x->n, x->k, a, x->lda, b, x->ldb, 0.0f, x->c->out + i * x->m * x->n, x->n, NULL);
    }
}

/* dst[c, r] = src[r, c] for a rows x cols block (lds, ldd: row strides), in tiles so
 * both sides stay in cache. */
static void transpose_block(const float *src, int64_t lds, float *dst, int64_t ldd, int64_t rows, int64_t cols) {
    enum { TILE = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE)
            for (int64_t r = r0; r < rows && r < r0 + TILE; r++)
                for (int64_t c = c0; c < cols && c < c0 + TILE; c++) dst[c * ldd + r] = src[r * lds + c];
}

/* x [M, K] times a weight stored [N, K] (a linear layer's x W^T) on the bf16 path: its
 * transposed-B packing re-reads every frozen weight column-wise each step and ran at a
 * tenth of the plain layout's speed (a 0.6B model's projections and lm_head), so the
 * product is taken the other way round, C^T = W x^T, with the weight as the row-major
 * left operand, over chunks of W's rows so the transposed result stays small. False
 * (nothing written) when out of memory. */
#define WT_CHUNK 2048
static bool matmul_wt_bf16(const cpu_call *c, int64_t M, int64_t N, int64_t K, const float *X, int64_t ldx,
                           const float *W, int64_t ldw) {
    int64_t nb = N < WT_CHUNK ? N : WT_CHUNK;
    float *xt = malloc(sizeof(float) * (size_t)(K * M)), *ct = malloc(sizeof(float) * (size_t)(nb * M));
    if (!xt || !ct) { free(xt); free(ct); return false; }
    transpose_block(X, ldx, xt, M, M, K);
    for (int64_t j0 = 0; j0 < N; j0 += nb) {
        int64_t n = N - j0 < nb ? N - j0 : nb;
        cpu_epilogue ep = { 0 };
        if (c->ep) ep = (cpu_epilogue){ c->ep->bias ? c->ep->bias + j0 : NULL, true, c->ep->relu };
        cpu_kgemm(c, c->pool, 0, 0, n, M, K, W + j0 * ldw, ldw, xt, M, 0.0f, ct, M, c->ep ? &ep : NULL);
        transpose_block(ct, M, c->out + j0, N, n, M);
    }
    free(xt);
    free(ct);
    return true;
}

bool cpu_matmul_is_one_gemm(const af_tensor *t) {
    af_shape sa = t->src[0]->shape, sb = t->src[1]->shape, so = t->shape;
    int64_t m = so.dim[so.rank - 2], n = so.dim[so.rank - 1];
    int64_t batches = af_shape_count(so) / (m * n);
    int64_t batch_a = af_shape_count(sa) / (sa.dim[sa.rank - 1] * sa.dim[sa.rank - 2]);
    int64_t batch_b = af_shape_count(sb) / (sb.dim[sb.rank - 1] * sb.dim[sb.rank - 2]);
    return (batch_b == 1 && batch_a == batches && !t->a.ta) || batches == 1; /* the two paths below */
}

void cpu_k_matmul(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape sa = t->src[0]->shape, sb = t->src[1]->shape, so = t->shape;
    int ta = t->a.ta, tb = t->a.tb;
    int64_t m = so.dim[so.rank - 2], n = so.dim[so.rank - 1];
    int64_t k = ta ? sa.dim[sa.rank - 2] : sa.dim[sa.rank - 1];
    int64_t lda = sa.dim[sa.rank - 1], ldb = sb.dim[sb.rank - 1];
    int64_t mat_a = sa.dim[sa.rank - 1] * sa.dim[sa.rank - 2];
    int64_t mat_b = sb.dim[sb.rank - 1] * sb.dim[sb.rank - 2];
    int64_t batches = af_shape_count(so) / (m * n);
    int64_t batch_a = af_shape_count(sa) / mat_a, batch_b = af_shape_count(sb) / mat_b;
    /* A shared right operand with a full left batch is one tall GEMM (a linear layer on [B, T, D]). */
    if (batch_b == 1 && batch_a == batches && !ta) {
        if (c->bf16 && tb && n >= 256 && matmul_wt_bf16(c, batches * m, n, k, c->in[0], lda, c->in[1], ldb)) return;
        cpu_kgemm(c, c->pool, 0, tb, batches * m, n, k, c->in[0], lda, c->in[1], ldb, 0.0f, c->out, n, c->ep);
        return;
    }
    /* Tiny products against a shared left operand: one wide GEMM beats thousands of calls. */
    int64_t shared_batches;
    if (c->scratch && cpu_matmul_scratch(t) > 0 && left_shared(t, &shared_batches)) { /* scratch only when tiny */
        matmul_left_shared(c, shared_batches);
        return;
    }
    /* Otherwise whole products in parallel, each on one thread. */
    batch_ctx x = { c, sa, sb, so, m, n, k, lda, ldb, mat_a, mat_b };
    if (batches == 1) {
        cpu_kgemm(c, c->pool, ta, tb, m, n, k, c->in[0], lda, c->in[1], ldb, 0.0f, c->out, n, c->ep);
        return;
    }
    cpu_pool_for(c->pool, batches, 1, batch_range, &x);
}
