/* The tokenizer's vocabulary: building and checking it, its index from bytes to id, and
 * llama2.c's tokenizer.bin format both ways. */
#include "text/maps.h"
#include "aneforge_data.h"
#include "text/text.h"
#include "data/data.h"
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int txt_lookup(const af_tokenizer *t, const uint8_t *s, size_t n) {
    size_t mask = t->nslot - 1;
    for (size_t i = (size_t)txt_hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && (n == 0 || memcmp(t->bytes + t->off[id], s, n) == 0)) return id;
    }
}

/* Indexes every token; a repeated string keeps its lowest id. */
static void build_index(af_tokenizer *t) {
    size_t mask = t->nslot - 1;
    for (int id = 0; id < t->n; id++) {
        const uint8_t *s = t->bytes + t->off[id];
        size_t i = (size_t)txt_hash_bytes(s, t->len[id]) & mask;
        for (; t->slot[i] >= 0; i = (i + 1) & mask) {
            int32_t o = t->slot[i];
            if (t->len[o] == t->len[id] && memcmp(t->bytes + t->off[o], s, t->len[id]) == 0) break;
        }
        if (t->slot[i] < 0) t->slot[i] = id;
    }
}

void af_tokenizer_free(af_tokenizer *t) {
    if (!t) return;
    free(t->bytes);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->slot);
    free(t);
}

af_status txt_tokenizer_build(int n, const uint8_t *const *tok, const uint32_t *len, const float *score,
                              int max_len, const char *what, af_tokenizer **out) {
    *out = NULL;
    if (n < TXT_MIN_VOCAB)
        return ir_fail(AF_ERR_CORRUPT, "%s has %d tokens; a llama2.c tokenizer needs at least %d (<unk>, <s>, </s> "
                                       "and the 256 byte tokens its byte fallback uses)", what, n, TXT_MIN_VOCAB);
    if (n > TXT_MAX_VOCAB)
        return ir_fail(AF_ERR_CORRUPT, "%s has %d tokens; at most %d fit the uint16 token files", what, n,
                       TXT_MAX_VOCAB);
    size_t total = 0;
    uint32_t longest = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(score[i])) return ir_fail(AF_ERR_CORRUPT, "%s: token %d has a NaN score", what, i);
        if (len[i] && memchr(tok[i], 0, len[i]))
            return ir_fail(AF_ERR_CORRUPT, "%s: token %d contains a NUL byte, which llama2.c's C strings cannot hold",
                           what, i);
        if (len[i] > longest) longest = len[i];
        total += len[i];
    }
    if (max_len < 0) max_len = (int)longest;
    if (longest > (uint32_t)max_len)
        return ir_fail(AF_ERR_CORRUPT, "%s: a token is %u bytes, longer than max_token_length %d (llama2.c sizes its "
                                       "merge buffer by it)", what, (unsigned)longest, max_len);
    af_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    t->n = n;
    t->max_len = max_len;
    t->longest = longest;
    t->nslot = 1;
    while (t->nslot < 2 * (size_t)n) t->nslot *= 2;
    t->bytes = malloc(total + (size_t)n); /* each token NUL-terminated, for callers that want C strings */
    t->off = malloc((size_t)n * sizeof *t->off);
    t->len = malloc((size_t)n * sizeof *t->len);
    t->score = malloc((size_t)n * sizeof *t->score);
    t->slot = malloc(t->nslot * sizeof *t->slot);
    if (!t->bytes || !t->off || !t->len || !t->score || !t->slot) {
        af_tokenizer_free(t);
        return ir_fail(AF_ERR_NOMEM, "%s: out of memory for %d tokens", what, n);
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (len[i]) memcpy(t->bytes + at, tok[i], len[i]);
        t->bytes[at + len[i]] = 0;
        t->off[i] = at;
        t->len[i] = len[i];
        t->score[i] = score[i];
        at += len[i] + 1;
    }
    for (size_t i = 0; i < t->nslot; i++) t->slot[i] = -1;
    build_index(t);
    for (int b = 0; b < 256; b++) t->byte_piece[b] = (uint8_t)b;
    t->space = txt_lookup(t, (const uint8_t *)" ", 1);
    *out = t;
    return AF_OK;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

af_status txt_tokenizer_parse(const uint8_t *buf, size_t size, const char *what, af_tokenizer **out) {
    *out = NULL;
    if (size < 4)
        return ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes, too short for a llama2.c tokenizer.bin (it starts with an "
                                       "int32 max_token_length)", what, size);
    int32_t max_len = (int32_t)le32(buf);
    if (max_len < 0) return ir_fail(AF_ERR_CORRUPT, "%s: max_token_length is %d", what, (int)max_len);
    /* First pass: count and check the records, so the second can fill arrays. */
    int n = 0;
    size_t at = 4;
    while (at < size) {
        if (n >= TXT_MAX_VOCAB)
            return ir_fail(AF_ERR_CORRUPT, "%s holds more than %d tokens; at most %d fit the uint16 token files",
                           what, TXT_MAX_VOCAB, TXT_MAX_VOCAB);
        if (size - at < 8)
            return ir_fail(AF_ERR_CORRUPT, "%s: truncated: the file ends inside token %d's score and length "
                                           "(%zu of 8 bytes)", what, n, size - at);
        int32_t l = (int32_t)le32(buf + at + 4);
        if (l < 0) return ir_fail(AF_ERR_CORRUPT, "%s: token %d has length %d", what, n, (int)l);
        if ((size_t)l > size - at - 8)
            return ir_fail(AF_ERR_CORRUPT, "%s: truncated: token %d is %d bytes long but only %zu remain", what, n,
                           (int)l, size - at - 8);
        at += 8 + (size_t)l;
        n++;
    }
    if (n < TXT_MIN_VOCAB)
        return ir_fail(AF_ERR_CORRUPT, "%s has %d tokens; a llama2.c tokenizer needs at least %d (<unk>, <s>, </s> "
                                       "and the 256 byte tokens its byte fallback uses)", what, n, TXT_MIN_VOCAB);
    const uint8_t **tok = malloc((size_t)n * sizeof *tok);
    uint32_t *len = malloc((size_t)n * sizeof *len);
    float *score = malloc((size_t)n * sizeof *score);
    af_status st = AF_ERR_NOMEM;
    if (tok && len && score) {
        at = 4;
        for (int i = 0; i < n; i++) {
            uint32_t bits = le32(buf + at);
            memcpy(&score[i], &bits, sizeof bits);
            len[i] = le32(buf + at + 4);
            tok[i] = buf + at + 8;
            at += 8 + len[i];
        }
        st = txt_tokenizer_build(n, tok, len, score, max_len, what, out);
    } else {
        ir_fail(st, "%s: out of memory for %d tokens", what, n);
    }
    free(tok);
    free(len);
    free(score);
    return st;
}

af_status txt_tokenizer_serialize(const af_tokenizer *t, uint8_t **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    size_t total = 4;
    for (int i = 0; i < t->n; i++) total += 8 + t->len[i];
    uint8_t *b = malloc(total);
    if (!b) return ir_fail(AF_ERR_NOMEM, "out of memory for a %zu-byte tokenizer file", total);
    put_le32(b, (uint32_t)t->max_len);
    size_t at = 4;
    for (int i = 0; i < t->n; i++) {
        uint32_t bits;
        memcpy(&bits, &t->score[i], sizeof bits);
        put_le32(b + at, bits);
        put_le32(b + at + 4, t->len[i]);
        if (t->len[i]) memcpy(b + at + 8, t->bytes + t->off[i], t->len[i]);
        at += 8 + t->len[i];
    }
    *buf = b;
    *size = total;
    return AF_OK;
}

af_tokenizer *af_tokenizer_load(const char *path) {
    uint8_t *buf;
    size_t size;
    if (data_read_file(path, "train one with `aneforge tokenizer train` or use llama2.c's tokenizer.bin", &buf,
                       &size) != AF_OK)
        return NULL;
    af_tokenizer *t;
    txt_tokenizer_parse(buf, size, path, &t);
    free(buf);
    return t;
}

af_status af_tokenizer_save(const af_tokenizer *t, const char *path) {
    if (!t || !path) return ir_fail(AF_ERR_INVALID, "af_tokenizer_save: %s is NULL", t ? "path" : "the tokenizer");
    uint8_t *buf;
    size_t size;
    af_status st = txt_tokenizer_serialize(t, &buf, &size);
    if (st != AF_OK) return st;
    st = ir_write_file(path, buf, size, "af_tokenizer_save"); /* whole or not at all */
    free(buf);
    return st;
}

/* The byte-level tokenizer: the specials and one token per byte, nothing to merge.
 * Printable ASCII bytes are spelled as themselves, so run.c finds " " for its dummy
 * prefix; every other byte is its <0xXX> token. Either way byte b has id b + 3. */
af_tokenizer *af_tokenizer_byte_level(void) {
    static const char *const special[3] = { "<unk>", "\n<s>\n", "\n</s>\n" };
    uint8_t store[256][7];
    const uint8_t *tok[TXT_MIN_VOCAB];
    uint32_t len[TXT_MIN_VOCAB];
    float score[TXT_MIN_VOCAB] = { 0 };
    for (int i = 0; i < 3; i++) tok[i] = (const uint8_t *)special[i], len[i] = (uint32_t)strlen(special[i]);
    for (int b = 0; b < 256; b++) {
        if (b >= 0x20 && b < 0x7f) {
            store[b][0] = (uint8_t)b;
            len[TXT_BYTE0 + b] = 1;
        } else {
            snprintf((char *)store[b], sizeof store[b], "<0x%02X>", b);
            len[TXT_BYTE0 + b] = 6;
        }
        tok[TXT_BYTE0 + b] = store[b];
    }
    af_tokenizer *t;
    txt_tokenizer_build(TXT_MIN_VOCAB, tok, len, score, -1, "the byte-level tokenizer", &t);
    return t;
}

int af_tokenizer_vocab_size(const af_tokenizer *t) { return t ? t->n : 0; }

const char *af_tokenizer_token(const af_tokenizer *t, int32_t id, size_t *len, float *score) {
    if (!t || id < 0 || id >= t->n) {
        if (len) *len = 0;
        if (score) *score = 0;
        ir_fail(AF_ERR_INVALID, "token %d is outside the vocabulary (size %d)", id, t ? t->n : 0);
        return NULL;
    }
    if (len) *len = t->len[id];
    if (score) *score = t->score[id];
    return (const char *)t->bytes + t->off[id];
}
