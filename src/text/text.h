/* Text layer: tokenizers in llama2.c's tokenizer.bin format and uint16 token files.
 *
 * A tokenizer is a vocabulary of byte strings with a float score each. Encoding follows
 * llama2.c's run.c: the text is cut into UTF-8 code points, each looked up whole or
 * spelled as byte tokens <0xXX> (id = byte + 3), then the adjacent pair whose
 * concatenation is a token with the highest score is merged until none is left.
 * Ids 0, 1, 2 are <unk>, <s> (BOS) and </s> (EOS); 3..258 the 256 byte tokens.
 *
 * A tokenizer is immutable once built, so it may be used from several threads at once.
 */
#ifndef AF_TEXT_H
#define AF_TEXT_H

#include "aneforge.h"
#include "aneforge_data.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    TXT_BOS = 1,
    TXT_EOS = 2,
    TXT_BYTE0 = 3,                 /* id of <0x00>; byte b is TXT_BYTE0 + b */
    TXT_MIN_VOCAB = 3 + 256,       /* the specials and the byte tokens */
    TXT_MAX_VOCAB = 65536,         /* ids must fit the uint16 token files */
};

/* run.c starts its search for the best merge at this score, so a token scored at or
 * below it is never the result of a merge. */
#define TXT_NO_MERGE_SCORE (-1e10f)

struct af_tokenizer {
    int n;                /* vocabulary size */
    int max_len;          /* the file's max_token_length */
    uint32_t longest;     /* the longest token's length (max_len may say more) */
    uint8_t *bytes;       /* every token's bytes, one after the other */
    size_t *off;          /* token i is bytes[off[i] .. off[i] + len[i]) */
    uint32_t *len;
    float *score;
    int32_t *slot;        /* open-addressing index from token bytes to the lowest id */
    size_t nslot;         /* a power of two */
    int space;            /* id of " " (run.c's dummy prefix), or -1 */
    uint8_t byte_piece[256];
};

/* Builds a tokenizer from n tokens (copied). Checks what every tokenizer must satisfy
 * (see txt_tokenizer_parse); `what` names the source in messages. max_len < 0 means
 * the longest token's length. */
af_status txt_tokenizer_build(int n, const uint8_t *const *tok, const uint32_t *len, const float *score,
                              int max_len, const char *what, af_tokenizer **out);

/* Parses tokenizer.bin bytes: int32 max_token_length, then per token float32 score,
 * int32 length and the bytes, little-endian, until the end of the buffer. */
af_status txt_tokenizer_parse(const uint8_t *buf, size_t size, const char *what, af_tokenizer **out);

/* The file image of t (malloc'd, the caller frees). */
af_status txt_tokenizer_serialize(const af_tokenizer *t, uint8_t **buf, size_t *size);

/* The id of the token whose bytes are s[0..n), the lowest one if several; -1 if none. */
int txt_lookup(const af_tokenizer *t, const uint8_t *s, size_t n);

/* The length of the code point run.c reads at s[0..n) (n > 0): one byte, then the
 * continuation bytes (10xxxxxx) that follow, four bytes at most. */
static inline size_t txt_unit_len(const uint8_t *s, size_t n) {
    size_t k = 1;
    while (k < n && k < 4 && (s[k] & 0xC0) == 0x80) k++;
    return k;
}

/* Whether s[0..n) is one well-formed UTF-8 code point (no overlong form, no surrogate,
 * at most U+10FFFF). */
bool txt_utf8_valid(const uint8_t *s, size_t n);

/* Parses a token file (uint16 little-endian ids, no header) into a malloc'd array;
 * ids >= vocab are rejected when vocab > 0. */
af_status txt_tokens_parse(const uint8_t *buf, size_t size, int vocab, const char *what, int32_t **tokens,
                           int64_t *n);

/* The BPE trainer. When given, `chunk_fn` sees every distinct training chunk (the
 * pieces merges never cross), how often it occurs and the tokens training left it in:
 * the tests check that encoding the chunk gives the same tokens. */
typedef void (*txt_chunk_fn)(const uint8_t *chunk, size_t len, int64_t count, const int32_t *ids, int n,
                             void *user);
af_status txt_bpe_train(int64_t ndocs, const char *const *docs, const size_t *lens, int vocab,
                        txt_chunk_fn chunk_fn, void *user, af_tokenizer **out);

#endif
