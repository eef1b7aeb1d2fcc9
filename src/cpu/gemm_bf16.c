/* The bf16 GEMM (gemm_bf16.h). Both operands are packed once per call, rounded to bf16
 * in software (so both kernels see the same operands, denormals included), padded with
 * zeros to whole 32 x 32 blocks:
 *   Ap [Mp][Kp]        row-major bf16 rows of A
 *   Bp [Kp/2][Np][2]   B in pairs along k ("VNNI" layout): what vdpbf16ps and tdpbf16ps
 *                      multiply a pair of A against
 * (the AMX path stores both tile by tile, see rows_amx)
 * and each thread computes whole 32-row blocks of C. */
#define _GNU_SOURCE
#include "cpu/gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_features.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

uint16_t cpu_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float cpu_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

const char *cpu_bf16_path_name(cpu_bf16_path path) {
    return path == CPU_BF16_AMX ? "amx" : path == CPU_BF16_AVX512 ? "avx512bf16" : "none";
}

typedef struct {
    const uint16_t *ap, *bp;
    int64_t M, N, Kp, Np;
    float *C;
    int64_t ldc;
} job;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* Linux gives a process the AMX tile state only when asked, once. */
static bool amx_permitted(void) {
    static int state; /* 0 unknown, 1 yes, -1 no */
    if (!state) {
#if defined(__linux__)
        state = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0 ? 1 : -1;
#else
        state = -1;
#endif
    }
    return state > 0;
}

/* cpu_bf16_round on 16 lanes, in integer ops so denormals round as in the scalar code
 * (vcvtne2ps2bf16 would flush them): the bf16 in each 32-bit lane's low half. */
__attribute__((target("avx512f"))) static inline __m512i round16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    r = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

/* A row of n floats to bf16 (16 at a time, the tail by the scalar rounding). */
__attribute__((target("avx512f"))) static void pack_row_avx512(const float *src, int64_t n, uint16_t *dst) {
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) _mm256_storeu_si256((__m256i *)(dst + k), _mm512_cvtepi32_epi16(round16(_mm512_loadu_ps(src + k))));
    for (; k < n; k++) dst[k] = cpu_bf16_round(src[k]);
}

/* Rows k and k + 1 of B (n columns) into pairs: dst[2j] from r0[j], dst[2j + 1] from r1[j]. */
__attribute__((target("avx512f"))) static void pack_pairs_avx512(const float *r0, const float *r1, int64_t n, uint16_t *dst) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i lo = round16(_mm512_loadu_ps(r0 + j));
        __m512i hi = r1 ? round16(_mm512_loadu_ps(r1 + j)) : _mm512_setzero_si512();
        _mm512_storeu_si512(dst + 2 * j, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
    for (; j < n; j++) dst[2 * j] = cpu_bf16_round(r0[j]), dst[2 * j + 1] = r1 ? cpu_bf16_round(r1[j]) : 0;
}

/* 8 x 32 of C per register block: 16 accumulators, a broadcast pair of A per row and two
 * 16-pair vectors of B per k pair. Stores only the valid rows and columns. */
__attribute__((target("avx512f,avx512bf16"))) static void rows_avx512(void *ctx, int64_t b0, int64_t b1) {
    const job *j = ctx;
    for (int64_t i0 = b0 * 32; i0 < b1 * 32; i0 += 8)
        for (int64_t j0 = 0; j0 < j->Np; j0 += 32) {
            __m512 acc[8][2];
            for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            const uint16_t *b = j->bp + 2 * j0;
            const uint16_t *a = j->ap + i0 * j->Kp;
            for (int64_t kp = 0; kp < j->Kp / 2; kp++, b += 2 * j->Np) {
                __m512bh v0 = (__m512bh)_mm512_loadu_si512(b), v1 = (__m512bh)_mm512_loadu_si512(b + 32);
                for (int r = 0; r < 8; r++) {
                    int32_t pair;
                    memcpy(&pair, a + r * j->Kp + 2 * kp, 4);
                    __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
                    acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, v0);
                    acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, v1);
                }
            }
            int64_t n = j->N - j0;
            __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1);
            __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffffu : n <= 16 ? 0u : (1u << (n - 16)) - 1);
            for (int r = 0; r < 8 && i0 + r < j->M; r++) {
                float *c = j->C + (i0 + r) * j->ldc + j0;
                _mm512_mask_storeu_ps(c, m0, acc[r][0]);
                _mm512_mask_storeu_ps(c + 16, m1, acc[r][1]);
            }
        }
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* 32 x 32 of C per block in four 16 x 16 fp32 tiles (0-3), fed by two A tiles (4, 5:
 * 16 rows x 32 bf16) and two B tiles (6, 7: 16 k pairs x 16 columns) per 32 k. The
 * operands are packed tile by tile (1 KiB each, rows 64 bytes apart): loading a tile
 * from B's rows in place (4 KiB apart at N = 1024) put all 16 lines in one L1 set. */
__attribute__((target("amx-tile,amx-bf16"))) static void rows_amx(void *ctx, int64_t b0, int64_t b1) {
    const job *j = ctx;
    tile_config cfg = { .palette = 1 };
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    float out[4][16 * 16];
    const int64_t kt = j->Kp / 32; /* tiles along k */
    /* Four 32-row blocks share each 32-column stripe of B while it is in L2. */
    for (int64_t c0 = b0 * 32; c0 < b1 * 32; c0 += 128)
        for (int64_t j0 = 0; j0 < j->Np; j0 += 32)
            for (int64_t i0 = c0; i0 < c0 + 128 && i0 < b1 * 32; i0 += 32) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                const uint16_t *a0 = j->ap + (i0 / 16) * kt * 512, *a1 = a0 + kt * 512;
                const uint16_t *bt0 = j->bp + (j0 / 16) * kt * 512, *bt1 = bt0 + kt * 512;
                for (int64_t k = 0; k < kt; k++) {
                    _tile_loadd(4, a0 + k * 512, 64);
                    _tile_loadd(5, a1 + k * 512, 64);
                    _tile_loadd(6, bt0 + k * 512, 64);
                    _tile_loadd(7, bt1 + k * 512, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
                _tile_stored(0, out[0], 64);
                _tile_stored(1, out[1], 64);
                _tile_stored(2, out[2], 64);
                _tile_stored(3, out[3], 64);
                for (int t = 0; t < 4; t++) {
                    int64_t r0 = i0 + 16 * (t >> 1), cc = j0 + 16 * (t & 1);
                    int64_t nc = j->N - cc < 16 ? j->N - cc : 16;
                    for (int64_t r = 0; r < 16 && r0 + r < j->M && nc > 0; r++)
                        memcpy(j->C + (r0 + r) * j->ldc + cc, out[t] + r * 16, (size_t)nc * 4);
                }
            }
    _tile_release();
}
#endif

cpu_bf16_path cpu_gemm_bf16_best(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const cpu_features *f = cpu_features_get();
    if (f->amx_bf16 && amx_permitted()) return CPU_BF16_AMX;
    if (f->avx512bf16) return CPU_BF16_AVX512;
#endif
    return CPU_BF16_NONE;
}

static bool path_ok(cpu_bf16_path path) {
    cpu_bf16_path best = cpu_gemm_bf16_best();
    if (path == CPU_BF16_AMX) return best == CPU_BF16_AMX;
    if (path == CPU_BF16_AVX512) return cpu_features_get()->avx512bf16;
    return false;
}

bool cpu_sgemm_bf16(cpu_pool *p, cpu_bf16_path path, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc) {
    return cpu_sgemm_bf16_t(p, path, 0, 0, M, N, K, A, lda, B, ldb, C, ldc);
}

/* A transposed operand is first copied untransposed (a plain fp32 transpose), so both
 * packings below stay the contiguous vector loops. */
static float *untranspose(const float *src, int64_t ld, int64_t rows, int64_t cols) {
    float *t = malloc(sizeof(float) * (size_t)(rows * cols));
    if (!t) return NULL;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) t[i * cols + j] = src[j * ld + i];
    return t;
}

bool cpu_sgemm_bf16_t(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
    if (path == CPU_BF16_NONE) path = cpu_gemm_bf16_best();
    if (!path_ok(path) || M <= 0 || N <= 0 || K <= 0) return false;
    if (ta || tb) {
        float *at = ta ? untranspose(A, lda, M, K) : NULL, *bt = tb ? untranspose(B, ldb, K, N) : NULL;
        bool ok = (!ta || at) && (!tb || bt) &&
                  cpu_sgemm_bf16_t(p, path, 0, 0, M, N, K, ta ? at : A, ta ? K : lda, tb ? bt : B, tb ? N : ldb, C, ldc);
        free(at);
        free(bt);
        return ok;
    }
    int64_t Mp = (M + 31) & ~(int64_t)31, Np = (N + 31) & ~(int64_t)31, Kp = (K + 31) & ~(int64_t)31;
    uint16_t *ap = calloc((size_t)(Mp * Kp), 2), *bp = calloc((size_t)(Kp * Np), 2);
    if (!ap || !bp) {
        free(ap);
        free(bp);
        return false;
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    /* both paths imply AVX-512F */
    if (path == CPU_BF16_AMX) { /* tile by tile: A [Mp/16][Kp/32][16][32], B [Np/16][Kp/32][16 pairs][16][2] */
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k += 32)
                pack_row_avx512(A + i * lda + k, K - k < 32 ? K - k : 32, ap + ((i / 16) * (Kp / 32) + k / 32) * 512 + (i % 16) * 32);
        for (int64_t k = 0; k < K; k += 2)
            for (int64_t n = 0; n < N; n += 16)
                pack_pairs_avx512(B + k * ldb + n, k + 1 < K ? B + (k + 1) * ldb + n : NULL, N - n < 16 ? N - n : 16,
                                  bp + ((n / 16) * (Kp / 32) + k / 32) * 512 + ((k % 32) / 2) * 32);
    } else {
        for (int64_t i = 0; i < M; i++) pack_row_avx512(A + i * lda, K, ap + i * Kp);
        for (int64_t k = 0; k < K; k += 2)
            pack_pairs_avx512(B + k * ldb, k + 1 < K ? B + (k + 1) * ldb : NULL, N, bp + k * Np);
    }
#endif
    job j = { ap, bp, M, N, Kp, Np, C, ldc };
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    cpu_pool_for(p, Mp / 32, 1, path == CPU_BF16_AMX ? rows_amx : rows_avx512, &j);
#else
    (void)p, (void)j;
#endif
    free(ap);
    free(bp);
    return true;
}
