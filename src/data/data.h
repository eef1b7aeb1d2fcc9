/* Data layer: MNIST / Fashion-MNIST (IDX), CIFAR-10 (binary batches) and NumPy .npy.
 *
 * Depends only on the C standard library, POSIX and af_status/ir_fail. Every loader
 * reads whole files with bounds checks and never aborts: failures return NULL (or an
 * af_status) and af_error_message() names the file and the problem.
 *
 * Ownership: an af_dataset owns its pixels and labels; free it with af_dataset_free.
 * Pointers it returns (labels) live as long as the dataset. Paths are only read.
 */
#ifndef AF_DATA_H
#define AF_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "aneforge.h"
#include "aneforge_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- internal
 * Shared by the data sources; not part of the public API. */

/* Reads the whole regular file at path into a malloc'd buffer (*buf, *len; *buf is
 * non-NULL even for an empty file). Missing files fail with AF_ERR_IO naming path;
 * `hint` (may be NULL) is appended to that message, e.g. the fetch command to run. */
af_status data_read_file(const char *path, const char *hint, uint8_t **buf, size_t *len);

/* Reads an IDX ubyte file of exactly `rank` dims (1 or 3), gzip-compressed or not (a
 * compressed one may decompress to at most gz_cap bytes; *gz, when not NULL, says
 * whether it was). On success *buf owns the whole (decompressed) file, *data points at
 * the payload inside it, dims[0..rank) (room for 3) are filled and the payload size
 * equals prod(dims). */
af_status data_idx_read(const char *path, const char *hint, int rank, size_t gz_cap, int64_t *dims,
                        uint8_t **buf, const uint8_t **data, int *gz);

/* gzip (src/data/gzip.c). data_is_gzip: the buffer starts with gzip's magic 1f 8b.
 * data_gunzip decompresses a whole gzip file held in memory (`path` names it in
 * messages; concatenated members are joined) into a malloc'd *out of *out_len bytes,
 * refusing output past `cap` bytes, a bad CRC or length, truncation and trailing bytes. */
int data_is_gzip(const uint8_t *buf, size_t len);
af_status data_gunzip(const char *path, const uint8_t *in, size_t len, size_t cap, uint8_t **out,
                      size_t *out_len);
/* The most a compressed IDX file given by path (af_dataset_load_idx) may decompress to. */
#define DATA_GZ_CAP ((size_t)1 << 30)

/* The four IDX files of MNIST and Fashion-MNIST, in the order train images, train
 * labels, test images, test labels, and the SHA-256 of each uncompressed file (one
 * table: `aneforge data` verifies fetched files against it, af_dataset_load the
 * compressed copies it reads). kind is AF_DATA_MNIST or AF_DATA_FASHION. */
extern const char *const data_idx_names[4];
const char *data_idx_sha256(af_dataset_kind kind, int file);

/* Checks an IDX ubyte image held in memory (buf, len: a whole file; `path` names it in
 * messages) as data_idx_read does; on success *data points at the payload inside buf. */
af_status data_idx_parse(const char *path, const uint8_t *buf, size_t len, int rank, int64_t *dims,
                         const uint8_t **data);

/* Reads CIFAR-10 binary files in order into malloc'd *pixels ([count, 3072] CHW bytes)
 * and *labels ([count]); labels are checked < 10. */
af_status data_cifar_read(int nfiles, const char *const *paths, const char *hint,
                        uint8_t **pixels, uint8_t **labels, int64_t *count);

/* Checks one CIFAR-10 file held in memory (`path` names it in messages) and appends its
 * records to the malloc'd *pixels / *labels, which hold *count records (NULL and 0 to
 * start). On failure *count is unchanged and the arrays (perhaps moved) stay the caller's. */
af_status data_cifar_append(const char *path, const uint8_t *buf, size_t len, uint8_t **pixels,
                            uint8_t **labels, size_t *count);

/* Parses a whole .npy file held in memory (`path` names it in messages) as af_npy_read
 * does; dims needs room for 8. */
af_status data_npy_parse(const char *path, const uint8_t *buf, size_t len, float **data, int *rank,
                         int64_t *dims);
/* The same for af_npy_read_typed: any numeric descr, as doubles. */
af_status data_npy_parse_typed(const char *path, const uint8_t *buf, size_t len, double **data, int *rank,
                               int64_t *dims, af_npy_dtype *dtype);

#ifdef __cplusplus
}
#endif
#endif
