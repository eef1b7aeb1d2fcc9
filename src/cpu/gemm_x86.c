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
 * 24 independent FMAs per k, enough to cover the FMA latency on two 512-bit pipes.
 * Edge tiles run the same code with fewer rows (R) and, when n <= 16, one b vector
 * (NV): the constants fold, so an edge costs only the work it needs. */
#define R512(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define F512(i)                                                                                    \
    if ((i) < R) {                                                                                 \
        __m512 ai = _mm512_set1_ps(a[i]);                                                          \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                                                \
        if (NV > 1) c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                                    \
    }
#define S512(i)                                                                                    \
    if ((i) < R) {                                                                                 \
        float *r = c + (i) * ldc;                                                                  \
        if (accumulate) {                                                                          \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_maskz_loadu_ps(m0, r));                        \
            if (NV > 1) c##i##1 = _mm512_add_ps(c##i##1, _mm512_maskz_loadu_ps(m1, r + 16));       \
        }                                                                                          \
        _mm512_mask_storeu_ps(r, m0, c##i##0);                                                     \
        if (NV > 1) _mm512_mask_storeu_ps(r + 16, m1, c##i##1);                                    \
    }
/* The tile's C rows into L1 before the k loop, so the stores (and accumulating loads)
 * at its end find them there; with the driver's L2 prefetch of the next tile this took a
 * cold 512x768x768 from 127 to 147 GFLOP/s (either alone: 134-145). */
#define P512(i)                                                                                    \
    if ((i) < R) {                                                                                 \
        _mm_prefetch((const char *)(c + (i) * ldc), _MM_HINT_T0);                                  \
        if (NV > 1) _mm_prefetch((const char *)(c + (i) * ldc + 16), _MM_HINT_T0);                 \
    }
#define ALL12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#define GEN512(RR, NVV)                                                                            \
    AVX512 static void k512_##RR##_##NVV(int64_t kc, const float *restrict a, const float *restrict b, \
                                         float *restrict c, int64_t ldc, int accumulate, int n) {  \
        enum { R = RR, NV = NVV };                                                                 \
        ALL12(P512)                                                                                \
        ALL12(R512)                                                                                \
        for (int64_t k = 0; k < kc; k++, a += 12, b += 32) {                                       \
            __m512 b0 = _mm512_loadu_ps(b), b1 = NV > 1 ? _mm512_loadu_ps(b + 16) : b0;           \
            ALL12(F512)                                                                            \
        }                                                                                          \
        /* column masks: the first n of 32 */                                                      \
        const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1);                       \
        const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffffu : n <= 16 ? 0u : (1u << (n - 16)) - 1);  \
        ALL12(S512)                                                                                \
    }
#define GEN512_R(RR) GEN512(RR, 1) GEN512(RR, 2)
GEN512_R(1) GEN512_R(2) GEN512_R(3) GEN512_R(4) GEN512_R(5) GEN512_R(6)
GEN512_R(7) GEN512_R(8) GEN512_R(9) GEN512_R(10) GEN512_R(11) GEN512_R(12)

typedef void (*tile_fn)(int64_t, const float *, const float *, float *, int64_t, int, int);
#define T512(RR) { k512_##RR##_1, k512_##RR##_2 },
static const tile_fn k512[12][2] = { T512(1) T512(2) T512(3) T512(4) T512(5) T512(6)
                                     T512(7) T512(8) T512(9) T512(10) T512(11) T512(12) };

static void ukernel_avx512_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate,
                                 int m, int n) {
    k512[m - 1][n > 16](kc, a, b, c, ldc, accumulate, n);
}

/* 6 x 16: 12 ymm accumulators, two b vectors, one broadcast: 15 of 16 registers; edge
 * tiles as above. */
#define R256(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define F256(i)                                                                                    \
    if ((i) < R) {                                                                                 \
        __m256 ai = _mm256_broadcast_ss(a + (i));                                                  \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                                \
        if (NV > 1) c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                                    \
    }
/* A full tile's rows with plain loads and stores: AMD's vmaskmovps store is microcoded
 * (Zen 3: llama's products 63 -> 67 GFLOP/s on one thread with these). */
#define S256_FULL(i)                                                                               \
    if ((i) < R) {                                                                                 \
        float *r = c + (i) * ldc;                                                                  \
        if (accumulate) {                                                                          \
            c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(r));                                  \
            c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(r + 8));                              \
        }                                                                                          \
        _mm256_storeu_ps(r, c##i##0);                                                              \
        _mm256_storeu_ps(r + 8, c##i##1);                                                          \
    }
#define S256(i)                                                                                    \
    if ((i) < R) {                                                                                 \
        float *r = c + (i) * ldc;                                                                  \
        if (accumulate) {                                                                          \
            c##i##0 = _mm256_add_ps(c##i##0, _mm256_maskload_ps(r, m0));                           \
            if (NV > 1) c##i##1 = _mm256_add_ps(c##i##1, _mm256_maskload_ps(r + 8, m1));          \
        }                                                                                          \
        _mm256_maskstore_ps(r, m0, c##i##0);                                                       \
        if (NV > 1) _mm256_maskstore_ps(r + 8, m1, c##i##1);                                       \
    }
#define ALL6(X) X(0) X(1) X(2) X(3) X(4) X(5)
/* The k loop unrolled by 4 (gcc and clang both read this pragma; the FMAs' order per
 * accumulator is unchanged, so the bits are too). One k step a turn left Zen 3's FMA
 * pipes idle about a tenth of the time: llama a's, llama b's and Stories110M's steps
 * 7-11% faster (results.md, "The AVX2 kernel's k loop unrolled"); unrolled by 2 or 8 ran
 * the same as by 4. */
#define K_UNROLL_4 _Pragma("GCC unroll 4")

#define GEN256(RR, NVV)                                                                            \
    AVX2 static void k256_##RR##_##NVV(int64_t kc, const float *restrict a, const float *restrict b, \
                                       float *restrict c, int64_t ldc, int accumulate, int n) {    \
        enum { R = RR, NV = NVV };                                                                 \
        ALL6(R256)                                                                                 \
        K_UNROLL_4                                                                                 \
        for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {                                        \
            __m256 b0 = _mm256_loadu_ps(b), b1 = NV > 1 ? _mm256_loadu_ps(b + 8) : b0;            \
            ALL6(F256)                                                                             \
        }                                                                                          \
        if (NV > 1 && n == 16) {                                                                   \
            ALL6(S256_FULL)                                                                        \
            return;                                                                                \
        }                                                                                          \
        /* column masks: lane j is stored when j < n */                                            \
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                            \
        const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);                         \
        const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);                     \
        ALL6(S256)                                                                                 \
    }
#define GEN256_R(RR) GEN256(RR, 1) GEN256(RR, 2)
GEN256_R(1) GEN256_R(2) GEN256_R(3) GEN256_R(4) GEN256_R(5) GEN256_R(6)
#define T256(RR) { k256_##RR##_1, k256_##RR##_2 },
static const tile_fn k256[6][2] = { T256(1) T256(2) T256(3) T256(4) T256(5) T256(6) };

static void ukernel_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate,
                              int m, int n) {
    k256[m - 1][n > 8](kc, a, b, c, ldc, accumulate, n);
}

/* 3 x 3 dot products: 9 ymm sums and 6 loads fit the 16 registers; a scalar tail. */
#define D256(i, j) __m256 s##i##j = _mm256_setzero_ps();
#define DF256(i, j) s##i##j = _mm256_fmadd_ps(a##i, b##j, s##i##j);

AVX2 static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static void dot_avx2_3x3(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *acc) {
    D256(0, 0) D256(0, 1) D256(0, 2) D256(1, 0) D256(1, 1) D256(1, 2) D256(2, 0) D256(2, 1) D256(2, 2)
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 a0 = _mm256_loadu_ps(a + p), a1 = _mm256_loadu_ps(a + lda + p), a2 = _mm256_loadu_ps(a + 2 * lda + p);
        __m256 b0 = _mm256_loadu_ps(b + p), b1 = _mm256_loadu_ps(b + ldb + p), b2 = _mm256_loadu_ps(b + 2 * ldb + p);
        DF256(0, 0) DF256(0, 1) DF256(0, 2) DF256(1, 0) DF256(1, 1) DF256(1, 2) DF256(2, 0) DF256(2, 1) DF256(2, 2)
    }
    __m256 s[9] = { s00, s01, s02, s10, s11, s12, s20, s21, s22 };
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float t = hsum256(s[i * 3 + j]);
            for (int64_t q = p; q < k; q++) t += a[i * lda + q] * b[j * ldb + q];
            acc[i * 3 + j] += t;
        }
}

/* 4 x 4 dot products in ymm with AVX-512VL's 32 registers: 16 sums and 8 loads per 16
 * FMAs (a zmm 4 x 3 needs 7 loads per 12 and ran slower on Zen 4, out of cache too). */
#define AVX512VL __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define DV(i, j) __m256 s##i##j = _mm256_setzero_ps();
#define DFV(i, j) s##i##j = _mm256_fmadd_ps(a##i, b##j, s##i##j);
#define DFV_ROW(i) DFV(i, 0) DFV(i, 1) DFV(i, 2) DFV(i, 3)
AVX512VL static void dot_avx512vl_4x4(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *acc) {
    DV(0, 0) DV(0, 1) DV(0, 2) DV(0, 3) DV(1, 0) DV(1, 1) DV(1, 2) DV(1, 3)
    DV(2, 0) DV(2, 1) DV(2, 2) DV(2, 3) DV(3, 0) DV(3, 1) DV(3, 2) DV(3, 3)
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 a0 = _mm256_loadu_ps(a + p), a1 = _mm256_loadu_ps(a + lda + p);
        __m256 a2 = _mm256_loadu_ps(a + 2 * lda + p), a3 = _mm256_loadu_ps(a + 3 * lda + p);
        __m256 b0 = _mm256_loadu_ps(b + p), b1 = _mm256_loadu_ps(b + ldb + p);
        __m256 b2 = _mm256_loadu_ps(b + 2 * ldb + p), b3 = _mm256_loadu_ps(b + 3 * ldb + p);
        DFV_ROW(0) DFV_ROW(1) DFV_ROW(2) DFV_ROW(3)
    }
    __m256 s[16] = { s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33 };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float t = hsum256(s[i * 4 + j]);
            for (int64_t q = p; q < k; q++) t += a[i * lda + q] * b[j * ldb + q];
            acc[i * 4 + j] += t;
        }
}

/* The transposing pack (gemm_ukernel.h) in 8 x 8 and 4 x 4 register transposes: eight
 * rows are read along k eight values at a time and written as eight k-columns. */
AVX2 static inline void transpose8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

AVX2 static void pack_t_avx2(const float *src, int64_t ld, int rows, int64_t kc, int w, float *dst) {
    int i = 0;
    for (; i + 8 <= rows; i += 8) {
        const float *s = src + (int64_t)i * ld;
        /* The next group's rows are fetched while this one is transposed, a line of each
         * per line of these read: each row is a short stream (kc values) the prefetchers
         * barely start on (cold x W^T 512x768x768: 150 -> 154 GFLOP/s, 256x2048x768 136 -> 142). */
        int nxt = rows - i - 8 < 8 ? rows - i - 8 : 8;
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 r[8];
            if (!(k & 15))
                for (int q = 0; q < nxt; q++) _mm_prefetch((const char *)(s + (8 + q) * ld + k), _MM_HINT_T0);
            for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(s + q * ld + k);
            transpose8(r);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (k + q) * w + i, r[q]);
        }
        for (; k < kc; k++)
            for (int q = 0; q < 8; q++) dst[k * w + i + q] = s[q * ld + k];
    }
    if (rows == 6 && w == 6) { /* the AVX2 kernel's A sliver: two rows short of a transpose */
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 r[8];
            for (int q = 0; q < 6; q++) r[q] = _mm256_loadu_ps(src + q * ld + k);
            r[6] = r[7] = _mm256_setzero_ps();
            transpose8(r);
            /* each store runs 2 floats into the next k's row, which the next store writes */
            for (int q = 0; q < 7; q++) _mm256_storeu_ps(dst + (k + q) * 6, r[q]);
            __m128 lo = _mm256_castps256_ps128(r[7]);
            _mm_storeu_ps(dst + (k + 7) * 6, lo);
            _mm_storel_pi((__m64 *)(dst + (k + 7) * 6 + 4), _mm256_extractf128_ps(r[7], 1));
        }
        for (; k < kc; k++)
            for (int q = 0; q < 6; q++) dst[k * 6 + q] = src[q * ld + k];
        return;
    }
    for (; i + 4 <= rows; i += 4) {
        const float *s = src + (int64_t)i * ld;
        int64_t k = 0;
        for (; k + 4 <= kc; k += 4) {
            __m128 r0 = _mm_loadu_ps(s + k), r1 = _mm_loadu_ps(s + ld + k);
            __m128 r2 = _mm_loadu_ps(s + 2 * ld + k), r3 = _mm_loadu_ps(s + 3 * ld + k);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(dst + k * w + i, r0);
            _mm_storeu_ps(dst + (k + 1) * w + i, r1);
            _mm_storeu_ps(dst + (k + 2) * w + i, r2);
            _mm_storeu_ps(dst + (k + 3) * w + i, r3);
        }
        for (; k < kc; k++)
            for (int q = 0; q < 4; q++) dst[k * w + i + q] = s[q * ld + k];
    }
    for (; i < rows; i++)
        for (int64_t k = 0; k < kc; k++) dst[k * w + i] = src[(int64_t)i * ld + k];
    if (rows < w)
        for (int64_t k = 0; k < kc; k++)
            for (int q = rows; q < w; q++) dst[k * w + q] = 0.0f;
}

bool gemm_ukernel_avx512(gemm_ukernel *k) {
    if (!cpu_features_get()->avx512f) return false;
    /* Measured on a Zen 4 (docs/results.md): kc 256 with mc 384 (a 384 KiB a-block in a 1 MiB L2)
     * holds up best at 2048; 128..384 are within noise at 256..1024. */
    *k = (gemm_ukernel){ "avx512", 12, 32, 256, 384, true, ukernel_avx512_12x32, 3, 3, dot_avx2_3x3, pack_t_avx2, false };
    /* with VL, 4 x 4 dots in 32 ymm registers: 53 vs 37 GFLOP/s for 4 x 3 in zmm on Zen 4 */
    if (cpu_features_get()->avx512vl) k->dmr = 4, k->dnr = 4, k->dot = dot_avx512vl_4x4;
    return true;
}

bool gemm_ukernel_avx2(gemm_ukernel *k) {
    const cpu_features *f = cpu_features_get();
    if (!f->avx2 || !f->fma) return false;
    *k = (gemm_ukernel){ "avx2", 6, 16, 384, 192, true, ukernel_avx2_6x16, 3, 3, dot_avx2_3x3, pack_t_avx2, true };
    return true;
}
#else
bool gemm_ukernel_avx512(gemm_ukernel *k) { (void)k; return false; }
bool gemm_ukernel_avx2(gemm_ukernel *k) { (void)k; return false; }
#endif
