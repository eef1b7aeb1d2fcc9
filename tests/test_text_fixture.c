/* run.c's encoding against an independent Python statement of it: the vocabulary and
 * the expected ids and decodings in tests/fixtures/text/ were written by
 * make_text_fixtures.py (standard library only), never by aneforge. */
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <stdlib.h>
#include <string.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif
#define DIR AF_SOURCE_DIR "/tests/fixtures/text/"

static size_t unhex(const char *s, char *out) {
    size_t n = 0;
    if (!strcmp(s, "-")) return 0;
    for (; s[0] && s[1]; s += 2) {
        unsigned v;
        sscanf(s, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

int main(void) {
    af_tokenizer *t = af_tokenizer_load(DIR "vocab.bin");
    CHECK(t != NULL, "load the fixture vocabulary: %s", af_error_message());
    FILE *f = fopen(DIR "cases.txt", "r");
    CHECK(f != NULL, "open cases.txt");
    if (!t || !f) return check_finish("text_fixture");
    static char line[1 << 16];
    int cases = 0, encoded = 0, decoded = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *flags_s = strtok(line, "\t"), *text_s = strtok(NULL, "\t"), *ids_s = strtok(NULL, "\t"),
             *dec_s = strtok(NULL, "\t");
        if (!flags_s || !text_s || !ids_s || !dec_s) {
            CHECK(0, "malformed line %d", cases + 2);
            continue;
        }
        static char text[1 << 14], want_dec[1 << 14];
        int32_t want[4096];
        size_t len = unhex(text_s, text), dlen = unhex(dec_s, want_dec);
        int nw = 0;
        for (char *p = strcmp(ids_s, "-") ? strtok(ids_s, " ") : NULL; p; p = strtok(NULL, " ")) want[nw++] = atoi(p);
        int32_t *ids;
        int64_t n;
        cases++;
        if (af_tokenizer_encode(t, text, len, (unsigned)atoi(flags_s), &ids, &n) != AF_OK) continue;
        if (n == nw && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids))) encoded++;
        else if (cases - encoded <= 3) fprintf(stderr, "  case %d (%s): %lld ids, Python %d\n", cases, text_s, (long long)n, nw);
        char *back;
        size_t blen;
        if (af_tokenizer_decode(t, want, nw, &back, &blen) == AF_OK && blen == dlen && !memcmp(back, want_dec, dlen)) decoded++;
        free(back);
        free(ids);
    }
    fclose(f);
    CHECK(cases >= 300, "%d cases", cases);
    CHECK(encoded == cases, "encoding equals the Python reference in %d of %d cases", encoded, cases);
    CHECK(decoded == cases, "decoding equals the Python reference in %d of %d cases", decoded, cases);
    af_tokenizer_free(t);
    return check_finish("text_fixture");
}
