/* The family-file reader and writer: a flat JSON object (RFC 8259 syntax, restricted to
 * one level). The bytes are untrusted (a probe file comes from someone else's Mac), so
 * every bound is checked and nothing is read past n. */
#include "engine/family_file.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *src;
    const uint8_t *p;
    size_t n, at;
} lex;

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

static af_status bad(const lex *l, const char *what) {
    return ir_fail(AF_ERR_CORRUPT, "%s: byte %zu: %s (a family file is one flat JSON object: "
                                  "\"key\": string, number, true, false or null)", l->src, l->at, what);
}

static void ws(lex *l) {
    while (l->at < l->n && (l->p[l->at] == ' ' || l->p[l->at] == '\t' || l->p[l->at] == '\n' || l->p[l->at] == '\r')) l->at++;
}

static int hexval(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string into out (at most cap - 1 bytes); escapes are decoded, \u only below 0x80
 * (a family file's text is ASCII; raw UTF-8 bytes pass through unchanged). */
static af_status string(lex *l, char *out, size_t cap) {
    size_t k = 0;
    if (l->at >= l->n || l->p[l->at] != '"') return bad(l, "expected a string");
    l->at++;
    for (;;) {
        if (l->at >= l->n) return bad(l, "unterminated string");
        uint8_t c = l->p[l->at++];
        if (c == '"') break;
        if (c < 0x20) return bad(l, "control character in a string (write it as an escape)");
        if (c == '\\') {
            if (l->at >= l->n) return bad(l, "unterminated escape");
            uint8_t e = l->p[l->at++];
            switch (e) {
            case '"': case '\\': case '/': c = e; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                int v = 0;
                for (int j = 0; j < 4; j++) {
                    int h = l->at < l->n ? hexval(l->p[l->at]) : -1;
                    if (h < 0) return bad(l, "\\u needs four hex digits");
                    v = v * 16 + h;
                    l->at++;
                }
                if (v == 0 || v >= 0x80) return bad(l, "\\u escapes are limited to ASCII 0x01..0x7f (write other characters as UTF-8)");
                c = (uint8_t)v;
                break;
            }
            default: return bad(l, "unknown escape");
            }
        }
        if (k + 1 >= cap) return bad(l, "string too long");
        out[k++] = (char)c;
    }
    out[k] = 0;
    return AF_OK;
}

/* A number: an integer within int64 when it has no fraction or exponent, else a finite
 * double. The grammar is JSON's (no leading zeros, no '+', no bare '.'). */
static af_status number(lex *l, ff_member *m) {
    size_t s = l->at;
    bool frac = false;
    if (l->at < l->n && l->p[l->at] == '-') l->at++;
    if (l->at >= l->n || l->p[l->at] < '0' || l->p[l->at] > '9') return bad(l, "expected a value");
    if (l->p[l->at] == '0') l->at++;
    else while (l->at < l->n && l->p[l->at] >= '0' && l->p[l->at] <= '9') l->at++;
    if (l->at < l->n && l->p[l->at] == '.') {
        frac = true;
        l->at++;
        if (l->at >= l->n || l->p[l->at] < '0' || l->p[l->at] > '9') return bad(l, "a digit must follow '.'");
        while (l->at < l->n && l->p[l->at] >= '0' && l->p[l->at] <= '9') l->at++;
    }
    if (l->at < l->n && (l->p[l->at] == 'e' || l->p[l->at] == 'E')) {
        frac = true;
        l->at++;
        if (l->at < l->n && (l->p[l->at] == '+' || l->p[l->at] == '-')) l->at++;
        if (l->at >= l->n || l->p[l->at] < '0' || l->p[l->at] > '9') return bad(l, "a digit must follow the exponent");
        while (l->at < l->n && l->p[l->at] >= '0' && l->p[l->at] <= '9') l->at++;
    }
    char tok[40];
    size_t len = l->at - s;
    if (len >= sizeof tok) return bad(l, "number too long");
    memcpy(tok, l->p + s, len);
    tok[len] = 0;
    errno = 0;
    if (!frac) {
        long long v = strtoll(tok, NULL, 10);
        if (errno) return bad(l, "integer out of range");
        m->type = FF_INT;
        m->i = v;
        m->num = (double)v;
    } else {
        double v = strtod(tok, NULL);
        if (errno || !isfinite(v)) return bad(l, "number out of range");
        m->type = FF_NUM;
        m->num = v;
    }
    return AF_OK;
}

static bool word(lex *l, const char *w) {
    size_t k = strlen(w);
    if (l->n - l->at < k || memcmp(l->p + l->at, w, k)) return false;
    l->at += k;
    return true;
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

af_status ff_parse(const char *src, const uint8_t *buf, size_t n, ff_doc *out) {
    lex l = { .src = src ? src : "family file", .p = buf, .n = n };
    memset(out, 0, sizeof *out);
    if (n > FF_MAX_BYTES) return ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes, over the %u-byte limit of a family file", l.src, n, FF_MAX_BYTES);
    char *val = malloc(FF_MAX_STR + 1);
    if (!val) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", l.src);
    af_status st = AF_OK;
    ws(&l);
    if (l.at >= n || buf[l.at] != '{') { st = bad(&l, "expected '{'"); goto done; }
    l.at++;
    ws(&l);
    if (l.at < n && buf[l.at] == '}') l.at++;
    else for (;;) {
        char key[FF_MAX_KEY + 1];
        ws(&l);
        size_t kat = l.at;
        if ((st = string(&l, key, sizeof key))) goto done;
        if (!key[0]) { l.at = kat; st = bad(&l, "empty key"); goto done; }
        if (ff_get(out, key)) {
            l.at = kat;
            char why[FF_MAX_KEY + 40];
            snprintf(why, sizeof why, "duplicate key \"%s\"", key);
            st = bad(&l, why);
            goto done;
        }
        ws(&l);
        if (l.at >= n || buf[l.at] != ':') { st = bad(&l, "expected ':'"); goto done; }
        l.at++;
        ws(&l);
        ff_member tmp = { 0 };
        if (l.at >= n) { st = bad(&l, "expected a value"); goto done; }
        uint8_t c = buf[l.at];
        if (c == '"') {
            if ((st = string(&l, val, FF_MAX_STR + 1))) goto done;
            tmp.type = FF_STR;
        } else if (c == '{' || c == '[') {
            st = bad(&l, "nested objects and arrays are not part of a family file");
            goto done;
        } else if (word(&l, "true")) { tmp.type = FF_BOOL; tmp.i = 1; }
        else if (word(&l, "false")) { tmp.type = FF_BOOL; tmp.i = 0; }
        else if (word(&l, "null")) tmp.type = FF_NULL;
        else if ((st = number(&l, &tmp))) goto done;
        ff_member *m = add(out, key);
        if (!m) { st = out->n >= FF_MAX_MEMBERS ? bad(&l, "more than 4096 members") : ir_fail(AF_ERR_NOMEM, "%s: out of memory", l.src); goto done; }
        m->type = tmp.type;
        m->i = tmp.i;
        m->num = tmp.num;
        if (tmp.type == FF_STR && !(m->str = dupstr(val))) { st = ir_fail(AF_ERR_NOMEM, "%s: out of memory", l.src); goto done; }
        ws(&l);
        if (l.at < n && buf[l.at] == ',') { l.at++; continue; }
        if (l.at < n && buf[l.at] == '}') { l.at++; break; }
        st = bad(&l, "expected ',' or '}'");
        goto done;
    }
    ws(&l);
    if (l.at != n) st = bad(&l, "trailing bytes after the object");
done:
    free(val);
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
