#include "dash_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n, i;
    jl_line *out;
} cursor;

static void skip_ws(cursor *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\r' || c->s[c->i] == '\n')) c->i++;
}

static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == ch) { c->i++; return true; }
    return false;
}

static int hex4(cursor *c, unsigned *v) {
    if (c->n - c->i < 4) return -1;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char h = c->s[c->i++];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

/* Appends up to len bytes to dst (cap), keeping room for the terminator; cuts silently. */
static void put(char *dst, size_t *o, size_t cap, const char *b, size_t len) {
    if (*o + len + 1 > cap) return;
    memcpy(dst + *o, b, len);
    *o += len;
}

/* A string after its opening quote, unescaped into dst (cap bytes, cut if longer). */
static int string_body(cursor *c, char *dst, size_t cap) {
    size_t o = 0;
    while (c->i < c->n) {
        unsigned char ch = (unsigned char)c->s[c->i++];
        if (ch == '"') { if (cap) dst[o < cap ? o : cap - 1] = 0; return 0; }
        if (ch < 0x20) return -1;
        if (ch != '\\') { put(dst, &o, cap, (const char *)&ch, 1); continue; }
        if (c->i >= c->n) return -1;
        char e = c->s[c->i++], b[4];
        const char *map = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *m = strchr(map, e);
        if (e && m) { b[0] = to[m - map]; put(dst, &o, cap, b, 1); continue; }
        if (e != 'u') return -1;
        unsigned u;
        if (hex4(c, &u)) return -1;
        if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair, or U+FFFD for a lone half */
            unsigned lo;
            if (c->n - c->i >= 6 && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u') {
                c->i += 2;
                if (hex4(c, &lo)) return -1;
                u = lo >= 0xDC00 && lo < 0xE000 ? 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00) : 0xFFFD;
            } else u = 0xFFFD;
        } else if (u >= 0xDC00 && u < 0xE000) u = 0xFFFD;
        if (u == 0) u = 0xFFFD; /* strings stay C strings */
        size_t len;
        if (u < 0x80) { b[0] = (char)u; len = 1; }
        else if (u < 0x800) { b[0] = (char)(0xC0 | u >> 6); b[1] = (char)(0x80 | (u & 63)); len = 2; }
        else if (u < 0x10000) { b[0] = (char)(0xE0 | u >> 12); b[1] = (char)(0x80 | (u >> 6 & 63)); b[2] = (char)(0x80 | (u & 63)); len = 3; }
        else { b[0] = (char)(0xF0 | u >> 18); b[1] = (char)(0x80 | (u >> 12 & 63)); b[2] = (char)(0x80 | (u >> 6 & 63)); b[3] = (char)(0x80 | (u & 63)); len = 4; }
        put(dst, &o, cap, b, len);
    }
    return -1;
}

/* Skips a nested object or array (after its opening bracket), strings included. */
static int skip_nested(cursor *c) {
    int depth = 1;
    while (c->i < c->n && depth > 0) {
        char ch = c->s[c->i++];
        if (ch == '"') {
            char junk[1];
            if (string_body(c, junk, 0)) return -1;
        } else if (ch == '{' || ch == '[') {
            if (++depth > 64) return -1;
        } else if (ch == '}' || ch == ']') depth--;
    }
    return depth == 0 ? 0 : -1;
}

static int number(cursor *c, double *v) {
    size_t start = c->i;
    while (c->i < c->n && strchr("+-0123456789.eE", c->s[c->i]) && c->s[c->i]) c->i++;
    size_t len = c->i - start;
    if (len == 0 || len > 63) return -1;
    char buf[64];
    memcpy(buf, c->s + start, len);
    buf[len] = 0;
    char *end;
    *v = strtod(buf, &end);
    return *end || !isfinite(*v) ? -1 : 0;
}

static bool word(cursor *c, const char *w) {
    size_t len = strlen(w);
    if (c->n - c->i < len || memcmp(c->s + c->i, w, len)) return false;
    c->i += len;
    return true;
}

static int value(cursor *c, jl_field *f) {
    skip_ws(c);
    if (c->i >= c->n) return -1;
    char ch = c->s[c->i];
    if (ch == '"') {
        c->i++;
        jl_line *l = c->out;
        char *dst = l->text + l->used;
        size_t cap = JL_TEXT - l->used;
        if (string_body(c, dst, cap)) return -1;
        if (f) { f->type = JL_STR; f->str = cap ? l->used : JL_TEXT - 1; }
        if (cap) l->used += strlen(dst) + 1;
        return 0;
    }
    if (ch == '{' || ch == '[') {
        c->i++;
        if (f) f->type = JL_NESTED;
        return skip_nested(c);
    }
    if (word(c, "true")) { if (f) { f->type = JL_BOOL; f->num = 1; } return 0; }
    if (word(c, "false")) { if (f) { f->type = JL_BOOL; f->num = 0; } return 0; }
    if (word(c, "null")) { if (f) f->type = JL_NULL; return 0; }
    double v;
    if (number(c, &v)) return -1;
    if (f) { f->type = JL_NUM; f->num = v; }
    return 0;
}

int jl_parse(const char *s, size_t n, jl_line *out) {
    out->n = 0;
    out->used = 0;
    memset(out->text + JL_TEXT - 1, 0, 1); /* where strings cut to nothing point */
    out->text[0] = 0;
    cursor c = { s, n, 0, out };
    if (!s || !eat(&c, '{')) return -1;
    if (!eat(&c, '}')) {
        do {
            if (!eat(&c, '"')) goto fail;
            char key[JL_KEY];
            if (string_body(&c, key, sizeof key) || !eat(&c, ':')) goto fail;
            jl_field *f = out->n < JL_MAX_FIELDS ? &out->f[out->n] : NULL;
            if (value(&c, f)) goto fail;
            if (f) {
                memcpy(f->key, key, sizeof key);
                out->n++;
            }
        } while (eat(&c, ','));
        if (!eat(&c, '}')) goto fail;
    }
    skip_ws(&c);
    if (c.i != n) goto fail;
    return 0;
fail:
    out->n = 0;
    out->used = 0;
    return -1;
}

const jl_field *jl_get(const jl_line *l, const char *key) {
    for (int i = l->n - 1; i >= 0; i--) /* the last of a repeated key wins */
        if (!strcmp(l->f[i].key, key)) return &l->f[i];
    return NULL;
}

double jl_num(const jl_line *l, const char *key, double dflt) {
    const jl_field *f = jl_get(l, key);
    return f && f->type == JL_NUM ? f->num : dflt;
}

bool jl_has_num(const jl_line *l, const char *key) {
    const jl_field *f = jl_get(l, key);
    return f && f->type == JL_NUM;
}

const char *jl_str(const jl_line *l, const char *key) {
    const jl_field *f = jl_get(l, key);
    return f && f->type == JL_STR ? l->text + f->str : NULL;
}
