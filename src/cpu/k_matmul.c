/* Matmul kernels: baked-weight matmul and broadcast batched matmul, both on GEMM. */
#include "cpu/gemm.h"
#include "cpu/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static bool matmul_wt_bf16(const cpu_call *c, int64_t M, int64_t N, int64_t K, const float *X, int64_t ldx,
                           const float *W, int64_t ldw);

void cpu_k_matmul_w(const cpu_call *c) {
    const af_tensor *t = c->t;
    int64_t n = t->src[1]->shape.dim[0], k = t->src[1]->shape.dim[1];
    int64_t m = af_shape_count(t->src[0]->shape) / k;
    if (c->bf16 && n >= 256 && k >= 256 && m >= 32 && matmul_wt_bf16(c, m, n, k, c->in[0], k, c->in[1], k)) return;
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

/* The bf16 GEMM (gemm_bf16.c) converts and packs each whole operand on the calling
 * thread before its tiles run in parallel, so a product against a large frozen weight
 * (a 0.6B model's projections and its 151,936-row lm_head) spent most of its time in
 * that serial packing, and a transposed weight first went through a column-wise copy
 * that ran at a tenth of the plain layout's speed. The two products below cut the
 * weight into chunks that the pool's threads convert, pack and multiply side by side,
 * each chunk's GEMM on one thread; the packed copies stay a chunk's size. */
#define WT_CHUNK 2048        /* weight rows per chunk */
#define KSPLIT_CHUNK 4096    /* summed rows per chunk */
#define KSPLIT_MIN 16384     /* a K this long is split */
/* A weight of at most this many rows is multiplied whole (cpu_kgemm): its transposed
 * packing is now split over the pool and in registers, it is kept for the input
 * gradient (gemm_bf16.h's cache), and the chunked form's two fp32 transposes of x and
 * C^T cost more than that (shape a's x W^T ran at 121-153 GFLOP/s against 420-560 for
 * the untransposed products). Past it (lm_head's vocabulary rows) the chunks keep the
 * packed copies a chunk's size. */
#define WT_DIRECT_MAX 8192

typedef struct {
    const cpu_call *c;
    int64_t M, N, K, nb, chunks, ldw, lda;
    const float *W, *xt, *A;
    float *part;             /* k-split: one M x N partial sum per worker */
    int64_t workers;
    _Atomic int failed;
} wt_job;

/* Chunks [c0, c1) of C^T = W x^T: W's rows j0.. against x^T, written transposed into C. */
static void wt_chunks(void *p, int64_t c0, int64_t c1) {
    wt_job *j = p;
    float *ct = malloc(sizeof(float) * (size_t)(j->nb * j->M));
    if (!ct) { j->failed = 1; return; }
    for (int64_t ch = c0; ch < c1; ch++) {
        int64_t j0 = ch * j->nb, n = j->N - j0 < j->nb ? j->N - j0 : j->nb;
        cpu_kgemm(j->c, NULL, 0, 0, n, j->M, j->K, j->W + j0 * j->ldw, j->ldw, j->xt, j->M, 0.0f, ct, j->M, NULL);
        transpose_block(ct, j->M, j->c->out + j0, j->N, n, j->M);
        /* the whole epilogue on C's columns [j0, j0 + n), still in cache */
        if (cpu_epilogue_any(j->c->ep)) cpu_apply_epilogue(j->c->ep, j->c->out, j->N, 0, j0, j->M, n);
    }
    free(ct);
}

/* x [M, K] times a weight stored [N, K] (x W^T), taken as C^T = W x^T with the weight
 * as the row-major left operand, by chunks of W's rows. False (C partly written: the
 * caller recomputes it whole) when out of memory. */
static bool matmul_wt_bf16(const cpu_call *c, int64_t M, int64_t N, int64_t K, const float *X, int64_t ldx,
                           const float *W, int64_t ldw) {
    int64_t threads = cpu_pool_threads(c->pool), nb = (N + threads - 1) / threads;
    nb = nb < WT_CHUNK ? (nb + 31) & ~(int64_t)31 : WT_CHUNK;
    float *xt = malloc(sizeof(float) * (size_t)(K * M));
    if (!xt) return false;
    transpose_block(X, ldx, xt, M, M, K);
    wt_job j = { .c = c, .M = M, .N = N, .K = K, .nb = nb, .chunks = (N + nb - 1) / nb, .ldw = ldw, .W = W, .xt = xt };
    cpu_pool_for(c->pool, j.chunks, 1, wt_chunks, &j);
    free(xt);
    return !j.failed;
}

/* Worker w's share of C = A B over K: chunks w, w + workers, ... summed into its partial. */
static void ksplit_workers(void *p, int64_t w0, int64_t w1) {
    wt_job *j = p;
    int64_t nchunks = (j->K + KSPLIT_CHUNK - 1) / KSPLIT_CHUNK;
    for (int64_t w = w0; w < w1; w++) {
        float *part = j->part + w * j->M * j->N;
        for (int64_t ch = w, first = 1; ch < nchunks; ch += j->workers, first = 0) {
            int64_t k0 = ch * KSPLIT_CHUNK, kc = j->K - k0 < KSPLIT_CHUNK ? j->K - k0 : KSPLIT_CHUNK;
            cpu_kgemm(j->c, NULL, 0, 0, j->M, j->N, kc, j->A + k0, j->lda, j->W + k0 * j->ldw, j->ldw, first ? 0.0f : 1.0f,
                      part, j->N, NULL);
        }
    }
}

/* A [M, K] times a weight B [K, N] with a long K (lm_head's gradient for its input, K =
 * vocab): the K rows split among the workers, each summing its chunks, then the partial
 * sums added. False (nothing written) when out of memory. */
static bool matmul_ksplit_bf16(const cpu_call *c, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                               const float *B, int64_t ldb) {
    int64_t workers = cpu_pool_threads(c->pool), nchunks = (K + KSPLIT_CHUNK - 1) / KSPLIT_CHUNK;
    if (workers > nchunks) workers = nchunks;
    wt_job j = { .c = c, .M = M, .N = N, .K = K, .ldw = ldb, .lda = lda, .W = B, .A = A, .workers = workers };
    if (!(j.part = malloc(sizeof(float) * (size_t)(workers * M * N)))) return false;
    cpu_pool_for(c->pool, workers, 1, ksplit_workers, &j);
    for (int64_t i = 0; i < M; i++)
        for (int64_t n = 0; n < N; n++) {
            float sum = 0.0f;
            for (int64_t w = 0; w < workers; w++) sum += j.part[(w * M + i) * N + n];
            c->out[i * N + n] = sum;
        }
    free(j.part);
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

void cpu_k_matmul(const cpu_call *call) {
    const af_tensor *t = call->t;
    af_shape sa = t->src[0]->shape, sb = t->src[1]->shape, so = t->shape;
    int ta = t->a.ta, tb = t->a.tb;
    int64_t m = so.dim[so.rank - 2], n = so.dim[so.rank - 1];
    int64_t k = ta ? sa.dim[sa.rank - 2] : sa.dim[sa.rank - 1];
    /* The bf16 GEMM pads every side to 32 and converts whole operands per call, so a
     * product with a side of 8 or less (LoRA's rank-8 ones, a few tokens) costs more in
     * bf16 than it saves: those stay fp32. */
    int64_t rows = af_shape_count(sb) == sb.dim[sb.rank - 1] * sb.dim[sb.rank - 2] && !ta ? af_shape_count(so) / n : m;
    cpu_call narrow = *call;
    if (call->bf16 && (k <= 8 || n <= 8 || rows <= 8)) narrow.bf16 = 0;
    const cpu_call *c = &narrow;
    int64_t lda = sa.dim[sa.rank - 1], ldb = sb.dim[sb.rank - 1];
    int64_t mat_a = sa.dim[sa.rank - 1] * sa.dim[sa.rank - 2];
    int64_t mat_b = sb.dim[sb.rank - 1] * sb.dim[sb.rank - 2];
    int64_t batches = af_shape_count(so) / (m * n);
    int64_t batch_a = af_shape_count(sa) / mat_a, batch_b = af_shape_count(sb) / mat_b;
    /* A shared right operand with a full left batch is one tall GEMM (a linear layer on [B, T, D]). */
    if (batch_b == 1 && batch_a == batches && !ta) {
        if (c->bf16 && tb && n > WT_DIRECT_MAX && k >= 256 && matmul_wt_bf16(c, batches * m, n, k, c->in[0], lda, c->in[1], ldb))
            return;
        if (c->bf16 && !tb && !c->ep && k >= KSPLIT_MIN && matmul_ksplit_bf16(c, batches * m, n, k, c->in[0], lda, c->in[1], ldb))
            return;
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
