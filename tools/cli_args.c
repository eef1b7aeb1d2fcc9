#define _POSIX_C_SOURCE 200809L /* open_memstream */
/* Number arguments of the CLI's options. */
#include "cli_args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* Whether the usage text names opt as an option: opt followed by something that cannot
 * continue an option name (so --seq does not match --seq-len). */
static bool usage_names(const char *text, const char *opt) {
    size_t n = strlen(opt);
    for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
        bool starts = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '-');
        char c = p[n];
        if (starts && !(isalnum((unsigned char)c) || c == '-' || c == '_')) return true;
    }
    return false;
}

const char *cli_missing_value_message(void (*usage)(FILE *), const char *opt) {
    static _Thread_local char msg[300];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bool known = false;
    if (f) {
        usage(f);
        if (fclose(f) == 0 && text) known = opt[0] == '-' && opt[1] && usage_names(text, opt);
    }
    free(text);
    snprintf(msg, sizeof msg, known ? "%s needs a value" : "unknown option %s", opt);
    return msg;
}

