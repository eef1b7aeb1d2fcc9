/* Typed .npy reading and writing for `aneforge mil run` (see mil_npy.c). */
#ifndef AF_TOOLS_MIL_NPY_H
#define AF_TOOLS_MIL_NPY_H
#include "aneforge.h"

#include <stddef.h>
#include <stdint.h>

/* Reads path as floats for an argument of MIL dtype dt ("int32", "bool", "fp16", ...);
 * any little-endian numeric .npy whose values all fit dt. 0 on success; else 1 and a
 * message in err. *data is malloc'd. */
int mil_npy_read(const char *path, const char *dt, float **data, int *rank, int64_t dims[AF_MAX_RANK], char *err, size_t errlen);
/* Writes data as a .npy of the MIL dtype dt (bool as |b1, int32 as <i4, fp16 as <f2 ...). */
int mil_npy_write(const char *path, const char *dt, const float *data, int rank, const int64_t *dims, char *err, size_t errlen);

#endif
