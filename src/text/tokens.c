/* Token files as llama2.c and TinyStories write them: uint16 token ids, little-endian,
 * one after the other, no header. In memory ids are int32_t, as everywhere in the API. */
#include "text/text.h"
#include "aneforge_data.h"
#include "data/data.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

af_status txt_tokens_parse(const uint8_t *buf, size_t size, int vocab, const char *what, int32_t **tokens,
                           int64_t *n) {
    *tokens = NULL;
    *n = 0;
    if (size % 2)
        return ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes is not a whole number of uint16 tokens (a token file is "
                                       "little-endian uint16 ids with no header)", what, size);
    size_t count = size / 2;
    int32_t *t = malloc(count ? count * sizeof *t : 1);
    if (!t) return ir_fail(AF_ERR_NOMEM, "%s: out of memory for %zu tokens", what, count);
    for (size_t i = 0; i < count; i++) {
        t[i] = (int32_t)(buf[2 * i] | buf[2 * i + 1] << 8);
        if (vocab > 0 && t[i] >= vocab) {
            unsigned id = (unsigned)t[i];
            free(t);
            return ir_fail(AF_ERR_CORRUPT, "%s: token %zu is %u, outside the vocabulary of %d: was the file made "
                                           "with another tokenizer?", what, i, id, vocab);
        }
    }
    *tokens = t;
    *n = (int64_t)count;
    return AF_OK;
}

af_status af_tokens_read(const char *path, int vocab_size, int32_t **tokens, int64_t *n) {
    if (tokens) *tokens = NULL;
    if (n) *n = 0;
    if (!tokens || !n) return ir_fail(AF_ERR_INVALID, "af_tokens_read: tokens and n must not be NULL");
    uint8_t *buf;
    size_t size;
    af_status st = data_read_file(path, "write one with `aneforge data tokenize`", &buf, &size);
    if (st != AF_OK) return st;
    st = txt_tokens_parse(buf, size, vocab_size, path, tokens, n);
    free(buf);
    return st;
}

af_status af_tokens_write(const char *path, const int32_t *tokens, int64_t n) {
    if (!path || n < 0 || (!tokens && n))
        return ir_fail(AF_ERR_INVALID, "af_tokens_write: path and tokens must not be NULL, n >= 0");
    for (int64_t i = 0; i < n; i++) /* checked before the file is made: nothing half-written */
        if (tokens[i] < 0 || tokens[i] > 65535)
            return ir_fail(AF_ERR_INVALID, "af_tokens_write: token %lld is %ld, outside 0..65535, which a token file "
                                           "(uint16 ids) cannot hold: use a vocabulary of at most 65536",
                           (long long)i, (long)tokens[i]);
    FILE *f = ir_open_write(path); /* whole or not at all */
    if (!f) return AF_ERR_IO;
    uint8_t chunk[8192];
    int ok = 1;
    for (int64_t i = 0; ok && i < n;) {
        int64_t m = n - i < (int64_t)sizeof chunk / 2 ? n - i : (int64_t)sizeof chunk / 2;
        for (int64_t j = 0; j < m; j++) chunk[2 * j] = (uint8_t)tokens[i + j], chunk[2 * j + 1] = (uint8_t)(tokens[i + j] >> 8);
        ok = fwrite(chunk, 2, (size_t)m, f) == (size_t)m;
        i += m;
    }
    return ir_close_written(f, path, ok);
}
