/* Single-precision GEMM driver (GotoBLAS layout): pack a KC x NC panel of op(B) (sized
 * to the L2) and an MC x KC block of op(A) into contiguous slivers, then run the MR x NR
 * micro-kernel the CPU's features chose (gemm_ukernel.h) over them, each MR-row sliver
 * of op(A) held in L1 while the kernel sweeps the panel; the epilogue (bias, ReLU) is
 * applied to each tile while it is still in L1. BLAS is reached only through the policy
 * in gemm_blas.c. */
#include "cpu/gemm.h"
#include "cpu/cpu_features.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The widest N block (a multiple of every NR); panel_cols picks the block in use. */
enum { NC_MAX = 2048, MAX_TILE = 12 * 32 };
/* The shared operand of a parallel product is packed once when it is at least this
 * large (smaller: a second pool dispatch costs more) and at most this large (1 MiB):
 * a larger panel is mostly read from the other core's cache, and each thread packing
 * its own copy ran the llama steps 2-3% faster (Sapphire Rapids, 2 threads, paired
 * runs: llama b 88.5 -> 86.3 ms median of 10, llama a and Stories110M likewise; the
 * MLP's 100k-float panels stay shared). */
#define SHARED_PACK_MIN 8192.0
#define SHARED_PACK_MAX (256.0 * 1024)
/* Below this many multiply-adds, waking the pool costs more than it saves. */
#define PARALLEL_MIN_MACS (1 << 20)

static gemm_ukernel pick_ukernel(void) {
    gemm_ukernel k;
    if (gemm_ukernel_avx512(&k) || gemm_ukernel_avx2(&k) || gemm_ukernel_neon(&k)) return k;
    gemm_ukernel_portable(&k);
    return k;
}

const gemm_ukernel *cpu_gemm_ukernel(void) {
    static gemm_ukernel k;
    static atomic_int done;
    if (!atomic_load(&done)) { /* racing first calls compute the same value */
        k = pick_ukernel();
        atomic_store(&done, 1);
    }
    return &k;
}

/* Slivers of w from rows stored k-major: row k (src + k * ld) holds `extent` values, and
 * sliver s takes values [s w, s w + w) of every row, at dst + s w kc + k w (zero-padded
 * past extent). SCATTER_ROWS rows at a time, sliver by sliver: the source is still read
 * as a few streams front to back (sliver by sliver over all kc rows it was read as kc
 * short pieces ld apart, which the hardware prefetchers do not follow: 9-13% slower
 * products), and each sliver gets a contiguous run of SCATTER_ROWS pieces. Row by row,
 * every piece went to another sliver, kc w floats apart: a multiple of 4 KiB at kc 256,
 * so all of them fell in one L1 set. bench_gemm_cold, the weight gradients dy^T x (both
 * operands packed here), operands cold, one thread, Sapphire Rapids: 143-147 -> 150-161
 * and 139-140 -> 149-164 GFLOP/s; in llama b's step this pass went from 6.1% to 5.1% of
 * the CPU samples. */
enum { SCATTER_ROWS = 16 };
static void scatter_rows(const float *restrict src, int64_t ld, int64_t kc, int64_t extent, int w,
                         float *restrict dst) {
    int64_t full = extent / w, rest = extent - full * w;
    for (int64_t k0 = 0; k0 < kc; k0 += SCATTER_ROWS) {
        int64_t rows = kc - k0 < SCATTER_ROWS ? kc - k0 : SCATTER_ROWS;
        const float *r0 = src + k0 * ld;
        float *d0 = dst + k0 * w;
#define SCATTER_FULL(W)                                                                            \
        for (int64_t s = 0; s < full; s++)                                                         \
            for (int64_t k = 0; k < rows; k++)                                                     \
                memcpy(d0 + s * (W) * kc + k * (W), r0 + k * ld + s * (W), (W) * sizeof(float));   \
        break;
        switch (w) { /* constant widths: the copies become a few vector moves */
        case 6: SCATTER_FULL(6)
        case 8: SCATTER_FULL(8)
        case 12: SCATTER_FULL(12)
        case 16: SCATTER_FULL(16)
        case 32: SCATTER_FULL(32)
        default: SCATTER_FULL(w)
        }
#undef SCATTER_FULL
        for (int64_t k = 0; rest && k < rows; k++) {
            float *t = d0 + full * w * kc + k * w;
            memcpy(t, r0 + k * ld + full * w, (size_t)rest * sizeof(float));
            memset(t + rest, 0, (size_t)(w - rest) * sizeof(float));
        }
    }
}

/* Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) into MR-row slivers, k-major,
 * zero-padding the last sliver. */
static void pack_a(const gemm_ukernel *uk, int ta, const float *A, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                   int64_t kc, float *restrict dst) {
    const int mr = uk->mr;
    if (ta) { /* op(A)'s columns are A's rows: read them whole */
        scatter_rows(A + p0 * lda + i0, lda, kc, mc, mr, dst);
        return;
    }
    for (int64_t is = 0; is < mc; is += mr, dst += (int64_t)mr * kc) {
        int64_t rows = mc - is < mr ? mc - is : mr;
        if (uk->pack_t) {
            uk->pack_t(A + (i0 + is) * lda + p0, lda, (int)rows, kc, mr, dst);
            continue;
        }
        for (int64_t i = 0; i < mr; i++) {
            if (i >= rows) {
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = 0.0f;
            } else {
                const float *src = A + (i0 + is + i) * lda + p0;
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = src[k];
            }
        }
    }
}

/* Packs rows [p0, p0+kc) x cols [j0, j0+nc) of op(B) into NR-column slivers, k-major. */
static void pack_b(const gemm_ukernel *uk, int tb, const float *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kc,
                   int64_t nc, float *restrict dst) {
    const int nr = uk->nr;
    if (!tb) { /* B's rows are op(B)'s: read them whole */
        scatter_rows(B + p0 * ldb + j0, ldb, kc, nc, nr, dst);
        return;
    }
    for (int64_t js = 0; js < nc; js += nr, dst += (int64_t)nr * kc) {
        int64_t cols = nc - js < nr ? nc - js : nr;
        if (uk->pack_t) {
            uk->pack_t(B + (j0 + js) * ldb + p0, ldb, (int)cols, kc, nr, dst);
        } else {
            for (int64_t j = 0; j < nr; j++) {
                const float *src = B + (j0 + js + j) * ldb + p0;
                if (j < cols)
                    for (int64_t k = 0; k < kc; k++) dst[k * nr + j] = src[k];
                else
                    for (int64_t k = 0; k < kc; k++) dst[k * nr + j] = 0.0f;
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

/* Static, called through cpu_apply_epilogue: clones on an external function do not link
 * under clang 14 (cpu_features.h). */
CPU_VECTOR_CLONES static void apply_epilogue(const cpu_epilogue *ep, float *C, int64_t ldc, int64_t i0, int64_t j0,
                                             int64_t m, int64_t n) {
    for (int64_t i = 0; i < m; i++) {
        float *c = C + (i0 + i) * ldc + j0;
        if (ep->bias && ep->bias_rows) {
            const float b = ep->bias[i0 + i];
            for (int64_t j = 0; j < n; j++) c[j] += b;
        } else if (ep->bias) {
            const float *b = ep->bias + j0;
            for (int64_t j = 0; j < n; j++) c[j] += b[j];
        }
        if (ep->add) {
            const float *a = ep->add + (i0 + i) * ep->ld_add + j0;
            for (int64_t j = 0; j < n; j++) c[j] += a[j];
        }
        if (ep->relu)
            for (int64_t j = 0; j < n; j++) c[j] = c[j] > 0.0f ? c[j] : 0.0f;
    }
    if (ep->absmax) {
        uint32_t mx = 0;
        for (int64_t i = 0; i < m; i++) {
            const float *c = C + (i0 + i) * ldc + j0;
            for (int64_t j = 0; j < n; j++) {
                uint32_t u;
                memcpy(&u, &c[j], sizeof u);
                u &= 0x7fffffffu;
                mx = u > mx ? u : mx;
            }
        }
        cpu_absmax_merge(ep->absmax, mx);
    }
}

void cpu_apply_epilogue(const cpu_epilogue *ep, float *C, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n) {
    apply_epilogue(ep, C, ldc, i0, j0, m, n);
}

typedef struct { const cpu_epilogue *ep; float *C; int64_t ldc, N; } epilogue_job;

static void epilogue_rows(void *ctx, int64_t i0, int64_t i1) {
    const epilogue_job *j = ctx;
    cpu_apply_epilogue(j->ep, j->C, j->ldc, i0, 0, i1 - i0, j->N);
}

void cpu_apply_epilogue_rows(cpu_pool *p, const cpu_epilogue *ep, float *C, int64_t ldc, int64_t M, int64_t N) {
    if (!cpu_epilogue_any(ep) || M <= 0 || N <= 0) return;
    epilogue_job j = { ep, C, ldc, N };
    cpu_pool_for(p, M, 1 + 16384 / N, epilogue_rows, &j);
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
    gemm_ukernel uk;
    int ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    int64_t lda, ldb, ldc;
    float *C;
    const cpu_epilogue *ep;
    int split_rows; /* parallel split: 1 over MR-row groups, 0 over NR-column groups */
    int64_t nc;     /* the N block (n_block) */
    /* The operand every task shares (op(B) when splitting rows, op(A) when splitting
     * columns), packed once for all K blocks, or NULL: each task packs its own copy.
     * K block pc starts at shared + pc * shared_pad (pad: the shared extent rounded up to
     * the register tile). */
    const float *shared;
    int64_t shared_pad;
} gemm_job;

/* Packing buffers live per thread and only grow: allocating them per call cost more
 * than the product itself for small GEMMs (buffers past malloc's mmap threshold are
 * mapped, faulted in and unmapped every time). A key destructor frees a thread's
 * buffer when the thread (a pool worker) exits. */
typedef struct { float *p; size_t floats; } pack_buf;
/* a task's own blocks; the caller's shared operand; a deep product's second half */
enum { PACK_PRIVATE, PACK_SHARED, PACK_PARTIAL, PACK_KEYS };
static pthread_key_t pack_key[PACK_KEYS];
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;

static void pack_buf_free(void *v) {
    pack_buf *b = v;
    free(b->p);
    free(b);
}
static void pack_key_make(void) {
    for (int k = 0; k < PACK_KEYS; k++)
        if (pthread_key_create(&pack_key[k], pack_buf_free) != 0) pack_key[k] = 0;
}

static float *pack_space_of(int which, size_t floats) {
    pthread_once(&pack_once, pack_key_make);
    pack_buf *b = pthread_getspecific(pack_key[which]);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(pack_key[which], b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->floats < floats) {
        size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
        float *p = aligned_alloc(64, bytes);
        if (!p) return NULL;
        free(b->p);
        b->p = p;
        b->floats = floats;
    }
    return b->p;
}

static float *pack_space(size_t floats) { return pack_space_of(PACK_PRIVATE, floats); }

/* The serial blocked algorithm on the sub-matrix C[i0.., j0..] of size m x n. The
 * innermost loop runs one A sliver (MR x kc, 12 KiB at kc 256) along the B panel's
 * slivers: the A sliver stays in L1 and the B slivers stream from L2. The other way
 * round, the B sliver (kc x 32 floats, 32 KiB) had to stay in a 48 KiB L1 beside the A
 * stream and was partly evicted: the llama products, one thread, operands cold,
 * Sapphire Rapids, 131-142 -> 142-153 GFLOP/s. The AVX2 kernel's B sliver (kc x 16,
 * 24 KiB) does fit a 32 KiB L1, and it takes that order (gemm_ukernel.b_in_l1). */
static int gemm_block(const gemm_job *g, int64_t i0, int64_t m, int64_t j0, int64_t n) {
    const int mr = g->uk.mr, nr = g->uk.nr;
    const int64_t KC = g->uk.kc, MC = g->uk.mc;
    int64_t kc_max = g->K < KC ? g->K : KC;
    const int64_t NB = g->nc;
    int64_t nc_max = n < NB ? (n + nr - 1) / nr * nr : NB;
    int64_t mc_max = m < MC ? (m + mr - 1) / mr * mr : MC;
    /* a-block first, then the b-panel at a 64-byte boundary */
    int64_t a_floats = (mc_max * kc_max + 15) / 16 * 16;
    float *ap = pack_space((size_t)(a_floats + nc_max * kc_max));
    if (!ap) return -1;
    float *bp = ap + a_floats;
    float ab[MAX_TILE];
    const bool unit_alpha = g->alpha == 1.0f;
    const float *add = g->ep ? g->ep->add : NULL;
    for (int64_t jc = 0; jc < n; jc += NB) {
        int64_t nc = n - jc < NB ? n - jc : NB;
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            int64_t kc = g->K - pc < KC ? g->K - pc : KC;
            float beta = pc == 0 ? g->beta : 1.0f; /* later K blocks accumulate */
            bool last = pc + kc >= g->K;
            const float *bpk = bp, *apk = ap;
            if (g->shared && g->split_rows) bpk = g->shared + pc * g->shared_pad + (j0 + jc) * kc;
            else pack_b(&g->uk, g->tb, g->B, g->ldb, pc, j0 + jc, kc, nc, bp);
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                if (g->shared && !g->split_rows) apk = g->shared + pc * g->shared_pad + (i0 + ic) * kc;
                else pack_a(&g->uk, g->ta, g->A, g->lda, i0 + ic, pc, mc, kc, ap);
                const bool b_l1 = g->uk.b_in_l1;
                for (int64_t o1 = 0; o1 < (b_l1 ? nc : mc); o1 += (b_l1 ? nr : mr)) {
                    for (int64_t o2 = 0; o2 < (b_l1 ? mc : nc); o2 += (b_l1 ? mr : nr)) {
                        int64_t ir = b_l1 ? o2 : o1, jr = b_l1 ? o1 : o2;
                        int64_t tm = mc - ir < mr ? mc - ir : mr;
                        int64_t tn = nc - jr < nr ? nc - jr : nr;
                        int64_t ci = i0 + ic + ir, cj = j0 + jc + jr;
                        float *c = g->C + ci * g->ldc + cj;
                        { /* The next tile's C rows into L2 while this one is computed: a
                           * tile's first store (or load, in later K blocks) waits on memory
                           * otherwise, and C is usually cold (the step wrote it long ago, or
                           * never). 512x768x768 with A, B, C cold, Sapphire Rapids, one
                           * thread: 127 -> 147 GFLOP/s (a helper function computing the same
                           * addresses measured 134, so this stays inline). */
                            int64_t ni, nj;
                            if (b_l1) ni = ir + mr < mc ? ci + mr : i0 + ic, nj = ir + mr < mc ? cj : cj + nr;
                            else ni = jr + nr < nc ? ci : ci + mr, nj = jr + nr < nc ? cj + nr : j0 + jc;
                            int64_t rows = i0 + m - ni < mr ? i0 + m - ni : mr;
                            const float *a = last ? add : NULL; /* and the matrix its epilogue adds */
                            if (b_l1 ? ir + mr < mc || jr + nr < nc : ni < i0 + ic + mc)
                                for (int64_t r = 0; r < rows; r++) {
                                    const float *q = g->C + (ni + r) * g->ldc + nj;
                                    __builtin_prefetch(q, 1, 2);
                                    __builtin_prefetch(q + nr - 1, 1, 2);
                                    if (a) {
                                        __builtin_prefetch(a + (ni + r) * g->ep->ld_add + nj, 0, 2);
                                        __builtin_prefetch(a + (ni + r) * g->ep->ld_add + nj + nr - 1, 0, 2);
                                    }
                                }
                        }
                        if (unit_alpha && (beta == 0.0f || beta == 1.0f)) {
                            g->uk.fn(kc, apk + ir * kc, bpk + jr * kc, c, g->ldc, beta != 0.0f, (int)tm, (int)tn);
                        } else { /* scaling: through a tile buffer */
                            g->uk.fn(kc, apk + ir * kc, bpk + jr * kc, ab, nr, 0, mr, nr);
                            store_tile(c, g->ldc, tm, tn, nr, ab, g->alpha, beta);
                        }
                        if (last && g->ep) cpu_apply_epilogue(g->ep, g->C, g->ldc, ci, cj, tm, tn);
                    }
                }
            }
        }
    }
    return 0;
}

/* The K block for a product of depth K: equal blocks of at most the kernel's kc (K = 288:
 * 144 + 144, not 256 + a 32-deep block that loads and stores every C tile for a few
 * multiply-adds), one block up to a quarter past kc. */
static int k_block(const gemm_ukernel *uk, int64_t K) {
    if (K > uk->kc + uk->kc / 4) {
        int64_t blocks = (K + uk->kc - 1) / uk->kc;
        return (int)((K + blocks - 1) / blocks + 7) / 8 * 8;
    }
    return K > uk->kc ? (int)K : uk->kc;
}

/* The N block: the widest multiple of nr whose columns, floats_per_col floats each (kc:
 * the B panel), fill half the L2, at most NC_MAX. Each A sliver sweeps the whole panel
 * (gemm_block), so the panel must stay in L2 from one sliver to the next: at NC 2048
 * Stories110M's 256 x 2048 x 768 forward product read it from L3 for every sliver
 * (107-114 against 126-133 GFLOP/s at 1024). */
static int64_t panel_cols(const gemm_ukernel *uk, int64_t floats_per_col) {
    if (uk->b_in_l1) return NC_MAX; /* the panel is read from L3 once per A block */
    int64_t nc = cpu_l2_bytes() / 2 / (floats_per_col * (int64_t)sizeof(float)) / uk->nr * uk->nr;
    return nc < uk->nr ? uk->nr : nc > NC_MAX ? NC_MAX : nc;
}

/* The M block: the kernel's mc, and in the B-sliver-in-L1 order (whose A block is read
 * from L2 by every B sliver) at most the rows whose kc floats fill 5/8 of the L2: the
 * AVX2 kernel's 192 x 384 block is 288 KiB, past a 256 KiB L2 (Intel's AVX2 cores). */
static int m_block(const gemm_ukernel *uk, int kc) {
    if (!uk->b_in_l1) return uk->mc;
    int64_t rows = cpu_l2_bytes() * 5 / 8 / ((int64_t)kc * (int64_t)sizeof(float)) / uk->mr * uk->mr;
    return rows < uk->mr ? uk->mr : rows > uk->mc ? uk->mc : (int)rows;
}

/* The N block of a column split whose op(A) is packed once for all tasks: panel_cols, or, when
 * the rows fit in one M block, the widest multiple of nr that keeps a task's C block
 * (rows x nc) and its B panel (kc x nc) in half the L2 from one K block to the next;
 * with NC, C went out to memory and came back for every K block. Stories110M's
 * classifier, 256 x 32000 x 768 on two threads, Sapphire Rapids (2 MiB L2: 512
 * columns): 278 -> 310-315 GFLOP/s. Where each N block packs op(A) again it cost more
 * than it saved (256 x 768 x 2048 as stored: 292 -> 266), and with more rows than an M
 * block (a weight gradient's 2048) it was slower too. */
static int64_t n_block(const gemm_ukernel *uk, int64_t rows, int kc) {
    return panel_cols(uk, rows > uk->mc ? kc : rows + kc);
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
    if (g->ep) cpu_apply_epilogue(g->ep, g->C, g->ldc, i0, j0, m, n);
}

/* Packs slivers [s0, s1) of the shared operand for every K block (a pool task). */
static void prepack_part(void *ctx, int64_t s0, int64_t s1) {
    const gemm_job *g = ctx;
    int w = g->split_rows ? g->uk.nr : g->uk.mr;
    int64_t ext = g->split_rows ? g->N : g->M, a = s0 * w, b = s1 * w < ext ? s1 * w : ext;
    for (int64_t pc = 0; pc < g->K; pc += g->uk.kc) {
        int64_t kc = g->K - pc < g->uk.kc ? g->K - pc : g->uk.kc;
        float *dst = (float *)g->shared + pc * g->shared_pad + a * kc;
        if (g->split_rows) pack_b(&g->uk, g->tb, g->B, g->ldb, pc, a, kc, b - a, dst);
        else pack_a(&g->uk, g->ta, g->A, g->lda, a, pc, b - a, kc, dst);
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

/* C = A B^T with few outputs and a long K (a weight gradient summed over a batch: a
 * packed tile would be mostly padding and the packing would copy both operands): dot
 * products read in place, K cut into L1-sized chunks and split over the threads, each
 * thread summing into its own M x N buffer. */
enum { DOT_KCHUNK = 1024 };
#define DOT_MAX_OUTPUTS 8192

static bool use_dots(const gemm_ukernel *uk, int ta, int tb, int64_t M, int64_t N, int64_t K) {
    int64_t wider = M > N ? M : N;
    return uk->dot && !ta && tb && M * N <= DOT_MAX_OUTPUTS && K >= DOT_KCHUNK && K >= 16 * wider;
}

/* Where the block holding index i starts (blocks of d in an extent n), the stride to use
 * and which of its rows are new. A block that would overhang the end slides back to
 * end at n (its overlap is recomputed and dropped); an extent shorter than d reads one
 * row d times (stride 0) and keeps the first. */
typedef struct { int64_t start, stride, lo, hi, next; } dot_block;

static dot_block block_at(int64_t i, int64_t n, int d, int64_t ld) {
    if (n < d) return (dot_block){ i, 0, 0, 1, i + 1 };
    int64_t st = i + d <= n ? i : n - d;
    return (dot_block){ st, ld, i - st, d, st + d };
}

typedef struct {
    const gemm_ukernel *uk;
    int64_t M, N, K, lda, ldb, parts;
    const float *A, *B;
    float *acc; /* parts x M x N, zeroed */
} dot_job;

static void dot_part(void *ctx, int64_t p0, int64_t p1) {
    const dot_job *d = ctx;
    const int dm = d->uk->dmr, dn = d->uk->dnr;
    int64_t chunks = (d->K + DOT_KCHUNK - 1) / DOT_KCHUNK;
    for (int64_t part = p0; part < p1; part++) {
        float *acc = d->acc + part * d->M * d->N;
        for (int64_t ch = chunks * part / d->parts; ch < chunks * (part + 1) / d->parts; ch++) {
            int64_t k0 = ch * DOT_KCHUNK, kc = d->K - k0 < DOT_KCHUNK ? d->K - k0 : DOT_KCHUNK;
            for (int64_t i = 0; i < d->M;) {
                dot_block bi = block_at(i, d->M, dm, d->lda);
                for (int64_t j = 0; j < d->N;) {
                    dot_block bj = block_at(j, d->N, dn, d->ldb);
                    float t[64] = { 0 };
                    d->uk->dot(kc, d->A + bi.start * d->lda + k0, bi.stride, d->B + bj.start * d->ldb + k0, bj.stride, t);
                    for (int64_t r = bi.lo; r < bi.hi; r++)
                        for (int64_t q = bj.lo; q < bj.hi; q++) acc[(bi.start + r) * d->N + bj.start + q] += t[r * dn + q];
                    j = bj.next;
                }
                i = bi.next;
            }
        }
    }
}

/* false when the partial sums cannot be allocated (the caller packs instead). */
static bool gemm_dots(const gemm_ukernel *uk, cpu_pool *p, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                      const cpu_epilogue *ep) {
    int64_t chunks = (K + DOT_KCHUNK - 1) / DOT_KCHUNK, parts = cpu_pool_threads(p);
    if (parts > chunks) parts = chunks;
    float *acc = calloc((size_t)(parts * M * N), sizeof *acc);
    if (!acc) return false;
    dot_job d = { uk, M, N, K, lda, ldb, parts, A, B, acc };
    cpu_pool_for(p, parts, 1, dot_part, &d);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t q = 0; q < parts; q++) s += acc[(q * M + i) * N + j];
            float *c = C + i * ldc + j;
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
    if (ep) cpu_apply_epilogue(ep, C, ldc, 0, 0, M, N);
    free(acc);
    return true;
}

/* The packed product, its rows or columns split over the pool. */
static void gemm_packed(const gemm_ukernel *uk, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                        float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc, const cpu_epilogue *ep) {
    gemm_job g = {*uk, ta != 0, tb != 0, M, N, K, alpha, beta, A, B, lda, ldb, ldc, C, ep, 1, 0, NULL, 0};
    g.uk.kc = k_block(uk, K);
    g.uk.mc = m_block(uk, g.uk.kc);
    g.nc = panel_cols(uk, g.uk.kc);
    int64_t mgroups = (M + uk->mr - 1) / uk->mr, ngroups = (N + uk->nr - 1) / uk->nr;
    int threads = cpu_pool_threads(p);
    if (threads > 1 && (double)M * (double)N * (double)K >= PARALLEL_MIN_MACS) {
        /* Each task packs its own copy of the operand it shares, so split the larger
         * dimension (the duplicated packing is then the smaller operand), unless the
         * other one divides into the threads' shares more evenly: 128 rows are 11 tiles
         * of 12, 6 and 5 on two threads, while 128 columns are 2 + 2 slivers of 32. */
        int64_t mshare = (mgroups + threads - 1) / threads, nshare = (ngroups + threads - 1) / threads;
        double mwaste = (double)(mshare * threads * uk->mr) / (double)M, nwaste = (double)(nshare * threads * uk->nr) / (double)N;
        g.split_rows = M >= N ? mwaste <= nwaste * 1.05 : mwaste * 1.05 < nwaste;
        int64_t groups = g.split_rows ? mgroups : ngroups;
        /* The shared operand packed once, its slivers split over the threads, instead of
         * once per task: for the MLP's 128x128x784 forward product each copy (100k
         * floats) took about as long as the task's half of the product. */
        int w = g.split_rows ? uk->nr : uk->mr;
        int64_t ext = g.split_rows ? N : M, pad = (ext + w - 1) / w * w, slivers = pad / w;
        double floats = (double)K * (double)pad;
        if (floats >= SHARED_PACK_MIN && floats <= SHARED_PACK_MAX && (!g.split_rows || N <= NC_MAX)) {
            float *sp = pack_space_of(PACK_SHARED, (size_t)floats);
            if (sp) {
                g.shared = sp, g.shared_pad = pad;
                cpu_pool_for(p, slivers, 1, prepack_part, &g);
                if (!g.split_rows) g.nc = n_block(uk, M, g.uk.kc); /* op(A) packed once: narrow N blocks are free */
            }
        }
        cpu_pool_for(p, groups, 1, gemm_task, &g);
    } else {
        gemm_task(&g, 0, mgroups);
    }
}

/* A deep product (K at least twice its longer side, op(B) = B: dy W in a backward pass)
 * is summed as two halves of K, C = (alpha A1 B1 + beta C) + alpha A2 B2, on any thread
 * count. On two threads each half runs on its own: a row or column split packs the
 * operand it does not split on both threads (Stories110M's classifier: 32 MB of logit
 * gradients twice), and the halves ran dy W 6-11% faster (256x768x2048, 512x768x2048,
 * 256x768x32000; a transposed B gained nothing). The halves depend on the shape alone,
 * so the bits do not depend on the thread count. */
static bool is_deep(const gemm_ukernel *uk, int tb, int64_t M, int64_t N, int64_t K) {
    return !tb && K >= 2 * (M > N ? M : N) && K >= 4 * (int64_t)uk->kc;
}

typedef struct {
    const gemm_ukernel *uk;
    cpu_pool *inner; /* the pool each half splits over, or NULL: the halves are the tasks */
    int ta;
    int64_t M, N, K, half, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C, *P; /* P: the second half's M x N sum */
    const cpu_epilogue *ep; /* applied to each row once it is summed */
} deep_job;

static void deep_half(void *ctx, int64_t h0, int64_t h1) {
    const deep_job *d = ctx;
    for (int64_t h = h0; h < h1; h++) {
        int64_t k0 = h ? d->half : 0, kn = h ? d->K - d->half : d->half;
        const float *a = d->ta ? d->A + k0 * d->lda : d->A + k0, *b = d->B + k0 * d->ldb;
        float beta = h ? 0.0f : d->beta, *c = h ? d->P : d->C; /* the first half takes beta */
        int64_t ldc = h ? d->N : d->ldc;
        gemm_packed(d->uk, d->inner, d->ta, 0, d->M, d->N, kn, d->alpha, a, d->lda, b, d->ldb, beta, c, ldc, NULL);
    }
}

static void deep_sum_rows(void *ctx, int64_t i0, int64_t i1) {
    const deep_job *d = ctx;
    for (int64_t i = i0; i < i1; i++) {
        float *restrict c = d->C + i * d->ldc;
        const float *restrict q = d->P + i * d->N;
        for (int64_t j = 0; j < d->N; j++) c[j] += q[j];
        if (d->ep) cpu_apply_epilogue(d->ep, d->C, d->ldc, i, 0, 1, d->N);
    }
}

/* False when the second half's sums cannot be allocated. */
static bool gemm_deep(const gemm_ukernel *uk, cpu_pool *p, int ta, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                      const cpu_epilogue *ep) {
    float *P = pack_space_of(PACK_PARTIAL, (size_t)(M * N));
    if (!P) return false;
    int threads = cpu_pool_threads(p);
    deep_job d = { uk, threads == 2 ? NULL : p, ta, M, N, K, (K / 2 + 7) / 8 * 8, lda, ldb, ldc, alpha, beta, A, B, C,
                   P, ep };
    if (threads == 2) cpu_pool_for(p, 2, 1, deep_half, &d);
    else deep_half(&d, 0, 2);
    cpu_pool_for(p, M, 1 + 16384 / N, deep_sum_rows, &d);
    return true;
}

void cpu_sgemm_with(const gemm_ukernel *uk, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc, const cpu_epilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (!cpu_epilogue_any(ep)) ep = NULL;
    if (K <= 0 || alpha == 0.0f) { /* BLAS semantics: A and B are not read */
        scale_c(M, N, beta, C, ldc);
        if (ep) cpu_apply_epilogue(ep, C, ldc, 0, 0, M, N);
        return;
    }
    if (use_dots(uk, ta, tb, M, N, K) && gemm_dots(uk, p, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep)) return;
    if (is_deep(uk, tb, M, N, K) && gemm_deep(uk, p, ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep)) return;
    gemm_packed(uk, p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

int64_t cpu_sgemm_packed_b_floats(int64_t K, int64_t N) {
    const int nr = cpu_gemm_ukernel()->nr;
    return (N + nr - 1) / nr * nr * K;
}

bool cpu_sgemm_pack_b(int tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *dst) {
    if (cpu_gemm_prefers_blas(cpu_gemm_ukernel()) || K <= 0 || N <= 0) return false;
    pack_b(cpu_gemm_ukernel(), tb, B, ldb, 0, 0, K, N, dst);
    return true;
}

/* gemm_block's K and M blocking with op(B) already packed: only op(A) is packed, block by
 * block, and K is cut as cpu_sgemm cuts it. Each B sliver is held while the A slivers
 * pass, the other order from gemm_block's: an attention block has a few A slivers and a
 * short K, and gemm_block's order ran llama b's attention 2-7% slower. */
bool cpu_sgemm_pb(int ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *Bp,
                  int64_t Kp, bool accumulate, float *C, int64_t ldc) {
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    if (M <= 0 || N <= 0) return true;
    if (K <= 0) {
        if (!accumulate) scale_c(M, N, 0.0f, C, ldc);
        return true;
    }
    const int mr = uk->mr, nr = uk->nr;
    const int64_t KC = k_block(uk, K), MC = uk->mc;
    int64_t mc_max = M < MC ? (M + mr - 1) / mr * mr : MC;
    float *ap = pack_space((size_t)(mc_max * (K < KC ? K : KC)));
    if (!ap) return false;
    for (int64_t pc = 0; pc < K; pc += KC) {
        int64_t kc = K - pc < KC ? K - pc : KC;
        int add = accumulate || pc > 0;
        for (int64_t ic = 0; ic < M; ic += MC) {
            int64_t mc = M - ic < MC ? M - ic : MC;
            pack_a(uk, ta, A, lda, ic, pc, mc, kc, ap);
            for (int64_t jr = 0; jr < N; jr += nr) {
                int tn = N - jr < nr ? (int)(N - jr) : nr;
                const float *b = Bp + jr * Kp + pc * nr; /* sliver jr / nr, from row pc */
                for (int64_t ir = 0; ir < mc; ir += mr) {
                    int tm = mc - ir < mr ? (int)(mc - ir) : mr;
                    uk->fn(kc, ap + ir * kc, b, C + (ic + ir) * ldc + jr, ldc, add, tm, tn);
                }
            }
        }
    }
    return true;
}

void cpu_sgemm_ep(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                  float *C, int64_t ldc, const cpu_epilogue *ep) {
    /* Few outputs over a long K, narrower than one packed tile: our dot products beat a
     * packed GEMM there, BLAS's included (16x9x50176: 57 vs 26 GFLOP/s on Zen 4; at
     * 32x144x12544 OpenBLAS's Cooperlake kernel wins, 64 vs 53). */
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    bool dots = use_dots(uk, ta, tb, M, N, K) && (M < uk->mr || N < uk->nr);
    if (cpu_gemm_prefers_blas(uk) && K > 0 && alpha != 0.0f && !dots &&
        cpu_sgemm_blas(p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) {
        cpu_apply_epilogue_rows(p, ep, C, ldc, M, N);
        return;
    }
    cpu_sgemm_with(uk, p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

void cpu_sgemm(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc) {
    cpu_sgemm_ep(p, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

const char *cpu_gemm_path(void) {
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    if (!cpu_gemm_prefers_blas(uk)) return uk->name;
    return cpu_blas_path();
}
