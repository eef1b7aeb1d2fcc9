/* The MIL writer's primitives: the text buffer, hex floats, unique names, types, const
 * statements (inline or in the weight file) and op statements. The emitter's driver
 * (mil_emit.c) and the op lowerings (mil_lower.c) both write through them. */
#define _POSIX_C_SOURCE 200809L
#include "mil/mil_emit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- text buffer */

void mil_sb_printf(mil_sb *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->cap ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = true; return; }
        if ((size_t)k < room) { b->len += (size_t)k; return; }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = true; return; }
        b->s = s;
        b->cap = cap;
    }
}

char *mil_hexfloat(double v, char *buf) {
    if (isnan(v)) { strcpy(buf, "nan"); return buf; }
    if (isinf(v)) { strcpy(buf, v < 0 ? "-inf" : "inf"); return buf; }
    const char *sign = signbit(v) ? "-" : "";
    if (v == 0) { sprintf(buf, "%s0x0p+0", sign); return buf; }
    int e;
    double m = frexp(fabs(v), &e); /* m in [0.5, 1) */
    uint64_t frac = (uint64_t)ldexp(m * 2.0 - 1.0, 52);
    char digits[16];
    int nd = 0;
    for (int i = 12; i >= 0; i--) digits[nd++] = "0123456789abcdef"[(frac >> (4 * i)) & 15];
    while (nd > 0 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    sprintf(buf, "%s0x1%s%sp%+d", sign, nd ? "." : "", digits, e - 1);
    return buf;
}

/* ---------------------------------------------------------------- names */

static const char *const reserved[] = {
    "tensor", "state", "dict", "tuple", "list", "func", "program", "string", "bool", "true", "false",
    "fp16", "fp32", "fp64", "bf16", "int4", "int8", "int16", "int32", "int64", "uint1", "uint2", "uint3",
    "uint4", "uint6", "uint8", "uint16", "uint32", "uint64", "BLOBFILE", "inf", "nan", NULL,
};

static bool name_used(const mil_emitter *e, const char *s) {
    for (int i = 0; i < e->nnames; i++)
        if (!strcmp(e->names[i], s)) return true;
    return false;
}

const char *mil_unique_name(mil_emitter *e, const char *base) {
    if (e->st) return "_";
    size_t n = strlen(base);
    char *s = malloc(n + 24);
    if (!s) { e->st = AF_ERR_NOMEM; return "_"; }
    size_t k = 0;
    if (!n || (base[0] >= '0' && base[0] <= '9')) s[k++] = 'v', s[k++] = '_';
    for (size_t i = 0; i < n && k < 200; i++) {
        char c = base[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        s[k++] = ok ? c : '_';
    }
    s[k] = 0;
    for (int i = 0; reserved[i]; i++)
        if (!strcmp(s, reserved[i])) { s[k++] = '_'; s[k] = 0; break; }
    for (int suffix = 1; name_used(e, s); suffix++) sprintf(s + k, "_%d", suffix);
    if (e->nnames == e->capnames) {
        int cap = e->capnames ? e->capnames * 2 : 64;
        char **nn = realloc(e->names, sizeof *nn * (size_t)cap);
        if (!nn) { free(s); e->st = AF_ERR_NOMEM; return "_"; }
        e->names = nn;
        e->capnames = cap;
    }
    e->names[e->nnames++] = s;
    return s;
}

/* ---------------------------------------------------------------- types and literals */

void mil_type_str(char *buf, size_t n, const char *dt, af_shape s) {
    if (s.rank == 0) { snprintf(buf, n, "%s", dt); return; }
    size_t k = (size_t)snprintf(buf, n, "tensor<%s, [", dt);
    for (int i = 0; i < s.rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)s.dim[i]);
    if (k < n) snprintf(buf + k, n - k, "]>");
}

/* Nested brackets, one level per axis. */
static void nested(mil_emitter *e, af_shape s, int axis, const float *v, const int64_t *iv, int64_t *at) {
    if (axis == s.rank) {
        char h[40];
        if (v) mil_sb_printf(&e->text, "%s", mil_hexfloat(af_f16_to_f32(af_f32_to_f16(v[*at])), h));
        else mil_sb_printf(&e->text, "%lld", (long long)iv[*at]);
        (*at)++;
        return;
    }
    mil_sb_printf(&e->text, "[");
    for (int64_t i = 0; i < s.dim[axis]; i++) {
        if (i) mil_sb_printf(&e->text, ", ");
        nested(e, s, axis + 1, v, iv, at);
    }
    mil_sb_printf(&e->text, "]");
}

static void const_head(mil_emitter *e, const char *type, const char *name) {
    mil_sb_printf(&e->text, "            %s %s = const()[name = string(\"%s\"), val = ", type, name, name);
}

const char *mil_const_f16(mil_emitter *e, const char *base, af_shape s, const float *v) {
    const char *name = mil_unique_name(e, base);
    char type[200];
    mil_type_str(type, sizeof type, "fp16", s);
    int64_t n = af_shape_count(s);
    const_head(e, type, name);
    if (n >= AF_MIL_BLOB_MIN) {
        uint16_t *h = malloc((size_t)n * sizeof *h);
        if (!h) { e->st = AF_ERR_NOMEM; return name; }
        for (int64_t i = 0; i < n; i++) h[i] = af_f32_to_f16(v[i]);
        int64_t off = milblob_add(e->blob, AF_MILBLOB_FP16, h, n * 2); /* little-endian hosts only */
        free(h);
        if (off < 0) { e->st = AF_ERR_NOMEM; return name; }
        mil_sb_printf(&e->text, "%s(BLOBFILE(path = string(\"%s\"), offset = uint64(%lld)))];\n", type, AF_MIL_WEIGHT_PATH,
                      (long long)off);
    } else if (s.rank == 0) {
        char h[40];
        mil_sb_printf(&e->text, "fp16(%s)];\n", mil_hexfloat(af_f16_to_f32(af_f32_to_f16(v[0])), h));
    } else {
        int64_t at = 0;
        mil_sb_printf(&e->text, "%s(", type);
        nested(e, s, 0, v, NULL, &at);
        mil_sb_printf(&e->text, ")];\n");
    }
    return name;
}

const char *mil_const_f16_scalar(mil_emitter *e, const char *base, float v) {
    return mil_const_f16(e, base, (af_shape){ 0 }, &v);
}

const char *mil_const_f32_scalar(mil_emitter *e, const char *base, float v) {
    const char *name = mil_unique_name(e, base);
    char h[40];
    const_head(e, "fp32", name);
    mil_sb_printf(&e->text, "fp32(%s)];\n", mil_hexfloat(v, h));
    return name;
}

const char *mil_const_ints(mil_emitter *e, const char *base, int n, const int64_t *v, bool scalar) {
    const char *name = mil_unique_name(e, base);
    if (scalar) {
        const_head(e, "int32", name);
        mil_sb_printf(&e->text, "int32(%lld)];\n", (long long)v[0]);
        return name;
    }
    af_shape s = { .rank = 1, .dim = { n } };
    char type[64];
    snprintf(type, sizeof type, "tensor<int32, [%d]>", n);
    const_head(e, type, name);
    int64_t at = 0;
    mil_sb_printf(&e->text, "%s(", type);
    nested(e, s, 0, NULL, v, &at);
    mil_sb_printf(&e->text, ")];\n");
    return name;
}

const char *mil_const_int(mil_emitter *e, const char *base, int64_t v) { return mil_const_ints(e, base, 1, &v, true); }

const char *mil_const_bool(mil_emitter *e, const char *base, bool v) {
    const char *name = mil_unique_name(e, base);
    const_head(e, "bool", name);
    mil_sb_printf(&e->text, "bool(%s)];\n", v ? "true" : "false");
    return name;
}

const char *mil_const_string(mil_emitter *e, const char *base, const char *v) {
    const char *name = mil_unique_name(e, base);
    const_head(e, "string", name);
    mil_sb_printf(&e->text, "string(\"%s\")];\n", v);
    return name;
}

/* ---------------------------------------------------------------- statements */

static int kv_cmp(const void *a, const void *b) { return strcmp(((const mil_kv *)a)->key, ((const mil_kv *)b)->key); }

void mil_stmt(mil_emitter *e, const char *type, const char *var, const char *op, int n, mil_kv *args) {
    qsort(args, (size_t)n, sizeof *args, kv_cmp);
    mil_sb_printf(&e->text, "            %s %s = %s(", type, var, op);
    for (int i = 0; i < n; i++) mil_sb_printf(&e->text, "%s%s = %s", i ? ", " : "", args[i].key, args[i].val);
    mil_sb_printf(&e->text, ")[name = string(\"%s\")];\n", var);
}

const char *mil_operand(mil_emitter *e, af_tensor *t) {
    if (e->var[t->id]) return e->var[t->id];
    if (t->op != IR_OP_CONST) { /* the schedule is topological, so only consts get here */
        e->st = AF_ERR_INVALID;
        return "_";
    }
    e->var[t->id] = mil_const_f16(e, t->name ? t->name : "const", t->shape, t->data);
    return e->var[t->id];
}
