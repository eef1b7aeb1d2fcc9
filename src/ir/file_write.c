/* Whole-file writes for every library writer (ir.h): a temporary beside the target,
 * renamed over it only when every byte is written, so a full disk or a killed process
 * never leaves a cut file, and an older file stays as it was. */
#define _POSIX_C_SOURCE 200809L
#include "ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A path that exists and is not a regular file (a device, a pipe) is written in place:
 * renaming over it would replace the device node. */
static bool in_place(const char *path) {
    struct stat st;
    return !stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static char *tmp_name(const char *path) {
    size_t n = strlen(path) + 9;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%s.partial", path);
    return t;
}

void *ir_open_write(const char *path) {
    if (!path) { ir_fail(AF_ERR_INVALID, "no path to write"); return NULL; }
    if (in_place(path)) {
        FILE *f = fopen(path, "wb");
        if (!f) ir_fail(AF_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return f;
    }
    char *tmp = tmp_name(path);
    if (!tmp) { ir_fail(AF_ERR_NOMEM, "cannot write %s: out of memory", path); return NULL; }
    FILE *f = fopen(tmp, "wb");
    if (!f) ir_fail(AF_ERR_IO, "cannot create %s (is the folder there and writable?): %s", path, strerror(errno));
    free(tmp);
    return f;
}

af_status ir_close_written(void *file, const char *path, bool ok) {
    int e = ok ? 0 : errno ? errno : EIO; /* the failed fwrite's */
    FILE *f = file;
    if (!e && (fflush(f) || ferror(f))) e = errno ? errno : EIO;
    bool direct = in_place(path);
    if (!e && !direct && fsync(fileno(f)) && errno != EINVAL) e = errno;
    if (fclose(f) && !e) e = errno ? errno : EIO;
    char *tmp = direct ? NULL : tmp_name(path);
    if (!direct && !tmp) e = e ? e : ENOMEM;
    if (!e && tmp && rename(tmp, path)) e = errno;
    if (e && tmp) remove(tmp);
    free(tmp);
    return e ? ir_fail(AF_ERR_IO, "writing %s failed: %s%s", path, strerror(e), direct ? "" : " (nothing written there)")
             : AF_OK;
}

af_status ir_write_file(const char *path, const void *data, size_t n, const char *who) {
    FILE *f = ir_open_write(path);
    af_status st = f ? AF_OK : AF_ERR_IO;
    if (f) {
        errno = 0;
        bool ok = fwrite(data, 1, n, f) == n;
        st = ir_close_written(f, path, ok);
    }
    if (!st) return AF_OK;
    char why[1024]; /* the message is rewritten with the prefix: copy it out first */
    snprintf(why, sizeof why, "%s", af_error_message());
    return ir_fail(st, "%s: %s", who, why);
}
