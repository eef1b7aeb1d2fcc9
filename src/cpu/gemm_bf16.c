/* The bf16 GEMM (gemm_bf16.h). Both operands are packed for each call (B may come from a
 * cpu_bf16_cache instead), rounded to bf16 as cpu_bf16_round does (so both kernels see
 * the same operands, denormals included), padded with zeros to whole 32 x 32 blocks, the
 * packing split over the pool, tile by tile (1 KiB, 16 rows of 64 bytes; see block_at):
 *   A  tiles [Mp/16][Kp/32], each 16 rows x 16 pairs along k
 *   B  tiles [Np/16][Kp/32], each 16 pairs along k x 16 columns ("VNNI" pairs: what
 *      vdpbf16ps and tdpbf16ps multiply a pair of A against)
 * Both kernels read this layout: the AMX one loads whole tiles, the AVX512-BF16 one
 * streams a 16-column group of B, whose tiles along k are one run. Each task computes
 * whole row blocks of C (32 rows on AMX, 16 on AVX512-BF16: run_rows). */
#define _GNU_SOURCE
#include "cpu/gemm_bf16.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/absmax.h"
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

/* n rounded up to whole 32 x 32 blocks: every packed dimension. */
static inline int64_t pad32(int64_t n) { return (n + 31) & ~(int64_t)31; }

typedef struct {
    const uint16_t *ap, *bp;
    int64_t M, N, Kp, Np;
    float *C;
    int64_t ldc;
    int64_t bs; /* B's packing's tiles along k (more than Kp/32 when B is a leading block of it) */
    _Atomic uint32_t *absmax; /* NULL, or: the largest |C| bit pattern max'ed here (cpu_bf16_keys) */
} job;

/* Both packed operands are matrices of bf16 pairs along k (32-bit "dwords"):
 *   A: D(i, p) = (A(i, 2p), A(i, 2p + 1)), Mp x Kp/2     B: D(p, n) = (B(2p, n), B(2p + 1, n)), Kp/2 x Np
 * made 16 x 16 dwords at a time. Where k runs along a stored row (A untransposed, B
 * transposed) a stored row gives 16 pairs at once ("adjacent"); elsewhere two stored rows
 * give 16 pairs ("paired"). Those 16-lane vectors are the block's rows when they run along
 * D's rows (A untransposed, B untransposed) and its columns otherwise, then transposed in
 * registers: no fp32 copy of a transposed operand. Every dword is written (zeros past the
 * edges), so the buffers need no clearing. */
typedef struct {
    const float *src;
    int64_t ld;
    bool adj;       /* k runs along the stored rows */
    bool cols;      /* the vectors are the block's columns */
    bool is_b;      /* D is B's layout (else A's) */
    int64_t lines;  /* adj: stored rows that hold data (M or N); paired: K */
    int64_t len;    /* adj: K; paired: the stored rows' length (N or M) */
    int64_t drows, dcols; /* D's size: Mp x Kp/2 (A) or Kp/2 x Np (B) */
    int64_t kt;     /* Kp/32: tiles along k */
    uint32_t *dst;
    uint32_t *other; /* B transposed only, or NULL: also B as stored untransposed (see keep_other) */
    int64_t okt;     /* other's tiles along k: Np/32 */
    bool hw;         /* round with vcvtne2ps2bf16 (convert32); pack sets it from the CPU */
} packer;

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

static inline __mmask16 first(int64_t n) { return (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1); }

/* The largest |x| pattern of rows x min(cols, 32) floats of C (rows ldc apart) max'ed
 * into mx: the block the AMX kernel has just stored, read back from L1. */
__attribute__((target("avx512f"))) static __m512i block_max(const float *c, int64_t ldc, int64_t rows, int64_t cols,
                                                            __m512i mx) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    const __mmask16 m0 = first(cols), m1 = first(cols - 16);
    for (int64_t r = 0; r < rows; r++) {
        __m512i a = _mm512_maskz_loadu_epi32(m0, c + r * ldc), b = _mm512_maskz_loadu_epi32(m1, c + r * ldc + 16);
        mx = _mm512_max_epu32(mx, _mm512_max_epu32(_mm512_and_si512(a, abs), _mm512_and_si512(b, abs)));
    }
    return mx;
}

/* 32 floats (lo: the first 16) as 32 bf16 in order by the CPU's vcvtne2ps2bf16, which
 * gives round16's bits for every value but a denormal (checked over all 2^32 patterns on
 * Sapphire Rapids): a denormal it flushes to zero, where round16 rounds it, up to the
 * smallest normal near the top of the range. False, nothing written, when a lane holds
 * one: the caller rounds in software. Three instructions for 32 values where round16
 * takes about twenty: a warm packing pass went from 0.20-0.25 to 0.14-0.19 ns a value
 * (Sapphire Rapids, llama a's and b's operand shapes). */
__attribute__((target("avx512f,avx512dq,avx512bf16"))) static inline bool convert32(__m512 lo, __m512 hi, __m512i *out) {
    if (_mm512_fpclass_ps_mask(lo, 0x20 /* denormal */) | _mm512_fpclass_ps_mask(hi, 0x20)) return false;
    *out = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    return true;
}

/* n <= 32 consecutive floats (zeros past n) as 16 bf16 pairs: lane t = (x[2t], x[2t + 1]).
 * hw: the CPU has vcvtne2ps2bf16 (convert32). */
__attribute__((target("avx512f,avx512dq,avx512bf16"))) static inline __m512i adjacent(const float *x, int64_t n, bool hw) {
    if (n <= 0) return _mm512_setzero_si512();
    __m512 x0 = _mm512_maskz_loadu_ps(first(n), x), x1 = n > 16 ? _mm512_maskz_loadu_ps(first(n - 16), x + 16) : _mm512_setzero_ps();
    __m512i v;
    if (hw && convert32(x0, x1, &v)) return v;
    __m256i lo = _mm512_cvtepi32_epi16(round16(x0)), hi = _mm512_cvtepi32_epi16(round16(x1));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* n <= 16 floats of two rows (r1 NULL: zeros) as pairs: lane t = (r0[t], r1[t]). */
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) static inline __m512i paired(const float *r0, const float *r1,
                                                                                          int64_t n, bool hw) {
    if (n <= 0 || !r0) return _mm512_setzero_si512();
    __m512 x0 = _mm512_maskz_loadu_ps(first(n), r0), x1 = r1 ? _mm512_maskz_loadu_ps(first(n), r1) : _mm512_setzero_ps();
    __m512i v;
    if (hw && convert32(x0, x1, &v)) { /* r0's 16 bf16 then r1's: interleave them */
        static const uint16_t pairs[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                           8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
        return _mm512_permutexvar_epi16(_mm512_loadu_si512(pairs), v);
    }
    return _mm512_or_si512(round16(x0), _mm512_slli_epi32(round16(x1), 16));
}

/* v[r][c] -> v[c][r] over 16 x 16 32-bit lanes. */
__attribute__((target("avx512f"))) static inline void transpose16(__m512i v[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* v[4a + b] now holds, in 128-bit lane L, row-group a's column 4L + b. */
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(v[i], v[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_i32x4(v[i], v[4 + i], 0xdd);
        t[8 + i] = _mm512_shuffle_i32x4(v[8 + i], v[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_i32x4(v[8 + i], v[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);
        v[8 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xdd);
        v[4 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0x88);
        v[12 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0xdd);
    }
}

/* Where row r of D's 16 x 16 block (r0, c0) starts (rows 16 dwords apart): A's tiles
 * [Mp/16][Kp/32] of 16 rows x 16 pairs, B's [Np/16][Kp/32] of 16 pairs x 16 columns. */
static uint32_t *block_at(uint32_t *d, bool is_b, int64_t kt, int64_t r0, int64_t c0) {
    return is_b ? d + ((c0 / 16) * kt + r0 / 16) * 256 : d + ((r0 / 16) * kt + c0 / 16) * 256;
}

/* B transposed is W stored [N, K]; its 16 stored rows n0.. as adjacent vectors v (32 k
 * each from 2 p0) are also 8 pairs of rows of W used untransposed, [K' = N, N' = K]:
 * D'(q, m) = (W[2q][m], W[2q + 1][m]) for q = n0/2 .. +8, m = 2 p0 .. +32. */
__attribute__((target("avx512f,avx512bw"))) static void emit_other(const packer *x, const __m512i v[16], int64_t n0, int64_t p0) {
    static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    __m512i lo = _mm512_loadu_si512(lo_idx), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int j = 0; j < 8; j++) {
        int64_t q = n0 / 2 + j;
        uint32_t *d0 = block_at(x->other, true, x->okt, q & ~(int64_t)15, 2 * p0);
        uint32_t *d1 = block_at(x->other, true, x->okt, q & ~(int64_t)15, 2 * p0 + 16);
        _mm512_storeu_si512(d0 + (q & 15) * 16, _mm512_permutex2var_epi16(v[2 * j], lo, v[2 * j + 1]));
        _mm512_storeu_si512(d1 + (q & 15) * 16, _mm512_permutex2var_epi16(v[2 * j], hi, v[2 * j + 1]));
    }
}

/* The packing prefetches each line's source this many blocks of 16 ahead along it: a
 * 16-line block reads 16 or 32 lines side by side, more streams than Zen 4's hardware
 * prefetchers follow, from an activation written nodes ago (in L3 or memory). llama a
 * bf16 on Zen 4, 2 threads: packing 23.5-34.6 -> 18.4-22.1 ms a run, llama b 8.8-13.3 ->
 * 7.2-9.0 (bench_llama_profile ... 1, 4 pairs each; 4 blocks ahead did as well as 8). */
enum { PF_BLOCKS = 8 };

/* Blocks [b0, b1) of 16 stored lines (D's rows, or its columns where the vectors are its
 * columns), each along the whole line, so each line is read from start to end. */
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) static void pack_range(void *ctx, int64_t b0, int64_t b1) {
    const packer *x = ctx;
    __m512i v[16];
    for (int64_t a = b0 * 16; a < b1 * 16; a += 16)
        for (int64_t b = 0; b < (x->cols ? x->drows : x->dcols); b += 16) {
            /* vector j: line a + j of the operand, from b along it */
            int64_t r0 = x->cols ? b : a, c0 = x->cols ? a : b, ahead = b + 16 * PF_BLOCKS;
            for (int j = 0; j < 16; j++) {
                if (x->adj) {
                    int64_t line = a + j;
                    if (line < x->lines && 2 * ahead < x->len) {
                        __builtin_prefetch(x->src + line * x->ld + 2 * ahead);
                        __builtin_prefetch(x->src + line * x->ld + 2 * ahead + 16);
                    }
                    v[j] = line < x->lines ? adjacent(x->src + line * x->ld + 2 * b, x->len - 2 * b, x->hw) : _mm512_setzero_si512();
                } else {
                    int64_t k = 2 * (a + j);
                    if (k + 1 < x->lines && ahead < x->len) {
                        __builtin_prefetch(x->src + k * x->ld + ahead);
                        __builtin_prefetch(x->src + (k + 1) * x->ld + ahead);
                    }
                    v[j] = k < x->lines ? paired(x->src + k * x->ld + b, k + 1 < x->lines ? x->src + (k + 1) * x->ld + b : NULL,
                                                 x->len - b, x->hw)
                                        : _mm512_setzero_si512();
                }
            }
            if (x->other) emit_other(x, v, c0, r0);
            if (x->cols) transpose16(v);
            uint32_t *d = block_at(x->dst, x->is_b, x->kt, r0, c0);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(d + j * 16, v[j]);
        }
}

/* 8 x 32 of C per register block: 16 accumulators, a broadcast pair of A per row and two
 * 16-pair vectors of B per k pair, on the tile-by-tile packing rows_amx reads: a 16-column
 * group of B is one run along k, 64 bytes a k pair, so the two vectors come from two
 * sequential streams. Like rows_amx, a 32-column stripe of B serves the
 * task's rows (up to 128) while it is in L2. Stores only the valid rows and columns. */
__attribute__((target("avx512f,avx512bf16"))) static void rows_avx512(void *ctx, int64_t b0, int64_t b1) {
    const job *j = ctx;
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    __m512i mx = _mm512_setzero_si512();
    const int64_t kt = j->Kp / 32; /* tiles along k */
    for (int64_t c0 = b0 * 16; c0 < b1 * 16; c0 += 128)
        for (int64_t j0 = 0; j0 < j->Np; j0 += 32)
            for (int64_t i0 = c0; i0 < c0 + 128 && i0 < b1 * 16 && i0 < j->M; i0 += 8) {
                __m512 acc[8][2];
                for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
                const uint16_t *bt0 = j->bp + (j0 / 16) * j->bs * 512, *bt1 = bt0 + j->bs * 512;
                const uint16_t *at = j->ap + (i0 / 16) * kt * 512 + (i0 % 16) * 32;
                for (int64_t t = 0; t < kt; t++, at += 512, bt0 += 512, bt1 += 512)
                    for (int q = 0; q < 16; q++) {
                        __m512bh v0 = (__m512bh)_mm512_loadu_si512(bt0 + 32 * q);
                        __m512bh v1 = (__m512bh)_mm512_loadu_si512(bt1 + 32 * q);
                        for (int r = 0; r < 8; r++) {
                            int32_t pair;
                            memcpy(&pair, at + 32 * r + 2 * q, 4);
                            __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
                            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, v0);
                            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, v1);
                        }
                    }
                int64_t n = j->N - j0;
                __mmask16 m0 = first(n), m1 = first(n - 16);
                for (int r = 0; r < 8 && i0 + r < j->M; r++) {
                    float *c = j->C + (i0 + r) * j->ldc + j0;
                    _mm512_mask_storeu_ps(c, m0, acc[r][0]);
                    _mm512_mask_storeu_ps(c + 16, m1, acc[r][1]);
                    if (j->absmax) { /* the valid columns only (masked: zero elsewhere) */
                        __m512i a = _mm512_maskz_and_epi32(m0, _mm512_castps_si512(acc[r][0]), abs);
                        __m512i b = _mm512_maskz_and_epi32(m1, _mm512_castps_si512(acc[r][1]), abs);
                        mx = _mm512_max_epu32(mx, _mm512_max_epu32(a, b));
                    }
                }
            }
    if (j->absmax) cpu_absmax_merge(j->absmax, (uint32_t)_mm512_reduce_max_epu32(mx));
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* 32 x 32 of C per block in four 16 x 16 fp32 tiles (0-3), fed by two A tiles (4, 5:
 * 16 rows x 32 bf16) and two B tiles (6, 7: 16 k pairs x 16 columns) per 32 k. The
 * operands are packed tile by tile (1 KiB each, rows 64 bytes apart): loading a tile
 * from B's rows in place (4 KiB apart at N = 1024) put all 16 lines in one L1 set.
 *
 * While a block is computed, the C rows of the block four ahead (the same rows in the
 * next column stripe, or the next row group's first block after the last stripe) are
 * prefetched for writing, a few rows each k step: a tile store to a line the core does
 * not own waits for the line, and the step's C is mostly cold (an activation written
 * long ago, or another core's). llama a's bf16 step, 2 threads: the kernel 36.8-39.8 ->
 * 30.7-31.3 ms a run (bench_llama_profile's bf16 kernel line), most of it in the
 * forward products and input gradients; the weight gradients, whose C is small and
 * warm, gained nothing. One block ahead, as tried before, was too late to matter. */
__attribute__((target("amx-tile,amx-bf16,avx512f,prfchw"))) static void rows_amx(void *ctx, int64_t b0, int64_t b1) {
    const job *j = ctx;
    tile_config cfg = { .palette = 1 };
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    float out[4][16 * 16];
    const int64_t kt = j->Kp / 32; /* tiles along k */
    __m512i mx = _mm512_setzero_si512();
    /* Four 32-row blocks share each 32-column stripe of B while it is in L2. */
    for (int64_t c0 = b0 * 32; c0 < b1 * 32; c0 += 128)
        for (int64_t j0 = 0; j0 < j->Np; j0 += 32)
            for (int64_t i0 = c0; i0 < c0 + 128 && i0 < b1 * 32; i0 += 32) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                const uint16_t *a0 = j->ap + (i0 / 16) * kt * 512, *a1 = a0 + kt * 512;
                const uint16_t *bt0 = j->bp + (j0 / 16) * j->bs * 512, *bt1 = bt0 + j->bs * 512;
                /* the block four ahead, (pi, pj): its prows rows of pcols columns, per a k step */
                int64_t pi = j0 + 32 < j->N ? i0 : i0 + 128, pj = j0 + 32 < j->N ? j0 + 32 : 0;
                int64_t prows = pi < b1 * 32 && pi < j->M ? (j->M - pi < 32 ? j->M - pi : 32) : 0;
                int64_t per = (prows + kt - 1) / kt, pcols = j->N - pj < 32 ? j->N - pj : 32;
                const float *pc = prows ? j->C + pi * j->ldc + pj : j->C;
                for (int64_t k = 0; k < kt; k++) {
                    for (int64_t r = k * per; r < (k + 1) * per && r < prows; r++) {
                        __builtin_prefetch(pc + r * j->ldc, 1, 3);
                        __builtin_prefetch(pc + r * j->ldc + pcols - 1, 1, 3);
                    }
                    _tile_loadd(4, a0 + k * 512, 64);
                    _tile_loadd(5, a1 + k * 512, 64);
                    _tile_loadd(6, bt0 + k * 512, 64);
                    _tile_loadd(7, bt1 + k * 512, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
                if (i0 + 32 <= j->M && j0 + 32 <= j->N) { /* a whole block: straight into C */
                    float *c = j->C + i0 * j->ldc + j0;
                    _tile_stored(0, c, j->ldc * 4);
                    _tile_stored(1, c + 16, j->ldc * 4);
                    _tile_stored(2, c + 16 * j->ldc, j->ldc * 4);
                    _tile_stored(3, c + 16 * j->ldc + 16, j->ldc * 4);
                    if (j->absmax) mx = block_max(c, j->ldc, 32, 32, mx);
                    continue;
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
                if (j->absmax && i0 < j->M)
                    mx = block_max(j->C + i0 * j->ldc + j0, j->ldc, j->M - i0 < 32 ? j->M - i0 : 32, j->N - j0, mx);
            }
    _tile_release();
    if (j->absmax) cpu_absmax_merge(j->absmax, (uint32_t)_mm512_reduce_max_epu32(mx));
}
#endif

/* The packed product, 32 rows of C a task on the AMX tiles (two A tiles high), 16 on
 * AVX512-BF16: a weight gradient with M 288 is then 18 tasks, 9 a thread on two, where
 * 9 blocks of 32 left one thread a fifth longer than the other. */
static void run_rows(cpu_pool *p, int64_t Mp, bool amx, job *j) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (amx)
        cpu_pool_for(p, Mp / 32, 1, rows_amx, j);
    else
        cpu_pool_for(p, Mp / 16, 1, rows_avx512, j);
#else
    (void)p, (void)Mp, (void)amx, (void)j;
#endif
}

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

/* Packs one operand into dst (and B's other layout into other), split over the pool by
 * blocks of 16 stored lines. */
static void pack(cpu_pool *p, packer *x) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    x->hw = cpu_features_get()->avx512bf16; /* every CPU with it has AVX512-BW and -DQ */
    cpu_pool_for(p, (x->cols ? x->dcols : x->drows) / 16, 4, pack_range, x);
#else
    (void)p, (void)x;
#endif
}

/* Packs op(A) [M, K] (A stored [K, M] when ta) into dst, M and K padded to 32. */
static void pack_a(cpu_pool *p, const float *A, int64_t lda, int ta, int64_t M, int64_t K, uint16_t *dst) {
    int64_t Mp = pad32(M), Kp = pad32(K);
    packer x = { A, lda, !ta, ta, false, ta ? K : M, ta ? M : K, Mp, Kp / 2, Kp / 32, (uint32_t *)dst, NULL, 0, false };
    pack(p, &x);
}

/* Packs op(B) [K, N] (B stored [N, K] when tb) into dst, K and N padded to 32; with tb,
 * also B as stored into other unless NULL (the same size). */
static void pack_b(cpu_pool *p, const float *B, int64_t ldb, int tb, int64_t K, int64_t N, uint16_t *dst,
                   uint16_t *other) {
    int64_t Np = pad32(N), Kp = pad32(K);
    packer x = { B, ldb, tb, tb, true, tb ? N : K, tb ? K : N, Kp / 2, Np, Kp / 32, (uint32_t *)dst,
                 tb ? (uint32_t *)other : NULL, Np / 32, false };
    pack(p, &x);
}

/* One operand's packing for a later product of the step (cpu_bf16_cache): a tensor in one
 * role (A or B), transposition, shape, stride and path. */
typedef struct {
    const void *key;
    const float *data;
    int role, trans;   /* 0: A, 1: B; ta or tb */
    int64_t rows, cols, ld; /* op(A) M x K, or op(B) K x N */
    cpu_bf16_path path;
    uint64_t step;     /* the step it was packed in; 0: none */
    uint16_t *bp;
    size_t cap;        /* bp's size in uint16 */
} cache_entry;

struct cpu_bf16_cache {
    uint64_t step;
    cache_entry *e;
    int n, cap;
};

static atomic_llong stat_packed, stat_reused, stat_packed_a, stat_reused_a, stat_pack_ns, stat_kernel_ns;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void cpu_bf16_stats_time(int64_t *pack_ns, int64_t *kernel_ns) {
    if (pack_ns) *pack_ns = atomic_load(&stat_pack_ns);
    if (kernel_ns) *kernel_ns = atomic_load(&stat_kernel_ns);
}

void cpu_bf16_stats(int64_t *packed_b, int64_t *reused_b) {
    if (packed_b) *packed_b = atomic_load(&stat_packed);
    if (reused_b) *reused_b = atomic_load(&stat_reused);
}

void cpu_bf16_stats_a(int64_t *packed_a, int64_t *reused_a) {
    if (packed_a) *packed_a = atomic_load(&stat_packed_a);
    if (reused_a) *reused_a = atomic_load(&stat_reused_a);
}

cpu_bf16_cache *cpu_bf16_cache_new(void) {
    cpu_bf16_cache *c = calloc(1, sizeof *c);
    if (c) c->step = 1;
    return c;
}

void cpu_bf16_cache_free(cpu_bf16_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].bp);
    free(c->e);
    free(c);
}

void cpu_bf16_cache_step(cpu_bf16_cache *c) {
    if (c) c->step++;
}

size_t cpu_bf16_cache_bytes(const cpu_bf16_cache *c) {
    size_t n = 0;
    for (int i = 0; c && i < c->n; i++) n += c->e[i].cap * 2;
    return n;
}

/* One entry per tensor and layout; the data pointer is checked on use, so a caller that
 * feeds a weight from a new buffer each run reuses its entry instead of adding one. */
static cache_entry *find(cpu_bf16_cache *c, const void *key, int role, int trans, int64_t rows, int64_t cols, int64_t ld,
                         cpu_bf16_path path) {
    for (int i = 0; c && i < c->n; i++) {
        cache_entry *e = &c->e[i];
        if (e->key == key && e->role == role && e->trans == trans && e->rows == rows && e->cols == cols && e->ld == ld &&
            e->path == path)
            return e;
    }
    return NULL;
}

/* The packing kept this step under key for this data, or NULL. */
static cache_entry *lookup(cpu_bf16_cache *c, const void *key, const float *data, int role, int trans, int64_t rows,
                           int64_t cols, int64_t ld, cpu_bf16_path path) {
    cache_entry *e = c && key ? find(c, key, role, trans, rows, cols, ld, path) : NULL;
    return e && e->step == c->step && e->data == data ? e : NULL;
}

/* Room for three more entries, made before any entry of a call is looked up: claim then
 * never moves the entries, and the pointers of one call stay valid. */
static bool reserve(cpu_bf16_cache *c) {
    if (c->n + 3 <= c->cap) return true;
    int cap = c->cap ? 2 * c->cap : 16;
    cache_entry *grown = realloc(c->e, sizeof *grown * (size_t)cap);
    if (!grown) return false;
    c->e = grown, c->cap = cap;
    return true;
}

/* The entry for this operand (found or added, its buffer at least `need`), marked stale
 * until the packing in it is complete; NULL when memory runs out. */
static cache_entry *claim(cpu_bf16_cache *c, const void *key, const float *data, int role, int trans, int64_t rows,
                          int64_t cols, int64_t ld, cpu_bf16_path path, size_t need) {
    cache_entry *e = find(c, key, role, trans, rows, cols, ld, path);
    if (!e) {
        if (c->n == c->cap) return NULL; /* reserve first */
        e = &c->e[c->n++];
        *e = (cache_entry){ key, data, role, trans, rows, cols, ld, path, 0, NULL, 0 };
    }
    e->step = 0;
    e->data = data;
    if (e->cap < need) { /* repacked whole below: nothing to copy; cache-line aligned as ws_get's */
        free(e->bp);
        e->bp = aligned_alloc(64, (need * 2 + 63) & ~(size_t)63);
        e->cap = e->bp ? need : 0;
        if (!e->bp) return NULL;
    }
    return e;
}

/* The packing buffers, kept per thread from call to call: a buffer malloc'd and freed
 * per product is, at these sizes, mapped and unmapped each time, and every page of it
 * faulted in again (a sixth of a llama step's time on one thread). Freed when the thread
 * ends (the key's destructor). */
typedef struct { uint16_t *buf[2]; size_t cap[2]; } workspace;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static bool ws_key_ok;

static void ws_free(void *v) {
    workspace *w = v;
    free(w->buf[0]);
    free(w->buf[1]);
    free(w);
}

static void ws_init(void) { ws_key_ok = pthread_key_create(&ws_key, ws_free) == 0; }

/* This thread's buffer i of at least n uint16, or NULL when memory runs out. */
static uint16_t *ws_get(int i, size_t n) {
    pthread_once(&ws_once, ws_init);
    if (!ws_key_ok) return NULL;
    workspace *w = pthread_getspecific(ws_key);
    if (!w) {
        if (!(w = calloc(1, sizeof *w))) return NULL;
        if (pthread_setspecific(ws_key, w)) {
            free(w);
            return NULL;
        }
    }
    if (w->cap[i] < n) {
        free(w->buf[i]); /* the old contents are not needed: no realloc copy */
        /* whole cache lines: a tile row (64 bytes) then spans one line, not two */
        w->buf[i] = aligned_alloc(64, (n * 2 + 63) & ~(size_t)63);
        w->cap[i] = w->buf[i] ? n : 0;
    }
    return w->buf[i];
}

bool cpu_sgemm_bf16_t(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
    return cpu_sgemm_bf16_c(p, path, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, NULL, NULL, false);
}

bool cpu_sgemm_bf16_c(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                      cpu_bf16_cache *cache, const void *key, bool keep_other) {
    cpu_bf16_keys k = { NULL, key, false, false, keep_other, NULL };
    return cpu_sgemm_bf16_k(p, path, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, cache, &k);
}

bool cpu_sgemm_bf16_k(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                      cpu_bf16_cache *cache, const cpu_bf16_keys *keys) {
    if (path == CPU_BF16_NONE) path = cpu_gemm_bf16_best();
    if (!path_ok(path) || M <= 0 || N <= 0 || K <= 0) return false;
    int64_t Mp = pad32(M), Np = pad32(N), Kp = pad32(K);
    const void *akey = cache && keys ? keys->a_key : NULL, *bkey = cache && keys ? keys->b_key : NULL;
    if ((akey || bkey) && !reserve(cache)) akey = bkey = NULL; /* out of memory: pack as uncached */
    /* packed earlier in this step: A by a product reading the same tensor the same way;
     * B likewise, or untransposed by the product that read it transposed */
    cache_entry *hit_a = lookup(cache, akey, A, 0, ta, M, K, lda, path);
    cache_entry *hit_b = lookup(cache, bkey, B, 1, tb, K, N, ldb, path);
    /* to keep for a later product: this layout, and B transposed's untransposed one */
    cache_entry *keep_a = akey && !hit_a && keys->keep_a
                              ? claim(cache, akey, A, 0, ta, M, K, lda, path, (size_t)(Mp * Kp)) : NULL;
    cache_entry *keep_b = bkey && !hit_b && keys->keep_b
                              ? claim(cache, bkey, B, 1, tb, K, N, ldb, path, (size_t)(Kp * Np)) : NULL;
    cache_entry *keep = bkey && !hit_b && tb && keys->keep_other
                            ? claim(cache, bkey, B, 1, 0, N, K, ldb, path, (size_t)(Np * Kp)) : NULL;
    uint16_t *ap = hit_a ? hit_a->bp : keep_a ? keep_a->bp : ws_get(0, (size_t)(Mp * Kp));
    uint16_t *bp = hit_b ? hit_b->bp : keep_b ? keep_b->bp : ws_get(1, (size_t)(Kp * Np));
    if (!ap || !bp) return false;
    int64_t t0 = p ? now_ns() : 0;
    if (!hit_a) {
        pack_a(p, A, lda, ta, M, K, ap);
        atomic_fetch_add(&stat_packed_a, 1);
        if (keep_a) keep_a->step = cache->step;
    } else {
        atomic_fetch_add(&stat_reused_a, 1);
    }
    if (!hit_b) {
        pack_b(p, B, ldb, tb, K, N, bp, keep ? keep->bp : NULL);
        atomic_fetch_add(&stat_packed, 1);
        if (keep_b) keep_b->step = cache->step;
        if (keep) keep->step = cache->step;
    } else {
        atomic_fetch_add(&stat_reused, 1);
    }
    job j = { ap, bp, M, N, Kp, Np, C, ldc, Kp / 32, keys ? keys->absmax : NULL };
    int64_t t1 = p ? now_ns() : 0;
    run_rows(p, Mp, path == CPU_BF16_AMX, &j);
    if (p) {
        atomic_fetch_add(&stat_pack_ns, t1 - t0);
        atomic_fetch_add(&stat_kernel_ns, now_ns() - t1);
    }
    return true;
}

size_t cpu_bf16_packed_size(int64_t K, int64_t N) {
    return (size_t)(pad32(K) * pad32(N));
}

bool cpu_bf16_pack_b(cpu_pool *p, cpu_bf16_path path, int tb, int64_t K, int64_t N, const float *B, int64_t ldb,
                     uint16_t *dst, uint16_t *other) {
    if (path == CPU_BF16_NONE) path = cpu_gemm_bf16_best();
    if (!path_ok(path) || K <= 0 || N <= 0) return false;
    pack_b(p, B, ldb, tb, K, N, dst, other);
    atomic_fetch_add(&stat_packed, 1);
    return true;
}

bool cpu_sgemm_bf16_pb(cpu_pool *p, cpu_bf16_path path, int ta, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const uint16_t *bp, int64_t bK, int64_t bN, float *C, int64_t ldc) {
    if (path == CPU_BF16_NONE) path = cpu_gemm_bf16_best();
    /* past K the packing holds B's next rows, not zeros: K must end on a 32-row boundary */
    if (!path_ok(path) || M <= 0 || N <= 0 || K <= 0 || N > bN || K > bK || (K != bK && K % 32)) return false;
    int64_t Mp = pad32(M), Np = pad32(N), Kp = pad32(K);
    int64_t bKp = pad32(bK);
    uint16_t *ap = ws_get(0, (size_t)(Mp * Kp));
    if (!ap) return false;
    pack_a(p, A, lda, ta, M, K, ap);
    atomic_fetch_add(&stat_packed_a, 1);
    atomic_fetch_add(&stat_reused, 1);
    job j = { ap, bp, M, N, Kp, Np, C, ldc, bKp / 32, NULL };
    run_rows(p, Mp, path == CPU_BF16_AMX, &j);
    return true;
}
