/* The bf16 GEMM (cpu_sgemm_bf16) on every path this CPU has (AMX tiles, AVX512-BF16 dot
 * products) against a double-precision triple loop over the same operands rounded to
 * bf16: only the fp32 accumulation may differ. Odd sizes (edges of the 32 x 32 blocks and
 * of K's 32 steps), padded leading dimensions, the pool split; the rounding itself
 * (nearest even, NaN kept) against exact cases. With a bound asked for (cpu_bf16_keys'
 * absmax), the same C and the largest |C| of the valid elements bit for bit, the edges'
 * included, and inf's pattern or above with a nan in A. Skipped (77) on a CPU with
 * neither path.
 *
 * planted: the AMX kernel's edge blocks left out of the bound -> the cases whose largest
 * |C| lies in an edge row fail; the packing's denormal check left out (convert32) ->
 * check_packing fails on both paths, the largest denormal packed as 0. */
#include "cpu/gemm_bf16.h"
#include "cpu/pool.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static test_rng rng = {7};
static const float SENTINEL = -12345.0f;

static void check_rounding(void) {
    /* 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: ties go to the even (1). */
    CHECK(cpu_bf16_round(1.0f + 0x1p-8f) == 0x3f80, "tie to even, down");
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up to the even one. */
    CHECK(cpu_bf16_round(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie to even, up");
    CHECK(cpu_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81, "above the tie rounds up");
    CHECK(cpu_bf16_round(-2.0f) == 0xc000, "exact value kept");
    CHECK(cpu_bf16_to_float(cpu_bf16_round(3.0e38f)) == INFINITY || cpu_bf16_round(3.0e38f) == 0x7f62,
          "large finite value");
    CHECK(isnan(cpu_bf16_to_float(cpu_bf16_round(NAN))), "NaN stays NaN");
}

/* One case: C (ldc = N + pad, padding kept) against sum_k bf16(a) bf16(b) in double;
 * A stored [K,M] when ta, B stored [N,K] when tb. */
static void run_case_t(cpu_bf16_path path, cpu_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K,
                       int64_t pad) {
    int64_t arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int64_t lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
    float *A = malloc(sizeof(float) * (size_t)(arows * lda)), *B = malloc(sizeof(float) * (size_t)(brows * ldb));
    float *C = malloc(sizeof(float) * (size_t)(M * ldc));
    test_fill_uniform(&rng, A, arows * lda, -1, 1);
    test_fill_uniform(&rng, B, brows * ldb, -1, 1);
    for (int64_t i = 0; i < M * ldc; i++) C[i] = SENTINEL;
    CHECK(cpu_sgemm_bf16_t(pool, path, ta, tb, M, N, K, A, lda, B, ldb, C, ldc), "%s refused %lldx%lldx%lld",
          cpu_bf16_path_name(path), (long long)M, (long long)N, (long long)K);
    int bad = 0;
    for (int64_t i = 0; i < M && bad < 3; i++)
        for (int64_t j = 0; j < ldc && bad < 3; j++) {
            if (j >= N) {
                if (C[i * ldc + j] != SENTINEL) {
                    bad++;
                    CHECK(0, "padding of C written at %lld,%lld", (long long)i, (long long)j);
                }
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)cpu_bf16_to_float(cpu_bf16_round(ta ? A[k * lda + i] : A[i * lda + k])) *
                           cpu_bf16_to_float(cpu_bf16_round(tb ? B[j * ldb + k] : B[k * ldb + j]));
                ref += p, mag += fabs(p);
            }
            /* fp32 accumulation: a few ulps of the magnitude per step of the sum's depth */
            double tol = 1e-6 + mag * 4 * (double)K * 0x1p-24;
            if (fabs(C[i * ldc + j] - ref) > tol) {
                bad++;
                CHECK(0, "%s ta %d tb %d %lldx%lldx%lld: C[%lld,%lld] = %.7g, reference %.7g",
                      cpu_bf16_path_name(path), ta, tb, (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, C[i * ldc + j], ref);
            }
        }
    CHECK(bad == 0, "%s %lldx%lldx%lld pad %lld", cpu_bf16_path_name(path), (long long)M, (long long)N,
          (long long)K, (long long)pad);
    /* the same product with its bound: the same C, and its largest |C| exactly; then with
     * a nan in A, a bound of inf's pattern or above */
    for (int nan = 0; nan < 2; nan++) {
        float *C2 = malloc(sizeof(float) * (size_t)(M * ldc));
        for (int64_t i = 0; i < M * ldc; i++) C2[i] = SENTINEL;
        if (nan) A[(arows - 1) * lda + acols - 1] = NAN; /* the last row's or column's */
        _Atomic uint32_t mx = 0;
        cpu_bf16_keys keys = { NULL, NULL, false, false, false, &mx };
        CHECK(cpu_sgemm_bf16_k(pool, path, ta, tb, M, N, K, A, lda, B, ldb, C2, ldc, NULL, &keys), "bound refused");
        uint32_t want = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                uint32_t u;
                memcpy(&u, &C2[i * ldc + j], 4);
                want = (u & 0x7fffffffu) > want ? u & 0x7fffffffu : want;
            }
        if (!nan)
            CHECK(memcmp(C, C2, sizeof(float) * (size_t)(M * ldc)) == 0, "%s %lldx%lldx%lld: C differs with a bound",
                  cpu_bf16_path_name(path), (long long)M, (long long)N, (long long)K);
        CHECK(atomic_load(&mx) == want && (!nan || want >= 0x7f800000u), "%s ta %d tb %d %lldx%lldx%lld%s: bound %#x, largest |C| %#x",
              cpu_bf16_path_name(path), ta, tb, (long long)M, (long long)N, (long long)K, nan ? " (nan)" : "",
              (unsigned)atomic_load(&mx), (unsigned)want);
        free(C2);
    }
    free(A), free(B), free(C);
}

static void run_case(cpu_bf16_path path, cpu_pool *pool, int64_t M, int64_t N, int64_t K, int64_t pad) {
    run_case_t(path, pool, 0, 0, M, N, K, pad);
}

/* Where element (k, n) of a packed op(B) lies, as uint16: pairs along k, in tiles of 16
 * pairs x 16 columns, the tiles [Np/16][Kp/32] (both paths). */
static int64_t packed_at(int64_t Kp, int64_t k, int64_t n) {
    int64_t p = k / 2, dword = ((n / 16) * (Kp / 32) + p / 16) * 256 + (p % 16) * 16 + n % 16;
    return dword * 2 + (k & 1);
}

/* The packed rows x cols matrix op(B) (element (k, n) at x[k * sk + n * sn]) against
 * cpu_bf16_round element by element, padding zeros included. */
static void check_packed(cpu_bf16_path path, const uint16_t *got, const float *x, int64_t K, int64_t N, int64_t sk,
                         int64_t sn, const char *what) {
    int64_t Kp = (K + 31) / 32 * 32, Np = (N + 31) / 32 * 32;
    uint16_t *want = calloc((size_t)(Kp * Np), sizeof *want);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) want[packed_at(Kp, k, n)] = cpu_bf16_round(x[k * sk + n * sn]);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < Kp * Np; i++)
        if (got[i] != want[i]) bad++, first = first < 0 ? i : first;
    CHECK(bad == 0, "%s %s: %lld of %lld packed values differ from cpu_bf16_round, first at %lld: %#x, want %#x",
          cpu_bf16_path_name(path), what, (long long)bad, (long long)(Kp * Np), (long long)first,
          first < 0 ? 0u : got[first], first < 0 ? 0u : want[first]);
    free(want);
}

/* cpu_bf16_pack_b's packing of op(B) [K, N] (B stored [N, K] when tb), and with tb the
 * packing of B as stored it writes beside it, against cpu_bf16_round. Special values
 * among ordinary ones: the packing rounds most groups of 32 values in one CPU
 * instruction, which flushes denormals, and falls back to software where a group holds
 * one; the largest denormal must still round up to the smallest normal. */
static void check_packing(cpu_bf16_path path) {
    static const uint32_t special[] = {0x00000001u, 0x007fffffu, 0x807fffffu, 0x7f800001u, 0xffc00001u,
                                       0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x80000000u, 0x3f808000u,
                                       0x00800000u, 0x3f818000u};
    const int64_t K = 70, N = 45;
    float *B = malloc(sizeof(float) * (size_t)(K * N));
    uint16_t *got = malloc(sizeof(uint16_t) * cpu_bf16_packed_size(K, N)), *other = malloc(sizeof(uint16_t) * cpu_bf16_packed_size(N, K));
    for (int tb = 0; tb < 2; tb++) {
        test_fill_uniform(&rng, B, K * N, -3, 3);
        for (size_t i = 0; i < sizeof special / sizeof *special; i++)
            memcpy(&B[(int64_t)(i * 263) % (K * N)], &special[i], 4);
        CHECK(cpu_bf16_pack_b(NULL, path, tb, K, N, B, tb ? K : N, got, tb ? other : NULL), "%s: packing refused",
              cpu_bf16_path_name(path));
        check_packed(path, got, B, K, N, tb ? 1 : N, tb ? K : 1, tb ? "B transposed" : "B");
        if (tb) check_packed(path, other, B, N, K, K, 1, "B as stored beside it");
    }
    free(B), free(got), free(other);
}

/* cpu_bf16_stats_time counts the packing and the kernel of products run over a pool,
 * and nothing for one run without. */
static void check_time_stats(cpu_bf16_path path, cpu_pool *pool) {
    enum { M = 200, N = 150, K = 300 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
    test_fill_uniform(&rng, A, M * K, -1, 1);
    test_fill_uniform(&rng, B, K * N, -1, 1);
    int64_t p0, k0, p1, k1, p2, k2;
    cpu_bf16_stats_time(&p0, &k0);
    CHECK(cpu_sgemm_bf16(pool, path, M, N, K, A, K, B, N, C, N), "%s: pooled product refused", cpu_bf16_path_name(path));
    cpu_bf16_stats_time(&p1, &k1);
    CHECK(cpu_sgemm_bf16(NULL, path, M, N, K, A, K, B, N, C, N), "%s: product refused", cpu_bf16_path_name(path));
    cpu_bf16_stats_time(&p2, &k2);
    CHECK(p1 > p0 && k1 > k0, "%s: a pooled product's packing (%lld ns) and kernel (%lld ns) not counted",
          cpu_bf16_path_name(path), (long long)(p1 - p0), (long long)(k1 - k0));
    CHECK(p2 == p1 && k2 == k1, "%s: a product without a pool counted", cpu_bf16_path_name(path));
    free(A), free(B), free(C);
}

/* The bf16 result must differ from the fp32 product where operands are not bf16 values:
 * proves the operands were rounded (a kernel reading fp32 would pass run_case's bound). */
static void check_operands_rounded(cpu_bf16_path path) {
    float a[2] = {1.0f + 0x1p-9f, 1.0f}, b[2] = {1.0f, 0.0f}, c = 0;
    CHECK(cpu_sgemm_bf16(NULL, path, 1, 1, 2, a, 2, b, 1, &c, 1), "1x1x2 refused");
    CHECK(c == 1.0f, "%s: 1 + 2^-9 rounds to 1 in bf16, product %.9g", cpu_bf16_path_name(path), c);
}

int main(void) {
    check_rounding();
    cpu_bf16_path paths[] = {CPU_BF16_AMX, CPU_BF16_AVX512};
    int ran = 0;
    cpu_pool *pool = cpu_pool_new(3);
    for (int p = 0; p < 2; p++) {
        float x = 1, y = 1, z;
        if (!cpu_sgemm_bf16(NULL, paths[p], 1, 1, 1, &x, 1, &y, 1, &z, 1)) {
            fprintf(stderr, "gemm_bf16: %s not on this CPU, skipped\n", cpu_bf16_path_name(paths[p]));
            continue;
        }
        ran++;
        check_operands_rounded(paths[p]);
        check_packing(paths[p]);
        check_time_stats(paths[p], pool);
        static const int64_t sizes[][3] = {{1, 1, 1}, {1, 33, 31}, {17, 5, 64}, {31, 32, 33}, {32, 32, 32},
                                           {33, 65, 95}, {64, 48, 100}, {100, 97, 257}, {7, 300, 13}};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int64_t pad = 0; pad <= 3; pad += 3)
                run_case(paths[p], s % 2 ? pool : NULL, sizes[s][0], sizes[s][1], sizes[s][2], pad);
        run_case(paths[p], pool, 200, 130, 70, 1); /* several 32-row blocks over the pool */
        for (int t = 1; t < 4; t++) { /* transposed operands, as the backward products take them */
            run_case_t(paths[p], pool, t & 1, t >> 1, 33, 47, 65, 2);
            run_case_t(paths[p], NULL, t & 1, t >> 1, 5, 100, 31, 0);
        }
    }
    cpu_pool_free(pool);
    CHECK(!cpu_sgemm_bf16(NULL, CPU_BF16_AMX, 0, 1, 1, NULL, 1, NULL, 1, NULL, 1), "empty product refused");
    int rc = check_finish("gemm_bf16");
    if (!ran && rc == 0) {
        fprintf(stderr, "gemm_bf16: this CPU has neither AMX-BF16 nor AVX512-BF16: skipped\n");
        return 77;
    }
    return rc;
}
