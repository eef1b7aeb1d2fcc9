/* libFuzzer target for the text layer's readers, and for the trainer and encoder on
 * what they accept. Every input is tried three ways:
 *  - as a tokenizer.bin: rejected cleanly, or accepted and then written back byte for
 *    byte, encoding a text into ids inside the vocabulary, every id decodable;
 *  - as a token file: rejected cleanly (odd size, an id past the vocabulary) or read
 *    whole;
 *  - as text (inputs up to 4 KiB): lines as documents to train a BPE vocabulary on;
 *    run.c's encoder must give every training chunk the tokens training left it in,
 *    and each document must come back from encode -> decode, unless it spells a token
 *    name such as "<0x41>": run.c merges that into the byte token whatever training
 *    did, and decodes it as the byte.
 *
 *   make fuzz    (builds this with clang and runs it FUZZ_TIME seconds on
 *                 tests/corpus/tokenizer)
 */
#include "text/text.h"
#include "aneforge_data.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_tokenizer: %s failed\n", #c); abort(); } } while (0)

static void check_encoding(const af_tokenizer *t, const uint8_t *text, size_t len, unsigned flags) {
    int32_t *ids;
    int64_t n;
    REQUIRE(af_tokenizer_encode(t, (const char *)text, len, flags, &ids, &n) == AF_OK);
    REQUIRE(n >= 0 && (size_t)n <= len + 3);
    for (int64_t i = 0; i < n; i++) {
        REQUIRE(ids[i] >= 0 && ids[i] < t->n);
        size_t l;
        REQUIRE(af_tokenizer_decode_piece(t, i ? ids[i - 1] : -1, ids[i], &l) != NULL);
    }
    char *back;
    size_t blen;
    REQUIRE(af_tokenizer_decode(t, ids, n, &back, &blen) == AF_OK && back[blen] == 0);
    af_free(back);
    af_free(ids);
}

static void check_tokenizer(const uint8_t *data, size_t size) {
    af_tokenizer *t = NULL;
    if (txt_tokenizer_parse(data, size, "fuzz", &t) != AF_OK) {
        REQUIRE(t == NULL);
        return;
    }
    REQUIRE(t->n >= TXT_MIN_VOCAB && t->n <= TXT_MAX_VOCAB);
    uint8_t *img;
    size_t n;
    REQUIRE(txt_tokenizer_serialize(t, &img, &n) == AF_OK && n == size && !memcmp(img, data, size));
    free(img);
    size_t tail = size < 64 ? size : 64; /* a text the input chooses */
    check_encoding(t, data + size - tail, tail, AF_ENCODE_BOS | AF_ENCODE_EOS);
    check_encoding(t, data + size - tail, tail, AF_ENCODE_NO_PREFIX);
    af_tokenizer_free(t);
}

static void check_tokens(const uint8_t *data, size_t size) {
    int vocab = size ? 1 + data[0] * 256 : 0;
    int32_t *ids;
    int64_t n;
    if (txt_tokens_parse(data, size, vocab, "fuzz", &ids, &n) != AF_OK) {
        REQUIRE(ids == NULL && n == 0);
        return;
    }
    REQUIRE(size % 2 == 0 && (size_t)n == size / 2);
    for (int64_t i = 0; i < n; i++) REQUIRE(vocab == 0 || ids[i] < vocab);
    af_free(ids);
}

typedef struct {
    const af_tokenizer *t;
} replay;

static void replay_chunk(const uint8_t *chunk, size_t len, int64_t count, const int32_t *ids, int n, void *user) {
    const replay *r = user;
    int32_t *got;
    int64_t ng;
    if (!r->t || memchr(chunk, '<', len)) return; /* a token name, "<0x41>", merges whole in run.c */
    REQUIRE(count > 0);
    REQUIRE(af_tokenizer_encode(r->t, (const char *)chunk, len, AF_ENCODE_NO_PREFIX, &got, &ng) == AF_OK);
    REQUIRE(ng == n && !memcmp(got, ids, (size_t)n * sizeof *ids));
    af_free(got);
}

static void check_training(const uint8_t *data, size_t size) {
    const char *docs[4096];
    size_t lens[4096];
    int64_t nd = 0;
    for (size_t at = 0; at < size && nd < 4096;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) : size;
        docs[nd] = (const char *)data + at, lens[nd++] = end - at;
        at = end + 1;
    }
    int vocab = 260 + (size ? data[0] : 0);
    af_tokenizer *t = NULL, *again = NULL;
    replay r = { NULL };
    REQUIRE(txt_bpe_train(nd, docs, lens, vocab, replay_chunk, &r, &t) == AF_OK);
    REQUIRE(t->n >= TXT_MIN_VOCAB + 1 && t->n <= vocab);
    r.t = t; /* train again, now replaying every chunk against the first result */
    REQUIRE(txt_bpe_train(nd, docs, lens, vocab, replay_chunk, &r, &again) == AF_OK && again->n == t->n);
    for (int64_t d = 0; d < nd; d++) {
        if (memchr(docs[d], '<', lens[d])) continue;
        int32_t *ids;
        int64_t n;
        char *back;
        size_t blen;
        REQUIRE(af_tokenizer_encode(t, docs[d], lens[d], AF_ENCODE_BOS, &ids, &n) == AF_OK);
        REQUIRE(af_tokenizer_decode(t, ids, n, &back, &blen) == AF_OK);
        REQUIRE(blen == lens[d] && !memcmp(back, docs[d], blen));
        af_free(back);
        af_free(ids);
    }
    af_tokenizer_free(again);
    af_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_tokenizer(data, size);
    check_tokens(data, size);
    if (size <= 4096) check_training(data, size);
    return 0;
}
