/* Family files: one flat JSON object per Neural Engine family, the format of the
 * built-in families (src/engine/families/<name>.json, compiled in) and of what
 * `aneforge doctor --probe` measures on a Mac. The reader is strict: a flat object
 * only (no nesting), strings, integers, decimals, true/false and null, every key
 * checked, every bound stated. Keys: docs/fake-ane.md "Family files". */
#ifndef AF_ENGINE_FAMILY_FILE_H
#define AF_ENGINE_FAMILY_FILE_H
#include "aneforge.h"

#include <stddef.h>
#include <stdint.h>

#define FF_MAX_BYTES (1u << 20) /* a family file is a few KiB; a probe file tens */
#define FF_MAX_MEMBERS 4096
#define FF_MAX_KEY 63
#define FF_MAX_STR 2047

typedef enum { FF_NULL, FF_BOOL, FF_INT, FF_NUM, FF_STR } ff_type;

typedef struct {
    char key[FF_MAX_KEY + 1];
    ff_type type;
    int64_t i;  /* FF_INT, FF_BOOL */
    double num; /* FF_NUM, FF_INT */
    char *str;  /* FF_STR */
} ff_member;

typedef struct ff_doc_t {
    ff_member *m;
    int n, cap;
} ff_doc;

/* Parses a flat JSON object through ir_json_parse; duplicate keys are refused. On
 * failure the error names src and either the line and column or the member. Integers
 * are FF_INT below 2^53 in magnitude (exact); a longer one is FF_NUM. */
af_status ff_parse(const char *src, const uint8_t *buf, size_t n, ff_doc *out);
af_status ff_read(const char *path, ff_doc *out);
void ff_free(ff_doc *d);
const ff_member *ff_get(const ff_doc *d, const char *key);
/* Sets key (replacing a member of that key): a string, an integer or null. */
af_status ff_set_str(ff_doc *d, const char *key, const char *v);
af_status ff_set_int(ff_doc *d, const char *key, int64_t v);
af_status ff_set_null(ff_doc *d, const char *key);
/* Writes d as JSON, one member a line, through a temporary and a rename. */
af_status ff_write(const char *path, const ff_doc *d);
#endif
