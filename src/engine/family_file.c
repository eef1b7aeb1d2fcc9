/* The family-file reader and writer: a flat JSON object (RFC 8259, restricted to one
 * level). The bytes are untrusted (a probe file comes from someone else's Mac), so they
 * go through the library's one strict JSON reader (ir_json_parse: duplicate keys,
 * trailing bytes, invalid UTF-8 refused with line and column); this file only maps the
 * members and checks the family file's own bounds (FF_MAX_*, no nesting, no NUL). */
#include "engine/family_file.h"
#include "ir/file.h"
#include "ir/ir.h"
#include "ir/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

static af_status bad(const char *src, const char *key, const char *what) {
    return ir_fail(AF_ERR_CORRUPT, "%s: %s%s%s%s (a family file is one flat JSON object: "
                                  "\"key\": string, number, true, false or null)",
                   src, key ? "member \"" : "", key ? key : "", key ? "\": " : "", what);
}

const ff_member *ff_get(const ff_doc *d, const char *key) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->m[i].key, key)) return &d->m[i];
    return NULL;
}

static ff_member *add(ff_doc *d, const char *key) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->m[i].key, key)) {
            free(d->m[i].str);
            d->m[i].str = NULL;
            return &d->m[i];
        }
    if (d->n >= FF_MAX_MEMBERS) return NULL;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 32;
        ff_member *m = realloc(d->m, sizeof *m * (size_t)cap);
        if (!m) return NULL;
        d->m = m;
        d->cap = cap;
    }
    ff_member *m = &d->m[d->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->key, sizeof m->key, "%s", key);
    return m;
}

void ff_free(ff_doc *d) {
    for (int i = 0; d && i < d->n; i++) free(d->m[i].str);
    if (d) free(d->m);
    if (d) memset(d, 0, sizeof *d);
}

/* Integers are exact below 2^53 only (ir_json keeps numbers as doubles); a larger one is
 * kept as a number, so a field that needs an integer refuses it rather than reading a
 * rounded value. */
#define FF_EXACT_INT 9007199254740992.0

af_status ff_parse(const char *src, const uint8_t *buf, size_t n, ff_doc *out) {
    src = src ? src : "family file";
    memset(out, 0, sizeof *out);
    if (n > FF_MAX_BYTES) return ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes, over the %u-byte limit of a family file", src, n, FF_MAX_BYTES);
    char err[256];
    json_doc *j = ir_json_parse((const char *)buf, n, err, sizeof err);
    if (!j) return bad(src, NULL, err);
    af_status st = AF_OK;
    if (j->n[0].type != JSON_OBJ) { st = bad(src, NULL, "the document is not a JSON object"); goto done; }
    if (j->n[0].count > FF_MAX_MEMBERS) { st = bad(src, NULL, "more than 4096 members"); goto done; }
    for (int i = j->n[0].child; i >= 0; i = j->n[i].next) {
        const json_node *v = &j->n[i];
        const char *key = ir_json_key(j, i);
        if (!v->keylen) { st = bad(src, NULL, "empty key"); goto done; }
        if (strlen(key) != v->keylen) { st = bad(src, NULL, "a key holds a NUL byte"); goto done; }
        if (v->keylen > FF_MAX_KEY) { st = bad(src, NULL, "a key longer than 63 bytes"); goto done; }
        ff_member tmp = { 0 };
        switch (v->type) {
        case JSON_OBJ: case JSON_ARR:
            st = bad(src, key, "nested objects and arrays are not part of a family file");
            goto done;
        case JSON_STR:
            if (!ir_json_is_text(j, i)) { st = bad(src, key, "the string holds a NUL byte (\\u0000)"); goto done; }
            if (v->len > FF_MAX_STR) { st = bad(src, key, "string longer than 2047 bytes"); goto done; }
            tmp.type = FF_STR;
            break;
        case JSON_BOOL: tmp.type = FF_BOOL; tmp.i = v->boolean; break;
        case JSON_NULL: tmp.type = FF_NULL; break;
        case JSON_NUM:
            tmp.type = v->integer && fabs(v->num) < FF_EXACT_INT ? FF_INT : FF_NUM;
            tmp.i = tmp.type == FF_INT ? (int64_t)v->num : 0;
            tmp.num = v->num;
            break;
        }
        ff_member *m = add(out, key); /* keys are unique: ir_json refuses duplicates */
        if (!m) { st = ir_fail(AF_ERR_NOMEM, "%s: out of memory", src); goto done; }
        m->type = tmp.type;
        m->i = tmp.i;
        m->num = tmp.num;
        if (tmp.type == FF_STR && !(m->str = dupstr(ir_json_str(j, i)))) { st = ir_fail(AF_ERR_NOMEM, "%s: out of memory", src); goto done; }
    }
done:
    ir_json_free(j);
    if (st) ff_free(out);
    return st;
}

af_status ff_read(const char *path, ff_doc *out) {
    memset(out, 0, sizeof *out);
    uint64_t size = 0;
    FILE *f = ir_fopen_regular(path, "family file", FF_MAX_BYTES, &size);
    if (!f) return AF_ERR_IO;
    uint8_t *buf = malloc(size ? (size_t)size : 1);
    if (!buf) { fclose(f); return ir_fail(AF_ERR_NOMEM, "family file %s: out of memory", path); }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    af_status st = got == size ? ff_parse(path, buf, got, out) : ir_fail(AF_ERR_IO, "family file %s: short read", path);
    free(buf);
    return st;
}

static af_status nomem(void) { return ir_fail(AF_ERR_NOMEM, "family file: out of memory (or more than %d members)", FF_MAX_MEMBERS); }

af_status ff_set_str(ff_doc *d, const char *key, const char *v) {
    ff_member *m = add(d, key);
    if (!m || !(m->str = dupstr(v))) return nomem();
    m->type = FF_STR;
    return AF_OK;
}

af_status ff_set_int(ff_doc *d, const char *key, int64_t v) {
    ff_member *m = add(d, key);
    if (!m) return nomem();
    m->type = FF_INT;
    m->i = v;
    m->num = (double)v;
    return AF_OK;
}

af_status ff_set_null(ff_doc *d, const char *key) {
    ff_member *m = add(d, key);
    if (!m) return nomem();
    m->type = FF_NULL;
    return AF_OK;
}

/* The file's text, built in memory and written whole (ir_write_file: temporary + rename). */
typedef struct {
    char *b;
    size_t n, cap;
    bool ok;
} sbuf;

static void put(sbuf *o, const char *fmt, ...) {
    va_list ap;
    for (int tries = 0; o->ok && tries < 2; tries++) {
        va_start(ap, fmt);
        int k = vsnprintf(o->b ? o->b + o->n : NULL, o->b ? o->cap - o->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { o->ok = false; return; }
        if (o->b && o->n + (size_t)k < o->cap) { o->n += (size_t)k; return; }
        size_t cap = (o->cap + (size_t)k + 1) * 2;
        char *b = realloc(o->b, cap);
        if (!b) { o->ok = false; return; }
        o->b = b;
        o->cap = cap;
    }
}

static void put_str(sbuf *o, const char *s) {
    put(o, "\"");
    for (const unsigned char *c = (const unsigned char *)s; o->ok && *c; c++) {
        if (*c == '"' || *c == '\\') put(o, "\\%c", *c);
        else if (*c == '\n') put(o, "\\n");
        else if (*c < 0x20 || *c == 0x7f) put(o, "\\u%04x", *c);
        else put(o, "%c", *c);
    }
    put(o, "\"");
}

af_status ff_write(const char *path, const ff_doc *d) {
    sbuf o = { .ok = true };
    put(&o, "{\n");
    for (int i = 0; o.ok && i < d->n; i++) {
        const ff_member *m = &d->m[i];
        put(&o, "  ");
        put_str(&o, m->key);
        put(&o, ": ");
        switch (m->type) {
        case FF_NULL: put(&o, "null"); break;
        case FF_BOOL: put(&o, m->i ? "true" : "false"); break;
        case FF_INT: put(&o, "%lld", (long long)m->i); break;
        case FF_NUM: put(&o, "%.17g", m->num); break;
        case FF_STR: put_str(&o, m->str); break;
        }
        put(&o, i + 1 < d->n ? ",\n" : "\n");
    }
    put(&o, "}\n");
    af_status st = o.ok ? ir_write_file(path, o.b, o.n, "family file") : ir_fail(AF_ERR_NOMEM, "family file %s: out of memory", path);
    free(o.b);
    return st;
}
