/* NFC: canonical decomposition (tables, Hangul arithmetically), canonical ordering by
 * combining class, then canonical composition (Unicode's algorithm: a character joins the
 * last starter unless a character of equal or higher class, or a starter, lies between). */
#include "text/nfc.h"
#include "text/unicode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(uint32_t c) {
    if (c < 0x300) return 0;
    int lo = 0, hi = nfc_ccc_count - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (c < nfc_ccc[m].lo) hi = m - 1;
        else if (c > nfc_ccc[m].hi) lo = m + 1;
        else return nfc_ccc[m].ccc;
    }
    return 0;
}

/* c's full canonical decomposition into out (at most 4 code points); returns its length */
static int decompose(uint32_t c, uint32_t *out) {
    if (c >= SBASE && c < SBASE + SCOUNT) {
        uint32_t s = c - SBASE, t = s % TCOUNT;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (!t) return 2;
        out[2] = TBASE + t;
        return 3;
    }
    int lo = 0, hi = nfc_decomp_count - 1;
    while (c >= 0xC0 && lo <= hi) {
        int m = (lo + hi) / 2;
        if (c < nfc_decomp[m].cp) hi = m - 1;
        else if (c > nfc_decomp[m].cp) lo = m + 1;
        else {
            memcpy(out, nfc_pool + nfc_decomp[m].off, sizeof *out * nfc_decomp[m].len);
            return nfc_decomp[m].len;
        }
    }
    out[0] = c;
    return 1;
}

/* the primary composite of a + b, or 0 */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = nfc_comp_count - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        const nfc_comp_entry *e = &nfc_comp[m];
        if (a < e->first || (a == e->first && b < e->second)) hi = m - 1;
        else if (a > e->first || b > e->second) lo = m + 1;
        else return e->composite;
    }
    return 0;
}

/* NFC of the code points c[0..n) in place; returns the new count */
static size_t nfc_run(uint32_t *c, size_t n) {
    for (size_t i = 1; i < n; i++) { /* canonical ordering: a stable sort of each run of nonzero classes */
        int k = ccc_of(c[i]);
        if (!k) continue;
        for (size_t j = i; j > 0 && ccc_of(c[j - 1]) > k; j--) {
            uint32_t t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
        }
    }
    if (!n) return 0;
    size_t out = 1, starter = 0;
    bool have = ccc_of(c[0]) == 0;
    int last = have ? 0 : 256;
    for (size_t i = 1; i < n; i++) {
        int k = ccc_of(c[i]);
        uint32_t comp = have ? compose(c[starter], c[i]) : 0;
        if (comp && (last < k || last == 0)) { c[starter] = comp; continue; }
        if (!k) { starter = out; have = true; }
        last = k;
        c[out++] = c[i];
    }
    return out;
}

static size_t put_utf8(uint32_t c, unsigned char *o) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 63)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12); o[1] = (unsigned char)(0x80 | (c >> 6 & 63)); o[2] = (unsigned char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18); o[1] = (unsigned char)(0x80 | (c >> 12 & 63));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 63)); o[3] = (unsigned char)(0x80 | (c & 63));
    return 4;
}

int text_nfc(const unsigned char *s, size_t n, unsigned char **out, size_t *out_len) {
    /* a code point of k bytes decomposes to at most 4 code points of at most 4 bytes each,
     * and composition only shortens: 4 code points per input byte bound both buffers */
    uint32_t *c = malloc(sizeof *c * (4 * n + 4));
    unsigned char *o = malloc(16 * n + 1);
    if (!c || !o) { free(c); free(o); return -1; }
    size_t m = 0, ol = 0;
    for (size_t i = 0; i <= n;) {
        int k = 1;
        uint32_t cp = i < n ? text_utf8_next(s + i, n - i, &k) : 0;
        bool invalid = i < n && cp == 0xFFFD && k == 1; /* a valid U+FFFD is 3 bytes */
        if (i == n || invalid) { /* flush the run of valid text before it */
            m = nfc_run(c, m);
            for (size_t q = 0; q < m; q++) ol += put_utf8(c[q], o + ol);
            m = 0;
            if (i == n) break;
            o[ol++] = s[i];
        } else {
            m += (size_t)decompose(cp, c + m);
        }
        i += (size_t)k;
    }
    free(c);
    *out = o;
    *out_len = ol;
    return 0;
}
