/* Data layer: MNIST / Fashion-MNIST (IDX), CIFAR-10 (binary batches) and NumPy .npy.
 *
 * Depends only on the C standard library, POSIX and af_status/af_fail. Every loader
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

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- datasets */

typedef struct af_dataset af_dataset;
typedef enum { AF_DATA_MNIST, AF_DATA_FASHION, AF_DATA_CIFAR10 } af_dataset_kind;

/* Loads the train (train != 0) or test split of `kind` from dir (NULL = af_data_dir()).
 * Files are looked up in <dir>/mnist/, <dir>/fashion/ or <dir>/cifar10/ (MNIST names
 * train-images-idx3-ubyte ...; CIFAR data_batch_1..5.bin / test_batch.bin). Also checks
 * the standard sizes (60000/10000 at 28x28, 50000/10000 at 3x32x32). NULL on error; a
 * missing file's message says which `aneforge data fetch` to run. */
af_dataset *af_dataset_load(af_dataset_kind kind, const char *dir, int train);
/* From explicit files: IDX images (magic 0x803, [n,h,w] ubyte) and labels (0x801, [n]).
 * Any n > 0 and h, w > 0; counts must match and labels must be < 10. */
af_dataset *af_dataset_load_idx(const char *images_path, const char *labels_path);
/* From CIFAR-10 binary files, concatenated in order: each record is 1 label byte then
 * 3072 pixel bytes (R, G, B planes of 32x32). Each file must hold >= 1 whole record. */
af_dataset *af_dataset_load_cifar(int nfiles, const char *const *paths);

int64_t af_dataset_count(const af_dataset *d);                        /* samples; 0 for NULL */
void    af_dataset_sample_shape(const af_dataset *d, int *c, int *h, int *w); /* 1x28x28, 3x32x32 */
int     af_dataset_classes(const af_dataset *d);                      /* 10 */
const uint8_t *af_dataset_labels(const af_dataset *d);                /* count entries, owned by d */
/* Writes samples idx[0..n) as floats scaled to [0,1] (pixel / 255, CHW order) into x
 * ([n, c*h*w]) and one-hot rows [n, classes] into onehot; either may be NULL. An idx
 * outside [0, count) gives an all-zero row and sets af_error_message. */
void af_dataset_batch(const af_dataset *d, int n, const int64_t *idx, float *x, float *onehot);
void af_dataset_free(af_dataset *d);                                  /* NULL is fine */

/* $ANEFORGE_DATA when set and non-empty, else "./data". The string is getenv's (or a
 * literal): do not free it, and re-call after changing the environment. */
const char *af_data_dir(void);

/* ---------------------------------------------------------------- npy
 * NumPy .npy v1.0 / v2.0, little-endian C order, descr '<f4' or '<f2' (read) and '<f4'
 * (write). The header dict must hold exactly descr, fortran_order: False and a shape
 * tuple of rank <= 8; anything else is rejected with a message. */

/* On success *data is a malloc'd array of prod(dims) floats (fp16 widened exactly) that
 * the caller frees with free(); *rank and dims[0..rank) describe it (rank 0 = scalar). */
af_status af_npy_read(const char *path, float **data, int *rank, int64_t dims[8]);
/* Writes a v1.0 '<f4' file; rank 0..8, dims >= 0. A failed write removes the file. */
af_status af_npy_write(const char *path, const float *data, int rank, const int64_t *dims);

/* ---------------------------------------------------------------- internal
 * Shared by the data sources; not part of the public API. */

/* Reads the whole regular file at path into a malloc'd buffer (*buf, *len; *buf is
 * non-NULL even for an empty file). Missing files fail with AF_ERR_IO naming path;
 * `hint` (may be NULL) is appended to that message, e.g. the fetch command to run. */
af_status af_data_read_file(const char *path, const char *hint, uint8_t **buf, size_t *len);

/* Reads an IDX ubyte file of exactly `rank` dims (1 or 3). On success *buf owns the
 * whole file, *data points at the payload inside it, dims[0..rank) (room for 3) are
 * filled and
 * the payload size equals prod(dims). */
af_status af_idx_read(const char *path, const char *hint, int rank, int64_t *dims,
                      uint8_t **buf, const uint8_t **data);

/* Reads CIFAR-10 binary files in order into malloc'd *pixels ([count, 3072] CHW bytes)
 * and *labels ([count]); labels are checked < 10. */
af_status af_cifar_read(int nfiles, const char *const *paths, const char *hint,
                        uint8_t **pixels, uint8_t **labels, int64_t *count);

#ifdef __cplusplus
}
#endif
#endif
