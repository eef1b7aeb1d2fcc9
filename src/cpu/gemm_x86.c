/* x86-64 GEMM micro-kernels in intrinsics, each compiled for its instruction set by a
 * target attribute so a baseline build carries them all; gemm.c calls one only after
 * cpu_features says the CPU has it. Accumulators are spelled out one per variable so
 * they stay in registers. */
#include "cpu/cpu_features.h"
#include "cpu/gemm_ukernel.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))

/* 12 x 32: 24 zmm accumulators, two b vectors, one broadcast: 27 of 32 registers, and
 * 24 independent FMAs per k, enough to cover the FMA latency on two 512-bit pipes. */
#define R512(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define F512(i)                                                                                    \
    { __m512 ai = _mm512_set1_ps(a[i]);                                                            \
      c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                                                  \
      c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1); }
#define S512(i)                                                                                    \
    { float *r = c + (i) * ldc;                                                                    \
      if (accumulate) {                                                                            \
          c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(r));                                    \
          c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(r + 16));                               \
      }                                                                                            \
      _mm512_storeu_ps(r, c##i##0);                                                                \
      _mm512_storeu_ps(r + 16, c##i##1); }

AVX512 static void ukernel_avx512_12x32(int64_t kc, const float *restrict a, const float *restrict b,
                                        float *restrict c, int64_t ldc, int accumulate) {
    R512(0) R512(1) R512(2) R512(3) R512(4) R512(5) R512(6) R512(7) R512(8) R512(9) R512(10) R512(11)
    for (int64_t k = 0; k < kc; k++, a += 12, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        F512(0) F512(1) F512(2) F512(3) F512(4) F512(5) F512(6) F512(7) F512(8) F512(9) F512(10) F512(11)
    }
    S512(0) S512(1) S512(2) S512(3) S512(4) S512(5) S512(6) S512(7) S512(8) S512(9) S512(10) S512(11)
}

/* 6 x 16: 12 ymm accumulators, two b vectors, one broadcast: 15 of 16 registers. */
#define R256(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define F256(i)                                                                                    \
    { __m256 ai = _mm256_broadcast_ss(a + (i));                                                    \
      c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                                  \
      c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1); }
#define S256(i)                                                                                    \
    { float *r = c + (i) * ldc;                                                                    \
      if (accumulate) {                                                                            \
          c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(r));                                    \
          c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(r + 8));                                \
      }                                                                                            \
      _mm256_storeu_ps(r, c##i##0);                                                                \
      _mm256_storeu_ps(r + 8, c##i##1); }

AVX2 static void ukernel_avx2_6x16(int64_t kc, const float *restrict a, const float *restrict b,
                                   float *restrict c, int64_t ldc, int accumulate) {
    R256(0) R256(1) R256(2) R256(3) R256(4) R256(5)
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        F256(0) F256(1) F256(2) F256(3) F256(4) F256(5)
    }
    S256(0) S256(1) S256(2) S256(3) S256(4) S256(5)
}

bool gemm_ukernel_avx512(gemm_ukernel *k) {
    if (!cpu_features_get()->avx512f) return false;
    /* Measured on a Zen 4 (README): kc 256 with mc 384 (a 384 KiB a-block in a 1 MiB L2)
     * holds up best at 2048; 128..384 are within noise at 256..1024. */
    *k = (gemm_ukernel){ "avx512", 12, 32, 256, 384, true, ukernel_avx512_12x32 };
    return true;
}

bool gemm_ukernel_avx2(gemm_ukernel *k) {
    const cpu_features *f = cpu_features_get();
    if (!f->avx2 || !f->fma) return false;
    *k = (gemm_ukernel){ "avx2", 6, 16, 384, 192, true, ukernel_avx2_6x16 };
    return true;
}
#else
bool gemm_ukernel_avx512(gemm_ukernel *k) { (void)k; return false; }
bool gemm_ukernel_avx2(gemm_ukernel *k) { (void)k; return false; }
#endif
