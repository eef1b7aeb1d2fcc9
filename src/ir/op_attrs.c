/* The op table's ports and attributes (the ports and attrs columns of ops.def): source
 * names, attribute defaults, an attribute's value read from text, and the public view
 * af_op_info. `aneforge op` and `aneforge ops` read them from here. */
#include "ir/ir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The k-th comma-separated name of ports into buf; its length, or -1 when there is none. */
static int nth_name(const char *ports, int k, char *buf, size_t n) {
    const char *p = ports;
    for (; k > 0 && p; k--) {
        p = strchr(p, ',');
        if (p) p++;
    }
    if (!p || !*p) return -1;
    size_t len = strcspn(p, ",");
    snprintf(buf, n, "%.*s", (int)len, p);
    return (int)len;
}

int ir_op_nports(ir_op op) {
    const char *p = ir_ops[op].ports;
    if (!*p) return 0;
    int n = 1;
    for (; *p; p++) n += *p == ',';
    return n;
}

const char *ir_op_port(ir_op op, int k, char *buf, size_t n) {
    int np = ir_op_nports(op);
    if (k < 0 || n < 2) return NULL;
    char last[32];
    int len = np ? nth_name(ir_ops[op].ports, np - 1, last, sizeof last) : -1;
    if (len > 0 && last[len - 1] == '*' && k >= np - 1) { /* variadic: x0, x1, ... */
        snprintf(buf, n, "%.*s%d", len - 1, last, k - (np - 1));
        return buf;
    }
    if (k >= np || (len = nth_name(ir_ops[op].ports, k, buf, n)) < 0) return NULL;
    if (len > 0 && buf[len - 1] == '?') buf[len - 1] = 0; /* optional */
    return buf;
}

const ir_attr_def *ir_op_attr(ir_op op, const char *key) {
    for (const ir_attr_def *d = ir_ops[op].attrs; d && d->key; d++)
        if (!strcmp(d->key, key)) return d;
    return NULL;
}

void ir_attrs_default(ir_op op, ir_attrs *a) {
    *a = (ir_attrs){ 0 };
    char err[200];
    for (const ir_attr_def *d = ir_ops[op].attrs; d && d->key; d++)
        if (*d->def) (void)ir_attr_parse(op, d->key, d->def, a, AF_MAX_RANK, err, sizeof err); /* test_op_table checks they parse */
}

/* Comma-separated integers into v (at most AF_MAX_RANK); their count, or -1. */
static int int_list(const char *s, int64_t *v) {
    int n = 0;
    while (*s && n < AF_MAX_RANK) {
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno || end == s || (*end && *end != ',')) return -1;
        v[n++] = x;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

static bool is_float(ir_attr_slot s) { return s == IR_ATTR_SCALAR || s == IR_ATTR_EPS || s == IR_ATTR_BETA; }
static bool is_pair(ir_attr_slot s) {
    return s == IR_ATTR_KERNEL || s == IR_ATTR_STRIDE || s == IR_ATTR_PAD || s == IR_ATTR_DILATION;
}
static bool is_list(ir_attr_slot s) {
    return s == IR_ATTR_AXES || s == IR_ATTR_PERM || s == IR_ATTR_BEGIN || s == IR_ATTR_SIZES || s == IR_ATTR_SHAPE;
}

/* How a slot's value is written, as af_op_attr.type says it. */
static const char *slot_type(ir_attr_slot s) {
    if (s == IR_ATTR_TO) return "fp16|fp32";
    if (s == IR_ATTR_SEW) return "add|min|max";
    return is_float(s) ? "number" : is_pair(s) ? "h,w" : is_list(s) ? "ints" : "int";
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return false; } while (0)

bool ir_attr_parse(ir_op op, const char *key, const char *val, ir_attrs *a, int rank0, char *err, size_t errlen) {
    const ir_attr_def *d = ir_op_attr(op, key);
    if (!d) FAIL("op %s has no attribute '%s'", ir_ops[op].name, key);
    ir_attr_slot s = d->slot;
    if (s == IR_ATTR_TO) {
        if (strcmp(val, "fp16") && strcmp(val, "fp32")) FAIL("%s takes fp16 or fp32, not '%s'", key, val);
        a->to = val[2] == '1' ? AF_F16 : AF_F32;
        return true;
    }
    if (s == IR_ATTR_SEW) { /* af_sew_op's order; sub and mult reach the shape rule, which says why not */
        static const char *const names[5] = { "add", "sub", "mult", "min", "max" };
        for (int i = 0; i < 5; i++)
            if (!strcmp(val, names[i])) { a->mode = i; return true; }
        FAIL("%s takes add, min or max, not '%s'", key, val);
    }
    int64_t v[AF_MAX_RANK];
    float f = 0;
    int n = 0;
    if (is_float(s)) {
        char *end;
        double x = strtod(val, &end);
        if (end == val || *end || !isfinite(x)) FAIL("%s: '%s' is not a number", key, val);
        f = (float)x;
    } else if ((n = int_list(val, v)) < 1) {
        FAIL("%s: '%s' is not an integer or a comma-separated list of them", key, val);
    } else if (!is_list(s) && !is_pair(s) && n != 1) {
        FAIL("%s takes one integer, got '%s'", key, val);
    } else if (is_pair(s) && n != 2) {
        FAIL("%s takes two integers h,w, got '%s'", key, val);
    }
    switch (s) {
    case IR_ATTR_AXIS: a->axis = (int)v[0]; break;
    case IR_ATTR_AXES:
        a->ints[0] = 0;
        for (int i = 0; i < n; i++) {
            int ax = ir_norm_axis((int)v[i], rank0);
            if (ax < 0) FAIL("%s: axis %lld is out of range for rank %d", key, (long long)v[i], rank0);
            a->ints[0] |= 1ll << ax;
        }
        a->naxes = n;
        break;
    case IR_ATTR_KEEP: a->keep_dims = v[0] != 0; break;
    case IR_ATTR_PERM: case IR_ATTR_BEGIN: memcpy(a->ints, v, sizeof(int64_t) * (size_t)n); break;
    case IR_ATTR_SIZES: /* the axes not given run to the end */
        for (int i = 0; i < AF_MAX_RANK; i++) a->sizes[i] = i < n ? v[i] : -1;
        break;
    case IR_ATTR_SHAPE: memcpy(a->sizes, v, sizeof(int64_t) * (size_t)n); a->naxes = n; break;
    case IR_ATTR_TA: a->ta = v[0] != 0; break;
    case IR_ATTR_TB: a->tb = v[0] != 0; break;
    case IR_ATTR_MODE: a->mode = (int)v[0]; break;
    case IR_ATTR_GROUPS: a->groups = (int)v[0]; break;
    case IR_ATTR_KERNEL: a->kernel[0] = (int)v[0]; a->kernel[1] = (int)v[1]; break;
    case IR_ATTR_STRIDE: a->stride[0] = (int)v[0]; a->stride[1] = (int)v[1]; break;
    case IR_ATTR_PAD: a->pad[0] = (int)v[0]; a->pad[1] = (int)v[1]; break;
    case IR_ATTR_DILATION: a->dilation[0] = (int)v[0]; a->dilation[1] = (int)v[1]; break;
    case IR_ATTR_SCALAR: a->scalar = f; break;
    case IR_ATTR_EPS: a->eps = f; break;
    case IR_ATTR_BETA: a->beta = f; break;
    case IR_ATTR_INT0: case IR_ATTR_INT1: case IR_ATTR_INT2: case IR_ATTR_INT3: a->ints[s - IR_ATTR_INT0] = v[0]; break;
    case IR_ATTR_SIZE0: a->sizes[0] = v[0]; break;
    case IR_ATTR_FY: a->kernel[0] = (int)v[0]; break;
    case IR_ATTR_FX: a->kernel[1] = (int)v[0]; break;
    case IR_ATTR_TO: case IR_ATTR_SEW: break; /* read above */
    }
    return true;
}

af_status af_op_info(int op, af_op_desc *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_op_info: out is NULL");
    if (op < 0 || op >= IR_OP_COUNT)
        return ir_fail(AF_ERR_INVALID, "af_op_info: op %d is not a row of the op table (0..%d)", op, IR_OP_COUNT - 1);
    const ir_op_info *o = &ir_ops[op];
    *out = (af_op_desc){ .name = o->name, .kind = ir_op_kind_name(o->kind), .mil = o->mil, .arity = o->arity,
                         .ports = o->ports, .leaf = !!(o->flags & OPF_LEAF), .bridge = !!(o->flags & OPF_BRIDGE),
                         .cpu_only = !!(o->flags & OPF_CPU_ONLY) };
    for (const ir_attr_def *d = o->attrs; d && d->key; d++) {
        if (out->nattrs == AF_OP_MAX_ATTRS) break; /* test_op_table keeps every row within it */
        out->attrs[out->nattrs++] = (af_op_attr){ d->key, slot_type(d->slot), d->def, d->help };
    }
    return AF_OK;
}
