/* Opening a file for reading, for every reader in the library and the CLI: only a
 * regular file (a directory, device, FIFO or socket is refused before a byte is read,
 * so /dev/zero or a pipe cannot make a reader run forever) of at most a stated size. */
#ifndef AF_IR_FILE_H
#define AF_IR_FILE_H
#include "aneforge.h"

#include <stdint.h>
#include <stdio.h>

/* The largest file any reader loads whole (IR_FILE_MAX_BYTES, 64 GiB): a larger one is
 * refused with a message that names the limit. Readers with a tighter natural bound
 * pass their own. */
#define IR_FILE_MAX_BYTES ((uint64_t)64 << 30)

/* Opens path read-only when it is a regular file of at most max_bytes (0: IR_FILE_MAX_BYTES)
 * and sets *size. On failure returns -1 with the error set: "<what> <path>: ..." naming
 * the problem (missing, a directory, not a regular file, too large and the limit). A
 * FIFO is opened without blocking, so the check itself never hangs. */
int ir_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);
/* As ir_open_regular, as a stdio stream ("rb"); NULL on failure. */
FILE *ir_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);
#endif
