/* ir_open_regular: see file.h. */
#define _POSIX_C_SOURCE 200809L
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

static const char *kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a pipe (FIFO)";
#ifdef S_ISSOCK
    if (S_ISSOCK(m)) return "a socket";
#endif
    return "not a regular file";
}

int ir_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    if (!what) what = "file";
    if (size) *size = 0;
    if (!path || !*path) {
        ir_fail(AF_ERR_INVALID, "%s: no path given", what);
        return -1;
    }
    if (!max_bytes) max_bytes = IR_FILE_MAX_BYTES;
    /* O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == EISDIR) ir_fail(AF_ERR_IO, "%s %s is a directory; give the path of a file", what, path);
        else ir_fail(AF_ERR_IO, "cannot open %s %s: %s", what, path, strerror(e));
        errno = e;
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        ir_fail(AF_ERR_IO, "%s %s: cannot stat: %s", what, path, strerror(e));
        errno = e;
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        ir_fail(AF_ERR_IO, "%s %s is %s, not a regular file; give the path of a file", what, path,
                kind(sb.st_mode));
        errno = EINVAL;
        return -1;
    }
    if (sb.st_size < 0 || (uint64_t)sb.st_size > max_bytes) {
        close(fd);
        ir_fail(AF_ERR_IO, "%s %s is %lld bytes; the limit for a %s is %llu bytes (%.1f GiB)", what, path,
                (long long)sb.st_size, what, (unsigned long long)max_bytes, (double)max_bytes / (1 << 30));
        errno = EFBIG;
        return -1;
    }
    /* Back to blocking reads (regular files ignore the flag, but keep the fd ordinary). */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (uint64_t)sb.st_size;
    return fd;
}

FILE *ir_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    int fd = ir_open_regular(path, what, max_bytes, size);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        ir_fail(AF_ERR_NOMEM, "%s %s: cannot open a stream: %s", what ? what : "file", path, strerror(e));
        errno = e;
    }
    return f;
}
