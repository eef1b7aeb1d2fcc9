/* The CLI's file and text helpers (cli_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

FILE *cli_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    int fd = af_open_regular(path, what, max_bytes, size);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        af_fail(AF_ERR_NOMEM, "%s %s: cannot open a stream: %s", what ? what : "file", path, strerror(e));
        errno = e;
    }
    return f;
}

void cli_shape_str(af_shape s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "[");
    for (int i = 0; i < s.rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)s.dim[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

char *cli_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
