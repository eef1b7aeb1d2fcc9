/* Checkpoints: a container of named binary records (weights, optimizer moments, step
 * counters, RNG state, data position, run configuration) with an atomic, verified file
 * form. The file format is documented at the top of ckpt.c.
 *
 * Ownership: an ckpt owns copies of every name and payload put into it; pointers
 * returned by the getters stay valid until that name is replaced or the checkpoint is
 * freed. Paths are only read.
 *
 * Errors: functions that can fail return af_status (or NULL) and af_error_message()
 * names the file or record and the problem. Files are untrusted: ckpt_load checks
 * every size and offset before use and verifies a SHA-256 of the whole file.
 *
 * Not thread-safe per object: use one ckpt from one thread at a time (concurrent
 * const getters are fine). Two saves to the same path must not run at once in one
 * process (they would share a temp file name).
 */
#ifndef AF_CKPT_H
#define AF_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include "aneforge.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AF_CKPT_FORMAT_VERSION 1 /* the newest format version this build reads and writes */
#define AF_CKPT_MAX_NAME 255     /* bytes in a record name (names are non-empty C strings) */

typedef struct ckpt ckpt;

/* An empty checkpoint, or NULL (with the error set) when out of memory. */
ckpt   *ckpt_new(void);
void       ckpt_free(ckpt *c);                 /* NULL is fine */

/* Copies `bytes` bytes of data (data may be NULL when bytes == 0) under name; replaces
 * the record of that name if there is one (keeping its position in the file order). */
af_status  ckpt_put(ckpt *c, const char *name, const void *data, int64_t bytes);
/* An int64 record: 8 bytes, little-endian two's complement. */
af_status  ckpt_put_i64(ckpt *c, const char *name, int64_t v);
/* A string record: the bytes of s without its terminator. */
af_status  ckpt_put_str(ckpt *c, const char *name, const char *s);

/* The payload of a record (its size in *bytes, which may be NULL), or NULL when there is
 * no such record. A 0-byte record gives a non-NULL pointer. Every payload is followed
 * in memory by one hidden NUL byte and is aligned as malloc aligns. */
const void*ckpt_get(const ckpt *c, const char *name, int64_t *bytes);
/* AF_ERR_INVALID when there is no such record, AF_ERR_CORRUPT when it is not 8 bytes;
 * the message names the record (and the file it was loaded from). */
af_status  ckpt_get_i64(const ckpt *c, const char *name, int64_t *v);
/* The string stored under name, or NULL (with the error set) when there is no such
 * record or it holds a NUL byte. Valid while the record is. */
const char*ckpt_get_str(const ckpt *c, const char *name);

/* Records in file order (the order names were first put, or the file's order). */
int64_t    ckpt_count(const ckpt *c);
const char*ckpt_name(const ckpt *c, int64_t i);   /* NULL when i is out of range */

/* Writes atomically: a temp file "<path>.tmp.<pid>" in the same directory, fsync, rename
 * over path, fsync the directory. A crash at any moment leaves either the old file or the
 * new one at path, never a torn one; it may also leave its own temp file behind. Each
 * save first removes the "<path>.tmp.<pid>" files of processes that no longer exist, so
 * leftovers never accumulate. On failure the temp file is removed and path is untouched
 * (unless the failure is in the final directory fsync, after the rename). A symlink at
 * path is replaced by the file, not followed. */
af_status  ckpt_save(const ckpt *c, const char *path);

/* Reads and verifies a checkpoint: magic, format version (newer versions are rejected
 * with a message saying so), record table bounds, every size and offset, and the
 * SHA-256 of the whole file. On success *out owns a new checkpoint; on failure *out is
 * NULL. AF_ERR_IO when the file cannot be read, AF_ERR_CORRUPT when it fails a check,
 * AF_ERR_UNSUPPORTED for a newer format version. Temp files are never looked at. */
af_status  ckpt_load(const char *path, ckpt **out);
/* ckpt_load over a whole file held in memory (bytes, n); `name` stands for the path in
 * messages and in the loaded checkpoint's. */
af_status  ckpt_load_bytes(const uint8_t *bytes, size_t n, const char *name, ckpt **out);

#ifdef __cplusplus
}
#endif
#endif
