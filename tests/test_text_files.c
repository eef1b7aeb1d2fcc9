/* The text layer's files: tokenizer.bin written byte for byte as llama2.c's
 * tokenizer.py writes it and read back; every kind of damage rejected with a message;
 * token files as little-endian uint16 with no header. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge_data.h"
#include "text/text.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[64];

static const char *tpath(const char *name) {
    static char buf[8][128];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, 128, "%s/%s", tmp, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && (n == 0 || fwrite(p, 1, n, f) == n), "write %s", path);
    if (f) fclose(f);
}

static uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = malloc(1 << 20);
    *n = f && b ? fread(b, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    return b;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static void put32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24); }

/* A tokenizer.bin image as tokenizer.py's export writes it: struct.pack("I", max_len),
 * then per token struct.pack("fI", score, len) and the bytes. */
static size_t image(uint8_t *out, int32_t max_len, int n, const char *const *tok, const float *score) {
    size_t at = 4;
    put32(out, (uint32_t)max_len);
    for (int i = 0; i < n; i++) {
        uint32_t bits, len = (uint32_t)strlen(tok[i]);
        memcpy(&bits, &score[i], 4);
        put32(out + at, bits);
        put32(out + at + 4, len);
        memcpy(out + at + 8, tok[i], len);
        at += 8 + len;
    }
    return at;
}

/* The llama2.c layout: specials, bytes, then extra. */
static int llama_like(const char **tok, float *score, char names[256][8], const char *const *extra, const float *escore) {
    int n = 0;
    tok[n] = "<unk>", score[n++] = 0;
    tok[n] = "\n<s>\n", score[n++] = 0;
    tok[n] = "\n</s>\n", score[n++] = 0;
    for (int b = 0; b < 256; b++) snprintf(names[b], 8, "<0x%02X>", b), tok[n] = names[b], score[n++] = 0;
    for (int i = 0; extra && extra[i]; i++) tok[n] = extra[i], score[n++] = escore[i];
    return n;
}

static void test_tokenizer_layout(void) {
    const char *tok[300];
    float score[300];
    char names[256][8];
    const char *const extra[] = { " t", "he", " the", " ", "\xc3\xa9", NULL };
    const float escore[] = { -1, -2, -3, -1e9f, -4.5f };
    int n = llama_like(tok, score, names, extra, escore);
    static uint8_t want[1 << 16];
    size_t wn = image(want, 6, n, tok, score);
    write_bytes(tpath("in.bin"), want, wn);
    af_tokenizer *t = af_tokenizer_load(tpath("in.bin"));
    CHECK(t && af_tokenizer_vocab_size(t) == n, "load: %s", af_error_message());
    if (!t) return;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        size_t len;
        float s;
        const char *p = af_tokenizer_token(t, i, &len, &s);
        ok &= p && len == strlen(tok[i]) && !memcmp(p, tok[i], len) && p[len] == 0 && s == score[i];
    }
    CHECK(ok, "every token and score read back");
    CHECK(af_tokenizer_token(t, n, NULL, NULL) == NULL && af_tokenizer_token(t, -1, NULL, NULL) == NULL,
          "ids out of range have no token");
    CHECK(af_tokenizer_save(t, tpath("out.bin")) == AF_OK, "save: %s", af_error_message());
    size_t gn;
    uint8_t *got = read_bytes(tpath("out.bin"), &gn);
    CHECK(gn == wn && !memcmp(got, want, wn), "saved file equals the export's bytes (%zu vs %zu)", gn, wn);
    /* spot checks of the layout itself, by hand: */
    CHECK(le32(got) == 6, "max_token_length first");
    CHECK(le32(got + 4) == 0 && le32(got + 8) == 5 && !memcmp(got + 12, "<unk>", 5), "token 0: score 0.0, 5, <unk>");
    size_t t259 = 4 + (8 + 5) * 2 + (8 + 6) + 256 * (8 + 6);
    CHECK(le32(got + t259) == 0xBF800000u && le32(got + t259 + 4) == 2 && !memcmp(got + t259 + 8, " t", 2),
          "token 259: score -1.0f (0xBF800000), 2, \" t\"");
    free(got);
    af_tokenizer_free(t);

    /* the byte-level tokenizer saves and loads back identically */
    t = af_tokenizer_byte_level();
    CHECK(t && af_tokenizer_save(t, tpath("bytes.bin")) == AF_OK, "save byte-level");
    af_tokenizer *u = af_tokenizer_load(tpath("bytes.bin"));
    CHECK(u && af_tokenizer_vocab_size(u) == 259, "reload byte-level");
    got = read_bytes(tpath("bytes.bin"), &gn);
    CHECK(gn == 4 + 5 + 5 + 6 + 3 * 8 + 95 * 9 + 161 * 14 && le32(got) == 6, "byte-level file: %zu bytes", gn);
    free(got);
    af_tokenizer_free(t);
    af_tokenizer_free(u);

    /* a repeated string: lookups take the lowest id, as a sorted run.c vocabulary would
     * be ambiguous about */
    const char *const dup[] = { "ab", "a", "b", "ab", NULL };
    const float dscore[] = { -5, -10, -10, -1 };
    n = llama_like(tok, score, names, dup, dscore);
    wn = image(want, 6, n, tok, score);
    write_bytes(tpath("dup.bin"), want, wn);
    t = af_tokenizer_load(tpath("dup.bin"));
    CHECK(t && txt_lookup(t, (const uint8_t *)"ab", 2) == 259, "a repeated token resolves to its first id");
    af_tokenizer_free(t);
}

static void expect_bad(const uint8_t *img, size_t n, const char *why, const char *what) {
    write_bytes(tpath("bad.bin"), img, n);
    af_tokenizer *t = af_tokenizer_load(tpath("bad.bin"));
    const char *msg = af_error_message();
    CHECK(t == NULL && strstr(msg, "bad.bin") && strstr(msg, why), "%s: should fail saying \"%s\": \"%s\"", what, why, msg);
    af_tokenizer_free(t);
}

static void test_tokenizer_errors(void) {
    const char *tok[300];
    float score[300];
    char names[256][8];
    static uint8_t img[1 << 16];
    int n = llama_like(tok, score, names, NULL, NULL);
    size_t good = image(img, 6, n, tok, score);

    expect_bad(img, 0, "too short", "empty file");
    expect_bad(img, 3, "too short", "3 bytes");
    expect_bad(img, 4, "has 0 tokens", "header only");
    expect_bad(img, good - 1, "truncated", "last token cut");
    expect_bad(img, good - 10, "inside token 258's score", "cut inside the last record's header");
    expect_bad(img, image(img, 6, 258, tok, score), "has 258 tokens", "no room for the byte fallback");
    size_t m = image(img, 5, n, tok, score);
    expect_bad(img, m, "longer than max_token_length", "max_token_length too small");
    m = image(img, -1, n, tok, score);
    expect_bad(img, m, "max_token_length is -1", "negative max_token_length");
    m = image(img, 6, n, tok, score);
    put32(img + 4 + 8 + 5 + 4, 0xFFFFFFF0u);
    expect_bad(img, m, "length -16", "negative length");
    m = image(img, 6, n, tok, score);
    put32(img + 4 + 4, 1000000);
    expect_bad(img, m, "truncated", "length past the end");
    m = image(img, 6, n, tok, score);
    put32(img + 4, 0x7FC00000u);
    expect_bad(img, m, "NaN score", "NaN score");
    m = image(img, 6, n, tok, score);
    img[4 + 8] = 0; /* "<unk>" -> "\0unk>" */
    expect_bad(img, m, "NUL byte", "NUL inside a token");

    /* more than 65536 tokens: empty tokens are 8 bytes each */
    size_t big = 4 + (size_t)65537 * 8;
    uint8_t *b = calloc(1, big);
    memcpy(b, img, 4);
    expect_bad(b, big, "more than 65536", "too many tokens");
    free(b);

    af_tokenizer *t = af_tokenizer_load(tpath("missing.bin"));
    CHECK(!t && strstr(af_error_message(), "missing.bin") && strstr(af_error_message(), "aneforge tokenizer train"),
          "missing file names the fix: %s", af_error_message());
    CHECK(af_tokenizer_save(NULL, tpath("x.bin")) == AF_ERR_INVALID, "save NULL");
}

static void test_token_files(void) {
    const int32_t ids[5] = { 0, 1, 258, 0x1234, 65535 };
    const uint8_t want[10] = { 0, 0, 1, 0, 2, 1, 0x34, 0x12, 0xFF, 0xFF };
    CHECK(af_tokens_write(tpath("t.bin"), ids, 5) == AF_OK, "write: %s", af_error_message());
    size_t n;
    uint8_t *got = read_bytes(tpath("t.bin"), &n);
    CHECK(n == 10 && !memcmp(got, want, 10), "uint16 little-endian, no header");
    free(got);
    int32_t *back;
    int64_t nb;
    CHECK(af_tokens_read(tpath("t.bin"), 0, &back, &nb) == AF_OK && nb == 5 && !memcmp(back, ids, sizeof ids),
          "read back");
    af_free(back);
    CHECK(af_tokens_read(tpath("t.bin"), 65536, &back, &nb) == AF_OK && nb == 5, "all below 65536");
    free(back);
    CHECK(af_tokens_read(tpath("t.bin"), 300, &back, &nb) == AF_ERR_CORRUPT && back == NULL &&
              strstr(af_error_message(), "token 3 is 4660") && strstr(af_error_message(), "300"),
          "an id past the vocabulary: %s", af_error_message());
    write_bytes(tpath("odd.bin"), want, 9);
    CHECK(af_tokens_read(tpath("odd.bin"), 0, &back, &nb) == AF_ERR_CORRUPT && strstr(af_error_message(), "odd.bin") &&
              strstr(af_error_message(), "uint16"), "odd size: %s", af_error_message());
    CHECK(af_tokens_write(tpath("empty.bin"), NULL, 0) == AF_OK && af_tokens_read(tpath("empty.bin"), 10, &back, &nb) == AF_OK &&
              nb == 0, "an empty token file");
    free(back);
    CHECK(af_tokens_read(tpath("none.bin"), 0, &back, &nb) == AF_ERR_IO && strstr(af_error_message(), "none.bin"),
          "missing token file");
    CHECK(af_tokens_write(tpath("no/such/dir.bin"), ids, 5) == AF_ERR_IO, "unwritable path");
    /* ids are int32_t in memory; the file holds uint16: a larger or negative id is
     * refused before anything is written (it would wrap to another token) */
    const int32_t wide[3] = { 5, 65536, 7 }, neg[2] = { 1, -1 };
    remove(tpath("wide.bin"));
    CHECK(af_tokens_write(tpath("wide.bin"), wide, 3) == AF_ERR_INVALID && strstr(af_error_message(), "token 1 is 65536") &&
              strstr(af_error_message(), "0..65535") && !fopen(tpath("wide.bin"), "rb"),
          "an id past uint16: %s", af_error_message());
    CHECK(af_tokens_write(tpath("wide.bin"), neg, 2) == AF_ERR_INVALID && strstr(af_error_message(), "token 1 is -1"),
          "a negative id: %s", af_error_message());
    const char *names[] = { "in.bin", "out.bin", "bytes.bin", "dup.bin", "bad.bin", "t.bin", "odd.bin", "empty.bin" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove(tpath(names[i]));
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/af_test_text_%d", (int)getpid());
    CHECK(mkdir(tmp, 0700) == 0, "mkdir %s", tmp);
    test_tokenizer_layout();
    test_tokenizer_errors();
    test_token_files();
    rmdir(tmp);
    return check_finish("text_files");
}
