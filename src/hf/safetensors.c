/* safetensors read (mapped, checked) and write (safetensors.h). */
#define _POSIX_C_SOURCE 200809L
#include "hf/safetensors.h"
#include "aneforge_hf.h"

#include "ir/json.h"
#include "ir/file.h"
#include "ir/fp16.h"
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const DTYPE_NAMES[] = { "F32", "F16", "BF16" };
static const int DTYPE_SIZE[] = { 4, 2, 2 };
/* The format's other dtypes: named in the refusal so the user knows it is not corruption. */
static const char *const OTHER_DTYPES[] = { "F64", "F8_E4M3", "F8_E5M2", "I8", "U8", "I16", "U16", "I32", "U32",
                                            "I64", "U64", "BOOL", "F4", "F6_E2M3", "F6_E3M2", "F8_E8M0" };

const char *st_dtype_name(st_dtype d) { return DTYPE_NAMES[d]; }

void st_close(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    if (f->map) munmap(f->map, f->map_size);
    free(f);
}

static int by_begin(const void *a, const void *b) {
    const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One header entry, checked field by field. */
static af_status parse_entry(const json_doc *d, int e, const char *what, uint64_t data_len, st_tensor *t) {
    const char *name = ir_json_key(d, e);
    if (d->n[e].keylen > ST_MAX_NAME || strlen(name) != d->n[e].keylen)
        return ir_fail(AF_ERR_CORRUPT, "%s: a tensor name is longer than %d bytes or holds a NUL byte", what, ST_MAX_NAME);
    if (d->n[e].type != JSON_OBJ)
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" is not an object {dtype, shape, data_offsets}", what, name);
    for (int m = d->n[e].child; m >= 0; m = d->n[m].next) {
        const char *k = ir_json_key(d, m);
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" has an unknown field \"%.60s\"", what, name, k);
    }
    int dt = ir_json_get(d, e, "dtype"), sh = ir_json_get(d, e, "shape"), off = ir_json_get(d, e, "data_offsets");
    if (dt < 0 || sh < 0 || off < 0)
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" lacks %s", what, name,
                       dt < 0 ? "\"dtype\"" : sh < 0 ? "\"shape\"" : "\"data_offsets\"");
    const char *ds = ir_json_is_text(d, dt) ? ir_json_str(d, dt) : NULL;
    int which = -1;
    for (int i = 0; ds && i < 3; i++)
        if (!strcmp(ds, DTYPE_NAMES[i])) which = i;
    if (which < 0) {
        for (size_t i = 0; ds && i < sizeof OTHER_DTYPES / sizeof *OTHER_DTYPES; i++)
            if (!strcmp(ds, OTHER_DTYPES[i]))
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s; aneforge reads F32, F16 and BF16 "
                                                   "(convert the checkpoint to one of them)", what, name, ds);
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" has no valid dtype (F32, F16, BF16, ...)", what, name);
    }
    t->dtype = (st_dtype)which;
    if (d->n[sh].type != JSON_ARR || d->n[sh].count > ST_MAX_RANK)
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\": shape must be an array of at most %d dims", what, name, ST_MAX_RANK);
    t->rank = d->n[sh].count;
    uint64_t count = 1;
    int i = 0;
    for (int m = d->n[sh].child; m >= 0; m = d->n[m].next, i++) {
        int64_t v;
        if (!ir_json_int(d, m, 0, (int64_t)1 << 53, &v))
            return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\": dim %d is not a whole number in 0..2^53", what, name, i);
        t->shape[i] = v;
        if (v && count > UINT64_MAX / 8 / (uint64_t)v)
            return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\": its shape's element count overflows", what, name);
        count *= (uint64_t)v;
    }
    int64_t b, en;
    if (d->n[off].type != JSON_ARR || d->n[off].count != 2 || !ir_json_int(d, d->n[off].child, 0, (int64_t)1 << 53, &b) ||
        !ir_json_int(d, d->n[d->n[off].child].next, 0, (int64_t)1 << 53, &en) || en < b)
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\": data_offsets must be [begin, end] with 0 <= begin <= end", what, name);
    if ((uint64_t)en > data_len)
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" ends at byte %lld of the data, which holds %llu (file cut short?)",
                       what, name, (long long)en, (unsigned long long)data_len);
    if ((uint64_t)(en - b) != count * (uint64_t)DTYPE_SIZE[which])
        return ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\": %lld bytes for %llu %s values (%d bytes each)", what, name,
                       (long long)(en - b), (unsigned long long)count, ds, DTYPE_SIZE[which]);
    t->count = (int64_t)count;
    t->begin = (uint64_t)b;
    t->end = (uint64_t)en;
    if (!(t->name = strdup(name))) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    return AF_OK;
}

af_status st_parse(const uint8_t *bytes, size_t size, const char *what, st_file **out) {
    *out = NULL;
    if (size < 8) return ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes, not a safetensors file (it starts with an 8-byte header length)", what, size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | bytes[i];
    if (hl > ST_MAX_HEADER)
        return ir_fail(AF_ERR_CORRUPT, "%s: header length %llu is over the %llu-byte limit (not a safetensors file?)", what,
                       (unsigned long long)hl, (unsigned long long)ST_MAX_HEADER);
    if (hl > size - 8)
        return ir_fail(AF_ERR_CORRUPT, "%s: header length %llu runs past the end of the %zu-byte file", what,
                       (unsigned long long)hl, size);
    if (hl < 2 || bytes[8] != '{')
        return ir_fail(AF_ERR_CORRUPT, "%s: the header is not a JSON object (not a safetensors file?)", what);
    char err[256];
    /* the writer pads the header with spaces, which JSON's whitespace covers */
    json_doc *d = ir_json_parse((const char *)bytes + 8, (size_t)hl, err, sizeof err);
    if (!d) return ir_fail(AF_ERR_CORRUPT, "%s: header JSON: %s", what, err);
    st_file *f = calloc(1, sizeof *f);
    af_status st = AF_OK;
    if (!f || !(f->t = calloc((size_t)d->n[0].count + 1, sizeof *f->t))) {
        free(f);
        ir_json_free(d);
        return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    }
    f->data = bytes + 8 + hl;
    f->data_len = size - 8 - hl;
    for (int e = d->n[0].child; e >= 0 && st == AF_OK; e = d->n[e].next) {
        if (!strcmp(ir_json_key(d, e), "__metadata__")) {
            if (d->n[e].type != JSON_OBJ) st = ir_fail(AF_ERR_CORRUPT, "%s: __metadata__ is not an object", what);
            for (int m = d->n[e].child; st == AF_OK && m >= 0; m = d->n[m].next)
                if (d->n[m].type != JSON_STR)
                    st = ir_fail(AF_ERR_CORRUPT, "%s: __metadata__ value \"%.60s\" is not a string", what, ir_json_key(d, m));
            continue;
        }
        st = parse_entry(d, e, what, f->data_len, &f->t[f->n]);
        if (st == AF_OK) f->n++;
    }
    ir_json_free(d);
    if (st == AF_OK && f->n) {
        st_tensor **order = malloc(sizeof *order * (size_t)f->n);
        if (!order) st = ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
        for (int i = 0; order && i < f->n; i++) order[i] = &f->t[i];
        if (order) qsort(order, (size_t)f->n, sizeof *order, by_begin);
        uint64_t at = 0;
        for (int i = 0; st == AF_OK && i < f->n; i++) {
            if (order[i]->begin != at)
                st = ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%s\" starts at data byte %llu, expected %llu (tensors must tile the "
                                            "data without gaps or overlap)", what, order[i]->name,
                             (unsigned long long)order[i]->begin, (unsigned long long)at);
            at = order[i]->end;
        }
        if (st == AF_OK && at != f->data_len)
            st = ir_fail(AF_ERR_CORRUPT, "%s: %llu data bytes after the last tensor (file padded or a header entry lost?)",
                         what, (unsigned long long)(f->data_len - at));
        free(order);
    } else if (st == AF_OK && f->data_len)
        st = ir_fail(AF_ERR_CORRUPT, "%s: %llu data bytes but no tensors", what, (unsigned long long)f->data_len);
    if (st != AF_OK) { st_close(f); return st; }
    *out = f;
    return AF_OK;
}

af_status st_open(const char *path, st_file **out) {
    *out = NULL;
    uint64_t size;
    int fd = ir_open_regular(path, "safetensors file", 0, &size);
    if (fd < 0) return AF_ERR_IO;
    if (size < 8) {
        close(fd);
        return ir_fail(AF_ERR_CORRUPT, "%s: %llu bytes, not a safetensors file", path, (unsigned long long)size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ir_fail(AF_ERR_IO, "%s: cannot map the file into memory", path);
    af_status st = st_parse(map, (size_t)size, path, out);
    if (st != AF_OK) { munmap(map, (size_t)size); return st; }
    (*out)->map = map;
    (*out)->map_size = (size_t)size;
    return AF_OK;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

void st_read_f32(const st_file *f, const st_tensor *t, float *dst) {
    const uint8_t *p = f->data + t->begin;
    int64_t n = t->count;
    if (t->dtype == ST_F32) { memcpy(dst, p, (size_t)n * 4); return; } /* little-endian hosts only (x86, arm64) */
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if (t->dtype == ST_BF16) {
            uint32_t u = (uint32_t)h << 16;
            memcpy(&dst[i], &u, 4);
        } else
            ir_f16_to_f32_array(&h, &dst[i], 1);
    }
}

/* The header is built in memory first (its length leads the file). */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = true; return; }
        if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
}

/* name as a JSON string: quotes, backslashes and control bytes escaped */
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sb_put(b, "\\%c", c);
        else if (c < 0x20) sb_put(b, "\\u%04x", c);
        else sb_put(b, "%c", c);
    }
    sb_put(b, "\"");
}

af_status st_write(const char *path, int n, const st_out *t) {
    sbuf h = { 0 };
    sb_put(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t count = 1;
        sb_put(&h, ",");
        sb_json_string(&h, t[i].name);
        sb_put(&h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int r = 0; r < t[i].rank; r++) {
            sb_put(&h, "%s%lld", r ? "," : "", (long long)t[i].shape[r]);
            count *= t[i].shape[r];
        }
        sb_put(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + 4 * (uint64_t)count));
        off += 4 * (uint64_t)count;
    }
    sb_put(&h, "}");
    while (!h.oom && (h.len & 7) != 0) sb_put(&h, " "); /* the data starts 8-byte aligned */
    if (h.oom) { free(h.p); return ir_fail(AF_ERR_NOMEM, "%s: out of memory for the header", path); }
    char *hdr = h.p;
    size_t hlen = h.len;
    FILE *f = ir_open_write(path);
    if (!f) { free(hdr); return AF_ERR_IO; }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
    free(hdr);
    for (int i = 0; ok && i < n; i++) {
        int64_t count = 1;
        for (int r = 0; r < t[i].rank; r++) count *= t[i].shape[r];
        ok = fwrite(t[i].data, 4, (size_t)count, f) == (size_t)count;
    }
    return ir_close_written(f, path, ok);
}

_Static_assert(sizeof(af_safetensor) == sizeof(st_out) && ST_MAX_RANK == 8, "af_safetensor is st_out");

af_status af_safetensors_write(const char *path, int n, const af_safetensor *t) {
    if (!path || n < 0 || (n && !t)) return ir_fail(AF_ERR_INVALID, "af_safetensors_write: path or tensors are NULL");
    for (int i = 0; i < n; i++)
        if (!t[i].name || t[i].rank < 0 || t[i].rank > 8 || !t[i].data)
            return ir_fail(AF_ERR_INVALID, "af_safetensors_write: tensor %d needs a name, rank 0..8 and data", i);
    return st_write(path, n, (const st_out *)t);
}
