/* cpu_sgemm (BLAS when built with it) and cpu_sgemm_portable against a double
 * precision triple loop; cpu_pool_for coverage and pool lifecycle. */
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "support/check.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*gemm_fn)(cpu_pool *, int, int, int64_t, int64_t, int64_t, float, const float *,
                        int64_t, const float *, int64_t, float, float *, int64_t);

static test_rng rng = {42};
static const float SENTINEL = -12345.0f; /* fills the padding of C, which must survive */

/* Runs one case and compares every element against the double reference with a bound
 * scaled by sum |a||b| (fp32 accumulation error grows with K). */
static void run_case(const char *name, gemm_fn fn, cpu_pool *pool, int ta, int tb, int64_t M,
                     int64_t N, int64_t K, float alpha, float beta, int64_t pad) {
    int64_t arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int64_t lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
    size_t asz = (size_t)(arows * lda) + 1, bsz = (size_t)(brows * ldb) + 1, csz = (size_t)(M * ldc) + 1;
    float *A = malloc(asz * sizeof *A), *B = malloc(bsz * sizeof *B);
    float *C = malloc(csz * sizeof *C), *C0 = malloc(csz * sizeof *C0);
    if (!A || !B || !C || !C0) {
        CHECK(0, "alloc");
        goto out;
    }
    test_fill_uniform(&rng, A, (long)asz, -1, 1);
    test_fill_uniform(&rng, B, (long)bsz, -1, 1);
    for (size_t i = 0; i < csz; i++) C[i] = SENTINEL;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            C[i * ldc + j] = beta == 0.0f ? NAN : (float)(2 * test_uniform(&rng) - 1);
    memcpy(C0, C, csz * sizeof *C);

    fn(pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);

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
            double c0 = C0[i * ldc + j];
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * c0);
            double scale = fabs(alpha) * sa + (beta == 0.0f ? 0.0 : fabs(beta * c0));
            double tol = (double)(K + 8) * FLT_EPSILON * scale + 1e-30;
            double err = fabs((double)got - want);
            if (!(err <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s ta=%d tb=%d %lldx%lldx%lld a=%g b=%g pad=%lld: C[%lld,%lld] = %.9g, want %.9g\n",
                            name, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta,
                            (long long)pad, (long long)i, (long long)j, got, want);
            }
            if (scale > 0 && err / scale > worst) worst = err / scale;
        }
    }
    if (csz > 0) badpad += C[csz - 1] != SENTINEL;
    CHECK(bad == 0, "%s ta=%d tb=%d %lldx%lldx%lld alpha=%g beta=%g pad=%lld: %d wrong (worst rel %g)",
          name, ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad, bad, worst);
    CHECK(badpad == 0, "%s %lldx%lldx%lld: %d padding elements of C overwritten", name,
          (long long)M, (long long)N, (long long)K, badpad);
out:
    free(A); free(B); free(C); free(C0);
}

static void test_gemm(void) {
    cpu_pool *pool = cpu_pool_new(3); /* more threads than cores is fine and tests splitting */
    CHECK(pool != NULL, "pool");
    const int64_t sizes[] = {1, 3, 17, 64, 129};
    const float ab[][2] = {{1, 0}, {1, 1}, {0.5f, -2}, {-1.5f, 0}, {2, 0.25f}, {0, 0.5f}};
    const int nab = (int)(sizeof ab / sizeof *ab);
    struct { const char *name; gemm_fn fn; } fns[] = {{"portable", cpu_sgemm_portable}, {"sgemm", cpu_sgemm}};
    int c = 0;
    for (int f = 0; f < 2; f++)
        for (int t = 0; t < 4; t++)
            for (int mi = 0; mi < 5; mi++)
                for (int ni = 0; ni < 5; ni++)
                    for (int ki = 0; ki < 5; ki++, c++) {
                        /* rotate alpha/beta, padding and pool so each gets many shapes */
                        const float *p = ab[c % nab];
                        run_case(fns[f].name, fns[f].fn, (c % 3) ? pool : NULL, t & 1, t >> 1,
                                 sizes[mi], sizes[ni], sizes[ki], p[0], p[1], (c % 4 == 1) ? 5 : 0);
                    }
    /* a larger case that crosses KC and MC blocks and runs on the pool */
    for (int f = 0; f < 2; f++)
        for (int t = 0; t < 4; t++) {
            run_case(fns[f].name, fns[f].fn, pool, t & 1, t >> 1, 300, 200, 250, 1, 0, 0);
            run_case(fns[f].name, fns[f].fn, pool, t & 1, t >> 1, 300, 200, 250, -0.5f, 1.5f, 7);
        }
    /* K beyond one KC block: later blocks must accumulate instead of re-applying beta */
    for (int f = 0; f < 2; f++)
        for (int t = 0; t < 4; t++)
            run_case(fns[f].name, fns[f].fn, t & 1 ? pool : NULL, t & 1, t >> 1, 37, 45, 520,
                     0.75f, t & 2 ? 0.5f : 0.0f, 2);
    run_case("portable", cpu_sgemm_portable, pool, 0, 1, 5, 700, 300, 1, 0, 3); /* column split */
    run_case("portable", cpu_sgemm_portable, NULL, 1, 0, 2, 2100, 600, 1, 1, 0); /* N > NC, K > KC */
    /* degenerate sizes: K == 0 scales C by beta; M or N == 0 touches nothing */
    for (int f = 0; f < 2; f++) {
        run_case(fns[f].name, fns[f].fn, pool, 0, 0, 4, 5, 0, 1, 0, 2);
        run_case(fns[f].name, fns[f].fn, pool, 1, 1, 4, 5, 0, 1, 0.5f, 0);
        run_case(fns[f].name, fns[f].fn, pool, 0, 0, 0, 5, 3, 1, 0, 1);
        run_case(fns[f].name, fns[f].fn, pool, 0, 1, 4, 0, 3, 1, 0, 1);
        run_case(fns[f].name, fns[f].fn, NULL, 1, 0, 1, 1, 1, 1, 0, 0);
    }
    cpu_pool_free(pool);
    CHECK(cpu_have_blas() == 0 || cpu_have_blas() == 1, "cpu_have_blas");
    cpu_blas_set_threads(1);
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
}

int main(void) {
    test_pool();
    test_gemm();
    return check_finish("gemm");
}
