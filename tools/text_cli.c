/* Documents and options for the text commands (text_cli.h). */
#include "text_cli.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int add_doc(text_docs *d, const char *s, size_t n, int64_t *cap) {
    while (n && is_space(*s)) s++, n--;
    while (n && is_space(s[n - 1])) n--;
    if (!n) return 0;
    if (d->n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        const char **doc = realloc(d->doc, (size_t)*cap * sizeof *doc);
        if (doc) d->doc = doc;
        size_t *len = realloc(d->len, (size_t)*cap * sizeof *len);
        if (len) d->len = len;
        if (!doc || !len) return 1;
    }
    d->doc[d->n] = s;
    d->len[d->n++] = n;
    return 0;
}

int text_docs_split(const char *buf, size_t size, const char *sep, text_docs *d) {
    memset(d, 0, sizeof *d);
    int64_t cap = 0;
    size_t seplen = strlen(sep), start = 0;
    for (size_t at = 0; seplen && at < size;) {
        const char *nl = memchr(buf + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - buf) : size, n = end - at;
        if (n && buf[end - 1] == '\r') n--;
        if (n == seplen && !memcmp(buf + at, sep, seplen)) {
            if (add_doc(d, buf + start, at - start, &cap)) return 1;
            start = nl ? end + 1 : size;
        }
        at = nl ? end + 1 : size;
    }
    return add_doc(d, buf + start, size - start, &cap);
}

int text_docs_read(const char *path, const char *sep, text_docs *d) {
    uint8_t *buf;
    size_t size;
    memset(d, 0, sizeof *d);
    if (af_read_file(path, NULL, &buf, &size) != AF_OK) {
        fprintf(stderr, "aneforge: %s\n", af_error_message());
        return 1;
    }
    if (text_docs_split((const char *)buf, size, sep, d)) {
        fprintf(stderr, "aneforge: out of memory splitting %s\n", path);
        af_free(buf);
        text_docs_free(d);
        return 1;
    }
    d->buf = (char *)buf;
    return 0;
}

void text_docs_free(text_docs *d) {
    free(d->doc);
    free(d->len);
    af_free(d->buf); /* from af_read_file */
    memset(d, 0, sizeof *d);
}

const char *text_opt(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (!strcmp(argv[*i], name) && *i + 1 < argc) return argv[++*i];
    return NULL;
}
