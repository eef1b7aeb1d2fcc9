/* The protobuf wire format (pb.h). */
#include "coreml/pb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(pb_buf *b, size_t more) {
    if (b->oom) return false;
    if (more > PB_MAX_BYTES || b->n > PB_MAX_BYTES - more) { b->oom = true; return false; }
    if (b->n + more <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) { b->oom = true; return false; }
    b->p = p;
    b->cap = cap;
    return true;
}

void pb_raw(pb_buf *b, const void *data, size_t n) {
    if (!n || !grow(b, n)) return;
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

void pb_varint(pb_buf *b, uint64_t v) {
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(b, t, k);
}

static void tag(pb_buf *b, int field, int wt) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wt); }

void pb_uint(pb_buf *b, int field, uint64_t v) { tag(b, field, PB_VARINT); pb_varint(b, v); }
void pb_int(pb_buf *b, int field, int64_t v) { tag(b, field, PB_VARINT); pb_varint(b, (uint64_t)v); }

void pb_bytes(pb_buf *b, int field, const void *d, size_t n) {
    tag(b, field, PB_LEN);
    pb_varint(b, n);
    pb_raw(b, d, n);
}

void pb_str(pb_buf *b, int field, const char *s) { if (s) pb_bytes(b, field, s, strlen(s)); }

void pb_msg(pb_buf *b, int field, pb_buf *sub) {
    if (sub->oom) b->oom = true;
    else pb_bytes(b, field, sub->p, sub->n);
    pb_free(sub);
}

void pb_free(pb_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void pb_printf(pb_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = true; return; }
    if ((size_t)k < sizeof small) { pb_raw(b, small, (size_t)k); return; }
    if (!grow(b, (size_t)k + 1)) return;
    va_start(ap, fmt);
    vsnprintf((char *)b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

static bool rd_varint(pb_rd *r, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) return false;
        uint8_t c = *r->p++;
        if (i == 9 && c > 1) return false; /* more than 64 bits */
        x |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) { *v = x; return true; }
    }
    return false;
}

int pb_next(pb_rd *r, pb_field *f, const char **why) {
    memset(f, 0, sizeof *f);
    if (r->p >= r->end) return 0;
    uint64_t key;
    if (!rd_varint(r, &key)) { *why = "a field key runs past the end or over 10 bytes"; return -1; }
    if ((key >> 3) == 0 || (key >> 3) > 536870911u) { *why = "a field number is 0 or out of range"; return -1; }
    f->field = (int)(key >> 3);
    f->wt = (int)(key & 7);
    size_t left;
    switch (f->wt) {
    case PB_VARINT:
        if (!rd_varint(r, &f->v)) { *why = "a varint runs past the end or over 10 bytes"; return -1; }
        return 1;
    case PB_I64:
    case PB_I32: {
        size_t k = f->wt == PB_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < k) { *why = "a fixed-size field runs past the end"; return -1; }
        for (size_t i = 0; i < k; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += k;
        return 1;
    }
    case PB_LEN:
        if (!rd_varint(r, &f->v)) { *why = "a length runs past the end or over 10 bytes"; return -1; }
        left = (size_t)(r->end - r->p);
        if (f->v > left) { *why = "a length-delimited field is longer than the bytes left"; return -1; }
        f->data = r->p;
        f->len = (size_t)f->v;
        r->p += f->len;
        return 1;
    default:
        *why = "a field has a group or unknown wire type";
        return -1;
    }
}

pb_rd pb_sub(const pb_field *f) {
    pb_rd r = { f->data, f->data + f->len };
    return r;
}
