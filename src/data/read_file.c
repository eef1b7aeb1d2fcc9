/* Reading a whole data file into memory, the one way every data reader (IDX, CIFAR,
 * .npy) does it: through ir_open_regular (regular files only, size capped). */
#define _POSIX_C_SOURCE 200809L
#include "data/data.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

af_status data_read_file(const char *path, const char *hint, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (!path) return ir_fail(AF_ERR_INVALID, "data file path is NULL");
    uint64_t size = 0;
    int fd = ir_open_regular(path, "file", SIZE_MAX / 2 < IR_FILE_MAX_BYTES ? SIZE_MAX / 2 : IR_FILE_MAX_BYTES, &size);
    if (fd < 0) {
        if (hint && errno == ENOENT) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", af_error_message());
            return ir_fail(AF_ERR_IO, "%s; %s", msg, hint);
        }
        return AF_ERR_IO;
    }
    size_t len = (size_t)size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return ir_fail(AF_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, len);
    }
    size_t got = 0;
    errno = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    int err = errno;
    close(fd);
    if (got != len) {
        free(buf);
        return ir_fail(AF_ERR_IO, "%s: read %zu of %zu bytes (%s)", path, got, len,
                       got < len && err ? strerror(err) : "file changed while reading");
    }
    *out = buf;
    *out_len = len;
    return AF_OK;
}
