/* The property-list value tree and its XML writer (plistlib's output, sort_keys=True).
 * The reader is in plist_read.c. */
#include "netplist/plist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static plist_value *new_value(plist_kind kind) {
    plist_value *v = calloc(1, sizeof *v);
    if (v) v->kind = kind;
    return v;
}

plist_value *plist_dict(void) { return new_value(PLIST_DICT); }
plist_value *plist_array(void) { return new_value(PLIST_ARRAY); }

plist_value *plist_string(const char *s) {
    plist_value *v = new_value(PLIST_STRING);
    if (!v) return NULL;
    size_t n = strlen(s);
    v->s = malloc(n + 1);
    if (!v->s) { free(v); return NULL; }
    memcpy(v->s, s, n + 1);
    return v;
}

plist_value *plist_int(int64_t i) {
    plist_value *v = new_value(PLIST_INT);
    if (v) v->i = i;
    return v;
}

plist_value *plist_real(double r) {
    plist_value *v = new_value(PLIST_REAL);
    if (v) v->r = r;
    return v;
}

plist_value *plist_bool(bool b) {
    plist_value *v = new_value(PLIST_BOOL);
    if (v) v->b = b;
    return v;
}

plist_value *plist_data(const void *bytes, size_t len) {
    plist_value *v = new_value(PLIST_DATA);
    if (!v) return NULL;
    v->data = malloc(len ? len : 1);
    if (!v->data) { free(v); return NULL; }
    if (len) memcpy(v->data, bytes, len);
    v->len = len;
    return v;
}

void plist_free(plist_value *v) {
    if (!v) return;
    for (int k = 0; k < v->n; k++) {
        if (v->keys) free(v->keys[k]);
        plist_free(v->items[k]);
    }
    free(v->keys);
    free(v->items);
    free(v->s);
    free(v->data);
    free(v);
}

static bool grow(plist_value *c);

plist_value *plist_clone(const plist_value *v) {
    if (!v) return NULL;
    switch (v->kind) {
    case PLIST_STRING: return plist_string(v->s);
    case PLIST_INT: return plist_int(v->i);
    case PLIST_REAL: return plist_real(v->r);
    case PLIST_BOOL: return plist_bool(v->b);
    case PLIST_DATA: return plist_data(v->data, v->len);
    case PLIST_ARRAY: {
        plist_value *a = plist_array();
        for (int k = 0; a && k < v->n; k++) plist_push(a, plist_clone(v->items[k]));
        return a;
    }
    case PLIST_DICT: {
        plist_value *d = plist_dict();
        for (int k = 0; d && k < v->n; k++) plist_set(d, v->keys[k], plist_clone(v->items[k]));
        return d;
    }
    }
    return NULL;
}

static bool grow(plist_value *c) {
    if (c->n < c->cap) return true;
    int cap = c->cap ? c->cap * 2 : 8;
    plist_value **items = realloc(c->items, (size_t)cap * sizeof *items);
    if (!items) return false;
    c->items = items;
    if (c->kind == PLIST_DICT) {
        char **keys = realloc(c->keys, (size_t)cap * sizeof *keys);
        if (!keys) return false;
        c->keys = keys;
    }
    c->cap = cap;
    return true;
}

plist_value *plist_set(plist_value *dict, const char *key, plist_value *v) {
    if (!dict) { plist_free(v); return NULL; }
    if (dict->kind != PLIST_DICT || !v) { dict->oom = true; plist_free(v); return NULL; }
    for (int k = 0; k < dict->n; k++)
        if (strcmp(dict->keys[k], key) == 0) {
            plist_free(dict->items[k]);
            dict->items[k] = v;
            return v;
        }
    size_t kl = strlen(key);
    char *kc = malloc(kl + 1);
    if (!kc || !grow(dict)) { free(kc); dict->oom = true; plist_free(v); return NULL; }
    memcpy(kc, key, kl + 1);
    dict->keys[dict->n] = kc;
    dict->items[dict->n++] = v;
    return v;
}

plist_value *plist_set_int(plist_value *d, const char *key, int64_t i) { return plist_set(d, key, plist_int(i)); }
plist_value *plist_set_str(plist_value *d, const char *key, const char *s) { return plist_set(d, key, plist_string(s)); }
plist_value *plist_set_real(plist_value *d, const char *key, double r) { return plist_set(d, key, plist_real(r)); }
plist_value *plist_set_bool(plist_value *d, const char *key, bool b) { return plist_set(d, key, plist_bool(b)); }

plist_value *plist_push(plist_value *array, plist_value *v) {
    if (!array) { plist_free(v); return NULL; }
    if (array->kind != PLIST_ARRAY || !v || !grow(array)) { array->oom = true; plist_free(v); return NULL; }
    array->items[array->n++] = v;
    return v;
}

plist_value *plist_push_str(plist_value *array, const char *s) { return plist_push(array, plist_string(s)); }

const plist_value *plist_get(const plist_value *dict, const char *key) {
    if (!dict || dict->kind != PLIST_DICT) return NULL;
    for (int k = 0; k < dict->n; k++)
        if (strcmp(dict->keys[k], key) == 0) return dict->items[k];
    return NULL;
}

const plist_value *plist_get_kind(const plist_value *dict, const char *key, plist_kind kind) {
    const plist_value *v = plist_get(dict, key);
    return v && v->kind == kind ? v : NULL;
}

const char *plist_get_str(const plist_value *dict, const char *key) {
    const plist_value *v = plist_get_kind(dict, key, PLIST_STRING);
    return v ? v->s : NULL;
}

bool plist_get_int(const plist_value *dict, const char *key, int64_t *out) {
    const plist_value *v = plist_get_kind(dict, key, PLIST_INT);
    if (v) *out = v->i;
    return v != NULL;
}

bool plist_equal(const plist_value *a, const plist_value *b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case PLIST_STRING: return strcmp(a->s, b->s) == 0;
    case PLIST_INT: return a->i == b->i;
    case PLIST_REAL: return a->r == b->r || (isnan(a->r) && isnan(b->r));
    case PLIST_BOOL: return a->b == b->b;
    case PLIST_DATA: return a->len == b->len && (!a->len || memcmp(a->data, b->data, a->len) == 0);
    case PLIST_ARRAY:
        if (a->n != b->n) return false;
        for (int k = 0; k < a->n; k++)
            if (!plist_equal(a->items[k], b->items[k])) return false;
        return true;
    case PLIST_DICT:
        if (a->n != b->n) return false;
        for (int k = 0; k < a->n; k++)
            if (!plist_equal(a->items[k], plist_get(b, a->keys[k]))) return false;
        return true;
    }
    return false;
}

/* ---- the writer ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
    char *err;
    size_t errn;
} out_buf;

static void put(out_buf *o, const char *s, size_t n) {
    if (o->failed) return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (o->len + n + 1 > cap) cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->failed = true;
            snprintf(o->err, o->errn, "plist: out of memory writing the document");
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

static void puts_(out_buf *o, const char *s) { put(o, s, strlen(s)); }

static void indent(out_buf *o, int level) {
    for (int k = 0; k < level; k++) put(o, "\t", 1);
}

static void fail(out_buf *o, const char *msg) {
    if (!o->failed) snprintf(o->err, o->errn, "plist: %s", msg);
    o->failed = true;
}

/* plistlib's _escape: controls other than \t \n \r are refused, \r\n and \r become \n,
 * then &, < and > are escaped. */
static void put_escaped(out_buf *o, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
            fail(o, "a string holds a control character, which a property list cannot carry; use data instead");
            return;
        }
        if (*p == '\r') {
            put(o, "\n", 1);
            if (p[1] == '\n') p++;
        } else if (*p == '&') puts_(o, "&amp;");
        else if (*p == '<') puts_(o, "&lt;");
        else if (*p == '>') puts_(o, "&gt;");
        else put(o, (const char *)p, 1);
    }
}

static void simple(out_buf *o, int level, const char *tag, const char *text_escaped_src) {
    indent(o, level);
    put(o, "<", 1), puts_(o, tag), put(o, ">", 1);
    put_escaped(o, text_escaped_src);
    put(o, "</", 2), puts_(o, tag), puts_(o, ">\n");
}

/* Python's repr(float): the shortest digits that read back to r, fixed notation when
 * the decimal point falls in -4 < decpt <= 16 (with ".0" on whole numbers), otherwise
 * d[.ddd]e±XX. */
void plist_format_real(double r, char *out, size_t n) {
    if (isnan(r)) { snprintf(out, n, "nan"); return; }
    if (isinf(r)) { snprintf(out, n, r < 0 ? "-inf" : "inf"); return; }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, r);
        if (strtod(e, NULL) == r) break;
    }
    /* e is [-]d[.ddd]e[+-]XX */
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    char body[64];
    size_t b = 0;
    if (decpt <= -4 || decpt > 16) {
        body[b++] = digits[0];
        if (nd > 1) {
            body[b++] = '.';
            for (int k = 1; k < nd; k++) body[b++] = digits[k];
        }
        snprintf(body + b, sizeof body - b, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    } else if (decpt <= 0) {
        body[b++] = '0', body[b++] = '.';
        for (int k = 0; k < -decpt; k++) body[b++] = '0';
        for (int k = 0; k < nd; k++) body[b++] = digits[k];
        body[b] = 0;
    } else if (decpt >= nd) {
        for (int k = 0; k < nd; k++) body[b++] = digits[k];
        for (int k = nd; k < decpt; k++) body[b++] = '0';
        body[b++] = '.', body[b++] = '0', body[b] = 0;
    } else {
        for (int k = 0; k < nd; k++) {
            if (k == decpt) body[b++] = '.';
            body[b++] = digits[k];
        }
        body[b] = 0;
    }
    snprintf(out, n, "%s%s", neg ? "-" : "", body);
}

static void write_data(out_buf *o, int level, const plist_value *v) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    indent(o, level);
    puts_(o, "<data>\n");
    /* plistlib wraps lines at 76 columns less the indent counted as 8 per tab, 16 at least */
    int maxline = 76 - 8 * level;
    if (maxline < 16) maxline = 16;
    size_t chunk = (size_t)(maxline / 4) * 3;
    for (size_t at = 0; at < v->len; at += chunk) {
        size_t end = at + chunk < v->len ? at + chunk : v->len;
        indent(o, level);
        for (size_t k = at; k < end; k += 3) {
            unsigned x = (unsigned)v->data[k] << 16;
            if (k + 1 < end) x |= (unsigned)v->data[k + 1] << 8;
            if (k + 2 < end) x |= v->data[k + 2];
            char q[4] = {b64[(x >> 18) & 63], b64[(x >> 12) & 63], k + 1 < end ? b64[(x >> 6) & 63] : '=',
                         k + 2 < end ? b64[x & 63] : '='};
            put(o, q, 4);
        }
        put(o, "\n", 1);
    }
    indent(o, level);
    puts_(o, "</data>\n");
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

static void write_value(out_buf *o, int level, const plist_value *v) {
    if (o->failed) return;
    if (level > PLIST_MAX_DEPTH) { fail(o, "the value nests deeper than PLIST_MAX_DEPTH"); return; }
    if (v->oom) { fail(o, "a value ran out of memory while it was built"); return; }
    char num[64];
    switch (v->kind) {
    case PLIST_STRING: simple(o, level, "string", v->s); return;
    case PLIST_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->i);
        simple(o, level, "integer", num);
        return;
    case PLIST_REAL:
        plist_format_real(v->r, num, sizeof num);
        simple(o, level, "real", num);
        return;
    case PLIST_BOOL:
        indent(o, level);
        puts_(o, v->b ? "<true/>\n" : "<false/>\n");
        return;
    case PLIST_DATA: write_data(o, level, v); return;
    case PLIST_ARRAY:
        indent(o, level);
        if (!v->n) { puts_(o, "<array/>\n"); return; }
        puts_(o, "<array>\n");
        for (int k = 0; k < v->n; k++) write_value(o, level + 1, v->items[k]);
        indent(o, level);
        puts_(o, "</array>\n");
        return;
    case PLIST_DICT: {
        indent(o, level);
        if (!v->n) { puts_(o, "<dict/>\n"); return; }
        /* sorted by key as Python sorts str (code points; UTF-8 bytes sort the same) */
        char ***order = malloc((size_t)v->n * sizeof *order);
        if (!order) { fail(o, "out of memory writing the document"); return; }
        for (int k = 0; k < v->n; k++) order[k] = &v->keys[k];
        qsort(order, (size_t)v->n, sizeof *order, key_cmp);
        puts_(o, "<dict>\n");
        for (int k = 0; k < v->n; k++) {
            int at = (int)(order[k] - v->keys);
            simple(o, level + 1, "key", v->keys[at]);
            write_value(o, level + 1, v->items[at]);
        }
        free(order);
        indent(o, level);
        puts_(o, "</dict>\n");
        return;
    }
    }
}

char *plist_write_xml(const plist_value *v, size_t *len, char *err, size_t errn) {
    out_buf o = {.err = err, .errn = errn};
    if (!v) {
        snprintf(err, errn, "plist: no value to write (out of memory while building it?)");
        return NULL;
    }
    puts_(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
              "\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
              "<plist version=\"1.0\">\n");
    write_value(&o, 0, v);
    puts_(&o, "</plist>\n");
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    if (len) *len = o.len;
    return o.buf;
}
