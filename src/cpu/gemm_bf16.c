/* The bf16 GEMM (gemm_bf16.h). Both operands are packed once per call, rounded to bf16
 * in software (so both kernels see the same operands, denormals included), padded with
 * zeros to whole 32 x 32 blocks:
 *   Ap [Mp][Kp]        row-major bf16 rows of A
 *   Bp [Kp/2][Np][2]   B in pairs along k ("VNNI" layout): what vdpbf16ps and tdpbf16ps
 *                      multiply a pair of A against
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
 * 16 rows x 32 bf16) and two B tiles (6, 7: 16 k pairs x 16 columns) per 32 k. */
__attribute__((target("amx-tile,amx-bf16"))) static void rows_amx(void *ctx, int64_t b0, int64_t b1) {
    const job *j = ctx;
    tile_config cfg = { .palette = 1 };
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    float out[4][16 * 16];
    const int64_t sa = 2 * j->Kp, sb = 4 * j->Np; /* row strides in bytes */
    for (int64_t i0 = b0 * 32; i0 < b1 * 32; i0 += 32)
        for (int64_t j0 = 0; j0 < j->Np; j0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            const uint16_t *a = j->ap + i0 * j->Kp, *b = j->bp + 2 * j0;
            for (int64_t k = 0; k < j->Kp; k += 32) {
                _tile_loadd(4, a + k, sa);
                _tile_loadd(5, a + 16 * j->Kp + k, sa);
                _tile_loadd(6, b + k * j->Np, sb);
                _tile_loadd(7, b + k * j->Np + 32, sb);
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
                int64_t r0 = i0 + 16 * (t >> 1), c0 = j0 + 16 * (t & 1);
                int64_t nc = j->N - c0 < 16 ? j->N - c0 : 16;
                for (int64_t r = 0; r < 16 && r0 + r < j->M && nc > 0; r++)
                    memcpy(j->C + (r0 + r) * j->ldc + c0, out[t] + r * 16, (size_t)nc * 4);
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
    if (path == CPU_BF16_NONE) path = cpu_gemm_bf16_best();
    if (!path_ok(path) || M <= 0 || N <= 0 || K <= 0) return false;
    int64_t Mp = (M + 31) & ~(int64_t)31, Np = (N + 31) & ~(int64_t)31, Kp = (K + 31) & ~(int64_t)31;
    uint16_t *ap = calloc((size_t)(Mp * Kp), 2), *bp = calloc((size_t)(Kp * Np), 2);
    if (!ap || !bp) {
        free(ap);
        free(bp);
        return false;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) ap[i * Kp + k] = cpu_bf16_round(A[i * lda + k]);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) bp[((k >> 1) * Np + n) * 2 + (k & 1)] = cpu_bf16_round(B[k * ldb + n]);
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
