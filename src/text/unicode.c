/* Unicode classes and UTF-8 decoding for the byte-level BPE pre-tokenizers (unicode.h). */
#include "text/unicode.h"

static bool in_ranges(const text_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

bool text_is_letter(uint32_t cp) { return in_ranges(text_letters, text_letters_count, cp); }
bool text_is_number(uint32_t cp) { return in_ranges(text_numbers, text_numbers_count, cp); }

bool text_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t text_utf8_next(const unsigned char *s, size_t n, int *len) {
    unsigned char c = s[0];
    int k;
    uint32_t v, min;
    *len = 1;
    if (c < 0x80) return c;
    if ((c & 0xE0) == 0xC0) { k = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { k = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { k = 4; v = c & 0x07; min = 0x10000; }
    else return 0xFFFD;
    if (n < (size_t)k) return 0xFFFD;
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0xFFFD;
        v = v << 6 | (s[i] & 63);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0xFFFD;
    *len = k;
    return v;
}
