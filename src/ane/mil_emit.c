/* The MIL emitter: IR graph -> Apple's MIL text (program(1.3), func main<ios18>) and
 * the MILBlob weight file. Layout, naming and the choice between inline and BLOBFILE
 * constants live here; how each op lowers lives in mil_lower.c. */
#define _POSIX_C_SOURCE 200809L
#include "ane/mil_emit.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* ---------------------------------------------------------------- driver */

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const mil_arg_entry *)a).name, (*(const mil_arg_entry *)b).name);
}

static void emitter_free(mil_emitter *e) {
    for (int i = 0; i < e->nnames; i++) free(e->names[i]);
    free(e->names);
    free(e->var);
    free(e->text.s);
    milblob_writer_free(e->blob);
}

static af_status fail_emit(mil_emitter *e, af_status st, const char *fmt, ...) {
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emitter_free(e);
    return ir_fail(st, "af_mil_emit: %s", buf);
}

af_status mil_emit_mem(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                          char **text, size_t *len, milblob_writer **blob, int *arg_order) {
    mil_emitter e = { .g = g };
    if (text) *text = NULL;
    if (blob) *blob = NULL;
    if (!g || !text || !blob) return ir_fail(AF_ERR_INVALID, "af_mil_emit: graph or result pointer is NULL");
    if (g->error) return ir_fail(AF_ERR_INVALID, "af_mil_emit: the graph has an error: %s", g->error);
    if (nout < 1 || !out || nin < 0 || (nin && !in)) return ir_fail(AF_ERR_INVALID, "af_mil_emit: needs at least one output and valid input arrays");
    e.var = calloc((size_t)g->n, sizeof *e.var);
    bool *need = calloc((size_t)g->n + 1, sizeof *need);
    mil_arg_entry *args = calloc((size_t)nin + 1, sizeof *args);
    e.blob = milblob_writer_new();
    if (!e.var || !need || !args || !e.blob) { free(need); free(args); return fail_emit(&e, AF_ERR_NOMEM, "out of memory"); }
    af_status st = AF_OK;
    for (int i = 0; i < nout && !st; i++) {
        if (!out[i] || out[i]->g != g) st = ir_fail(AF_ERR_INVALID, "output %d is NULL or from another graph", i);
        else need[out[i]->id] = true;
    }
    for (int i = 0; i < nin && !st; i++) {
        if (!in[i] || in[i]->g != g || in[i]->op != IR_OP_INPUT) st = ir_fail(AF_ERR_INVALID, "input %d is not an af_input or af_parameter of this graph", i);
        for (int j = 0; j < i && !st; j++)
            if (in[j] == in[i]) st = ir_fail(AF_ERR_INVALID, "input '%s' is listed twice", af_tensor_name(in[i]));
    }
    for (int id = g->n - 1; id >= 0 && !st; id--)
        if (need[id])
            for (int k = 0; k < g->t[id]->nsrc; k++) need[g->t[id]->src[k]->id] = true;
    for (int id = 0; id < g->n && !st; id++) {
        af_tensor *t = g->t[id];
        if (!need[id] || t->op != IR_OP_INPUT) continue;
        bool listed = false;
        for (int i = 0; i < nin; i++) listed |= in[i] == t;
        if (!listed) st = ir_fail(AF_ERR_INVALID, "the outputs depend on '%s', which is not in the input list", af_tensor_name(t));
    }
    if (st) { free(need); free(args); return fail_emit(&e, st, "%s", af_error_message()); }

    /* Function arguments, alphabetical by their MIL names. */
    for (int i = 0; i < nin; i++) {
        e.var[in[i]->id] = mil_unique_name(&e, in[i]->name ? in[i]->name : "input");
        args[i] = (mil_arg_entry){ e.var[in[i]->id], in[i] };
    }
    qsort(args, (size_t)nin, sizeof *args, name_cmp);
    for (int k = 0; k < nin && arg_order; k++)
        for (int i = 0; i < nin; i++)
            if (in[i] == args[k].t) arg_order[k] = i;
    mil_sb_printf(&e.text, "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"%s\"}, "
                           "{\"coremlc-version\", \"%s\"}})]\n{\n    func main<ios18>(", AF_MIL_BUILD_MIL, AF_MIL_BUILD_COREMLC);
    for (int i = 0; i < nin; i++) {
        char type[200];
        mil_type_str(type, sizeof type, "fp16", args[i].t->shape);
        mil_sb_printf(&e.text, "%s%s %s", i ? ", " : "", type, args[i].name);
    }
    mil_sb_printf(&e.text, ") {\n");
    free(args);

    /* Ops in a canonical order, depth-first from the outputs with sources in order, and
     * numbered in that order: the text depends on the graph's structure only, not on
     * the order its nodes were created in (C leaves the evaluation order of nested
     * builder calls to the compiler). */
    int *order = malloc(sizeof *order * (size_t)g->n), norder = 0;
    int64_t *stack = malloc(sizeof *stack * (size_t)g->n * 2);
    uint8_t *done = calloc((size_t)g->n, 1);
    if (!order || !stack || !done) {
        free(order); free(stack); free(done); free(need);
        return fail_emit(&e, AF_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nout; i++) {
        int sp = 0;
        if (done[out[i]->id]) continue;
        stack[sp++] = out[i]->id;
        stack[sp++] = 0;
        done[out[i]->id] = 1;
        while (sp > 0) {
            af_tensor *t = g->t[stack[sp - 2]];
            int64_t k = stack[sp - 1];
            if (k < t->nsrc) {
                stack[sp - 1]++;
                int sid = t->src[k]->id;
                if (!done[sid]) { done[sid] = 1; stack[sp++] = sid; stack[sp++] = 0; }
                continue;
            }
            sp -= 2;
            if (!(ir_ops[t->op].flags & OPF_LEAF)) order[norder++] = t->id;
        }
    }
    free(stack);
    free(done);
    for (int oi = 0; oi < norder && !e.st; oi++) {
        int id = order[oi];
        af_tensor *t = g->t[id];
        char base[80];
        snprintf(base, sizeof base, "%s_%d", ir_ops[t->op].name, oi);
        const char *v = mil_unique_name(&e, t->name ? t->name : base);
        if (ir_ops[t->op].flags & OPF_CPU_ONLY) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s is a CPU-only kernel with no MIL form; graphs for engine "
                             "targets are built without af_graph_set_target(g, AF_TARGET_CPU)", ir_ops[t->op].name);
        }
        if (ir_ops[t->op].flags & OPF_BRIDGE) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s is a bridge op with no MIL form (the MIL frontend never "
                             "emits its layer); the engine targets run it as its own net.plist program, cut from the "
                             "MIL program around it", ir_ops[t->op].name);
        }
        if (!mil_lower(&e, t, v) && !e.st) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s has no MIL lowering", ir_ops[t->op].name);
        }
        e.var[id] = v;
    }
    free(order);
    free(need);

    /* Returned values: an input, a constant or a repeat gets its own identity. */
    const char **ret = calloc((size_t)nout, sizeof *ret);
    if (!ret) return fail_emit(&e, AF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nout && !e.st; i++) {
        af_tensor *t = out[i];
        const char *v = mil_operand(&e, t);
        bool repeat = ir_ops[t->op].flags & OPF_LEAF;
        for (int j = 0; j < i; j++) repeat |= ret[j] == v;
        if (repeat) {
            char base[200], type[200];
            snprintf(base, sizeof base, "%s_out", v);
            const char *o = mil_unique_name(&e, base);
            mil_type_str(type, sizeof type, "fp16", t->shape);
            mil_kv kv[1] = { { "x", v } };
            mil_stmt(&e, type, o, "identity", 1, kv);
            v = o;
        }
        ret[i] = v;
    }
    mil_sb_printf(&e.text, "        } -> (");
    for (int i = 0; i < nout; i++) mil_sb_printf(&e.text, "%s%s", i ? ", " : "", ret[i]);
    mil_sb_printf(&e.text, ");\n}\n");
    free(ret);
    if (e.st || e.text.oom) return fail_emit(&e, e.st ? e.st : AF_ERR_NOMEM, "%s", e.st == AF_ERR_INVALID ? "internal: a source was not emitted before its user" : "out of memory");
    *text = e.text.s;
    *len = e.text.len;
    *blob = e.blob;
    e.text.s = NULL;
    e.blob = NULL;
    emitter_free(&e);
    return AF_OK;
}

/* ---------------------------------------------------------------- files */

/* mkdir -p */
static af_status make_dir(const char *path) {
    char *p = ir_strdup(path);
    if (!p) return ir_fail(AF_ERR_NOMEM, "af_mil_emit: out of memory");
    for (char *q = p + 1;; q++) {
        if (*q && *q != '/') continue;
        char c = *q;
        *q = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            af_status st = ir_fail(AF_ERR_IO, "af_mil_emit: cannot create directory %s: %s", p, strerror(errno));
            free(p);
            return st;
        }
        *q = c;
        if (!c) break;
    }
    free(p);
    return AF_OK;
}

af_status af_mil_emit(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out, const char *dir) {
    if (!dir || !*dir) return ir_fail(AF_ERR_INVALID, "af_mil_emit: dir is NULL or empty");
    char *text;
    size_t len;
    milblob_writer *w;
    af_status st = mil_emit_mem(g, nin, in, nout, out, &text, &len, &w, NULL);
    if (st) return st;
    size_t n = strlen(dir) + 64;
    char *path = malloc(n);
    if (!path) { free(text); milblob_writer_free(w); return ir_fail(AF_ERR_NOMEM, "af_mil_emit: out of memory"); }
    st = make_dir(dir);
    if (!st) {
        snprintf(path, n, "%s/weights", dir);
        st = make_dir(path);
    }
    if (!st) {
        snprintf(path, n, "%s/weights/%s", dir, AF_MIL_WEIGHT_FILE);
        st = milblob_write_file(w, path);
    }
    if (!st) {
        snprintf(path, n, "%s/model.mil", dir);
        st = ir_write_file(path, text, len, "af_mil_emit"); /* whole or not at all */
    }
    free(path);
    free(text);
    milblob_writer_free(w);
    return st;
}
