/* The CLI's checked writers; see cli_out.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli_out.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cli_jnum(char *buf, size_t cap, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, cap, fmt, v);
    else snprintf(buf, cap, "null");
    return buf;
}

void cli_json_num(FILE *f, const char *fmt, double v) { fputs(JNUM(fmt, v), f); }

void cli_json_str(FILE *f, const char *s) {
    if (!s) { fputs("null", f); return; }
    putc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else putc(c, f);
    }
    putc('"', f);
}

/* errno, or EIO when a stream failed without leaving one. */
static int err_or_eio(void) { return errno ? errno : EIO; }

int cli_file_open(cli_file *o, const char *path, const char *cmd) {
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    struct stat st;
    bool in_place = !stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
    size_t n = strlen(path) + 32;
    o->path = malloc(n);
    o->tmp = in_place ? NULL : malloc(n);
    if (!o->path || (!in_place && !o->tmp)) {
        fprintf(stderr, "%s: cannot write %s: out of memory\n", cmd, path);
        free(o->path), free(o->tmp);
        return 1;
    }
    snprintf(o->path, n, "%s", path);
    if (o->tmp) snprintf(o->tmp, n, "%s.tmp%ld", path, (long)getpid());
    int fd = open(o->tmp ? o->tmp : path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!o->f) {
        int e = err_or_eio();
        fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(e));
        if (fd >= 0) close(fd);
        if (o->tmp && fd >= 0) unlink(o->tmp);
        free(o->path), free(o->tmp);
        memset(o, 0, sizeof *o);
        return 1;
    }
    return 0;
}

int cli_file_commit(cli_file *o) {
    if (!o->f) return 1;
    errno = 0;
    /* A failed write leaves its bytes buffered, so the flush meets the same error. */
    int e = fflush(o->f) || ferror(o->f) ? err_or_eio() : 0;
    if (!e && o->tmp && fsync(fileno(o->f)) && errno != EINVAL) e = errno;
    if (fclose(o->f) && !e) e = err_or_eio();
    if (!e && o->tmp && rename(o->tmp, o->path)) e = err_or_eio();
    if (e) {
        fprintf(stderr, "%s: cannot write %s: %s%s\n", o->cmd, o->path, strerror(e),
                o->tmp ? " (nothing written there)" : "");
        if (o->tmp) unlink(o->tmp);
    }
    free(o->path), free(o->tmp);
    memset(o, 0, sizeof *o);
    return e ? 1 : 0;
}

void cli_file_abort(cli_file *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->path), free(o->tmp);
    memset(o, 0, sizeof *o);
}

int cli_log_open(cli_log *l, const char *path, const char *cmd) {
    memset(l, 0, sizeof *l);
    l->path = path;
    l->cmd = cmd;
    l->f = fopen(path, "a");
    if (!l->f) {
        fprintf(stderr, "%s: cannot open log %s: %s\n", cmd, path, strerror(err_or_eio()));
        return 1;
    }
    return 0;
}

static void log_failed(cli_log *l, int e) {
    if (l->failed) return;
    l->failed = true;
    fprintf(stderr, "\n%s: writing log %s failed: %s; nothing more is logged\n", l->cmd, l->path, strerror(e));
}

void cli_log_printf(cli_log *l, const char *fmt, ...) {
    if (!l || !l->f || l->failed) return;
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int n = vfprintf(l->f, fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(l->f) || ferror(l->f)) log_failed(l, err_or_eio());
}

int cli_log_close(cli_log *l) {
    if (!l->f) return l->failed;
    errno = 0;
    if (fflush(l->f) || ferror(l->f)) log_failed(l, err_or_eio());
    if (fclose(l->f)) log_failed(l, err_or_eio());
    l->f = NULL;
    return l->failed;
}

static int check_output(const char *path, const char *flag, const char *cmd, bool append) {
    if (!path) return 0;
    struct stat st;
    const char *why = NULL;
    char *dir = NULL;
    int e = 0;
    if (!*path) why = "the path is empty";
    else if (!stat(path, &st)) {
        if (S_ISDIR(st.st_mode)) why = "it is a directory";
        else if (!S_ISREG(st.st_mode)) return 0; /* a device or pipe: written in place */
        else if (append) { /* a log grows in place: the file must take writes, not its folder */
            int fd = open(path, O_WRONLY | O_APPEND);
            if (fd >= 0) { close(fd); return 0; }
            e = errno;
        }
    } else if (errno != ENOENT) e = errno;
    if (!why && !e) {
        /* The folder must take a new file: checkpoints and reports are renamed into it. */
        size_t n = strlen(path) + 40;
        dir = malloc(n);
        if (!dir) { fprintf(stderr, "%s: out of memory\n", cmd); return 1; }
        snprintf(dir, n, "%s", path);
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, n, ".");
        else if (slash == dir) dir[1] = 0;
        else *slash = 0;
        size_t dl = strlen(dir);
        snprintf(dir + dl, n - dl, "/.aneforge-probe%ld", (long)getpid());
        int fd = open(dir, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0) e = errno;
        else close(fd), unlink(dir);
        dir[dl] = 0;
    }
    if (why || e) {
        if (why) fprintf(stderr, "%s: %s %s cannot be written: %s\n", cmd, flag, path, why);
        else if (dir) fprintf(stderr, "%s: %s %s cannot be written: folder %s: %s\n", cmd, flag, path, dir, strerror(e));
        else fprintf(stderr, "%s: %s %s cannot be written: %s\n", cmd, flag, path, strerror(e));
    }
    free(dir);
    return why || e ? 1 : 0;
}

int cli_check_output(const char *path, const char *flag, const char *cmd) { return check_output(path, flag, cmd, false); }
int cli_check_append(const char *path, const char *flag, const char *cmd) { return check_output(path, flag, cmd, true); }

int cli_stdout_check(const char *cmd) {
    errno = 0;
    if (!fflush(stdout) && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: writing to standard output failed: %s\n", cmd, strerror(err_or_eio()));
    return 1;
}

static struct rlimit fault_saved;

bool cli_fault_begin(int nth) {
    const char *v = getenv("ANEFORGE_TEST_FAIL_SAVE");
    bool hit = false;
    for (const char *p = v; p && *p && !hit; p += strcspn(p, ","), p += *p == ',')
        hit = atoi(p) == nth;
    if (!hit || getrlimit(RLIMIT_FSIZE, &fault_saved)) return false;
    signal(SIGXFSZ, SIG_IGN); /* the write returns EFBIG instead of killing the process */
    struct rlimit zero = { 0, fault_saved.rlim_max };
    return setrlimit(RLIMIT_FSIZE, &zero) == 0;
}

void cli_fault_end(bool on) {
    if (on) setrlimit(RLIMIT_FSIZE, &fault_saved);
}
