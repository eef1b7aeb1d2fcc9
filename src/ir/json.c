/* The strict JSON reader (json.h). Recursive descent with an explicit depth bound; nodes
 * live in one growing array addressed by index, so growth never invalidates a parent. */
#include "ir/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *p, *start, *end;
    json_doc *d;
    int cap;
    size_t slen;
    char *err;
    size_t errcap;
    bool failed;
} parser;

static void fail(parser *ps, const char *fmt, ...) {
    if (ps->failed) return;
    ps->failed = true;
    int line = 1, col = 1;
    for (const unsigned char *q = ps->start; q < ps->p && q < ps->end; q++) {
        if (*q == '\n') { line++; col = 1; }
        else col++;
    }
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->err && ps->errcap) snprintf(ps->err, ps->errcap, "line %d col %d: %s", line, col, msg);
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int new_node(parser *ps, json_type t) {
    json_doc *d = ps->d;
    if (d->count == ps->cap) {
        if (ps->cap >= JSON_MAX_VALUES) { fail(ps, "more than %d values", JSON_MAX_VALUES); return -1; }
        int cap = ps->cap ? ps->cap * 2 : 64;
        json_node *n = realloc(d->n, sizeof *n * (size_t)cap);
        if (!n) { fail(ps, "out of memory"); return -1; }
        d->n = n;
        ps->cap = cap;
    }
    json_node *n = &d->n[d->count];
    memset(n, 0, sizeof *n);
    n->type = t;
    n->child = n->next = -1;
    return d->count++;
}

static void put_utf8(parser *ps, uint32_t c) {
    char *o = ps->d->strings + ps->slen;
    if (c < 0x80) { o[0] = (char)c; ps->slen += 1; }
    else if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 63)); ps->slen += 2; }
    else if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | (c >> 6 & 63)); o[2] = (char)(0x80 | (c & 63)); ps->slen += 3;
    } else {
        o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | (c >> 12 & 63));
        o[2] = (char)(0x80 | (c >> 6 & 63)); o[3] = (char)(0x80 | (c & 63)); ps->slen += 4;
    }
}

static int hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) { fail(ps, "\\u escape cut short"); return -1; }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else { fail(ps, "bad hex digit in \\u escape"); return -1; }
    }
    *out = v;
    return 0;
}

/* One UTF-8 sequence starting at p (validated: no overlongs, surrogates or > U+10FFFF). */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int n;
    uint32_t v, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { n = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 4; v = c & 0x07; min = 0x10000; }
    else return -1;
    if (end - p < n) return -1;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return -1;
        v = v << 6 | (p[i] & 63);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return -1;
    return n;
}

/* A string at p (the opening quote); its decoded bytes go to the doc's buffer. */
static bool parse_string(parser *ps, size_t *off, size_t *len) {
    ps->p++;
    *off = ps->slen;
    for (;;) {
        if (ps->p >= ps->end) { fail(ps, "string not closed"); return false; }
        unsigned char c = *ps->p;
        if (c == '"') { ps->p++; break; }
        if (c < 0x20) { fail(ps, "control character 0x%02x in a string (escape it)", c); return false; }
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end) { fail(ps, "string not closed"); return false; }
            unsigned char e = *ps->p++;
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char to[] = "\"\\/\b\f\n\r\t";
                ps->d->strings[ps->slen++] = to[simple - "\"\\/bfnrt"];
            } else if (e == 'u') {
                uint32_t u, lo;
                if (hex4(ps, &u)) return false;
                if (u >= 0xDC00 && u <= 0xDFFF) { fail(ps, "lone low surrogate \\u%04x", u); return false; }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') { fail(ps, "lone high surrogate"); return false; }
                    ps->p += 2;
                    if (hex4(ps, &lo)) return false;
                    if (lo < 0xDC00 || lo > 0xDFFF) { fail(ps, "high surrogate not followed by a low one"); return false; }
                    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                }
                put_utf8(ps, u);
            } else {
                fail(ps, "unknown escape \\%c", e >= 0x20 && e < 0x7f ? e : '?');
                return false;
            }
            continue;
        }
        int n = utf8_len(ps->p, ps->end);
        if (n < 0) { fail(ps, "invalid UTF-8 in a string"); return false; }
        memcpy(ps->d->strings + ps->slen, ps->p, (size_t)n);
        ps->slen += (size_t)n;
        ps->p += n;
    }
    *len = ps->slen - *off;
    ps->d->strings[ps->slen++] = 0;
    return true;
}

static bool is_digit(const unsigned char *p, const unsigned char *end) { return p < end && *p >= '0' && *p <= '9'; }

static int parse_number(parser *ps) {
    const unsigned char *s = ps->p;
    bool integer = true;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (!is_digit(ps->p, ps->end)) { fail(ps, "expected a value"); return -1; }
    if (*ps->p == '0') {
        ps->p++;
        if (is_digit(ps->p, ps->end)) { fail(ps, "leading zero in a number"); return -1; }
    } else
        while (is_digit(ps->p, ps->end)) ps->p++;
    if (ps->p < ps->end && *ps->p == '.') {
        integer = false;
        ps->p++;
        if (!is_digit(ps->p, ps->end)) { fail(ps, "digit expected after '.'"); return -1; }
        while (is_digit(ps->p, ps->end)) ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integer = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (!is_digit(ps->p, ps->end)) { fail(ps, "digit expected in the exponent"); return -1; }
        while (is_digit(ps->p, ps->end)) ps->p++;
    }
    size_t n = (size_t)(ps->p - s);
    char buf[64];
    if (n >= sizeof buf) { fail(ps, "number longer than %zu characters", sizeof buf - 1); return -1; }
    memcpy(buf, s, n);
    buf[n] = 0;
    double v = strtod(buf, NULL);
    if (!isfinite(v)) { fail(ps, "number out of range"); return -1; }
    int i = new_node(ps, JSON_NUM);
    if (i < 0) return -1;
    ps->d->n[i].num = v;
    ps->d->n[i].integer = integer;
    return i;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) { fail(ps, "expected a value"); return false; }
    ps->p += n;
    return true;
}

static int parse_value(parser *ps, int depth);

static int parse_container(parser *ps, int depth, bool object) {
    int self = new_node(ps, object ? JSON_OBJ : JSON_ARR);
    if (self < 0) return -1;
    ps->p++;
    skip_ws(ps);
    char close = object ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return self; }
    int last = -1;
    for (;;) {
        size_t koff = 0, klen = 0;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') { fail(ps, "expected a key string"); return -1; }
            if (!parse_string(ps, &koff, &klen)) return -1;
            for (int m = ps->d->n[self].child; m >= 0; m = ps->d->n[m].next)
                if (ps->d->n[m].keylen == klen && !memcmp(ps->d->strings + ps->d->n[m].key, ps->d->strings + koff, klen)) {
                    fail(ps, "duplicate key \"%.60s\"", ps->d->strings + koff);
                    return -1;
                }
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') { fail(ps, "expected ':'"); return -1; }
            ps->p++;
            skip_ws(ps);
        }
        int v = parse_value(ps, depth + 1);
        if (v < 0) return -1;
        json_node *vn = &ps->d->n[v];
        vn->key = koff;
        vn->keylen = klen;
        if (last < 0) ps->d->n[self].child = v;
        else ps->d->n[last].next = v;
        last = v;
        ps->d->n[self].count++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; skip_ws(ps); continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return self; }
        fail(ps, "expected ',' or '%c'", close);
        return -1;
    }
}

static int parse_value(parser *ps, int depth) {
    if (depth > JSON_MAX_DEPTH) { fail(ps, "nested deeper than %d", JSON_MAX_DEPTH); return -1; }
    skip_ws(ps);
    if (ps->p >= ps->end) { fail(ps, "expected a value, found the end"); return -1; }
    int i;
    switch (*ps->p) {
    case '{': return parse_container(ps, depth, true);
    case '[': return parse_container(ps, depth, false);
    case '"': {
        size_t off, len;
        if (!parse_string(ps, &off, &len)) return -1;
        if ((i = new_node(ps, JSON_STR)) < 0) return -1;
        ps->d->n[i].str = off;
        ps->d->n[i].len = len;
        return i;
    }
    case 't': case 'f':
        if (!literal(ps, *ps->p == 't' ? "true" : "false")) return -1;
        if ((i = new_node(ps, JSON_BOOL)) < 0) return -1;
        ps->d->n[i].boolean = ps->p[-1] == 'e' && ps->p[-2] == 'u';
        return i;
    case 'n':
        if (!literal(ps, "null")) return -1;
        return new_node(ps, JSON_NULL);
    default: return parse_number(ps);
    }
}

json_doc *ir_json_parse(const char *text, size_t len, char *err, size_t cap) {
    if (err && cap) err[0] = 0;
    json_doc *d = calloc(1, sizeof *d);
    /* decoded strings never outgrow their source; +1 for each terminator is within len */
    if (d) d->strings = malloc(len + 1);
    if (!d || !d->strings) {
        if (err && cap) snprintf(err, cap, "out of memory for a %zu-byte document", len);
        ir_json_free(d);
        return NULL;
    }
    parser ps = { (const unsigned char *)text, (const unsigned char *)text, (const unsigned char *)text + len,
                  d, 0, 0, err, cap, false };
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) fail(&ps, "byte order mark before the document");
    else if (parse_value(&ps, 0) == 0) {
        skip_ws(&ps);
        if (ps.p != ps.end) fail(&ps, "bytes after the document");
    }
    if (ps.failed) { ir_json_free(d); return NULL; }
    return d;
}

void ir_json_free(json_doc *d) {
    if (!d) return;
    free(d->n);
    free(d->strings);
    free(d);
}

int ir_json_get(const json_doc *d, int obj, const char *key) {
    if (obj < 0 || d->n[obj].type != JSON_OBJ) return -1;
    size_t kl = strlen(key);
    for (int m = d->n[obj].child; m >= 0; m = d->n[m].next)
        if (d->n[m].keylen == kl && !memcmp(d->strings + d->n[m].key, key, kl)) return m;
    return -1;
}

const char *ir_json_str(const json_doc *d, int i) { return i >= 0 && d->n[i].type == JSON_STR ? d->strings + d->n[i].str : NULL; }
const char *ir_json_key(const json_doc *d, int i) { return d->strings + d->n[i].key; }

bool ir_json_is_text(const json_doc *d, int i) {
    return i >= 0 && d->n[i].type == JSON_STR && strlen(d->strings + d->n[i].str) == d->n[i].len;
}

bool ir_json_int(const json_doc *d, int i, int64_t lo, int64_t hi, int64_t *out) {
    if (i < 0 || d->n[i].type != JSON_NUM) return false;
    double v = d->n[i].num;
    if (v != floor(v) || v < (double)lo || v > (double)hi || fabs(v) > 9007199254740992.0) return false;
    *out = (int64_t)v;
    return true;
}
