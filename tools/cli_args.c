/* Number arguments of the CLI's options. */
#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (try --help)\n");
    va_end(ap);
    return 2;
}

int cli_parse_float(const char *s, float *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) return -1;
    *out = (float)v;
    return 0;
}

const char *cli_base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}
