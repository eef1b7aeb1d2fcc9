/* The XML property-list reader: the subset plistlib writes (dict, array, key, string,
 * integer, real, true, false, data), with the XML declaration, DOCTYPE, comments and
 * whitespace between elements. Untrusted input: every read is bounded by the length,
 * nesting by PLIST_MAX_DEPTH and the value count by PLIST_MAX_NODES, and anything else
 * is refused with the byte offset and what was expected. */
#include "netplist/plist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n, at;
    long nodes;
    char *err;
    size_t errn;
    bool failed;
} reader;

static bool bad(reader *r, const char *what) {
    if (!r->failed) snprintf(r->err, r->errn, "plist: at byte %zu: %s", r->at, what);
    r->failed = true;
    return false;
}

static bool starts(const reader *r, const char *lit) {
    size_t k = strlen(lit);
    return r->n - r->at >= k && !memcmp(r->s + r->at, lit, k);
}

/* Skips text up to and past lit; false when it never comes. */
static bool skip_past(reader *r, const char *lit) {
    size_t k = strlen(lit);
    while (r->n - r->at >= k) {
        if (!memcmp(r->s + r->at, lit, k)) {
            r->at += k;
            return true;
        }
        r->at++;
    }
    return false;
}

/* Whitespace, comments, and (before the root) the declaration and DOCTYPE. */
static bool skip_misc(reader *r) {
    for (;;) {
        while (r->at < r->n && (r->s[r->at] == ' ' || r->s[r->at] == '\t' || r->s[r->at] == '\n' || r->s[r->at] == '\r'))
            r->at++;
        if (starts(r, "<!--")) {
            if (!skip_past(r, "-->")) return bad(r, "a comment is not closed");
        } else if (starts(r, "<?")) {
            if (!skip_past(r, "?>")) return bad(r, "a processing instruction is not closed");
        } else if (starts(r, "<!DOCTYPE")) {
            if (!skip_past(r, ">")) return bad(r, "the DOCTYPE is not closed");
        } else {
            return true;
        }
    }
}

/* Reads "<name ...>" or "<name .../>": the name into buf, *empty for "/>". */
static bool open_tag(reader *r, char *buf, size_t bn, bool *empty) {
    if (!skip_misc(r)) return false;
    if (!starts(r, "<") || starts(r, "</")) return bad(r, "expected an element");
    r->at++;
    size_t k = 0;
    while (r->at < r->n && ((r->s[r->at] >= 'a' && r->s[r->at] <= 'z') || (r->s[r->at] >= 'A' && r->s[r->at] <= 'Z'))) {
        if (k + 1 >= bn) return bad(r, "an element name is too long");
        buf[k++] = r->s[r->at++];
    }
    buf[k] = 0;
    if (!k) return bad(r, "expected an element name");
    while (r->at < r->n && r->s[r->at] != '>') { /* attributes (plist version="1.0") */
        if (r->s[r->at] == '<') return bad(r, "'<' inside a tag");
        r->at++;
    }
    if (r->at >= r->n) return bad(r, "a tag is not closed");
    *empty = r->s[r->at - 1] == '/';
    r->at++;
    return true;
}

static bool close_tag(reader *r, const char *name) {
    if (!skip_misc(r)) return false;
    char want[32];
    snprintf(want, sizeof want, "</%s>", name);
    if (!starts(r, want)) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected %s", want);
        return bad(r, msg);
    }
    r->at += strlen(want);
    return true;
}

static void put_utf8(char *out, size_t *k, unsigned long c) {
    if (c < 0x80) out[(*k)++] = (char)c;
    else if (c < 0x800) out[(*k)++] = (char)(0xC0 | (c >> 6)), out[(*k)++] = (char)(0x80 | (c & 63));
    else if (c < 0x10000)
        out[(*k)++] = (char)(0xE0 | (c >> 12)), out[(*k)++] = (char)(0x80 | ((c >> 6) & 63)), out[(*k)++] = (char)(0x80 | (c & 63));
    else
        out[(*k)++] = (char)(0xF0 | (c >> 18)), out[(*k)++] = (char)(0x80 | ((c >> 12) & 63)),
        out[(*k)++] = (char)(0x80 | ((c >> 6) & 63)), out[(*k)++] = (char)(0x80 | (c & 63));
}

/* The character data up to the next '<', entities decoded: malloc'd, NUL-terminated. */
static char *text(reader *r) {
    size_t end = r->at;
    while (end < r->n && r->s[end] != '<') end++;
    if (end >= r->n) { bad(r, "text runs to the end of the document"); return NULL; }
    char *out = malloc(end - r->at + 1); /* decoding never grows the text */
    if (!out) { bad(r, "out of memory"); return NULL; }
    size_t k = 0;
    while (r->at < end) {
        char c = r->s[r->at];
        if (c == 0) { free(out); bad(r, "a NUL byte in text"); return NULL; }
        if (c != '&') { out[k++] = c; r->at++; continue; }
        static const struct { const char *ent; char c; } named[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        bool done = false;
        for (size_t e = 0; e < sizeof named / sizeof *named && !done; e++)
            if (starts(r, named[e].ent)) out[k++] = named[e].c, r->at += strlen(named[e].ent), done = true;
        if (done) continue;
        if (starts(r, "&#")) { /* &#NNN; or &#xHH; */
            size_t p = r->at + 2;
            int base = 10;
            if (p < end && r->s[p] == 'x') base = 16, p++;
            unsigned long v = 0;
            size_t digits = 0;
            for (; p < end && digits < 8; p++, digits++) {
                char d = r->s[p];
                int dv = d >= '0' && d <= '9' ? d - '0' : base == 16 && d >= 'a' && d <= 'f' ? d - 'a' + 10
                       : base == 16 && d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
                if (dv < 0) break;
                v = v * (unsigned long)base + (unsigned long)dv;
            }
            /* the reference is at least as long as its UTF-8 form ("&#N;" >= 4 bytes) */
            if (digits && p < end && r->s[p] == ';' && v > 0 && v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF) &&
                p + 1 - r->at >= 4) {
                put_utf8(out, &k, v);
                r->at = p + 1;
                continue;
            }
        }
        free(out);
        bad(r, "an unknown or malformed entity");
        return NULL;
    }
    out[k] = 0;
    return out;
}

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static plist_value *decode_data(reader *r, const char *t) {
    size_t n = strlen(t);
    unsigned char *buf = malloc(n / 4 * 3 + 4);
    if (!buf) { bad(r, "out of memory"); return NULL; }
    size_t k = 0, pad = 0;
    unsigned acc = 0;
    int bits = 0, chars = 0;
    for (const char *p = t; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') continue;
        if (*p == '=') { pad++; chars++; continue; }
        int v = b64_value(*p);
        if (v < 0 || pad) { free(buf); bad(r, "data holds a character that is not base64"); return NULL; }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        chars++;
        if (bits >= 8) {
            bits -= 8;
            buf[k++] = (unsigned char)(acc >> bits);
        }
    }
    if (chars % 4 || pad > 2) { free(buf); bad(r, "base64 data is not a whole number of 4-character groups"); return NULL; }
    plist_value *v = plist_data(buf, k);
    free(buf);
    if (!v) bad(r, "out of memory");
    return v;
}

static plist_value *parse_value(reader *r, int depth);

static plist_value *parse_container(reader *r, bool dict, int depth) {
    plist_value *c = dict ? plist_dict() : plist_array();
    if (!c) { bad(r, "out of memory"); return NULL; }
    const char *name = dict ? "dict" : "array";
    for (;;) {
        if (!skip_misc(r)) break;
        char end[16];
        snprintf(end, sizeof end, "</%s>", name);
        if (starts(r, end)) {
            r->at += strlen(end);
            return c;
        }
        char *key = NULL;
        if (dict) {
            char tag[16];
            bool empty;
            if (!open_tag(r, tag, sizeof tag, &empty)) break;
            if (strcmp(tag, "key") || empty) { bad(r, "a dict entry must start with <key>"); break; }
            if (!(key = text(r))) break;
            if (!close_tag(r, "key")) { free(key); break; }
            if (plist_get(c, key)) { free(key); bad(r, "a dict repeats a key"); break; }
        }
        plist_value *v = parse_value(r, depth + 1);
        if (!v) { free(key); break; }
        plist_value *added = dict ? plist_set(c, key, v) : plist_push(c, v);
        free(key);
        if (!added) { bad(r, "out of memory"); break; }
    }
    plist_free(c);
    return NULL;
}

static bool parse_int(const char *t, int64_t *out) {
    const char *p = t;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    if (!*p) return false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (lim - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static plist_value *parse_value(reader *r, int depth) {
    if (depth > PLIST_MAX_DEPTH) { bad(r, "values nest deeper than PLIST_MAX_DEPTH"); return NULL; }
    if (++r->nodes > PLIST_MAX_NODES) { bad(r, "more than PLIST_MAX_NODES values"); return NULL; }
    char tag[16];
    bool empty;
    if (!open_tag(r, tag, sizeof tag, &empty)) return NULL;
    if (!strcmp(tag, "true") || !strcmp(tag, "false")) {
        if (!empty && !close_tag(r, tag)) return NULL;
        plist_value *v = plist_bool(tag[0] == 't');
        if (!v) bad(r, "out of memory");
        return v;
    }
    if (!strcmp(tag, "dict") || !strcmp(tag, "array")) {
        if (empty) {
            plist_value *v = tag[0] == 'd' ? plist_dict() : plist_array();
            if (!v) bad(r, "out of memory");
            return v;
        }
        return parse_container(r, tag[0] == 'd', depth);
    }
    if (strcmp(tag, "string") && strcmp(tag, "integer") && strcmp(tag, "real") && strcmp(tag, "data")) {
        bad(r, "an element that is not a plist value (dict, array, string, integer, real, true, false, data)");
        return NULL;
    }
    char *t = empty ? calloc(1, 1) : text(r);
    if (!t) { bad(r, "out of memory"); return NULL; }
    if (!empty && !close_tag(r, tag)) { free(t); return NULL; }
    plist_value *v = NULL;
    if (!strcmp(tag, "string")) {
        if (!(v = plist_string(t))) bad(r, "out of memory");
    } else if (!strcmp(tag, "integer")) {
        int64_t i;
        if (!parse_int(t, &i)) bad(r, "an integer that is not a whole number in int64 range");
        else if (!(v = plist_int(i))) bad(r, "out of memory");
    } else if (!strcmp(tag, "real")) {
        char *end;
        errno = 0;
        double d = strtod(t, &end);
        if (!*t || *end) bad(r, "a real that is not a number");
        else if (!(v = plist_real(d))) bad(r, "out of memory");
    } else {
        v = decode_data(r, t);
    }
    free(t);
    return v;
}

plist_value *plist_read_xml(const char *text_, size_t len, char *err, size_t errn) {
    reader r = {.s = text_, .n = text_ ? len : 0, .err = err, .errn = errn};
    char tag[16];
    bool empty;
    if (!text_) { bad(&r, "no text"); return NULL; }
    if (!open_tag(&r, tag, sizeof tag, &empty)) return NULL;
    if (strcmp(tag, "plist") || empty) { bad(&r, "the root element must be <plist>"); return NULL; }
    plist_value *v = parse_value(&r, 0);
    if (v && close_tag(&r, "plist") && skip_misc(&r) && r.at != r.n) bad(&r, "text after </plist>");
    if (r.failed) {
        plist_free(v);
        return NULL;
    }
    return v;
}
