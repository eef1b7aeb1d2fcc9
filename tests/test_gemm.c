/* Every GEMM path against a double-precision triple loop: each micro-kernel this CPU
 * has (AVX-512, AVX2+FMA, NEON, portable; the ones it lacks are skipped and named),
 * the dispatching cpu_sgemm, and the linked BLAS; odd sizes, transposes, alpha/beta,
 * padded leading dimensions, the pool split, and every epilogue (bias per column or
 * per row, ReLU). Then cpu_pool_for coverage and pool lifecycle. */
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "support/check.h"

#include <float.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A GEMM path under test: one micro-kernel through our driver, or (uk NULL) cpu_sgemm
 * when blas is false, the BLAS directly when true. */
typedef struct {
    const char *name;
    const gemm_ukernel *uk;
    bool blas;
} gemm_path;

static test_rng rng = {42};
static const float SENTINEL = -12345.0f; /* fills the padding of C, which must survive */

static void call_path(const gemm_path *g, cpu_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                      int64_t ldc, const cpu_epilogue *ep) {
    if (g->uk) cpu_sgemm_with(g->uk, pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    else if (!g->blas) cpu_sgemm_ep(pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    else CHECK(cpu_sgemm_blas(pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), "blas call refused");
}

/* Runs one case and compares every element against the double reference with a bound
 * scaled by sum |a||b| (fp32 accumulation error grows with K). ep_kind: 0 none, 1 bias
 * per column, 2 bias per row, 3 ReLU, 4 bias per column + ReLU, 5 bias per row + ReLU,
 * 6 an added M x N matrix (its own row stride), 7 an added matrix + ReLU, 8 nothing but
 * the bound. Every epilogue also bounds |C| (absmax): it must be the largest |C| of the
 * result exactly, bit for bit, whichever path and thread split computed it. */
static void run_case_ep(const gemm_path *g, cpu_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K,
                        float alpha, float beta, int64_t pad, int ep_kind) {
    int64_t arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int64_t lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
    size_t asz = (size_t)(arows * lda) + 1, bsz = (size_t)(brows * ldb) + 1, csz = (size_t)(M * ldc) + 1;
    float *A = malloc(asz * sizeof *A), *B = malloc(bsz * sizeof *B);
    float *C = malloc(csz * sizeof *C), *C0 = malloc(csz * sizeof *C0);
    float *bias = malloc((size_t)(M > N ? M : N) * sizeof *bias + 4);
    int64_t ldr = N + 2;
    float *R = malloc((size_t)(M * ldr) * sizeof *R + 4);
    if (!A || !B || !C || !C0 || !bias || !R) {
        CHECK(0, "alloc");
        goto out;
    }
    test_fill_uniform(&rng, A, (long)asz, -1, 1);
    test_fill_uniform(&rng, B, (long)bsz, -1, 1);
    test_fill_uniform(&rng, bias, (long)(M > N ? M : N), -2, 2);
    test_fill_uniform(&rng, R, (long)(M * ldr), -2, 2);
    for (size_t i = 0; i < csz; i++) C[i] = SENTINEL;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            C[i * ldc + j] = beta == 0.0f ? NAN : (float)(2 * test_uniform(&rng) - 1);
    memcpy(C0, C, csz * sizeof *C);
    bool col_bias = ep_kind == 1 || ep_kind == 4, row_bias = ep_kind == 2 || ep_kind == 5;
    bool added = ep_kind == 6 || ep_kind == 7, relu = (ep_kind >= 3 && ep_kind <= 5) || ep_kind == 7;
    _Atomic uint32_t absmax = 0;
    cpu_epilogue ep = { col_bias || row_bias ? bias : NULL, row_bias, relu, added ? R : NULL, ldr, &absmax };

    call_path(g, pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep_kind ? &ep : NULL);
    if (ep_kind) {
        uint32_t want = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                uint32_t u;
                memcpy(&u, &C[i * ldc + j], sizeof u);
                want = (u & 0x7fffffffu) > want ? u & 0x7fffffffu : want;
            }
        CHECK(atomic_load(&absmax) == want, "%s ta=%d tb=%d %lldx%lldx%lld ep=%d: absmax bits %08x, largest |C| %08x",
              g->name, ta, tb, (long long)M, (long long)N, (long long)K, ep_kind, (unsigned)atomic_load(&absmax),
              (unsigned)want);
    }

    int bad = 0, badpad = 0;
    double worst = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < ldc; j++) {
            float got = C[i * ldc + j];
            if (j >= N) { /* padding must be untouched */
                badpad += got != SENTINEL;
                continue;
            }
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
                sa += fabs(a * b);
            }
            double c0 = C0[i * ldc + j], add = col_bias ? bias[j] : row_bias ? bias[i] : added ? R[i * ldr + j] : 0.0;
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * c0) + add;
            if (relu && want < 0) want = 0;
            double scale = fabs(alpha) * sa + (beta == 0.0f ? 0.0 : fabs(beta * c0)) + fabs(add);
            double tol = (double)(K + 8) * FLT_EPSILON * scale + 1e-30;
            double err = fabs((double)got - want);
            if (!(err <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s ta=%d tb=%d %lldx%lldx%lld a=%g b=%g pad=%lld ep=%d: C[%lld,%lld] = %.9g, want %.9g\n",
                            g->name, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta,
                            (long long)pad, ep_kind, (long long)i, (long long)j, got, want);
            }
            if (scale > 0 && err / scale > worst) worst = err / scale;
        }
    }
    if (csz > 0) badpad += C[csz - 1] != SENTINEL;
    CHECK(bad == 0, "%s ta=%d tb=%d %lldx%lldx%lld alpha=%g beta=%g pad=%lld ep=%d: %d wrong (worst rel %g)",
          g->name, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad, ep_kind, bad, worst);
    CHECK(badpad == 0, "%s %lldx%lldx%lld: %d padding elements of C overwritten", g->name,
          (long long)M, (long long)N, (long long)K, badpad);
out:
    free(A); free(B); free(C); free(C0); free(bias); free(R);
}

static void run_case(const gemm_path *g, cpu_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K,
                     float alpha, float beta, int64_t pad) {
    run_case_ep(g, pool, ta, tb, M, N, K, alpha, beta, pad, 0);
}

/* One path through every shape family. */
static void test_path(const gemm_path *g, cpu_pool *pool) {
    const int64_t sizes[] = {1, 3, 17, 64, 129};
    const float ab[][2] = {{1, 0}, {1, 1}, {0.5f, -2}, {-1.5f, 0}, {2, 0.25f}, {0, 0.5f}};
    const int nab = (int)(sizeof ab / sizeof *ab);
    int c = 0;
    for (int t = 0; t < 4; t++)
        for (int mi = 0; mi < 5; mi++)
            for (int ni = 0; ni < 5; ni++)
                for (int ki = 0; ki < 5; ki++, c++) {
                    /* rotate alpha/beta, padding, pool and epilogue so each gets many shapes */
                    const float *p = ab[c % nab];
                    run_case_ep(g, (c % 3) ? pool : NULL, t & 1, t >> 1, sizes[mi], sizes[ni], sizes[ki], p[0], p[1],
                                (c % 4 == 1) ? 5 : 0, g->blas ? 0 : c % 9);
                }
    /* larger cases that cross KC and MC blocks and run on the pool */
    for (int t = 0; t < 4; t++) {
        run_case(g, pool, t & 1, t >> 1, 300, 200, 250, 1, 0, 0);
        run_case(g, pool, t & 1, t >> 1, 300, 200, 250, -0.5f, 1.5f, 7);
        if (!g->blas) {
            run_case_ep(g, pool, t & 1, t >> 1, 397, 131, 300, 1, 0, 3, 4); /* epilogue after the last K block only */
            run_case_ep(g, pool, t & 1, t >> 1, 131, 397, 600, 1, 1, 0, 5);
            run_case_ep(g, pool, t & 1, t >> 1, 397, 131, 300, 1, 0, 2, 6 + (t & 1));
        }
    }
    /* K beyond one KC block: later blocks must accumulate instead of re-applying beta */
    for (int t = 0; t < 4; t++)
        run_case(g, t & 1 ? pool : NULL, t & 1, t >> 1, 37, 45, 520, 0.75f, t & 2 ? 0.5f : 0.0f, 2);
    run_case(g, pool, 0, 1, 5, 700, 300, 1, 0, 3);    /* column split */
    /* the shared operand packed once for all tasks: op(A) for a column split with M
     * beyond one MC block and K beyond one KC block (the row split's op(B) is covered
     * by the 300x200x250 and 397x131x300 cases above) */
    for (int t = 0; t < 4; t++) run_case(g, pool, t & 1, t >> 1, 400, 800, 270, 1, t & 2 ? 0.5f : 0.0f, t & 1);
    run_case(g, NULL, 1, 0, 2, 2100, 600, 1, 1, 0);   /* N > NC, K > KC */
    /* several M, N and K blocks in one task and in a row split: each A sliver sweeps an
     * N block of B slivers, the next tile's C prefetched across the rows' ends */
    for (int t = 0; t < 4; t++)
        run_case_ep(g, t & 1 ? pool : NULL, t & 1, t >> 1, 400, 1100, 600, 1, t & 2 ? 0.5f : 0.0f, 1, g->blas ? 0 : 4 + 3 * (t & 1));
    /* a column split with op(A) packed once and rows within one M block: N blocks sized
     * by the L2 (gemm.c n_block), several per task, K beyond one KC block */
    for (int t = 0; t < 4; t++) run_case(g, pool, t & 1, t >> 1, 100, 3000, 300, 1, t & 1 ? 0.5f : 0.0f, t & 2 ? 3 : 0);
    run_case(g, pool, 0, 0, 26, 64, 1030, 1, 0, 0);   /* full tiles with K > 2 KC */
    /* few outputs, long K, A B^T: the dot-product path (blocks sliding back at the
     * edges, extents shorter than a block, K split over the pool, a masked K tail) */
    run_case_ep(g, pool, 0, 1, 16, 9, 5003, 1, 0, 0, g->blas ? 0 : 1);
    run_case_ep(g, pool, 0, 1, 33, 145, 3001, 0.5f, 1, 2, g->blas ? 0 : 5);
    run_case_ep(g, NULL, 0, 1, 5, 7, 2000, 1, 0, 1, g->blas ? 0 : 3);
    run_case_ep(g, pool, 0, 1, 16, 9, 5003, 1, 0, 0, g->blas ? 0 : 6);
    run_case(g, pool, 0, 1, 3, 2, 1100, -1, 0.5f, 0);
    run_case(g, pool, 0, 1, 1, 1, 1025, 1, 0, 0);
    if (g->blas) return; /* BLAS refuses degenerate sizes by contract; cpu_sgemm covers them */
    /* degenerate sizes: K == 0 scales C by beta (then the epilogue); M or N == 0 touches nothing */
    run_case(g, pool, 0, 0, 4, 5, 0, 1, 0, 2);
    run_case(g, pool, 1, 1, 4, 5, 0, 1, 0.5f, 0);
    run_case_ep(g, pool, 1, 1, 4, 5, 0, 1, 0.5f, 0, 5);
    run_case_ep(g, pool, 0, 1, 4, 5, 0, 1, 0, 0, 7);
    run_case(g, pool, 0, 0, 0, 5, 3, 1, 0, 1);
    run_case(g, pool, 0, 1, 4, 0, 3, 1, 0, 1);
    run_case(g, NULL, 1, 0, 1, 1, 1, 1, 0, 0);
}

static void test_gemm(void) {
    cpu_pool *pool = cpu_pool_new(3); /* more threads than cores is fine and tests splitting */
    CHECK(pool != NULL, "pool");
    fprintf(stderr, "gemm: cpu features: %s; cpu_sgemm runs %s\n", cpu_features_string(), cpu_gemm_path());
    struct { const char *isa; bool (*get)(gemm_ukernel *); } simd[] = {
        {"avx512", gemm_ukernel_avx512}, {"avx2", gemm_ukernel_avx2}, {"neon", gemm_ukernel_neon}};
    for (int i = 0; i < 3; i++) {
        gemm_ukernel k;
        if (!simd[i].get(&k)) {
            fprintf(stderr, "gemm: skipped the %s kernel: this CPU (or compiler) lacks it\n", simd[i].isa);
            continue;
        }
        CHECK(k.simd && !strcmp(k.name, simd[i].isa) && k.mc % k.mr == 0 && k.mr * k.nr <= 12 * 32, "%s shape", k.name);
        test_path(&(gemm_path){k.name, &k, false}, pool);
        gemm_ukernel other = k; /* the loop order the kernel does not take (gemm_block) */
        other.b_in_l1 = !k.b_in_l1;
        test_path(&(gemm_path){k.b_in_l1 ? "a-sliver-in-L1 order" : "b-sliver-in-L1 order", &other, false}, pool);
    }
    gemm_ukernel port;
    gemm_ukernel_portable(&port);
    test_path(&(gemm_path){"portable", &port, false}, pool);
    test_path(&(gemm_path){"sgemm", NULL, false}, pool);
    if (cpu_have_blas()) test_path(&(gemm_path){"blas", NULL, true}, pool);
    else fprintf(stderr, "gemm: skipped the BLAS path: built without BLAS\n");
    /* the dispatch follows the features: a SIMD kernel whenever the CPU has one */
    const cpu_features *f = cpu_features_get();
    bool has_simd = f->avx512f || (f->avx2 && f->fma) || f->neon;
    CHECK(cpu_gemm_ukernel()->simd == has_simd, "best kernel %s for features %s", cpu_gemm_ukernel()->name,
          cpu_features_string());
    if (f->avx512f) CHECK(!strcmp(cpu_gemm_ukernel()->name, "avx512"), "AVX-512 CPU runs %s", cpu_gemm_ukernel()->name);
    /* the L2 the N block is sized by: what the system says, or 1 MiB; never absurd */
    int64_t l2 = cpu_l2_bytes();
    fprintf(stderr, "gemm: L2 %lld KiB\n", (long long)(l2 / 1024));
    CHECK(l2 >= 64 * 1024 && l2 <= ((int64_t)1 << 30) && l2 == cpu_l2_bytes(), "cpu_l2_bytes %lld", (long long)l2);
    cpu_pool_free(pool);
    CHECK(cpu_have_blas() == 0 || cpu_have_blas() == 1, "cpu_have_blas");
    cpu_blas_set_threads(1);
}

/* A deep product (gemm.c: summed as two halves of K, each half on its own thread when
 * there are two) against the double loop, with beta, padding and an epilogue, and bit for
 * bit the same on 1, 2 and 3 threads. */
static void test_deep(void) {
    const gemm_path sg = { "sgemm deep", NULL, false };
    cpu_pool *pools[3] = { NULL, cpu_pool_new(2), cpu_pool_new(3) };
    CHECK(pools[1] && pools[2], "pools");
    run_case_ep(&sg, pools[1], 0, 0, 40, 70, 2100, 1, 0, 0, 4);
    run_case_ep(&sg, pools[1], 0, 0, 40, 70, 2100, 1, 0.5f, 1, 7);
    run_case_ep(&sg, pools[1], 1, 0, 13, 100, 1500, 0.5f, 1.5f, 3, 5);
    run_case_ep(&sg, pools[2], 0, 0, 97, 5, 4099, -1, 0.25f, 0, 0);
    run_case_ep(&sg, NULL, 1, 0, 64, 64, 1030, 1, 1, 2, 1);
    enum { M = 37, N = 75, K = 3000 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C[3];
    for (int t = 0; t < 3; t++) C[t] = malloc(sizeof(float) * M * N);
    if (A && B && C[0] && C[1] && C[2] && pools[1] && pools[2]) {
        test_fill_uniform(&rng, A, M * K, -1, 1);
        test_fill_uniform(&rng, B, K * N, -1, 1);
        for (int t = 0; t < 3; t++) {
            for (int i = 0; i < M * N; i++) C[t][i] = (float)(i % 5);
            cpu_sgemm(pools[t], 0, 0, M, N, K, 1.0f, A, K, B, N, 0.5f, C[t], N);
        }
        CHECK(!memcmp(C[0], C[1], sizeof(float) * M * N) && !memcmp(C[0], C[2], sizeof(float) * M * N),
              "a deep product differs between 1, 2 and 3 threads");
    }
    free(A), free(B);
    for (int t = 0; t < 3; t++) free(C[t]);
    cpu_pool_free(pools[1]);
    cpu_pool_free(pools[2]);
}

/* cpu_sgemm_pb on leading blocks of an operand packed once (cpu_sgemm_pack_b), as
 * attention uses it: against the double loop, bit for bit against cpu_sgemm on the same
 * leading block (the header promises its rounding), accumulating and not, op(A) both
 * ways, K past one block, ragged slivers, C's padding untouched. Where cpu_sgemm goes to
 * BLAS the packing is refused and nothing is written. */
static void test_packed_b(void) {
    enum { KP = 700, NP = 333, PAD = 5 };
    int64_t floats = cpu_sgemm_packed_b_floats(KP, NP);
    float *B = malloc(sizeof(float) * KP * NP), *Bp = malloc(sizeof(float) * (size_t)(floats + 1));
    float *A = malloc(sizeof(float) * 64 * KP), *C = malloc(sizeof(float) * 64 * (NP + PAD));
    float *R = malloc(sizeof(float) * 64 * (NP + PAD));
    if (!B || !Bp || !A || !C || !R) {
        CHECK(0, "alloc");
        goto out;
    }
    test_fill_uniform(&rng, A, 64 * KP, -1, 1);
    test_fill_uniform(&rng, B, KP * NP, -1, 1);
    CHECK(floats >= (int64_t)KP * NP, "packed size %lld for %dx%d", (long long)floats, KP, NP);
    for (int tb = 0; tb < 2; tb++) {
        Bp[floats] = SENTINEL;
        bool packed = cpu_sgemm_pack_b(tb, KP, NP, B, tb ? KP : NP, Bp);
        if (!packed) {
            CHECK(cpu_have_blas() && strcmp(cpu_gemm_path(), cpu_gemm_ukernel()->name) != 0,
                  "cpu_sgemm_pack_b refused although cpu_sgemm runs %s", cpu_gemm_path());
            continue;
        }
        CHECK(Bp[floats] == SENTINEL, "cpu_sgemm_pack_b wrote past cpu_sgemm_packed_b_floats");
        static const int64_t cases[][3] = { { 32, 333, 64 }, { 13, 40, 700 }, { 64, 1, 321 }, { 1, 97, 5 }, { 29, 64, 350 } };
        for (int c = 0; c < 5; c++)
            for (int ta = 0; ta < 2; ta++)
                for (int acc = 0; acc < 2; acc++) {
                    int64_t M = cases[c][0], N = cases[c][1], K = cases[c][2], lda = ta ? M : K, ldc = N + PAD;
                    for (int64_t i = 0; i < 64 * (NP + PAD); i++) C[i] = R[i] = i % ldc < N ? (float)(i % 7) - 3 : SENTINEL;
                    CHECK(cpu_sgemm_pb(ta, M, N, K, A, lda, Bp, KP, acc, C, ldc), "cpu_sgemm_pb refused");
                    cpu_sgemm(NULL, ta, tb, M, N, K, 1.0f, A, lda, B, tb ? KP : NP, acc ? 1.0f : 0.0f, R, ldc);
                    int bad = 0, diff = 0;
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < ldc; j++) {
                            float got = C[i * ldc + j];
                            diff += memcmp(&got, &R[i * ldc + j], sizeof got) != 0;
                            if (j >= N) { bad += got != SENTINEL; continue; }
                            double s = acc ? (double)((i * ldc + j) % 7) - 3 : 0, sa = 0;
                            for (int64_t k = 0; k < K; k++) {
                                double a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * KP + k] : B[k * NP + j];
                                s += a * b;
                                sa += fabs(a * b);
                            }
                            bad += !(fabs(got - s) <= (double)(K + 8) * FLT_EPSILON * (sa + 3));
                        }
                    CHECK(bad == 0 && diff == 0, "pb tb=%d ta=%d acc=%d %lldx%lldx%lld: %d off the double loop, %d not cpu_sgemm's bits",
                          tb, ta, acc, (long long)M, (long long)N, (long long)K, bad, diff);
                }
    }
out:
    free(B), free(Bp), free(A), free(C), free(R);
}

/* ---------------------------------------------------------------- pool */

typedef struct { int64_t n; unsigned char *seen; int bad; } cover_ctx;

static void cover(void *p, int64_t b, int64_t e) {
    cover_ctx *c = p;
    if (b < 0 || e > c->n || b >= e) {
        c->bad = 1; /* never happens in a correct pool, so no race to speak of */
        return;
    }
    for (int64_t i = b; i < e; i++) c->seen[i]++;
}

/* A loop whose chunks each run a nested cpu_pool_for on the same pool: it must run
 * inline on the chunk's thread (a pool waiting on itself would never return). */
typedef struct { cpu_pool *pool; int64_t n; unsigned char *seen; int bad; } nest_ctx;

static void nest_outer(void *p, int64_t b, int64_t e) {
    nest_ctx *c = p;
    for (int64_t i = b; i < e; i++) {
        cover_ctx inner = {c->n, c->seen + i * c->n, 0};
        cpu_pool_for(c->pool, c->n, 1, cover, &inner);
        if (inner.bad) c->bad = 1;
    }
}

/* One pool per thread count, counted: the same pool for the same count, another for
 * another, alive until the last release; nested loops on it finish. */
static void test_shared_pool(void) {
    cpu_pool *a = cpu_pool_shared(2), *b = cpu_pool_shared(2), *c = cpu_pool_shared(3);
    CHECK(a && a == b && c && c != a && cpu_pool_threads(c) == 3, "shared pools: one per thread count");
    cpu_pool_release(b);
    unsigned char seen[100 * 10] = {0};
    nest_ctx nc = {a, 10, seen, 0};
    cpu_pool_for(a, 100, 1, nest_outer, &nc); /* a still held once: still runs */
    int ok = !nc.bad;
    for (int i = 0; i < 1000; i++) ok &= seen[i] == 1;
    CHECK(ok, "nested loops on one shared pool: every item exactly once");
    cpu_pool_release(a);
    cpu_pool *d = cpu_pool_shared(2); /* the last release stopped it: a fresh one works */
    unsigned char s2[64] = {0};
    cpu_pool_for(d, 64, 1, cover, &(cover_ctx){64, s2, 0});
    ok = d != NULL;
    for (int i = 0; i < 64; i++) ok &= s2[i] == 1;
    CHECK(ok, "a shared pool after its last release");
    cpu_pool_release(d);
    cpu_pool_release(c);
    cpu_pool_release(NULL);
}

static void test_pool(void) {
    CHECK(cpu_num_cores() >= 1, "cores");
    CHECK(cpu_pool_threads(NULL) == 1, "NULL pool has one thread");
    const int64_t ns[] = {0, 1, 2, 5, 7, 100, 1000, 12345};
    const int64_t chunks[] = {0, 1, 3, 64, 5000};
    const int threads[] = {1, 2, 3, 4, 8};
    for (int t = 0; t < 5; t++) {
        cpu_pool *p = cpu_pool_new(threads[t]);
        CHECK(p && cpu_pool_threads(p) == threads[t], "pool of %d", threads[t]);
        for (int ni = 0; ni < 8; ni++)
            for (int ci = 0; ci < 5; ci++) {
                int64_t n = ns[ni];
                cover_ctx c = {n, calloc((size_t)n + 1, 1), 0};
                if (!c.seen) continue;
                for (int rep = 0; rep < 3; rep++) cpu_pool_for(p, n, chunks[ci], cover, &c);
                int ok = !c.bad;
                for (int64_t i = 0; i < n; i++) ok &= c.seen[i] == 3;
                CHECK(ok, "threads=%d n=%lld min_chunk=%lld: not covered exactly once", threads[t],
                      (long long)n, (long long)chunks[ci]);
                free(c.seen);
            }
        cpu_pool_free(p);
    }
    cpu_pool_for(NULL, 10, 1, cover, &(cover_ctx){10, (unsigned char[11]){0}, 0});
    cpu_pool *d = cpu_pool_new(0);
    CHECK(d && cpu_pool_threads(d) == cpu_num_cores(), "default threads");
    cpu_pool_free(d);
    cpu_pool_free(NULL);
    /* lifecycle: create and free repeatedly, with and without work in between */
    int ok = 1;
    for (int i = 0; i < 100; i++) {
        cpu_pool *p = cpu_pool_new(1 + i % 4);
        ok &= p != NULL;
        if (p && i % 2) {
            unsigned char seen[64] = {0};
            cover_ctx c = {64, seen, 0};
            cpu_pool_for(p, 64, 1, cover, &c);
            for (int j = 0; j < 64; j++) ok &= seen[j] == 1;
        }
        cpu_pool_free(p);
    }
    CHECK(ok, "pool create/free x100");
    /* Many tiny jobs back to back, each with its own context on the stack: a worker that
     * wakes late must never run a chunk of a job that is over (its context is gone) or
     * of the next job with the old function. */
    for (int t = 2; t <= 4; t++) {
        cpu_pool *p = cpu_pool_new(t);
        int bad = 0;
        for (int i = 0; i < 2000 && p; i++) {
            unsigned char seen[9] = {0};
            cover_ctx c = {2 + i % 7, seen, 0};
            cpu_pool_for(p, c.n, 1, cover, &c);
            bad += c.bad;
            for (int j = 0; j < c.n; j++) bad += seen[j] != 1;
            memset(seen, 0xee, sizeof seen); /* what a stale chunk would find */
        }
        CHECK(p && bad == 0, "threads=%d: %d chunks missed, repeated or stale over 2000 tiny jobs", t, bad);
        cpu_pool_free(p);
    }
    test_shared_pool();
}

int main(int argc, char **argv) {
    /* Run by ctest with OPENBLAS_CORETYPE=Prescott: OpenBLAS then runs the SSE3 kernels it
     * falls back to on CPUs it cannot name, and cpu_sgemm must notice from the CPU's
     * features and use our SIMD kernel instead. */
    if (argc > 1 && !strcmp(argv[1], "--expect-own-kernel")) {
        const gemm_ukernel *k = cpu_gemm_ukernel();
        fprintf(stderr, "gemm: openblas on a CPU it cannot name: cpu_sgemm runs %s\n", cpu_gemm_path());
        CHECK(!k->simd || !strcmp(cpu_gemm_path(), k->name), "cpu_sgemm runs %s, want our %s kernel", cpu_gemm_path(),
              k->name);
        return check_finish("gemm (openblas fallback)");
    }
    test_pool();
    test_gemm();
    test_deep();
    test_packed_b();
    return check_finish("gemm");
}
