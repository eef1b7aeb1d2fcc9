/* fp16 conversion: exhaustive over fp16, exhaustive over midpoints, boundaries, and
 * random floats, all against references computed independently in double. */
#include "aneforge.h"
#include "ir/fp16.h"
#include "support/check.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* The value of an fp16 bit pattern, from its fields (NaN for NaN, +-inf for inf). */
static double ref_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp((double)(1024 + m), e - 25);
    return sign ? -v : v;
}

/* All non-negative finite fp16 values, ascending (index == bit pattern), plus 65536
 * standing in for inf: a value rounds to inf exactly when 65536 would be nearer (or
 * tied, since 0x7c00 is even), which is how IEEE defines overflow under RNE. */
static double table[0x7c01];

static uint16_t ref_to_f16(float f) {
    if (isnan(f)) return 0x7e00; /* callers check NaN separately */
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65536.0) return sign | 0x7c00;
    int lo = 0, hi = 0x7c00; /* invariant: table[lo] <= a < table[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (table[mid] <= a) lo = mid; else hi = mid;
    }
    double dlo = a - table[lo], dhi = table[hi] - a;
    int pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1) ? hi : lo;
    return (uint16_t)(sign | pick);
}

static int nfail_detail;

static void check_one(float f, const char *what) {
    uint16_t got = af_f32_to_f16(f), want = ref_to_f16(f);
    if (got != want && nfail_detail++ < 20)
        fprintf(stderr, "%s: f=%a (0x%08x) -> 0x%04x, want 0x%04x\n", what, (double)f, bits(f), got, want);
    CHECK(got == want, "%s", what);
    float r = af_round_f16(f);
    CHECK(bits(r) == bits(af_f16_to_f32(want)), "%s: round %a", what, (double)f);
}

static void test_f16_to_f32(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = af_f16_to_f32((uint16_t)h);
        double v = ref_value((uint16_t)h);
        int ok;
        if (isnan(v)) ok = isnan(f) && (bits(f) & 0x00400000u); /* quiet */
        else ok = (double)f == v;
        ok = ok && (!signbit(f) == !(h & 0x8000));
        if (!ok && bad++ < 10) fprintf(stderr, "f16 0x%04x -> %a, want %a\n", h, (double)f, v);
    }
    CHECK(bad == 0, "%d fp16 patterns decode wrongly", bad);
}

static void test_exhaustive_f16_values(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = af_f16_to_f32((uint16_t)h);
        uint16_t back = af_f32_to_f16(f);
        int isn = ((h >> 10) & 31) == 31 && (h & 1023);
        int ok = isn ? (back & 0x7c00) == 0x7c00 && (back & 0x200) && (back & 0x8000) == (h & 0x8000)
                     : back == h;
        if (!ok && bad++ < 10) fprintf(stderr, "round trip 0x%04x -> 0x%04x\n", h, back);
    }
    CHECK(bad == 0, "%d fp16 values do not round-trip", bad);
}

/* Every midpoint between adjacent non-negative fp16 values (12 significant bits, so
 * exact in f32) ties to the even neighbour; the float on either side goes to the
 * nearer one. The midpoint past 65504 is 65520, which ties to "even" inf. */
static void test_midpoints(void) {
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = table[h], hi = table[h + 1];
        float mid = (float)((lo + hi) / 2);
        CHECK((double)mid == (lo + hi) / 2, "midpoint of 0x%04x not exact", h);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int s = 0; s < 2; s++) {
            uint16_t sg = s ? 0x8000 : 0;
            float m = s ? -mid : mid;
            float up = nextafterf(m, s ? -INFINITY : INFINITY), down = nextafterf(m, 0.0f);
            CHECK(af_f32_to_f16(m) == (sg | even), "tie at 0x%04x", h);
            CHECK(af_f32_to_f16(up) == (sg | (h + 1)), "above tie at 0x%04x", h);
            CHECK(af_f32_to_f16(down) == (sg | h), "below tie at 0x%04x", h);
            check_one(m, "midpoint");
            check_one(up, "above midpoint");
            check_one(down, "below midpoint");
        }
    }
}

static void test_boundaries(void) {
    CHECK(af_f32_to_f16(65504.0f) == 0x7bff, "65504");
    CHECK(af_f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7bff, "just below 65520");
    CHECK(af_f32_to_f16(65519.99f) == 0x7bff, "65519.99");
    CHECK(af_f32_to_f16(65520.0f) == 0x7c00, "65520 -> inf");
    CHECK(af_f32_to_f16(-65520.0f) == 0xfc00, "-65520 -> -inf");
    CHECK(af_f32_to_f16(1e6f) == 0x7c00, "1e6");
    CHECK(af_f32_to_f16(FLT_MAX) == 0x7c00, "FLT_MAX");
    CHECK(af_f32_to_f16(-FLT_MAX) == 0xfc00, "-FLT_MAX");
    CHECK(af_f32_to_f16(INFINITY) == 0x7c00, "inf");
    CHECK(af_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    CHECK(isinf(af_round_f16(65520.0f)) && af_round_f16(65520.0f) > 0, "round 65520");
    CHECK(af_round_f16(65519.0f) == 65504.0f, "round 65519");
    /* zeros and subnormals */
    CHECK(af_f32_to_f16(0.0f) == 0x0000, "+0");
    CHECK(af_f32_to_f16(-0.0f) == 0x8000, "-0");
    CHECK(bits(af_round_f16(-0.0f)) == 0x80000000u, "round -0");
    float tiny = ldexpf(1.0f, -24); /* smallest fp16 subnormal */
    CHECK(af_f32_to_f16(tiny) == 0x0001, "2^-24");
    CHECK(af_f32_to_f16(tiny / 2) == 0x0000, "2^-25 ties to 0");
    CHECK(af_f32_to_f16(-tiny / 2) == 0x8000, "-2^-25 ties to -0");
    CHECK(af_f32_to_f16(nextafterf(tiny / 2, 1.0f)) == 0x0001, "just above 2^-25");
    CHECK(af_f32_to_f16(1.5f * tiny) == 0x0002, "1.5 ulp ties to 2");
    CHECK(af_f32_to_f16(2.5f * tiny) == 0x0002, "2.5 ulp ties to 2");
    CHECK(af_f32_to_f16(1023.5f * tiny) == 0x0400, "largest subnormal tie -> min normal");
    CHECK(af_f32_to_f16(ldexpf(1.0f, -14)) == 0x0400, "min normal");
    CHECK(af_f32_to_f16(from_bits(1)) == 0, "f32 denormal");
    CHECK(af_f32_to_f16(FLT_MIN) == 0, "FLT_MIN");
    CHECK(af_f32_to_f16(1.0f) == 0x3c00 && af_f32_to_f16(-2.0f) == 0xc000, "1, -2");
    CHECK(af_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "1 + half ulp ties to 1");
    CHECK(af_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02, "1 + 1.5 ulp ties to even");
    /* NaN: stays NaN, quiet, sign kept, even when only low payload bits are set */
    uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        float f = from_bits(nans[i]);
        uint16_t h = af_f32_to_f16(f);
        CHECK((h & 0x7c00) == 0x7c00 && (h & 0x0200), "nan 0x%08x -> 0x%04x", nans[i], h);
        CHECK((h >> 15) == (nans[i] >> 31), "nan sign 0x%08x", nans[i]);
        float r = af_round_f16(f);
        CHECK(isnan(r) && (bits(r) & 0x00400000u) && !signbit(r) == !(nans[i] >> 31),
              "round nan 0x%08x", nans[i]);
    }
}

static void test_random(void) {
    test_rng rng = {0x5eed1234ULL};
    const int n = 3000000;
    float *x = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n);
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    float *z = malloc(sizeof(float) * (size_t)n);
    CHECK(x && y && h && z, "alloc");
    if (!x || !y || !h || !z) goto out;
    for (int i = 0; i < n; i++) {
        uint32_t r = (uint32_t)(test_uniform(&rng) * 4294967296.0);
        switch (i % 4) {
        case 0: x[i] = from_bits(r); break; /* any pattern, NaN and inf included */
        case 1: /* exponents around the fp16 range: subnormal to overflow */
            x[i] = from_bits((r & 0x807fffffu) | ((uint32_t)(98 + (r >> 23) % 48) << 23));
            break;
        case 2: x[i] = (float)(test_normal(&rng) * 1000.0); break;
        default: x[i] = from_bits((bits(af_round_f16(from_bits(r >> 1))) + (r & 0x3fffu) - 0x2000u) |
                                  (r & 0x80000000u)); /* near fp16 values */
        }
    }
    nfail_detail = 0;
    int bad = 0, badarr = 0, badconv = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i])) continue;
        uint16_t want = ref_to_f16(x[i]);
        if (af_f32_to_f16(x[i]) != want || bits(af_round_f16(x[i])) != bits(af_f16_to_f32(want))) {
            if (bad++ < 10) fprintf(stderr, "random %a -> 0x%04x want 0x%04x\n", (double)x[i],
                                    af_f32_to_f16(x[i]), want);
        }
    }
    CHECK(bad == 0, "%d random floats round wrongly", bad);
    /* The array versions agree bit for bit with the scalar ones, NaNs included: first in
     * one call (a hardware path where there is one), then 7 at a time (portable code). */
    for (int pass = 0; pass < 2; pass++) {
        memcpy(y, x, sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i += pass ? 7 : n) {
            int len = pass && n - i > 7 ? 7 : n - i;
            ir_round_f16_array(y + i, len);
            ir_f32_to_f16_array(x + i, h + i, len);
            ir_f16_to_f32_array(h + i, z + i, len);
        }
        for (int i = 0; i < n; i++) {
            if (bits(y[i]) != bits(af_round_f16(x[i])) && badarr++ < 10)
                fprintf(stderr, "array round %a (0x%08x): 0x%08x vs 0x%08x\n", (double)x[i],
                        bits(x[i]), bits(y[i]), bits(af_round_f16(x[i])));
            if ((h[i] != af_f32_to_f16(x[i]) || bits(z[i]) != bits(af_f16_to_f32(h[i]))) &&
                badconv++ < 10)
                fprintf(stderr, "array convert %a\n", (double)x[i]);
        }
    }
    CHECK(badarr == 0, "%d ir_round_f16_array mismatches", badarr);
    CHECK(badconv == 0, "%d array conversion mismatches", badconv);
out:
    free(x); free(y); free(h); free(z);
}

/* The array version on every fp16 value and every midpoint and neighbour, with odd
 * lengths and offsets so vector bodies and scalar tails both run, then in short calls. */
static void test_array_exhaustive(void) {
    enum { N = 0x7c00 * 6 + 2 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    CHECK(x && y, "alloc");
    if (!x || !y) { free(x); free(y); return; }
    int64_t n = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float mid = (float)((table[h] + table[h + 1]) / 2);
        x[n++] = (float)table[h];
        x[n++] = -mid;
        x[n++] = mid;
        x[n++] = nextafterf(mid, INFINITY);
        x[n++] = nextafterf(mid, 0.0f);
        x[n++] = -nextafterf(mid, 0.0f);
    }
    x[n++] = INFINITY;
    x[n++] = from_bits(0xff800001u);
    for (int64_t off = 0; off < 3; off++) {
        memcpy(y, x, sizeof(float) * (size_t)n);
        ir_round_f16_array(y + off, n - off - 1);
        int bad = 0;
        for (int64_t i = off; i < n - 1; i++) bad += bits(y[i]) != bits(af_round_f16(x[i]));
        CHECK(bad == 0, "offset %d: %d mismatches", (int)off, bad);
        CHECK(bits(y[n - 1]) == bits(x[n - 1]), "wrote past the end");
    }
    memcpy(y, x, sizeof(float) * (size_t)n); /* short calls take the portable path */
    for (int64_t i = 0; i < n; i += 5) ir_round_f16_array(y + i, n - i < 5 ? n - i : 5);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += bits(y[i]) != bits(af_round_f16(x[i]));
    CHECK(bad == 0, "short calls: %d mismatches", bad);
    free(x); free(y);
}

int main(void) {
    for (uint32_t h = 0; h <= 0x7c00; h++) table[h] = h < 0x7c00 ? ref_value((uint16_t)h) : 65536.0;
    test_f16_to_f32();
    test_exhaustive_f16_values();
    test_midpoints();
    test_boundaries();
    test_array_exhaustive();
    test_random();
    return check_finish("fp16");
}
