/*
 * aneforge_data.h: the application-level data helpers beside the core library
 * (aneforge.h): image datasets (MNIST, Fashion-MNIST, CIFAR-10), NumPy .npy files,
 * llama2.c tokenizers and token files. They are part of libaneforge and follow its
 * rules: errors through af_error_message, nothing printed, and every array returned to
 * the caller is freed with af_free. Token ids are int32_t throughout.
 */
#ifndef ANEFORGE_DATA_H
#define ANEFORGE_DATA_H

#include "aneforge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- data (src/data) */

/* A dataset holds its samples in memory (the files are read whole and closed): the
 * caller frees it with af_dataset_free; arrays it returns live as long as it. */
typedef struct af_dataset af_dataset;
typedef enum { AF_DATA_MNIST, AF_DATA_FASHION, AF_DATA_CIFAR10 } af_dataset_kind;

/* Loads the train (train != 0) or test split of `kind` from dir (NULL = "./data").
 * Files are looked up in <dir>/mnist/, <dir>/fashion/ or <dir>/cifar10/ (MNIST names
 * train-images-idx3-ubyte ...; CIFAR data_batch_1..5.bin / test_batch.bin). Also checks
 * the sizes (at most 60000/10000 at 28x28: a subset is fine; 50000/10000 at 3x32x32). NULL on error; a
 * missing file's message says which `aneforge data fetch` to run. */
AF_API af_dataset *af_dataset_load(af_dataset_kind kind, const char *dir, int train);
/* From explicit files: IDX images (magic 0x803, [n,h,w] ubyte) and labels (0x801, [n]).
 * Any n > 0 and h, w > 0; counts must match and labels must be < 10. */
AF_API af_dataset *af_dataset_load_idx(const char *images_path, const char *labels_path);
/* From CIFAR-10 binary files, concatenated in order: each record is 1 label byte then
 * 3072 pixel bytes (R, G, B planes of 32x32). Each file must hold >= 1 whole record. */
AF_API af_dataset *af_dataset_load_cifar(int nfiles, const char *const *paths);

AF_API int64_t af_dataset_count(const af_dataset *d);                        /* samples; 0 for NULL */
AF_API void    af_dataset_sample_shape(const af_dataset *d, int *c, int *h, int *w); /* 1x28x28, 3x32x32 */
AF_API int     af_dataset_classes(const af_dataset *d);                      /* 10 */
AF_API const uint8_t *af_dataset_labels(const af_dataset *d);                /* count entries, owned by d */
/* Writes samples idx[0..n) as floats scaled to [0,1] (pixel / 255, CHW order) into x
 * ([n, c*h*w]) and one-hot rows [n, classes] into onehot; either may be NULL. n = 0 does
 * nothing. AF_ERR_INVALID (af_error_message says why) for a NULL dataset or idx with
 * n > 0, a negative n, or an idx outside [0, count): every other row is still written,
 * and each out-of-range row is all zeros. */
AF_API af_status af_dataset_batch(const af_dataset *d, int n, const int64_t *idx, float *x, float *onehot);
AF_API void af_dataset_free(af_dataset *d);                                  /* NULL is fine */


/* ---------------------------------------------------------------- files
 * How the library opens and writes files, for applications (the CLI) that read and
 * write the same way: only regular files are read (a directory, device, FIFO or socket
 * is refused before a byte is read, so a pipe cannot make a reader run forever), sizes
 * are capped, and a file is written whole or left as it was. */

/* The largest file read whole when max_bytes is 0: 64 GiB. */
#define AF_FILE_MAX_BYTES ((int64_t)64 << 30)
/* Opens path read-only (a POSIX file descriptor) when it is a regular file of at most
 * max_bytes (0: AF_FILE_MAX_BYTES) and sets *size (may be NULL). -1 on failure, with the
 * message "<what> <path>: ..." naming the problem (missing, a directory, not a regular
 * file, too large and the limit); errno is kept. */
AF_API int af_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);
/* The whole regular file at path as *len bytes (*data is non-NULL even for an empty
 * file; free it with af_free). A missing file fails with AF_ERR_IO naming path, and
 * `hint` (may be NULL) is appended to that message, e.g. the command that makes it. */
AF_API af_status af_read_file(const char *path, const char *hint, uint8_t **data, size_t *len);
/* Whole-file writes: af_write_open opens a temporary beside path (path + ".partial"; a
 * device or a pipe is written in place) and returns it as a stdio FILE * (NULL on
 * failure, the error set); af_write_close closes it and, when the writes (ok != 0) and
 * the close worked, renames it over path, else removes it and fails with AF_ERR_IO
 * naming path and the cause. path ends up written whole or as it was. */
AF_API void     *af_write_open(const char *path);
AF_API af_status af_write_close(void *file, const char *path, int ok);

/* ---------------------------------------------------------------- digests and gzip */

/* SHA-256 of len bytes, as 64 lowercase hex digits and a NUL. */
AF_API void      af_sha256(const void *data, size_t len, char hex[65]);
/* SHA-256 of the file at path, streamed (any size). */
AF_API af_status af_sha256_file(const char *path, char hex[65]);
/* Decompresses a whole gzip file held in memory (`path` names it in messages;
 * concatenated members are joined) into *out_len bytes at *out (free with af_free),
 * refusing output past cap bytes, a bad CRC or length, truncation and trailing bytes. */
AF_API af_status af_gunzip(const char *path, const uint8_t *in, size_t len, size_t cap, uint8_t **out,
                           size_t *out_len);
/* MNIST and Fashion-MNIST files: file 0..3 is train images, train labels, test images,
 * test labels. *name (e.g. "train-images-idx3-ubyte") and *sha256 (the digest of the
 * uncompressed file as published) may be NULL; AF_ERR_INVALID for another kind or file. */
AF_API af_status af_dataset_file(af_dataset_kind kind, int file, const char **name, const char **sha256);

/* ---------------------------------------------------------------- npy
 * NumPy .npy v1.0 / v2.0, little-endian C order, descr '<f4' or '<f2' (read) and '<f4'
 * (write). The header dict must hold exactly descr, fortran_order: False and a shape
 * tuple of rank <= AF_MAX_RANK, like every af_shape (a file of higher rank is rejected
 * with AF_ERR_UNSUPPORTED: reshape it in NumPy first); anything else is rejected with a
 * message. */

/* On success *data is an array of prod(dims) floats (fp16 widened exactly); free it
 * with af_free. *rank and dims[0..rank) describe it (rank 0 = scalar),
 * so af_shape_make(*rank, dims) is its shape. On failure *data is NULL and *rank 0. */
AF_API af_status af_npy_read(const char *path, float **data, int *rank, int64_t dims[AF_MAX_RANK]);
/* The element types af_npy_read_typed reads: descrs '<f4', '<f2', '<f8', '|b1', '|i1',
 * '|u1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8' (one-byte ones also as '<b1' ...). */
typedef enum {
    AF_NPY_F32, AF_NPY_F16, AF_NPY_F64, AF_NPY_BOOL, AF_NPY_I8, AF_NPY_U8,
    AF_NPY_I16, AF_NPY_U16, AF_NPY_I32, AF_NPY_U32, AF_NPY_I64, AF_NPY_U64
} af_npy_dtype;
/* As af_npy_read, with the same strict header rules, for any of those element types:
 * *data is an array of prod(dims) doubles (exact for every type except 64-bit integers
 * beyond 2^53, which round; free it with af_free), *dtype the file's type. A bool byte other than 0
 * or 1 is AF_ERR_CORRUPT. */
AF_API af_status af_npy_read_typed(const char *path, double **data, int *rank, int64_t dims[AF_MAX_RANK],
                                   af_npy_dtype *dtype);
/* Writes a v1.0 '<f4' file; rank 0..AF_MAX_RANK, dims >= 0. A failed write removes the
 * file. */
AF_API af_status af_npy_write(const char *path, const float *data, int rank, const int64_t *dims);

/* ---------------------------------------------------------------- text and tokens (src/text)
 * Tokenizers in llama2.c's tokenizer.bin format: int32 max_token_length, then per token
 * a float32 score, an int32 length and the bytes (little-endian; the file ends after the
 * last token). Ids 0, 1, 2 are <unk>, <s> (BOS) and </s> (EOS); 3..258 the byte tokens
 * <0x00>..<0xFF>. Any llama2.c tokenizer.bin loads, Llama 2's own included.
 *
 * Encoding is llama2.c run.c's: an optional BOS; a " " token before non-empty text (the
 * dummy prefix); each UTF-8 code point as its token, or as byte tokens (byte + 3) when it
 * has none; then, repeatedly, the adjacent pair whose concatenation is the token with
 * the highest score (above -1e10; the leftmost on ties) becomes that token; an optional
 * EOS. Decoding a token after BOS drops its leading space, and a "<0xXX>" token is the
 * byte XX. A tokenizer is read-only once made: any number of threads may use one. */
typedef struct af_tokenizer af_tokenizer;
enum { AF_TOKEN_UNK = 0, AF_TOKEN_BOS = 1, AF_TOKEN_EOS = 2 };
enum {
    AF_ENCODE_BOS = 1,       /* start with BOS */
    AF_ENCODE_EOS = 2,       /* end with EOS */
    AF_ENCODE_NO_PREFIX = 4  /* no dummy-prefix " " (run.c always adds it) */
};

/* NULL on error (af_error_message says what is wrong with the file). Free with
 * af_tokenizer_free. */
AF_API af_tokenizer *af_tokenizer_load(const char *path);
AF_API af_status     af_tokenizer_save(const af_tokenizer *t, const char *path);
/* 259 tokens: the specials and one per byte (printable ASCII spelled as itself, the rest
 * <0xXX>); byte b encodes as b + 3 whichever way it is spelled. */
AF_API af_tokenizer *af_tokenizer_byte_level(void);
/* Learns a BPE vocabulary of at most vocab_size tokens (260..65536) from ndocs documents
 * (docs[i] is lens[i] bytes, any bytes): the specials and byte tokens, the learnt merges
 * scored -1, -2, ... in the order learnt, then the documents' characters, so that
 * encoding replays the merges. Training stops early when no pair occurs twice. */
AF_API af_tokenizer *af_tokenizer_train(int64_t ndocs, const char *const *docs, const size_t *lens, int vocab_size);
AF_API int           af_tokenizer_vocab_size(const af_tokenizer *t);   /* 0 for NULL */
/* Token id's bytes (NUL-terminated, owned by t), its length and score; NULL when id is
 * out of range. */
AF_API const char   *af_tokenizer_token(const af_tokenizer *t, int32_t id, size_t *len, float *score);
/* Encodes text[0..len) (any bytes) into an array of *n ids; free it with af_free.
 * flags: AF_ENCODE_*. */
AF_API af_status     af_tokenizer_encode(const af_tokenizer *t, const char *text, size_t len, unsigned flags,
                                         int32_t **tokens, int64_t *n);
/* run.c's decode of one token that follows `prev` (-1: none): its bytes (*len of them,
 * owned by t), or NULL for an id out of range. A byte token gives its one byte (even
 * 0x00, which run.c, printing C strings, drops). */
AF_API const char   *af_tokenizer_decode_piece(const af_tokenizer *t, int32_t prev, int32_t token, size_t *len);
/* Decodes n ids into a NUL-terminated string of *len bytes (free it with af_free):
 * each id's piece after the id before it; BOS and EOS add nothing. decode(encode(text,
 * AF_ENCODE_BOS)) gives text back, unless text spells a token's name ("<0x41>") that
 * merges whole: run.c's format cannot tell that token from the byte. */
AF_API af_status     af_tokenizer_decode(const af_tokenizer *t, const int32_t *tokens, int64_t n, char **text,
                                         size_t *len);
AF_API void          af_tokenizer_free(af_tokenizer *t);                /* NULL is fine */

/* Token files (llama2.c's and TinyStories' .bin): uint16 ids, little-endian, no header.
 * Reading gives an array of *n ids (free it with af_free); vocab_size > 0 rejects any
 * id >= vocab_size. Writing refuses an id outside 0..65535 (AF_ERR_INVALID, before the
 * file is made); a failed write removes the file. */
AF_API af_status af_tokens_read(const char *path, int vocab_size, int32_t **tokens, int64_t *n);
AF_API af_status af_tokens_write(const char *path, const int32_t *tokens, int64_t n);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif
