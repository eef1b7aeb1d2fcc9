/* Readers' overflow and sign guards, each checked by WHICH error it reports (issue 32):
 * the old tests fed overflowing headers that a later size check rejected anyway, so a
 * removed guard went unnoticed. Here each header is built so that without its guard the
 * file would be accepted (a product that wraps to exactly the payload size) or rejected
 * with a different message.
 *
 * planted (src/data/idx.c, data_idx_parse): the `if (count > payload / d)` guard removed
 * -> dims 1380655685 x 3340214413 x 16 (= 4 * 2^64 + 16) over 16 data bytes, and
 * 2^31 x 2^31 x 4 over none, are accepted as valid; test_idx_wrap fails. */
#include "aneforge.h"
#include "aneforge_data.h"
#include "data/data.h"
#include "support/check.h"
#include "text/text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* An IDX ubyte file of rank 3 with the given dims and `payload` zero bytes of data. */
static size_t idx3(uint8_t *buf, uint32_t d0, uint32_t d1, uint32_t d2, size_t payload) {
    be32(buf, 0x00000803u);
    be32(buf + 4, d0);
    be32(buf + 8, d1);
    be32(buf + 12, d2);
    memset(buf + 16, 0, payload);
    return 16 + payload;
}

static void expect(af_status st, af_status want, const char *msg, const char *what) {
    CHECK(st == want && strstr(af_error_message(), msg) != NULL, "%s: status %d (want %d), message \"%s\" (want it to say \"%s\")",
          what, (int)st, (int)want, af_error_message(), msg);
}

static void test_idx_wrap(void) {
    uint8_t buf[64];
    int64_t dims[3];
    const uint8_t *data;
    /* 1380655685 * 3340214413 = 4 * 2^60 + 1, times 16 wraps to 16 in 64 bits */
    size_t n = idx3(buf, 1380655685u, 3340214413u, 16, 16);
    expect(data_idx_parse("wrap16.idx", buf, n, 3, dims, &data), AF_ERR_CORRUPT, "header dims need more than the 16 data bytes",
           "IDX dims whose product wraps to the payload size");
    n = idx3(buf, 1u << 31, 1u << 31, 4, 0);
    expect(data_idx_parse("wrap0.idx", buf, n, 3, dims, &data), AF_ERR_CORRUPT, "header dims need more than the 0 data bytes",
           "IDX dims 2^31 x 2^31 x 4 with no data");
    /* the neighbours, so the messages above are the guard's and not the size check's */
    n = idx3(buf, 2, 2, 4, 15);
    expect(data_idx_parse("short.idx", buf, n, 3, dims, &data), AF_ERR_CORRUPT, "need more than the 15 data bytes",
           "IDX one byte short");
    n = idx3(buf, 2, 2, 4, 17);
    expect(data_idx_parse("long.idx", buf, n, 3, dims, &data), AF_ERR_CORRUPT, "trailing garbage", "IDX one byte long");
    n = idx3(buf, 2, 0, 4, 0);
    expect(data_idx_parse("zero.idx", buf, n, 3, dims, &data), AF_ERR_CORRUPT, "dimension 1 is 0", "IDX zero dimension");
    n = idx3(buf, 2, 2, 4, 16);
    CHECK(data_idx_parse("ok.idx", buf, n, 3, dims, &data) == AF_OK && dims[0] == 2 && dims[1] == 2 && dims[2] == 4 && data == buf + 16,
          "IDX 2 x 2 x 4 with 16 bytes parses: %s", af_error_message());
}

/* A .npy (version 1.0) with the header dict `dict` and `payload` zero bytes. */
static size_t npy(uint8_t *buf, const char *dict, size_t payload) {
    size_t dl = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)dl, buf[9] = (uint8_t)(dl >> 8);
    memcpy(buf + 10, dict, dl);
    memset(buf + 10 + dl, 0, payload);
    return 10 + dl + payload;
}

/* planted (src/data/npy.c, data_npy_parse): the `if (count > payload / itemsize / d)`
 * guard removed -> shape (2^62 + 4,) of '<f4' over 16 bytes (count * 4 wraps to 16) is
 * accepted. */
static void test_npy_wrap(void) {
    uint8_t buf[256];
    float *x = NULL;
    int rank;
    int64_t dims[8];
    size_t n = npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387908,), }\n", 16);
    af_status st = data_npy_parse("wrap.npy", buf, n, &x, &rank, dims);
    expect(st, AF_ERR_CORRUPT, "shape needs more than the 16 data bytes", "npy shape whose byte count wraps to the payload");
    if (st == AF_OK) free(x);
    x = NULL;
    n = npy(buf, "{'descr': '<f2', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", 0);
    st = data_npy_parse("wrap0.npy", buf, n, &x, &rank, dims);
    expect(st, AF_ERR_CORRUPT, "shape needs more than the 0 data bytes", "npy shape 2^32 x 2^32 with no data");
    if (st == AF_OK) free(x);
    x = NULL;
    n = npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n", 12);
    st = data_npy_parse("short.npy", buf, n, &x, &rank, dims);
    expect(st, AF_ERR_CORRUPT, "needs more than the 12 data bytes", "npy one element short");
    if (st == AF_OK) free(x);
}

/* planted (src/text/vocab.c, txt_tokenizer_parse): the `if (l < 0)` check removed -> a
 * token length of 0xffffffff is reported as a truncated file instead of a bad length. */
static void test_tokenizer_lengths(void) {
    uint8_t buf[32] = { 0 };
    buf[0] = 4;                       /* max_token_length 4 */
    memset(buf + 8, 0xff, 4);         /* token 0: score 0, length -1 */
    af_tokenizer *t = NULL;
    expect(txt_tokenizer_parse(buf, 16, "neg.bin", &t), AF_ERR_CORRUPT, "token 0 has length -1", "tokenizer length -1");
    af_tokenizer_free(t);
    buf[8] = 0x10, buf[9] = 0, buf[10] = 0, buf[11] = 0; /* length 16 with 4 bytes left */
    expect(txt_tokenizer_parse(buf, 16, "trunc.bin", &t), AF_ERR_CORRUPT, "token 0 is 16 bytes long but only 4 remain",
           "tokenizer token past the end");
    af_tokenizer_free(t);
    memset(buf, 0xff, 4); /* max_token_length -1 */
    expect(txt_tokenizer_parse(buf, 16, "max.bin", &t), AF_ERR_CORRUPT, "max_token_length is -1", "tokenizer max length -1");
    af_tokenizer_free(t);
}

/* planted (src/text/tokens.c): `if (vocab > 0 && t[i] > vocab)` -> id == vocab accepted. */
static void test_token_ids(void) {
    uint8_t b[6] = { 1, 0, 3, 0, 4, 0 };
    int32_t *t = NULL;
    int64_t n = 0;
    expect(txt_tokens_parse(b, 6, 4, "ids.bin", &t, &n), AF_ERR_CORRUPT, "token 2 is 4, outside the vocabulary of 4",
           "token id equal to the vocabulary size");
    free(t);
    t = NULL;
    CHECK(txt_tokens_parse(b, 4, 4, "ids.bin", &t, &n) == AF_OK && n == 2 && t && t[1] == 3, "ids below the vocabulary: %s",
          af_error_message());
    free(t);
    t = NULL;
    expect(txt_tokens_parse(b, 5, 4, "odd.bin", &t, &n), AF_ERR_CORRUPT, "5 bytes is not a whole number of uint16 tokens",
           "odd-sized token file");
    free(t);
}

int main(void) {
    test_idx_wrap();
    test_npy_wrap();
    test_tokenizer_lengths();
    test_token_ids();
    return check_finish("kin_readers");
}
