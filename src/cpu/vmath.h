/* Vectorisable math for the CPU kernels' hot loops.
 *
 * cpu_vexpf: exp without a libm call, branch-free, so loops over it vectorise (glibc's
 * expf is a scalar call per element). Range reduction x = k ln2 + r (k rounded to
 * nearest, ln2 in two parts), Cephes' degree-6 polynomial for e^r on |r| <= ln2/2, and
 * 2^k applied as two factors so every k from -150 to 128 scales exactly (no overflow of
 * the exponent field). Within 1e-7 relative of exp over the normal range (measured:
 * 8.4e-8), exp(-inf) = 0, exp(+inf) = inf, NaN in gives NaN out, overflow gives inf.
 *
 * CPU_VECTOR_CLONES (cpu_features.h) builds the loops that use it per x86-64 level. */
#ifndef AF_CPU_VMATH_H
#define AF_CPU_VMATH_H
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_features.h" /* CPU_VECTOR_CLONES */

static inline float cpu_f32_from_bits(uint32_t i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

static inline float cpu_vexpf(float x) {
    /* Clamped so k stays in [-150, 129] (NaN too: it compares false and becomes -104;
     * the NaN is put back at the end). Below -104 the result scales to 0, above 89 to inf. */
    float y = x > -104.0f ? x : -104.0f;
    y = y < 89.0f ? y : 89.0f;
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float kf = y * 1.44269504088896341f + round_magic;
    int32_t k;
    memcpy(&k, &kf, sizeof k);
    k -= 0x4b400000; /* round_magic's bits */
    kf -= round_magic;
    float r = y - kf * 0.693359375f; /* ln2 = 0.693359375 - 2.12194440e-4 (the first part exact) */
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t k1 = k >> 1, k2 = k - k1;
    p = p * cpu_f32_from_bits((uint32_t)(k1 + 127) << 23) * cpu_f32_from_bits((uint32_t)(k2 + 127) << 23);
    return x != x ? x : p;
}
#endif
