/* IEEE binary16 <-> binary32 by bit manipulation, so results do not depend on the
 * compiler, the FPU mode or hardware conversion support. */
#include "ir/fp16.h"

#include <string.h>

/* Hardware conversion (vcvtps2ph/vcvtph2ps, round to nearest even) gives the same bits
 * as the portable code, NaNs included. Baseline x86-64 builds compile it separately and
 * use it when the CPU has AVX2 (every AVX2 CPU has F16C; not every compiler can test
 * for F16C by name). */
#if defined(__F16C__) && defined(__AVX__)
#define F16C_ATTR
#define have_f16c() 1
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define F16C_ATTR __attribute__((target("avx,f16c")))
#define have_f16c() __builtin_cpu_supports("avx2")
#endif
#ifdef F16C_ATTR
#include <immintrin.h>
#endif

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline uint16_t to_f16(float f) {
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: set the quiet bit, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (halfway past 65504) rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: normal fp16 */
        uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u); /* round to nearest even; carries into exp */
        return (uint16_t)(sign | (r >> 13));
    }
    /* Subnormal fp16: the result counts units of 2^-24. */
    uint32_t e = ax >> 23;
    if (e < 102) return (uint16_t)sign; /* below 2^-25: rounds to zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    h += (rem > half) | ((rem == half) & h);
    return (uint16_t)(sign | h); /* h == 0x400 is the smallest normal, correctly */
}

static inline float from_f16(uint16_t hh) {
    uint32_t h = hh;
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* inf, or NaN made quiet (as hardware converters do) */
        return u2f(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e) return u2f(sign | ((e + 112u) << 23) | (m << 13));
    if (!m) return u2f(sign);
    e = 113; /* subnormal: normalize so the leading 1 lands on bit 10 */
    while (!(m & 0x400u)) { m <<= 1; e--; }
    return u2f(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

uint16_t af_f32_to_f16(float f) { return to_f16(f); }
float af_f16_to_f32(uint16_t h) { return from_f16(h); }
/* The reference rounding: the array version below must agree with it bit for bit. */
float af_round_f16(float f) { return from_f16(to_f16(f)); }

/* Rounds in the f32 domain without branches, so the loop vectorizes:
 * - normal range: round the low 13 mantissa bits to nearest even in integers;
 * - below 2^-14: (|x| + 0.5f) - 0.5f rounds to a multiple of 2^-24 (the ulp of
 *   [0.5, 1)) by IEEE round-to-nearest-even, and the subtraction is exact;
 * - >= 65520 gives inf; NaN gets the quiet bit and loses the low payload bits,
 *   exactly as the f16 round trip does. */
static inline float round_fast(float v) {
    uint32_t x = f2u(v);
    uint32_t sign = x & 0x80000000u;
    int32_t ax = (int32_t)(x & 0x7fffffffu); /* signed compares vectorize on SSE2 */
    uint32_t rn = ((uint32_t)ax + 0x0fffu + (((uint32_t)ax >> 13) & 1u)) & 0xffffe000u;
    float t = u2f((uint32_t)ax) + 0.5f; /* assignment drops any excess precision */
    uint32_t rs = f2u(t - 0.5f);
    uint32_t rq = ((uint32_t)ax | 0x400000u) & 0xffffe000u;
    /* selects as masks: GCC leaves ?: on integers as branches, which blocks vectorizing */
    uint32_t sub = 0u - (uint32_t)(ax < 0x38800000), big = 0u - (uint32_t)(ax >= 0x477ff000),
             nan = 0u - (uint32_t)(ax > 0x7f800000);
    uint32_t r = (rs & sub) | (rn & ~sub);
    r = (0x7f800000u & big) | (r & ~big);
    r = (rq & nan) | (r & ~nan);
    return u2f(r | sign);
}

#ifdef F16C_ATTR
/* Each converts the largest multiple of 8 elements and returns how many it did. */
F16C_ATTR static int64_t round_f16c(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
    return i;
}

F16C_ATTR static int64_t to_f16_f16c(const float *x, uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

F16C_ATTR static int64_t from_f16_f16c(const uint16_t *h, float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    return i;
}
#endif

void ir_round_f16_array(float *x, int64_t n) {
    int64_t i = 0;
#ifdef F16C_ATTR
    if (have_f16c()) i = round_f16c(x, n);
#endif
    /* fixed-size blocks vectorize even under -O2's cheap cost model */
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) x[i + j] = round_fast(x[i + j]);
    for (; i < n; i++) x[i] = round_fast(x[i]);
}

void ir_f32_to_f16_array(const float *x, uint16_t *h, int64_t n) {
    int64_t i = 0;
#ifdef F16C_ATTR
    if (have_f16c()) i = to_f16_f16c(x, h, n);
#endif
    for (; i < n; i++) h[i] = to_f16(x[i]);
}

void ir_f16_to_f32_array(const uint16_t *h, float *x, int64_t n) {
    int64_t i = 0;
#ifdef F16C_ATTR
    if (have_f16c()) i = from_f16_f16c(h, x, n);
#endif
    for (; i < n; i++) x[i] = from_f16(h[i]);
}
