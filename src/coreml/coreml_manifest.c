/* Manifest.json both ways. The reader is a bounded JSON walker over untrusted text
 * that keeps only what it needs: rootModelIdentifier and each itemInfoEntries item's
 * path. */
#include "coreml/coreml.h"
#include "data/sha256.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_MAX_ITEMS 64
#define MF_MAX_STR 1024
#define MF_MAX_DEPTH 16

typedef struct {
    const char *s, *end;
    const char *why;
    char root[MF_MAX_STR];
    int nitems;
    char id[MF_MAX_ITEMS][MF_MAX_STR / 4], path[MF_MAX_ITEMS][MF_MAX_STR / 2];
} mf;

static void ws(mf *m) { while (m->s < m->end && strchr(" \t\r\n", *m->s) && *m->s) m->s++; }
static bool fail(mf *m, const char *why) { if (!m->why) m->why = why; return false; }

/* A string into out (size n; NULL: skip it). ASCII escapes only. */
static bool str(mf *m, char *out, size_t n) {
    if (m->s >= m->end || *m->s != '"') return fail(m, "expected a string");
    m->s++;
    size_t k = 0;
    for (;;) {
        if (m->s >= m->end) return fail(m, "unterminated string");
        char c = *m->s++;
        if (c == '"') break;
        if ((unsigned char)c < 0x20) return fail(m, "a control character inside a string");
        if (c == '\\') {
            if (m->s >= m->end) return fail(m, "unterminated string");
            char e = *m->s++;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *p = e ? strchr(from, e) : NULL;
            if (p) c = to[p - from];
            else if (e == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    if (m->s >= m->end) return fail(m, "unterminated \\u escape");
                    char h = *m->s++;
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0) return fail(m, "a bad \\u escape");
                    v = v * 16 + (unsigned)d;
                }
                if (v == 0 || v > 0x7f) return fail(m, "a \\u escape outside ASCII");
                c = (char)v;
            } else return fail(m, "an unknown escape in a string");
        }
        if (out) {
            if (k + 1 >= n) return fail(m, "a string longer than the manifest allows");
            out[k++] = c;
        }
    }
    if (out) out[k] = 0;
    return true;
}

/* One value; key path: depth 1 key k1, depth 2 key k2, depth 3 key k3. */
static bool value(mf *m, int depth, const char *k1, const char *k2, const char *k3);

static bool object(mf *m, int depth, const char *k1, const char *k2) {
    m->s++;
    ws(m);
    if (m->s < m->end && *m->s == '}') { m->s++; return true; }
    for (;;) {
        char key[MF_MAX_STR];
        ws(m);
        if (!str(m, key, sizeof key)) return false;
        ws(m);
        if (m->s >= m->end || *m->s != ':') return fail(m, "expected ':' after a key");
        m->s++;
        ws(m);
        const char *a = depth == 0 ? key : k1, *b = depth == 1 ? key : k2, *c = depth == 2 ? key : NULL;
        if (!value(m, depth + 1, a, depth >= 1 ? b : NULL, c)) return false;
        ws(m);
        if (m->s < m->end && *m->s == ',') { m->s++; continue; }
        if (m->s < m->end && *m->s == '}') { m->s++; return true; }
        return fail(m, "expected ',' or '}' in an object");
    }
}

static bool value(mf *m, int depth, const char *k1, const char *k2, const char *k3) {
    if (depth > MF_MAX_DEPTH) return fail(m, "nested too deeply");
    ws(m);
    if (m->s >= m->end) return fail(m, "ends early");
    char c = *m->s;
    if (c == '{') return object(m, depth, k1, k2);
    if (c == '[') {
        m->s++;
        ws(m);
        if (m->s < m->end && *m->s == ']') { m->s++; return true; }
        for (;;) {
            if (!value(m, depth + 1, NULL, NULL, NULL)) return false;
            ws(m);
            if (m->s < m->end && *m->s == ',') { m->s++; continue; }
            if (m->s < m->end && *m->s == ']') { m->s++; return true; }
            return fail(m, "expected ',' or ']' in an array");
        }
    }
    if (c == '"') {
        if (depth == 1 && k1 && !strcmp(k1, "rootModelIdentifier")) return str(m, m->root, sizeof m->root);
        if (depth == 3 && k1 && !strcmp(k1, "itemInfoEntries") && k3 && !strcmp(k3, "path")) {
            if (m->nitems == MF_MAX_ITEMS) return fail(m, "more item entries than the manifest allows");
            if (strlen(k2) >= sizeof m->id[0]) return fail(m, "an item identifier is too long");
            strcpy(m->id[m->nitems], k2);
            return str(m, m->path[m->nitems++], sizeof m->path[0]);
        }
        return str(m, NULL, 0);
    }
    const char *start = m->s; /* numbers, true, false, null: their characters */
    while (m->s < m->end && *m->s && strchr("0123456789+-.eEtruefalsn", *m->s)) m->s++;
    if (m->s == start) return fail(m, "an unexpected character");
    return true;
}

af_status coreml_manifest_root(const char *json, size_t len, const char *source, char *path, size_t n) {
    static mf zero;
    mf *m = malloc(sizeof *m);
    if (!m) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", source);
    *m = zero;
    m->s = json;
    m->end = json + len;
    ws(m);
    bool ok = m->s < m->end && *m->s == '{' && value(m, 0, NULL, NULL, NULL);
    if (ok) { ws(m); if (m->s != m->end) ok = fail(m, "text after the top-level object"); }
    else fail(m, "the manifest is not a JSON object");
    af_status st = AF_OK;
    if (!ok) st = ir_fail(AF_ERR_CORRUPT, "%s: not a valid manifest: %s at byte %zu", source, m->why, (size_t)(m->s - json));
    else if (!m->root[0]) st = ir_fail(AF_ERR_CORRUPT, "%s: no rootModelIdentifier; is this a Core ML package?", source);
    else {
        int k = -1;
        for (int i = 0; i < m->nitems; i++)
            if (!strcmp(m->id[i], m->root)) k = i;
        if (k < 0) st = ir_fail(AF_ERR_CORRUPT, "%s: rootModelIdentifier %s has no entry with a path in itemInfoEntries", source, m->root);
        else if (strlen(m->path[k]) >= n) st = ir_fail(AF_ERR_CORRUPT, "%s: the root model path is too long", source);
        else strcpy(path, m->path[k]);
    }
    free(m);
    return st;
}

static void uuid(const uint8_t *d, char out[37]) {
    static const char hex[] = "0123456789abcdef"; /* as coremltools writes them */
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        uint8_t b = d[i];
        if (i == 6) b = (uint8_t)((b & 0x0f) | 0x40); /* version 4 form */
        if (i == 8) b = (uint8_t)((b & 0x3f) | 0x80);
        out[k++] = hex[b >> 4];
        out[k++] = hex[b & 15];
    }
    out[k] = 0;
}

af_status coreml_manifest_write(const pb_buf *model, pb_buf *json) {
    memset(json, 0, sizeof *json);
    uint8_t d[32];
    data_sha256_ctx c;
    data_sha256_init(&c);
    data_sha256_update(&c, model->p, model->n);
    data_sha256_final(&c, d);
    char a[37], b[37];
    uuid(d, a);
    uuid(d + 16, b);
    pb_printf(json, "{\n    \"fileFormatVersion\": \"1.0.0\",\n    \"itemInfoEntries\": {\n"
                    "        \"%s\": {\n            \"author\": \"com.apple.CoreML\",\n"
                    "            \"description\": \"CoreML Model Specification\",\n"
                    "            \"name\": \"model.mlmodel\",\n            \"path\": \"com.apple.CoreML/model.mlmodel\"\n        },\n"
                    "        \"%s\": {\n            \"author\": \"com.apple.CoreML\",\n"
                    "            \"description\": \"CoreML Model Weights\",\n"
                    "            \"name\": \"weights\",\n            \"path\": \"com.apple.CoreML/weights\"\n        }\n"
                    "    },\n    \"rootModelIdentifier\": \"%s\"\n}\n", a, b, a);
    if (json->oom) { pb_free(json); return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory"); }
    return AF_OK;
}
