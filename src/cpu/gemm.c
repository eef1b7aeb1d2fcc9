/* Single-precision GEMM: BLAS when available, else a portable cache-blocked kernel
 * (GotoBLAS layout: pack a KC x NC panel of op(B) and an MC x KC block of op(A) into
 * contiguous slivers, then run an MR x NR register-tile micro-kernel over them). */
#if defined(AF_HAVE_BLAS)
#if defined(AF_HAVE_ACCELERATE)
#include <Accelerate/Accelerate.h>
#else
#include <cblas.h> /* first: OpenBLAS's config header sets feature macros */
#endif
#endif

#include "cpu/gemm.h"

#include <stdatomic.h>

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
void openblas_set_num_threads(int num_threads); /* not every cblas.h declares it */
#endif

/* Blocking: an A block (MC x KC, ~96 KiB) stays in L2, a B sliver (KC x NR) in L1.
 * MC and NC are multiples of every MR and NR below. */
enum { KC = 256, MC = 96, NC = 2048 };
/* Below this many multiply-adds, waking the pool costs more than it saves. */
#define PARALLEL_MIN_MACS (1 << 20)

typedef void (*ukernel_fn)(int64_t kc, const float *a, const float *b, float *ab);
typedef struct { int mr, nr; ukernel_fn fn; } ukernel;

/* The micro-kernel: ab[6][NR] = sum_k a[k][0..6) x b[k][0..NR). The six rows are
 * spelled out (one accumulator array each, constant trip count NR) so the compiler
 * unrolls and vectorizes over j and keeps the 6*NR sums in registers; a loop over rows
 * invites -O3's loop interchange, which moves the sums to memory. */
#define MR6 6
#define MADD_PLAIN(a, b, c) ((c) + (a) * (b))
#define MADD_FMA(a, b, c) fmaf((a), (b), (c))
#define DEFINE_UKERNEL(NAME, NR, MADD, ATTR)                                             \
    ATTR static void NAME(int64_t kc, const float *restrict a, const float *restrict b,  \
                          float *restrict ab) {                                         \
        float c0[NR], c1[NR], c2[NR], c3[NR], c4[NR], c5[NR];                           \
        for (int j = 0; j < NR; j++) c0[j] = c1[j] = c2[j] = c3[j] = c4[j] = c5[j] = 0; \
        for (int64_t k = 0; k < kc; k++, a += MR6, b += NR) {                           \
            const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5]; \
            for (int j = 0; j < NR; j++) {                                              \
                const float bj = b[j];                                                  \
                c0[j] = MADD(a0, bj, c0[j]);                                            \
                c1[j] = MADD(a1, bj, c1[j]);                                            \
                c2[j] = MADD(a2, bj, c2[j]);                                            \
                c3[j] = MADD(a3, bj, c3[j]);                                            \
                c4[j] = MADD(a4, bj, c4[j]);                                            \
                c5[j] = MADD(a5, bj, c5[j]);                                            \
            }                                                                           \
        }                                                                               \
        memcpy(ab, c0, sizeof c0);                                                      \
        memcpy(ab + NR, c1, sizeof c1);                                                 \
        memcpy(ab + 2 * NR, c2, sizeof c2);                                             \
        memcpy(ab + 3 * NR, c3, sizeof c3);                                             \
        memcpy(ab + 4 * NR, c4, sizeof c4);                                             \
        memcpy(ab + 5 * NR, c5, sizeof c5);                                             \
    }

/* 6x16 with FMA: 12 AVX2 (or 24 NEON) accumulators, enough independent FMAs to cover
 * their latency. Baseline x86-64 builds compile it separately for AVX2+FMA and pick it
 * at run time, since most x86 CPUs in use have them. */
#if (defined(__AVX2__) && defined(__FMA__)) || defined(__aarch64__)
#define AF_GEMM_WIDE 1
DEFINE_UKERNEL(ukernel_6x16, 16, MADD_FMA, )
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define AF_GEMM_WIDE 2
DEFINE_UKERNEL(ukernel_6x16, 16, MADD_FMA, __attribute__((target("avx2,fma"))))
#endif
#if !defined(AF_GEMM_WIDE) || AF_GEMM_WIDE == 2
/* 6x8 keeps 12 accumulators live, within the 16 vector registers of baseline x86-64. */
DEFINE_UKERNEL(ukernel_6x8, 8, MADD_PLAIN, )
#endif

static ukernel pick_ukernel(void) {
#if defined(AF_GEMM_WIDE) && AF_GEMM_WIDE == 1
    return (ukernel){6, 16, ukernel_6x16};
#else
#if defined(AF_GEMM_WIDE)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (ukernel){6, 16, ukernel_6x16};
#endif
    return (ukernel){6, 8, ukernel_6x8};
#endif
}

/* Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) into MR-row slivers, k-major,
 * zero-padding the last sliver. */
static void pack_a(int ta, const float *A, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                   int64_t kc, int mr, float *restrict dst) {
    for (int64_t is = 0; is < mc; is += mr, dst += (int64_t)mr * kc) {
        int64_t rows = mc - is < mr ? mc - is : mr;
        for (int64_t i = 0; i < mr; i++) {
            if (i >= rows) {
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = 0.0f;
            } else if (!ta) {
                const float *src = A + (i0 + is + i) * lda + p0;
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = src[k];
            } else {
                const float *src = A + p0 * lda + i0 + is + i;
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = src[k * lda];
            }
        }
    }
}

/* Packs rows [p0, p0+kc) x cols [j0, j0+nc) of op(B) into NR-column slivers, k-major. */
static void pack_b(int tb, const float *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kc,
                   int64_t nc, int nr, float *restrict dst) {
    for (int64_t js = 0; js < nc; js += nr, dst += (int64_t)nr * kc) {
        int64_t cols = nc - js < nr ? nc - js : nr;
        if (!tb) {
            for (int64_t k = 0; k < kc; k++) {
                const float *src = B + (p0 + k) * ldb + j0 + js;
                int64_t j = 0;
                for (; j < cols; j++) dst[k * nr + j] = src[j];
                for (; j < nr; j++) dst[k * nr + j] = 0.0f;
            }
        } else {
            for (int64_t j = 0; j < nr; j++) {
                const float *src = B + (j0 + js + j) * ldb + p0;
                for (int64_t k = 0; k < kc; k++) dst[k * nr + j] = j < cols ? src[k] : 0.0f;
            }
        }
    }
}

/* C[m x n] = alpha * ab + beta * C; beta == 0 overwrites (C may hold NaN). */
static void store_tile(float *C, int64_t ldc, int64_t m, int64_t n, int nr, const float *ab,
                       float alpha, float beta) {
    for (int64_t i = 0; i < m; i++) {
        float *c = C + i * ldc;
        const float *t = ab + i * nr;
        if (beta == 0.0f)
            for (int64_t j = 0; j < n; j++) c[j] = alpha * t[j];
        else if (beta == 1.0f)
            for (int64_t j = 0; j < n; j++) c[j] += alpha * t[j];
        else
            for (int64_t j = 0; j < n; j++) c[j] = alpha * t[j] + beta * c[j];
    }
}

static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof *c);
        else if (beta != 1.0f)
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
}

typedef struct {
    ukernel uk;
    int ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
    int split_rows; /* parallel split: 1 over MR-row groups, 0 over NR-column groups */
} gemm_job;

static float *alloc_floats(int64_t n) {
    size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* The serial blocked algorithm on the sub-matrix C[i0.., j0..] of size m x n. */
static int gemm_block(const gemm_job *g, int64_t i0, int64_t m, int64_t j0, int64_t n) {
    const int mr = g->uk.mr, nr = g->uk.nr;
    int64_t kc_max = g->K < KC ? g->K : KC;
    int64_t nc_max = n < NC ? (n + nr - 1) / nr * nr : NC;
    int64_t mc_max = m < MC ? (m + mr - 1) / mr * mr : MC;
    float *ap = alloc_floats(mc_max * kc_max), *bp = alloc_floats(nc_max * kc_max);
    if (!ap || !bp) {
        free(ap);
        free(bp);
        return -1;
    }
    float ab[16 * 16];
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = n - jc < NC ? n - jc : NC;
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            int64_t kc = g->K - pc < KC ? g->K - pc : KC;
            float beta = pc == 0 ? g->beta : 1.0f; /* later K blocks accumulate */
            pack_b(g->tb, g->B, g->ldb, pc, j0 + jc, kc, nc, nr, bp);
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                pack_a(g->ta, g->A, g->lda, i0 + ic, pc, mc, kc, mr, ap);
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        g->uk.fn(kc, ap + ir * kc, bp + jr * kc, ab);
                        store_tile(g->C + (i0 + ic + ir) * g->ldc + j0 + jc + jr, g->ldc,
                                   mc - ir < mr ? mc - ir : mr, nc - jr < nr ? nc - jr : nr,
                                   nr, ab, g->alpha, beta);
                    }
                }
            }
        }
    }
    free(ap);
    free(bp);
    return 0;
}

/* Triple loop for the sub-matrix, used only when packing buffers cannot be allocated. */
static void gemm_naive(const gemm_job *g, int64_t i0, int64_t m, int64_t j0, int64_t n) {
    for (int64_t i = i0; i < i0 + m; i++)
        for (int64_t j = j0; j < j0 + n; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < g->K; k++)
                s += (g->ta ? g->A[k * g->lda + i] : g->A[i * g->lda + k]) *
                     (g->tb ? g->B[j * g->ldb + k] : g->B[k * g->ldb + j]);
            float *c = g->C + i * g->ldc + j;
            *c = g->beta == 0.0f ? g->alpha * s : g->alpha * s + g->beta * *c;
        }
}

static void gemm_task(void *ctx, int64_t b, int64_t e) {
    const gemm_job *g = ctx;
    int64_t i0 = 0, m = g->M, j0 = 0, n = g->N;
    if (g->split_rows) {
        i0 = b * g->uk.mr;
        m = (e * g->uk.mr < g->M ? e * g->uk.mr : g->M) - i0;
    } else {
        j0 = b * g->uk.nr;
        n = (e * g->uk.nr < g->N ? e * g->uk.nr : g->N) - j0;
    }
    if (gemm_block(g, i0, m, j0, n) != 0) gemm_naive(g, i0, m, j0, n); /* out of memory */
}

void cpu_sgemm_portable(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) { /* BLAS semantics: A and B are not read */
        scale_c(M, N, beta, C, ldc);
        return;
    }
    gemm_job g = {pick_ukernel(), ta != 0, tb != 0, M, N, K, alpha, beta, A, B,
                  lda, ldb, ldc, C, 1};
    int64_t mgroups = (M + g.uk.mr - 1) / g.uk.mr, ngroups = (N + g.uk.nr - 1) / g.uk.nr;
    int threads = cpu_pool_threads(p);
    if (threads > 1 && (double)M * (double)N * (double)K >= PARALLEL_MIN_MACS) {
        /* Each task packs its own copy of the operand it shares, so split the larger
         * dimension: the duplicated packing is then the smaller operand. */
        g.split_rows = M >= N;
        int64_t groups = g.split_rows ? mgroups : ngroups;
        cpu_pool_for(p, groups, 1, gemm_task, &g);
    } else {
        gemm_task(&g, 0, mgroups);
    }
}

#if defined(AF_HAVE_BLAS)
/* OpenBLAS runs on one thread and large products are split over our own pool instead:
 * OpenBLAS's idle workers spin in sched_yield for a long while after every threaded
 * call, and on a small machine they steal the cores our pool's threads need (a third
 * of a CNN training step went to that). Accelerate manages its own threads. */
#define BLAS_SPLIT_MIN_MACS ((int64_t)1 << 21)

static void blas_call(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

#if !defined(AF_HAVE_ACCELERATE)
typedef struct {
    int ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc, parts;
    float alpha, beta;
    const float *A, *B;
    float *C;
} blas_split;

/* Part i of C: a band of rows (with op(A)'s matching rows) or of columns (with op(B)'s). */
static void blas_part(void *p, int64_t i0, int64_t i1) {
    const blas_split *s = p;
    for (int64_t i = i0; i < i1; i++) {
        int64_t extent = s->by_rows ? s->M : s->N, a = extent * i / s->parts, b = extent * (i + 1) / s->parts;
        if (a == b) continue;
        if (s->by_rows)
            blas_call(s->ta, s->tb, b - a, s->N, s->K, s->alpha, s->A + (s->ta ? a : a * s->lda), s->lda, s->B, s->ldb,
                      s->beta, s->C + a * s->ldc, s->ldc);
        else
            blas_call(s->ta, s->tb, s->M, b - a, s->K, s->alpha, s->A, s->lda, s->B + (s->tb ? a * s->ldb : a), s->ldb,
                      s->beta, s->C + a, s->ldc);
    }
}

static void blas_gemm(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int threads = cpu_pool_threads(p);
    if (threads < 2 || M * N * K < BLAS_SPLIT_MIN_MACS) {
        blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    blas_split s = { ta, tb, M >= N, M, N, K, lda, ldb, ldc, threads, alpha, beta, A, B, C };
    cpu_pool_for(p, threads, 1, blas_part, &s);
}
#endif /* !AF_HAVE_ACCELERATE */
#endif

void cpu_sgemm(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc) {
#if defined(AF_HAVE_BLAS)
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    /* cblas takes int sizes and rejects leading dimensions shorter than a row. */
    int64_t arow = ta ? M : K, brow = tb ? K : N;
    if (M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
        ldc <= INT_MAX && lda >= arow && ldb >= brow && ldc >= N) {
#if defined(AF_HAVE_ACCELERATE)
        blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
        blas_gemm(p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
        return;
    }
#endif
    cpu_sgemm_portable(p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cpu_blas_set_threads(int n) {
#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
    (void)n; /* OpenBLAS stays on one thread: cpu_sgemm splits large products over the pool */
    static _Atomic int once = 0;
    if (!atomic_exchange(&once, 1)) openblas_set_num_threads(1);
#else
    (void)n;
#endif
}

int cpu_have_blas(void) {
#if defined(AF_HAVE_BLAS)
    return 1;
#else
    return 0;
#endif
}
