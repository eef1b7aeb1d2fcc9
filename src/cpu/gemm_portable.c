/* The GEMM micro-kernels in plain C: NEON on arm64 (the compiler vectorizes the fmaf
 * rows into 4-wide FMAs: 24 accumulators in 32 registers) and the fallback everywhere
 * else. The six rows are spelled out (one accumulator array each, constant trip count
 * NR) so the compiler unrolls and vectorizes over j and keeps the sums in registers; a
 * loop over rows invites -O3's loop interchange, which moves the sums to memory. */
#include "cpu/cpu_features.h"
#include "cpu/gemm_ukernel.h"

#include <math.h>

#define MR6 6
#define MADD_PLAIN(a, b, c) ((c) + (a) * (b))
#define MADD_FMA(a, b, c) fmaf((a), (b), (c))
#define STORE_ROW(r, acc)                                                                \
    if ((r) < m)                                                                         \
        for (int j = 0; j < n; j++) c[(r) * ldc + j] = accumulate ? c[(r) * ldc + j] + acc[j] : acc[j];
#define DEFINE_UKERNEL(NAME, NR, MADD)                                                   \
    static void NAME(int64_t kc, const float *restrict a, const float *restrict b,      \
                     float *restrict c, int64_t ldc, int accumulate, int m, int n) {     \
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
        STORE_ROW(0, c0) STORE_ROW(1, c1) STORE_ROW(2, c2)                              \
        STORE_ROW(3, c3) STORE_ROW(4, c4) STORE_ROW(5, c5)                              \
    }

/* 2 x 2 dot products, four partial sums per product for the adder's latency. */
static void dot_portable_2x2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *acc) {
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const float *x = a + i * lda, *y = b + j * ldb;
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int64_t p = 0;
            for (; p + 4 <= k; p += 4) {
                s0 += x[p] * y[p];
                s1 += x[p + 1] * y[p + 1];
                s2 += x[p + 2] * y[p + 2];
                s3 += x[p + 3] * y[p + 3];
            }
            for (; p < k; p++) s0 += x[p] * y[p];
            acc[i * 2 + j] += (s0 + s1) + (s2 + s3);
        }
}

#if defined(__aarch64__)
DEFINE_UKERNEL(ukernel_neon_6x16, 16, MADD_FMA)
bool gemm_ukernel_neon(gemm_ukernel *k) {
    if (!cpu_features_get()->neon) return false;
    *k = (gemm_ukernel){ "neon", 6, 16, 256, 96, true, ukernel_neon_6x16, 2, 2, dot_portable_2x2, 0, false };
    return true;
}
#else
bool gemm_ukernel_neon(gemm_ukernel *k) { (void)k; return false; }
#endif

/* 6x8 keeps 12 accumulators live, within the 16 vector registers of baseline x86-64
 * (SSE2) and of most other targets. */
DEFINE_UKERNEL(ukernel_portable_6x8, 8, MADD_PLAIN)
void gemm_ukernel_portable(gemm_ukernel *k) { *k = (gemm_ukernel){ "portable", 6, 8, 256, 96, false, ukernel_portable_6x8, 2, 2, dot_portable_2x2, 0, false }; }
