/* What `aneforge data fetch text`, `data tokenize` and `tokenizer` share: documents in
 * fortune files (text cut by separator lines, "%" by default) and option parsing. */
#ifndef AF_TOOLS_TEXT_CLI_H
#define AF_TOOLS_TEXT_CLI_H
#include <stddef.h>
#include <stdint.h>

#define TEXT_DEFAULT_SEP "%"

/* Documents inside one buffer: doc[i] is len[i] bytes, not NUL-terminated. */
typedef struct {
    const char **doc;
    size_t *len;
    int64_t n;
    char *buf;               /* the text they point into, when owned */
} text_docs;

/* Cuts buf[0..size) at lines equal to sep (a trailing "\r" ignored; sep "" keeps the
 * whole text as one document), strips each document's leading and trailing whitespace
 * (as llama2.c's tinystories.py does) and drops empty ones. Returns 0, or 1 out of
 * memory. The documents point into buf. */
int text_docs_split(const char *buf, size_t size, const char *sep, text_docs *d);
/* Reads path whole and splits it; prints why on failure and returns 1. */
int text_docs_read(const char *path, const char *sep, text_docs *d);
void text_docs_free(text_docs *d);

/* argv[*i] is `name VALUE` or `name=VALUE`: the value (advancing *i past it), else NULL. */
const char *text_opt(int argc, char **argv, int *i, const char *name);
#endif
