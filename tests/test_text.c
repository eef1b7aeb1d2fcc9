/* The text layer: llama2.c run.c's encoding on a hand-made vocabulary against
 * hand-derived ids, the heap encoder against a naive statement of run.c's loop on
 * random vocabularies, decoding, encode->decode round trips, the BPE trainer (hand-derived
 * merges, layout, and run.c's encoder replaying its merges). The file formats are in
 * test_text_files.c, the Python fixture in test_text_fixture.c. */
#include "support/check.h"
#include "aneforge_data.h"
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#define S(x) (const uint8_t *)(x)

/* A vocabulary: the specials, <0x00>..<0xFF>, then `extra` (NULL-terminated) with
 * `scores`. */
static af_tokenizer *vocab_with(const char *const *extra, const float *scores) {
    static uint8_t names[256][7];
    const uint8_t *tok[400];
    uint32_t len[400];
    float score[400];
    const char *special[3] = { "<unk>", "\n<s>\n", "\n</s>\n" };
    int n = 0;
    for (int i = 0; i < 3; i++) tok[n] = S(special[i]), len[n] = (uint32_t)strlen(special[i]), score[n++] = 0;
    for (int b = 0; b < 256; b++) {
        snprintf((char *)names[b], 7, "<0x%02X>", b);
        tok[n] = names[b], len[n] = 6, score[n++] = 0;
    }
    for (int i = 0; extra[i]; i++) tok[n] = S(extra[i]), len[n] = (uint32_t)strlen(extra[i]), score[n] = scores[i], n++;
    af_tokenizer *t = NULL;
    CHECK(txt_tokenizer_build(n, tok, len, score, -1, "test vocab", &t) == AF_OK, "build: %s", af_error_message());
    return t;
}

/* The hand vocabulary; ids from 259 in this order. */
static const char *const HAND[] = { " ", "a", "b", "c", "ab", "bc", "abc", " a", "\xc3\xa9", "x", "xx", "cc", NULL };
static const float HAND_SCORE[] = { -100, -101, -102, -103, -1, -2, -3, -4, -104, -105, -1e10f, -5 };
enum { SP = 259, A, B, C, AB, BC, ABC, SA, EACUTE, X, XX, CC };

static int encode_is(const af_tokenizer *t, const char *text, size_t len, unsigned flags, const int32_t *want, int nwant,
                     const char *what) {
    int32_t *ids = NULL;
    int64_t n = 0;
    af_status st = af_tokenizer_encode(t, text, len, flags, &ids, &n);
    int ok = st == AF_OK && n == nwant && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids));
    CHECK(ok, "%s: got %lld ids (status %d)", what, (long long)n, (int)st);
    if (!ok && ids)
        for (int64_t i = 0; i < n; i++) fprintf(stderr, "  id[%lld] = %d\n", (long long)i, (int)ids[i]);
    free(ids);
    return ok;
}
#define ENC(t, text, flags, what, ...)                                                                         \
    do {                                                                                                       \
        const int32_t want_[] = { __VA_ARGS__ };                                                               \
        encode_is(t, text, sizeof(text) - 1, flags, want_, (int)(sizeof want_ / sizeof want_[0]), what);        \
    } while (0)

/* Each expectation derived by hand from run.c's rules (comments show the steps). */
static void test_hand_encoding(void) {
    af_tokenizer *t = vocab_with(HAND, HAND_SCORE);
    if (!t) return;
    /* " " a b c -> ab (-1 beats bc -2 and " a" -4) -> " " ab c -> abc (-3) */
    ENC(t, "abc", 0, "merges by score", SP, ABC);
    ENC(t, "abc", AF_ENCODE_NO_PREFIX, "no dummy prefix", ABC);
    /* BOS " " b c a b -> ab first (-1), then bc (-2); "bcab" is no token */
    ENC(t, "bcab", AF_ENCODE_BOS, "BOS, best pair first wherever it is", 1, SP, BC, AB);
    /* cc everywhere at -5: the leftmost pair merges first */
    ENC(t, "ccc", AF_ENCODE_NO_PREFIX, "ties go to the leftmost pair", CC, C);
    /* xx scores -1e10, run.c's starting score: never merged */
    ENC(t, "xx", 0, "a token at -1e10 is never a merge", SP, X, X);
    /* € is E2 82 AC, not in the vocabulary: its three bytes + 3 */
    ENC(t, "\xe2\x82\xac", 0, "byte fallback for a code point", SP, 0xE2 + 3, 0x82 + 3, 0xAC + 3);
    ENC(t, "\xc3\xa9", 0, "a known 2-byte code point", SP, EACUTE);
    /* a lone lead byte is its own code point; "<0xC3>a" is no token, so no merge */
    ENC(t, "\xc3" "a", 0, "lone lead byte", SP, 0xC3 + 3, A);
    /* continuation bytes: four make one code point, the fifth another */
    ENC(t, "\x80\x80\x80\x80\x80", AF_ENCODE_NO_PREFIX, "stray continuation bytes", 131, 131, 131, 131, 131);
    ENC(t, "a", AF_ENCODE_EOS, "EOS after the merges", SA, 2);
    ENC(t, "", AF_ENCODE_BOS | AF_ENCODE_EOS, "empty text: no dummy prefix", 1, 2);
    {
        int32_t *ids = (int32_t *)1;
        int64_t n = 7;
        CHECK(af_tokenizer_encode(t, NULL, 0, 0, &ids, &n) == AF_OK && n == 0, "empty text, no flags: %lld ids", (long long)n);
        free(ids);
    }
    /* a NUL byte (run.c never sees one) is a byte like any other */
    encode_is(t, "a\0b", 3, AF_ENCODE_NO_PREFIX, (const int32_t[]){ A, 3, B }, 3, "NUL byte");
    af_tokenizer_free(t);

    /* No " " in the vocabulary: the dummy prefix is the byte token of ' '. */
    const char *const nospace[] = { "a", NULL };
    const float nospace_score[] = { -1 };
    t = vocab_with(nospace, nospace_score);
    ENC(t, "a", 0, "prefix without a \" \" token", ' ' + 3, 259);
    af_tokenizer_free(t);

    /* run.c merges over BOS too: a token "\n<s>\n " swallows the dummy prefix. */
    const char *const bosmerge[] = { " ", "a", "\n<s>\n ", " a", NULL };
    const float bosmerge_score[] = { -10, -11, -1, -2 };
    t = vocab_with(bosmerge, bosmerge_score);
    ENC(t, "a", AF_ENCODE_BOS, "BOS takes part in merges", 261, 260);
    af_tokenizer_free(t);
}

static void test_decoding(void) {
    af_tokenizer *t = vocab_with(HAND, HAND_SCORE);
    if (!t) return;
    size_t len;
    const char *p = af_tokenizer_decode_piece(t, 1, SA, &len);
    CHECK(p && len == 1 && p[0] == 'a', "after BOS the leading space goes");
    p = af_tokenizer_decode_piece(t, 5, SA, &len);
    CHECK(p && len == 2 && !memcmp(p, " a", 2), "elsewhere it stays");
    p = af_tokenizer_decode_piece(t, -1, 3 + 0x41, &len);
    CHECK(p && len == 1 && p[0] == 'A', "<0x41> is A");
    p = af_tokenizer_decode_piece(t, -1, 3 + 0xE9, &len);
    CHECK(p && len == 1 && (uint8_t)p[0] == 0xE9, "<0xE9> is the byte E9");
    p = af_tokenizer_decode_piece(t, -1, 3, &len);
    CHECK(p && len == 1 && p[0] == 0, "<0x00> is one zero byte");
    p = af_tokenizer_decode_piece(t, -1, 1, &len);
    CHECK(p && len == 5 && !memcmp(p, "\n<s>\n", 5), "run.c's piece for BOS is its text");
    CHECK(af_tokenizer_decode_piece(t, -1, 400, &len) == NULL && len == 0, "an id out of range has no piece");

    char *text;
    const int32_t seq[] = { 1, SP, ABC, 3 + 0xC3, 3 + 0xA9, SA, 2 };
    CHECK(af_tokenizer_decode(t, seq, 7, &text, &len) == AF_OK && len == 7 && !memcmp(text, "abc\xc3\xa9 a", 8),
          "sequence: BOS/EOS silent, prefix dropped, bytes joined: len %zu", len);
    free(text);
    const int32_t bad[] = { 1, 9999 };
    CHECK(af_tokenizer_decode(t, bad, 2, &text, &len) == AF_ERR_INVALID && text == NULL &&
              strstr(af_error_message(), "position 1"), "bad id: %s", af_error_message());
    af_tokenizer_free(t);

    /* Byte-level: printable ASCII spelled as itself, the rest <0xXX>, all at byte + 3. */
    t = af_tokenizer_byte_level();
    CHECK(t && af_tokenizer_vocab_size(t) == 259, "byte-level size");
    if (!t) return;
    int ok = 1;
    for (int b = 0; b < 256; b++) {
        char want[8];
        if (b >= 0x20 && b < 0x7f) snprintf(want, sizeof want, "%c", b);
        else snprintf(want, sizeof want, "<0x%02X>", b);
        const char *s = af_tokenizer_token(t, 3 + b, &len, NULL);
        ok &= s && len == strlen(want) && !memcmp(s, want, len);
        p = af_tokenizer_decode_piece(t, 0, 3 + b, &len);
        ok &= p && len == 1 && (uint8_t)p[0] == b;
    }
    CHECK(ok, "byte-level tokens and their pieces");
    ENC(t, "h\xc3\xa9!", AF_ENCODE_BOS, "byte-level encoding", 1, ' ' + 3, 'h' + 3, 0xC3 + 3, 0xA9 + 3, '!' + 3);
    af_tokenizer_free(t);
}

/* ---------------------------------------------------------------- naive run.c */

/* run.c's loop stated directly: rescan every pair after each merge, linear search of
 * the vocabulary for the concatenation (lowest id), strict > from -1e10. */
static int naive_lookup(const af_tokenizer *t, const uint8_t *s, size_t n) {
    for (int i = 0; i < t->n; i++)
        if (t->len[i] == n && !memcmp(t->bytes + t->off[i], s, n)) return i;
    return -1;
}

static int64_t naive_encode(const af_tokenizer *t, const uint8_t *s, size_t len, unsigned flags, int32_t *out) {
    int64_t n = 0;
    if (flags & AF_ENCODE_BOS) out[n++] = 1;
    if (len && !(flags & AF_ENCODE_NO_PREFIX)) {
        int sp = naive_lookup(t, S(" "), 1);
        out[n++] = sp >= 0 ? sp : 35;
    }
    for (size_t i = 0; i < len;) {
        size_t u = 1;
        while (i + u < len && u < 4 && (s[i + u] & 0xC0) == 0x80) u++;
        int id = naive_lookup(t, s + i, u);
        if (id >= 0) out[n++] = id;
        else
            for (size_t j = 0; j < u; j++) out[n++] = 3 + s[i + j];
        i += u;
    }
    uint8_t buf[256];
    for (;;) {
        float best = -1e10f;
        int64_t at = -1;
        int best_id = -1;
        for (int64_t i = 0; i + 1 < n; i++) {
            uint32_t la = t->len[out[i]], lb = t->len[out[i + 1]];
            memcpy(buf, t->bytes + t->off[out[i]], la);
            memcpy(buf + la, t->bytes + t->off[out[i + 1]], lb);
            int id = naive_lookup(t, buf, la + lb);
            if (id >= 0 && t->score[id] > best) best = t->score[id], at = i, best_id = id;
        }
        if (at < 0) break;
        out[at] = best_id;
        memmove(out + at + 1, out + at + 2, (size_t)(n - at - 2) * sizeof *out);
        n--;
    }
    if (flags & AF_ENCODE_EOS) out[n++] = 2;
    return n;
}

static void test_against_naive(void) {
    test_rng rng = { 1414 };
    static const char *const alphabet[] = { "a", "b", "c", " ", "\xc3\xa9", "\xe6\x97\xa5", "\x80", "\xff", "\n", "q" };
    enum { NA = 10 };
    int cases = 0, same = 0;
    for (int v = 0; v < 40; v++) {
        /* a random vocabulary: some single units, random concatenations, scores with ties */
        char store[80][16];
        const char *extra[81];
        float score[80];
        int ne = 0;
        for (int i = 0; i < NA; i++)
            if (test_uniform(&rng) < 0.8) snprintf(store[ne], 16, "%s", alphabet[i]), score[ne] = -(float)(int)(test_uniform(&rng) * 20), ne++;
        while (ne < 60) {
            int parts = 2 + (int)(test_uniform(&rng) * 3);
            store[ne][0] = 0;
            for (int k = 0; k < parts; k++) strcat(store[ne], alphabet[(int)(test_uniform(&rng) * NA)]);
            int dup = 0;
            for (int j = 0; j < ne; j++) dup |= !strcmp(store[j], store[ne]);
            if (dup) continue;
            double r = test_uniform(&rng);
            score[ne] = r < 0.05 ? -2e10f : -(float)(int)(r * 30);
            ne++;
        }
        for (int i = 0; i < ne; i++) extra[i] = store[i];
        extra[ne] = NULL;
        af_tokenizer *t = vocab_with(extra, score);
        if (!t) return;
        for (int k = 0; k < 50; k++) {
            uint8_t text[200];
            size_t len = 0;
            int parts = (int)(test_uniform(&rng) * 40);
            for (int j = 0; j < parts; j++) {
                const char *a = alphabet[(int)(test_uniform(&rng) * NA)];
                memcpy(text + len, a, strlen(a));
                len += strlen(a);
            }
            unsigned flags = (unsigned)(test_uniform(&rng) * 8);
            int32_t want[210], *got;
            int64_t nw = naive_encode(t, text, len, flags, want), ng;
            cases++;
            if (af_tokenizer_encode(t, (const char *)text, len, flags, &got, &ng) == AF_OK && ng == nw &&
                (nw == 0 || !memcmp(got, want, (size_t)nw * sizeof *got)))
                same++;
            free(got);
        }
        af_tokenizer_free(t);
    }
    CHECK(same == cases, "heap encoder equals run.c's loop on %d of %d random cases", same, cases);
}

/* ---------------------------------------------------------------- round trips */

/* Synthetic English-like documents (seeded), with some UTF-8. */
static const char *const WORDS[] = { "the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was",
                                     "for", "on", "are", "as", "with", "his", "they", "I", "at", "be", "this",
                                     "have", "from", "or", "one", "had", "by", "word", "but", "not", "what",
                                     "all", "were", "we", "when", "your", "can", "said", "there", "use", "an",
                                     "each", "which", "she", "do", "how", "their", "if", "caf\xc3\xa9", "na\xc3\xafve",
                                     "\xe6\x97\xa5\xe6\x9c\xac", "--", "\"quoted\"", "(aside)" };

static size_t make_doc(test_rng *r, char *out, size_t cap) {
    size_t n = 0;
    int words = 5 + (int)(test_uniform(r) * 40);
    for (int w = 0; w < words && n + 32 < cap; w++) {
        const char *s = WORDS[(int)(test_uniform(r) * (sizeof WORDS / sizeof WORDS[0]))];
        if (w) out[n++] = test_uniform(r) < 0.1 ? '\n' : ' ';
        if (test_uniform(r) < 0.05) out[n++] = '\t';
        memcpy(out + n, s, strlen(s));
        n += strlen(s);
        if (test_uniform(r) < 0.1) out[n++] = test_uniform(r) < 0.5 ? ',' : '.';
    }
    return n;
}

static int round_trips(const af_tokenizer *t, const char *text, size_t len) {
    int32_t *ids;
    int64_t n;
    char *back = NULL;
    size_t blen = 0;
    int ok = af_tokenizer_encode(t, text, len, AF_ENCODE_BOS | AF_ENCODE_EOS, &ids, &n) == AF_OK;
    ok = ok && af_tokenizer_decode(t, ids, n, &back, &blen) == AF_OK && blen == len && !memcmp(back, text, len);
    if (ok) free(ids);
    free(back);
    return ok;
}

static void test_round_trips(af_tokenizer *trained) {
    static const struct { const char *s; size_t n; } texts[] = {
        { "Hello, world!", 13 },
        { " leading space", 14 },
        { "  two leading spaces and trailing  ", 35 },
        { "line one\nline two\r\n\ttabbed", 27 },
        { "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82 \xe2\x82\xac", 31 },
        { "\xff\xfe\x80\x81 invalid \xc3 bytes \xe6\x97 cut", 26 },
        { "\x80\x80\x80\x80\x80\x80", 6 },
        { "with\0nul", 8 },
        { "<0x41> <unk> \n<s>\n literal specials", 35 },
        { " ", 1 },
        { "", 0 },
    };
    af_tokenizer *bytes = af_tokenizer_byte_level();
    af_tokenizer *hand = vocab_with(HAND, HAND_SCORE);
    af_tokenizer *ts[3] = { trained, bytes, hand };
    const char *names[3] = { "trained", "byte-level", "hand" };
    for (int k = 0; k < 3; k++) {
        if (!ts[k]) continue;
        int ok = 0, total = 0;
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++, total++) {
            int r = round_trips(ts[k], texts[i].s, texts[i].n);
            if (!r) fprintf(stderr, "  %s: text %zu does not round-trip\n", names[k], i);
            ok += r;
        }
        test_rng rng = { 77 };
        char doc[4096];
        for (int i = 0; i < 100; i++, total++) ok += round_trips(ts[k], doc, make_doc(&rng, doc, sizeof doc));
        /* every byte value, and random bytes */
        for (int i = 0; i < 256; i++) doc[i] = (char)i;
        ok += round_trips(ts[k], doc, 256), total++;
        for (int i = 0; i < 50; i++, total++) {
            size_t n = (size_t)(test_uniform(&rng) * 300);
            for (size_t j = 0; j < n; j++) doc[j] = (char)(int)(test_uniform(&rng) * 256);
            ok += round_trips(ts[k], doc, n);
        }
        CHECK(ok == total, "%s tokenizer: %d of %d texts round-trip through encode and decode", names[k], ok, total);
    }
    af_tokenizer_free(bytes);
    af_tokenizer_free(hand);
}

/* ---------------------------------------------------------------- the trainer */

static void test_trainer_by_hand(void) {
    /* " aaa aaa" and " ab ab" give chunks " aaa" x2 and " ab" x2; characters " " (always
     * first), a (8 times), b (2). Pair counts: " a" 4, aa 4, ab 2 -> " a" (tie with aa,
     * lower ids win). Then " a"+a 2, aa 2, " a"+b 2 -> aa (ids 260,260 lowest), then
     * " a"+b 2 and " a"+aa 2 -> " ab" (b's id 261 < aa's 263), then " aaa". */
    const char *docs[2] = { "aaa aaa", "ab ab" };
    const size_t lens[2] = { 7, 5 };
    af_tokenizer *t = af_tokenizer_train(2, docs, lens, 1000);
    CHECK(t != NULL, "train: %s", af_error_message());
    if (!t) return;
    const char *want[] = { " a", "aa", " ab", " aaa", " ", "a", "b" };
    const float want_score[] = { -1, -2, -3, -4, -5, -6, -7 };
    CHECK(af_tokenizer_vocab_size(t) == 259 + 7, "stops when no pair occurs twice: %d tokens", af_tokenizer_vocab_size(t));
    for (int i = 0; i < 7 && i + 259 < af_tokenizer_vocab_size(t); i++) {
        size_t len;
        float score;
        const char *s = af_tokenizer_token(t, 259 + i, &len, &score);
        CHECK(len == strlen(want[i]) && !memcmp(s, want[i], len) && score == want_score[i],
              "token %d: \"%.*s\" %g, want \"%s\" %g", 259 + i, (int)len, s, (double)score, want[i], (double)want_score[i]);
    }
    ENC(t, "aaa ab", 0, "encoding replays the merges", 262, 261);
    af_tokenizer_free(t);

    t = af_tokenizer_train(2, docs, lens, 263);
    CHECK(t && af_tokenizer_vocab_size(t) == 263, "vocab 263: the 3 characters and 1 merge");
    if (t) {
        size_t len;
        const char *s = af_tokenizer_token(t, 259, &len, NULL);
        CHECK(len == 2 && !memcmp(s, " a", 2), "the one merge is \" a\"");
    }
    af_tokenizer_free(t);
    t = af_tokenizer_train(2, docs, lens, 261);
    CHECK(t && af_tokenizer_vocab_size(t) == 261, "vocab 261: room for \" \" and a only");
    if (t) ENC(t, "ab", 0, "b falls back to its byte", 259, 260, 'b' + 3);
    af_tokenizer_free(t);
    CHECK(af_tokenizer_train(2, docs, lens, 259) == NULL && strstr(af_error_message(), "vocab size 259"),
          "vocab 259 rejected: %s", af_error_message());
    CHECK(af_tokenizer_train(2, docs, lens, 65537) == NULL, "vocab 65537 rejected");
}

typedef struct {
    const af_tokenizer *t;
    int chunks, same;
    int64_t tokens;
} replay;

static void check_chunk(const uint8_t *chunk, size_t len, int64_t count, const int32_t *ids, int n, void *user) {
    replay *r = user;
    int32_t *got;
    int64_t ng;
    r->chunks++;
    r->tokens += count * n;
    if (!r->t) return;
    if (af_tokenizer_encode(r->t, (const char *)chunk, len, AF_ENCODE_NO_PREFIX, &got, &ng) == AF_OK && ng == n &&
        !memcmp(got, ids, (size_t)n * sizeof *ids))
        r->same++;
    else if (r->chunks - r->same <= 3)
        fprintf(stderr, "  chunk \"%.*s\" encodes differently from training\n", (int)len, (const char *)chunk);
    free(got);
}

static af_tokenizer *test_trainer_replays(void) {
    enum { NDOCS = 400 };
    static char store[NDOCS][4096];
    const char *docs[NDOCS];
    size_t lens[NDOCS];
    test_rng rng = { 2024 };
    for (int i = 0; i < NDOCS; i++) docs[i] = store[i], lens[i] = make_doc(&rng, store[i], sizeof store[i]);
    /* The callback needs the trained tokenizer: train once for it, then again (training
     * is deterministic, checked below) replaying every chunk. */
    af_tokenizer *t = NULL;
    replay r = { 0 };
    CHECK(txt_bpe_train(NDOCS, docs, lens, 600, check_chunk, &r, &t) == AF_OK, "train: %s", af_error_message());
    if (!t) return NULL;
    replay r2 = { .t = t };
    af_tokenizer *t2 = NULL;
    CHECK(txt_bpe_train(NDOCS, docs, lens, 600, check_chunk, &r2, &t2) == AF_OK, "train again");
    CHECK(r2.chunks > 100 && r2.same == r2.chunks, "run.c's encoder gives training's tokens for %d of %d chunks",
          r2.same, r2.chunks);
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    CHECK(txt_tokenizer_serialize(t, &b1, &n1) == AF_OK && txt_tokenizer_serialize(t2, &b2, &n2) == AF_OK &&
              n1 == n2 && !memcmp(b1, b2, n1), "training is deterministic");
    free(b1);
    free(b2);
    af_tokenizer_free(t2);

    /* The layout llama2.c's sentencepiece export has. */
    int n = af_tokenizer_vocab_size(t), ok = n == 600;
    size_t len;
    float score;
    const char *s;
    s = af_tokenizer_token(t, 0, &len, &score), ok &= len == 5 && !memcmp(s, "<unk>", 5) && score == 0;
    s = af_tokenizer_token(t, 1, &len, &score), ok &= len == 5 && !memcmp(s, "\n<s>\n", 5) && score == 0;
    s = af_tokenizer_token(t, 2, &len, &score), ok &= len == 6 && !memcmp(s, "\n</s>\n", 6) && score == 0;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        s = af_tokenizer_token(t, 3 + b, &len, &score);
        ok &= len == 6 && !memcmp(s, name, 6) && score == 0;
    }
    CHECK(ok, "specials and byte tokens as in llama2.c's export, vocab %d", n);
    /* merges scored -1, -2, ..., then the characters (one code point each) below them */
    int merges = 0, chars = 0, space = 0;
    float prev = 0;
    ok = 1;
    for (int id = 259; id < n; id++) {
        s = af_tokenizer_token(t, id, &len, &score);
        ok &= score == prev - 1;
        prev = score;
        bool one = txt_utf8_valid((const uint8_t *)s, len);
        ok &= one ? ++chars > 0 : chars == 0; /* no merge after the first character */
        merges += !one;
        space |= len == 1 && s[0] == ' ';
    }
    CHECK(ok && merges > 250 && chars > 20 && space, "scores -1, -2, ...: %d merges then %d characters, \" \" present %d",
          merges, chars, space);
    CHECK(t->max_len == (int)t->longest, "max_token_length is the longest token");
    return t;
}

int main(void) {
    test_hand_encoding();
    test_decoding();
    test_against_naive();
    test_trainer_by_hand();
    af_tokenizer *t = test_trainer_replays();
    test_round_trips(t);
    af_tokenizer_free(t);
    return check_finish("text");
}
