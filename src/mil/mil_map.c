/* MIL -> IR: the per-op mapping and the function driver (symbols and constants live in
 * mil_const.c). Each MIL op becomes IR nodes built with ir_build, so shape inference and
 * its checks apply; the canonical decompositions found by mil_fuse.c become their fused
 * IR op. A MIL bool is an IR tensor holding 0/1 (comparisons already produce that). */
#include "mil/mil_call.h"
#include "ir/fp16.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- calls */

bool mil_cfail(call *c, af_status st, const mil_arg *a, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return mil_error(c->M->diag, st, a ? a->line : c->s->line, a ? a->col : c->s->col, "%s: %s", c->s->op, buf);
}

const mil_arg *mil_find(call *c, const char *name) {
    for (int i = 0; i < c->s->nargs; i++)
        if (!strcmp(c->s->args[i].name, name)) return &c->s->args[i];
    return NULL;
}

/* A constant of an integer or bool literal is flagged exact: never rounded to fp16. */
static af_tensor *lit_tensor(call *c, const char *name, const mil_lit *lit, const float *vals, int line, int col) {
    af_tensor *t = mil_const_tensor(c->M, name, lit, vals, line, col);
    if (t && mil_dtype_class(lit->type.dt) != MIL_VC_FLOAT) t->flags |= IR_TF_EXACT;
    return t;
}

af_tensor *mil_value_tensor(call *c, const mil_value *v, const mil_arg *a, int *cls) {
    int k = MIL_VC_FLOAT;
    af_tensor *t = NULL;
    if (v->kind == MIL_V_TUPLE) { mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' is a tuple; a tensor is needed", a->name); return NULL; }
    if (v->kind == MIL_V_LIT) {
        k = mil_dtype_class(v->lit->type.dt);
        t = lit_tensor(c, NULL, v->lit, NULL, v->line, v->col);
    } else {
        mil_sym *s = mil_lookup(c->M, v->ident);
        if (!s) { mil_cfail(c, AF_ERR_INVALID, a, "'%s' is not defined before this statement", v->ident); return NULL; }
        if (!s->t && s->lit) {
            const float *vals = s->lit->type.dt == MIL_STRING ? NULL : mil_const_values(c->M, s, v->line, v->col);
            if (s->lit->type.dt != MIL_STRING && !vals) return NULL;
            s->t = lit_tensor(c, s->name, s->lit, vals, v->line, v->col);
            s->cls = mil_dtype_class(s->lit->type.dt);
        }
        if (!s->t) { if (!c->M->diag->st) mil_cfail(c, AF_ERR_INVALID, a, "'%s' is not a tensor", v->ident); return NULL; }
        k = s->cls;
        t = s->t;
    }
    if (t && !c->in_cls) c->in_cls = k;
    if (cls) *cls = k;
    return t;
}

af_tensor *mil_targ(call *c, const char *name, bool required, int *cls) {
    const mil_arg *a = mil_find(c, name);
    if (!a) {
        if (required) mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument '%s'", name);
        return NULL;
    }
    return mil_value_tensor(c, &a->val, a, cls);
}

const mil_lit *mil_const_arg(call *c, const char *name, bool *present, const mil_arg **ap) {
    const mil_arg *a = mil_find(c, name);
    *present = a != NULL;
    if (ap) *ap = a;
    if (!a) return NULL;
    if (a->val.kind == MIL_V_LIT) return a->val.lit;
    mil_sym *s = a->val.kind == MIL_V_IDENT ? mil_lookup(c->M, a->val.ident) : NULL;
    if (!s || !s->lit) { mil_cfail(c, AF_ERR_UNSUPPORTED, a, "argument '%s' must be a constant", name); return NULL; }
    return s->lit;
}

bool mil_get_ints(call *c, const char *name, int64_t *out, int max, int *n, bool required) {
    bool present;
    const mil_arg *a;
    const mil_lit *lit = mil_const_arg(c, name, &present, &a);
    *n = -1;
    if (!present) return required ? mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument '%s'", name) : true;
    if (!lit) return false;
    if (!lit->v || lit->type.dt == MIL_STRING) return mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must hold integers", name);
    if (lit->count > max) return mil_cfail(c, AF_ERR_UNSUPPORTED, a, "argument '%s' has %lld values; at most %d fit", name, (long long)lit->count, max);
    for (int64_t i = 0; i < lit->count; i++) {
        double v = lit->v[i];
        if (!(v == floor(v)) || fabs(v) > 2147483647.0) return mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must hold int32 values", name);
        out[i] = (int64_t)v;
    }
    *n = (int)lit->count;
    return true;
}

bool mil_get_int(call *c, const char *name, int64_t *v, int64_t dflt) {
    int64_t tmp[1];
    int n;
    if (!mil_get_ints(c, name, tmp, 1, &n, false)) return false;
    if (n == 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, name), "argument '%s' is empty", name);
    *v = n < 0 ? dflt : tmp[0];
    return true;
}

bool mil_get_bool(call *c, const char *name, bool *v, bool dflt) {
    int64_t tmp[1];
    int n;
    bool present;
    const mil_arg *a;
    const mil_lit *lit = mil_const_arg(c, name, &present, &a);
    if (!present) { *v = dflt; return true; }
    if (!lit) return false;
    if (lit->type.dt != MIL_BOOL || lit->count != 1) return mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must be a bool", name);
    if (!mil_get_ints(c, name, tmp, 1, &n, true)) return false;
    *v = tmp[0] != 0;
    return true;
}

bool mil_get_str(call *c, const char *name, const char **v, const char *dflt) {
    bool present;
    const mil_arg *a;
    const mil_lit *lit = mil_const_arg(c, name, &present, &a);
    if (!present) { *v = dflt; return dflt ? true : mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument '%s'", name); }
    if (!lit) return false;
    if (lit->type.dt != MIL_STRING || !lit->s) return mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must be a string", name);
    *v = lit->s;
    return true;
}

bool mil_get_float(call *c, const char *name, double *v, double dflt) {
    bool present;
    const mil_arg *a;
    const mil_lit *lit = mil_const_arg(c, name, &present, &a);
    if (!present) { *v = dflt; return true; }
    if (!lit) return false;
    if (!lit->v || lit->count != 1) return mil_cfail(c, AF_ERR_INVALID, a, "argument '%s' must be a scalar number", name);
    *v = lit->v[0];
    return true;
}

static const char *class_name(int cls) {
    return cls == MIL_VC_BOOL ? "bool" : cls == MIL_VC_INT ? "an integer type" : "fp16 or fp32";
}

bool mil_out(call *c, int k, af_tensor *t, int cls) {
    mil_mapper *M = c->M;
    if (!t) {
        if (M->diag->st) return false;
        const char *ge = af_graph_error(M->g);
        return mil_cfail(c, AF_ERR_SHAPE, NULL, "%s", ge ? ge : "the op could not be built");
    }
    if (k >= c->s->nout) return mil_cfail(c, AF_ERR_INVALID, NULL, "declares %d outputs; the op has more", c->s->nout);
    if (cls == MIL_VC_SAME) cls = c->in_cls ? c->in_cls : MIL_VC_FLOAT;
    mil_sym *s = mil_lookup(M, c->s->out_names[k]);
    const mil_type *ty = &s->type;
    if (ty->kind != MIL_TY_TENSOR || ty->dynamic) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "output '%s' needs a static tensor type", s->name);
    if (mil_dtype_class(ty->dt) != cls)
        return mil_cfail(c, AF_ERR_INVALID, NULL, "output '%s' is declared %s but the op gives %s", s->name, mil_dtype_name(ty->dt),
                         class_name(cls));
    bool same = ty->rank == t->shape.rank;
    for (int i = 0; same && i < ty->rank; i++) same = ty->dim[i] == t->shape.dim[i];
    if (!same) {
        char got[120];
        ir_shape_str(t->shape, got, sizeof got);
        return mil_cfail(c, AF_ERR_SHAPE, NULL, "output '%s' is declared with another shape than the op gives (%s)", s->name, got);
    }
    /* An integer or bool result is computed exactly: every node this statement built
     * (constants excepted: they keep their own literal's rounding) skips fp16 rounding. */
    if (cls != MIL_VC_FLOAT)
        for (int id = c->first_id; id < M->g->n; id++)
            if (M->g->t[id]->op != IR_OP_CONST) M->g->t[id]->flags |= IR_TF_EXACT;
    if (!t->name) t->name = ir_strdup(s->name);
    s->t = t;
    s->cls = cls;
    return true;
}

af_tensor *mil_b2(ir_op op, af_tensor *a, af_tensor *b) {
    af_tensor *s[2] = { a, b };
    return ir_build(op, 2, s, NULL);
}

af_tensor *mil_reshape_to(af_tensor *x, int rank, const int64_t *dims) {
    af_shape s = { .rank = rank };
    memcpy(s.dim, dims, sizeof(int64_t) * (size_t)rank);
    return af_reshape(x, s);
}

/* ---------------------------------------------------------------- handlers */

static af_tensor *one_minus(af_tensor *x) {
    return x ? af_sub(af_const_fill(x->g, (af_shape){ 0 }, 1.0f), x) : NULL;
}

static bool h_binary(call *c, int op) {
    af_tensor *x = X_("x"), *y = x ? X_("y") : NULL;
    NEED(y);
    return mil_out(c, 0, mil_b2((ir_op)op, x, y), false);
}

enum { CMP_NE = 1000, CMP_GE, CMP_LE, LOG_AND, LOG_OR, LOG_NOT };

static bool h_compare(call *c, int op) {
    af_tensor *x = X_("x");
    NEED(x);
    if (op == LOG_NOT) return mil_out(c, 0, one_minus(x), true);
    af_tensor *y = X_("y");
    NEED(y);
    af_tensor *r;
    switch (op) {
    case CMP_NE: r = one_minus(mil_b2(IR_OP_EQUAL, x, y)); break;
    case CMP_GE: r = mil_b2(IR_OP_MAXIMUM, mil_b2(IR_OP_GREATER, x, y), mil_b2(IR_OP_EQUAL, x, y)); break;
    case CMP_LE: r = mil_b2(IR_OP_MAXIMUM, mil_b2(IR_OP_LESS, x, y), mil_b2(IR_OP_EQUAL, x, y)); break;
    case LOG_AND: r = mil_b2(IR_OP_MUL, x, y); break;
    case LOG_OR: r = mil_b2(IR_OP_MAXIMUM, x, y); break;
    default: r = mil_b2((ir_op)op, x, y); break;
    }
    return mil_out(c, 0, r, true);
}

static bool h_select(call *c, int op) {
    (void)op;
    int ca, cb;
    af_tensor *cond = X_("cond"), *a = cond ? mil_targ(c, "a", true, &ca) : NULL, *b = a ? mil_targ(c, "b", true, &cb) : NULL;
    NEED(b);
    af_tensor *s[3] = { cond, a, b };
    return mil_out(c, 0, ir_build(IR_OP_SELECT, 3, s, NULL), ca);
}

static bool h_unary(call *c, int op) {
    af_tensor *x = X_("x");
    NEED(x);
    return mil_out(c, 0, ir_build((ir_op)op, 1, &x, NULL), false);
}

/* rsqrt / inverse / log take an epsilon added first (MIL defaults 1e-12, 1e-4, 1e-45). */
static bool h_eps_unary(call *c, int op) {
    double eps;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "epsilon", &eps, op == IR_OP_RSQRT ? 1e-12 : op == IR_OP_INVERSE ? 1e-4 : 1e-45));
    if (eps != 0) x = af_adds(x, (float)eps);
    return mil_out(c, 0, x ? ir_build((ir_op)op, 1, &x, NULL) : NULL, false);
}

static bool h_gelu(call *c, int op) {
    (void)op;
    const char *mode = NULL;
    af_tensor *x = X_("x");
    NEED(x && mil_get_str(c, "mode", &mode, "EXACT"));
    if (!strcmp(mode, "EXACT")) return mil_out(c, 0, af_gelu(x, AF_GELU_EXACT), false);
    if (!strcmp(mode, "TANH_APPROXIMATION")) return mil_out(c, 0, af_gelu(x, AF_GELU_TANH), false);
    if (!strcmp(mode, "SIGMOID_APPROXIMATION")) return mil_out(c, 0, af_mul(x, af_sigmoid(af_muls(x, 1.702f))), false);
    return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "mode"), "unknown mode '%s'", mode);
}

static bool h_linear(call *c, int op) {
    (void)op;
    af_tensor *x = X_("x"), *w = x ? X_("weight") : NULL;
    NEED(w);
    af_tensor *b = mil_targ(c, "bias", false, NULL);
    if (!b && c->M->diag->st) return false;
    af_tensor *y = af_matmul_w(x, w);
    return mil_out(c, 0, b ? af_add(y, b) : y, false);
}


static bool h_matmul(call *c, int op) {
    (void)op;
    bool tx, ty;
    af_tensor *x = X_("x"), *y = x ? X_("y") : NULL;
    NEED(y && mil_get_bool(c, "transpose_x", &tx, false) && mil_get_bool(c, "transpose_y", &ty, false));
    int rx = x->shape.rank, ry = y->shape.rank;
    if (rx == 0 || ry == 0) return mil_cfail(c, AF_ERR_SHAPE, NULL, "operands must have rank >= 1");
    if (rx == 1) { int64_t d[2] = { 1, x->shape.dim[0] }; x = mil_reshape_to(x, 2, d); tx = false; }
    if (ry == 1) { int64_t d[2] = { y->shape.dim[0], 1 }; y = mil_reshape_to(y, 2, d); ty = false; }
    af_tensor *r = af_matmul(x, y, tx, ty);
    if (r && (rx == 1 || ry == 1)) { /* drop the axes the vectors gained */
        af_shape s = r->shape;
        int64_t d[AF_MAX_RANK];
        int n = 0;
        for (int i = 0; i < s.rank; i++)
            if (!((rx == 1 && i == s.rank - 2) || (ry == 1 && i == s.rank - 1))) d[n++] = s.dim[i];
        r = mil_reshape_to(r, n, d);
    }
    return mil_out(c, 0, r, false);
}

static bool h_reduce(call *c, int op) {
    int64_t ax[AF_MAX_RANK];
    int n, axes[AF_MAX_RANK];
    bool keep;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "axes", ax, AF_MAX_RANK, &n, false) && mil_get_bool(c, "keep_dims", &keep, false));
    if (n < 0) { n = x->shape.rank; for (int i = 0; i < n; i++) ax[i] = i; }
    if (n == 0) return mil_out(c, 0, x, false);
    for (int i = 0; i < n; i++) axes[i] = (int)ax[i];
    af_tensor *r = op == IR_OP_REDUCE_SUM ? af_reduce_sum(x, n, axes, keep) : op == IR_OP_REDUCE_MEAN ? af_reduce_mean(x, n, axes, keep)
                 : op == IR_OP_REDUCE_MAX ? af_reduce_max(x, n, axes, keep) : af_reduce_min(x, n, axes, keep);
    return mil_out(c, 0, r, false);
}

static bool h_softmax(call *c, int op) {
    (void)op;
    int64_t axis = -1;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "axis", &axis, -1));
    return mil_out(c, 0, af_softmax(x, (int)axis), false);
}

static bool h_transpose(call *c, int op) {
    (void)op;
    int64_t p[AF_MAX_RANK];
    int n, perm[AF_MAX_RANK];
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "perm", p, AF_MAX_RANK, &n, true));
    if (n != x->shape.rank) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "perm"), "perm has %d entries for a rank-%d x", n, x->shape.rank);
    for (int i = 0; i < n; i++) perm[i] = (int)(p[i] < 0 ? p[i] + n : p[i]);
    return mil_out(c, 0, af_transpose(x, perm), false);
}

static bool h_reshape(call *c, int op) {
    (void)op;
    int64_t d[AF_MAX_RANK];
    int n;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "shape", d, AF_MAX_RANK, &n, true));
    for (int i = 0; i < n; i++)
        if (d[i] == 0 || d[i] < -1) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "shape"), "shape entry %lld is not supported (use sizes or one -1)", (long long)d[i]);
    return mil_out(c, 0, mil_reshape_to(x, n, d), false);
}

/* expand_dims and squeeze as reshapes. */
static bool h_squeeze_expand(call *c, int op) {
    int64_t ax[AF_MAX_RANK], d[AF_MAX_RANK];
    int n, r;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "axes", ax, AF_MAX_RANK, &n, op == 1));
    int rank = x->shape.rank;
    bool mark[AF_MAX_RANK + 1] = { 0 };
    int outr = op == 1 ? rank + n : rank;
    if (outr > AF_MAX_RANK) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "the result's rank exceeds %d", AF_MAX_RANK);
    for (int i = 0; i < n; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + outr : ax[i];
        if (a < 0 || a >= outr || mark[a]) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axes"), "axis %lld is out of range or repeated", (long long)ax[i]);
        mark[a] = true;
    }
    r = 0;
    if (op == 1) { /* expand_dims */
        for (int i = 0, k = 0; i < outr; i++) d[r++] = mark[i] ? 1 : x->shape.dim[k++];
    } else {
        for (int i = 0; i < rank; i++) {
            bool drop = n < 0 ? x->shape.dim[i] == 1 : mark[i];
            if (drop && x->shape.dim[i] != 1) return mil_cfail(c, AF_ERR_SHAPE, NULL, "axis %d has extent %lld, not 1", i, (long long)x->shape.dim[i]);
            if (!drop) d[r++] = x->shape.dim[i];
        }
    }
    return mil_out(c, 0, mil_reshape_to(x, r, d), false);
}

static bool h_slice_by_size(call *c, int op) {
    (void)op;
    int64_t b[AF_MAX_RANK], s[AF_MAX_RANK];
    int nb, ns;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "begin", b, AF_MAX_RANK, &nb, true) && mil_get_ints(c, "size", s, AF_MAX_RANK, &ns, true));
    if (nb != x->shape.rank || ns != x->shape.rank) return mil_cfail(c, AF_ERR_SHAPE, NULL, "begin and size need %d entries each", x->shape.rank);
    return mil_out(c, 0, af_slice(x, b, s), false);
}

/* Python's slice start..stop by step on an axis of d, after wrapping negatives, with
 * the masks (begin_mask: from the first element in the step's direction; end_mask: to
 * the last; squeeze_mask: only `begin`, and the axis dropped). */
static int64_t slice_axis(int64_t d, int64_t b, int64_t e, int64_t st, bool bm, bool em, bool sq, int64_t *start) {
    if (sq) { *start = b < 0 ? b + d : b; return *start >= 0 && *start < d ? 1 : 0; }
    int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? d : d - 1;
    int64_t s0 = bm ? (st > 0 ? 0 : d - 1) : (b < 0 ? b + d : b), s1 = em ? (st > 0 ? d : -1) : (e < 0 ? e + d : e);
    s0 = s0 < lo ? lo : s0 > hi ? hi : s0;
    s1 = s1 < lo ? lo : s1 > hi ? hi : s1;
    *start = s0;
    int64_t n = st > 0 ? (s1 - s0 + st - 1) / st : (s0 - s1 + (-st) - 1) / (-st);
    return n > 0 ? n : 0;
}

static bool h_slice_by_index(call *c, int op) {
    (void)op;
    int64_t b[AF_MAX_RANK], e[AF_MAX_RANK], st[AF_MAX_RANK], bm[AF_MAX_RANK], em[AF_MAX_RANK], sm[AF_MAX_RANK];
    int nb, ne, nst, nbm, nem, nsm;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "begin", b, AF_MAX_RANK, &nb, true) && mil_get_ints(c, "end", e, AF_MAX_RANK, &ne, true) &&
         mil_get_ints(c, "stride", st, AF_MAX_RANK, &nst, false) && mil_get_ints(c, "begin_mask", bm, AF_MAX_RANK, &nbm, false) &&
         mil_get_ints(c, "end_mask", em, AF_MAX_RANK, &nem, false) && mil_get_ints(c, "squeeze_mask", sm, AF_MAX_RANK, &nsm, false));
    int r = x->shape.rank;
    if (nb != r || ne != r || (nst >= 0 && nst != r) || (nbm >= 0 && nbm != r) || (nem >= 0 && nem != r) || (nsm >= 0 && nsm != r))
        return mil_cfail(c, AF_ERR_SHAPE, NULL, "begin, end, stride and masks need %d entries each", r);
    int64_t start[AF_MAX_RANK], count[AF_MAX_RANK], step[AF_MAX_RANK], keep[AF_MAX_RANK];
    int nk = 0;
    bool unit = true;
    for (int i = 0; i < r; i++) {
        bool sq = nsm >= 0 && sm[i];
        step[i] = nst >= 0 && !sq ? st[i] : 1;
        if (step[i] == 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "stride"), "stride on axis %d is 0", i);
        count[i] = slice_axis(x->shape.dim[i], b[i], e[i], step[i], nbm >= 0 && bm[i], nem >= 0 && em[i], sq, &start[i]);
        if (count[i] < 1) return mil_cfail(c, AF_ERR_SHAPE, NULL, "axis %d selects nothing", i);
        if (step[i] != 1 && count[i] > 1) {
            unit = false;
            if (count[i] > 1024) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "stride"), "a strided slice of %lld elements on axis %d (at most 1024)", (long long)count[i], i);
        }
        if (!sq) keep[nk++] = count[i];
    }
    af_tensor *y;
    if (unit) {
        y = af_slice(x, start, count);
    } else { /* one-element slices along each strided axis, concatenated in order */
        y = x;
        for (int i = 0; i < r && y; i++) {
            int64_t bb[AF_MAX_RANK] = { 0 }, ss[AF_MAX_RANK];
            for (int k = 0; k < r; k++) ss[k] = y->shape.dim[k];
            if (step[i] == 1 || count[i] == 1) {
                bb[i] = start[i];
                ss[i] = count[i];
                y = af_slice(y, bb, ss);
                continue;
            }
            af_tensor **parts = malloc(sizeof *parts * (size_t)count[i]);
            if (!parts) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
            ss[i] = 1;
            for (int64_t k = 0; k < count[i]; k++) { bb[i] = start[i] + k * step[i]; parts[k] = af_slice(y, bb, ss); }
            y = af_concat((int)count[i], parts, i);
            free(parts);
        }
    }
    if (y && nk != r) y = mil_reshape_to(y, nk, keep);
    return mil_out(c, 0, y, false);
}

static bool h_concat(call *c, int op) {
    (void)op;
    int64_t axis = 0;
    bool inter = false;
    const mil_arg *a = mil_find(c, "values");
    if (!a) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument 'values'");
    if (a->val.kind != MIL_V_TUPLE || a->val.n < 1) return mil_cfail(c, AF_ERR_INVALID, a, "values must be a tuple (a, b, ...)");
    NEED(mil_get_int(c, "axis", &axis, 0) && mil_get_bool(c, "interleave", &inter, false));
    if (!mil_find(c, "axis")) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument 'axis'");
    if (inter) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "interleave"), "interleave = true is not supported");
    af_tensor **xs = mil_alloc(c->M->arena, sizeof *xs * (size_t)a->val.n);
    if (!xs) return mil_cfail(c, AF_ERR_NOMEM, a, "out of memory");
    for (int i = 0; i < a->val.n; i++) NEED(xs[i] = mil_value_tensor(c, &a->val.items[i], a, NULL));
    return mil_out(c, 0, af_concat(a->val.n, xs, (int)axis), false);
}

static bool h_split(call *c, int op) {
    (void)op;
    int64_t axis = 0, num = 0, sizes[256];
    int ns;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "axis", &axis, 0) && mil_get_int(c, "num_splits", &num, -1) && mil_get_ints(c, "split_sizes", sizes, 256, &ns, false));
    if (!mil_find(c, "axis")) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument 'axis'");
    int n = ns >= 0 ? ns : (int)num;
    if (n < 1 || n != c->s->nout) return mil_cfail(c, AF_ERR_INVALID, NULL, "splits into %d parts but declares %d outputs", n, c->s->nout);
    af_tensor **parts = mil_alloc(c->M->arena, sizeof *parts * (size_t)n);
    if (!parts) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
    if (af_split(x, (int)axis, n, ns >= 0 ? sizes : NULL, parts) != AF_OK) return mil_out(c, 0, NULL, false);
    for (int k = 0; k < n; k++) NEED(mil_out(c, k, parts[k], false));
    return true;
}

/* gamma/beta of a norm, ones/zeros when absent. */
static af_tensor *affine_arg(call *c, const char *name, af_tensor *x, int axis, float dflt) {
    af_tensor *p = mil_targ(c, name, false, NULL);
    if (p || c->M->diag->st) return p;
    af_shape s = { .rank = 1, .dim = { x->shape.dim[axis] } };
    return af_const_fill(x->g, s, dflt);
}

static bool h_layer_norm(call *c, int op) {
    (void)op;
    int64_t ax[AF_MAX_RANK];
    int n;
    double eps;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "axes", ax, AF_MAX_RANK, &n, false) && mil_get_float(c, "epsilon", &eps, 1e-5));
    int r = x->shape.rank;
    if (n < 0) { n = r; for (int i = 0; i < r; i++) ax[i] = i; }
    int a = n == 1 ? (int)(ax[0] < 0 ? ax[0] + r : ax[0]) : -1;
    if (r < 1 || !(a == r - 1 || (a == 1 && r >= 2)))
        return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "axes"), "layer_norm over these axes is not supported (use the last axis, or axis 1)");
    af_tensor *g = affine_arg(c, "gamma", x, a, 1.0f), *b = g ? affine_arg(c, "beta", x, a, 0.0f) : NULL;
    NEED(b);
    af_tensor *y = a == r - 1 ? af_layer_norm(x, g, b, (float)eps) : af_channel_layer_norm(x, g, b, (float)eps);
    return mil_out(c, 0, y, false);
}

static bool h_instance_norm(call *c, int op) {
    (void)op;
    double eps;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "epsilon", &eps, 1e-5));
    if (x->shape.rank < 3) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank >= 3 ([N, C, ...])");
    af_tensor *g = affine_arg(c, "gamma", x, 1, 1.0f), *b = g ? affine_arg(c, "beta", x, 1, 0.0f) : NULL;
    NEED(b);
    return mil_out(c, 0, af_group_norm(x, (int)x->shape.dim[1], g, b, (float)eps), false);
}

/* Symmetric padding {h, w} from pad_type / pad; false (with an error) otherwise. */
static bool pads(call *c, af_tensor *x, const int64_t keff[2], const int64_t st[2], bool same_ok, int pad[2]) {
    const char *pt = NULL;
    int64_t p[4];
    int n;
    NEED(mil_get_str(c, "pad_type", &pt, "valid") && mil_get_ints(c, "pad", p, 4, &n, false));
    if (!strcmp(pt, "valid")) { pad[0] = pad[1] = 0; return true; }
    if (!strcmp(pt, "custom")) {
        if (n < 0) { pad[0] = pad[1] = 0; return true; }
        if (n != 4) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "pad"), "pad needs 4 entries [top, bottom, left, right]");
        if (p[0] != p[1] || p[2] != p[3] || p[0] < 0 || p[2] < 0 || p[0] > 65536 || p[2] > 65536)
            return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "pad"), "only symmetric non-negative padding is supported");
        pad[0] = (int)p[0];
        pad[1] = (int)p[2];
        return true;
    }
    if (same_ok && (!strcmp(pt, "same") || !strcmp(pt, "same_lower"))) {
        for (int i = 0; i < 2; i++) {
            int64_t in = x->shape.dim[2 + i], o = (in + st[i] - 1) / st[i];
            int64_t total = (o - 1) * st[i] + keff[i] - in;
            if (total < 0) total = 0;
            if (total % 2) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "pad_type"), "'same' padding is asymmetric here; only symmetric padding is supported");
            pad[i] = (int)(total / 2);
        }
        return true;
    }
    return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "pad_type"), "pad_type '%s' is not supported", pt);
}

static bool pair_arg(call *c, const char *name, int64_t v[2], int64_t dflt) {
    int n;
    NEED(mil_get_ints(c, name, v, 2, &n, false));
    if (n < 0) v[0] = v[1] = dflt;
    else if (n != 2) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, name), "%s needs 2 entries (2-D only)", name);
    for (int i = 0; i < 2; i++)
        if (v[i] < 1 || v[i] > 65536) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, name), "%s must be in 1..65536", name);
    return true;
}

static bool h_pool(call *c, int op) {
    int64_t k[2], st[2];
    int n, pad[2], ki[2], si[2];
    bool ceil_mode, excl;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "kernel_sizes", k, 2, &n, true) && pair_arg(c, "strides", st, 1) &&
         mil_get_bool(c, "ceil_mode", &ceil_mode, false) && mil_get_bool(c, "exclude_padding_from_average", &excl, false));
    if (n != 2 || k[0] < 1 || k[1] < 1 || k[0] > 65536 || k[1] > 65536) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "kernel_sizes"), "kernel_sizes needs 2 entries in 1..65536");
    if (x->shape.rank != 4) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "only 2-D pooling of [N, C, H, W] is supported");
    NEED(pads(c, x, k, st, true, pad));
    if (ceil_mode) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "ceil_mode"), "ceil_mode = true is not supported");
    if (excl && (pad[0] || pad[1])) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "exclude_padding_from_average"), "padded cells always count in the average");
    for (int i = 0; i < 2; i++) { ki[i] = (int)k[i]; si[i] = (int)st[i]; }
    return mil_out(c, 0, op == IR_OP_AVG_POOL ? af_avg_pool(x, ki, si, pad) : af_max_pool(x, ki, si, pad), false);
}

static bool h_conv(call *c, int op) {
    int64_t st[2], dl[2], groups = 1, oshape[AF_MAX_RANK];
    int pad[2], si[2], di[2], no;
    af_tensor *x = X_("x"), *w = x ? X_("weight") : NULL;
    NEED(w && pair_arg(c, "strides", st, 1) && pair_arg(c, "dilations", dl, 1) && mil_get_int(c, "groups", &groups, 1));
    af_tensor *bias = mil_targ(c, "bias", false, NULL);
    if (!bias && c->M->diag->st) return false;
    if (x->shape.rank != 4 || w->shape.rank != 4) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "only 2-D convolution of [N, C, H, W] is supported");
    if (groups < 1 || groups > 65536) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "groups"), "groups must be >= 1");
    int64_t keff[2] = { dl[0] * (w->shape.dim[2] - 1) + 1, dl[1] * (w->shape.dim[3] - 1) + 1 };
    NEED(pads(c, x, keff, st, op == IR_OP_CONV, pad));
    for (int i = 0; i < 2; i++) { si[i] = (int)st[i]; di[i] = (int)dl[i]; }
    af_tensor *y;
    if (op == IR_OP_CONV) {
        y = af_conv(x, w, si, pad, di, (int)groups);
    } else {
        if (groups != 1) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "groups"), "grouped conv_transpose is not supported");
        y = af_conv_transpose(x, w, si, pad, di);
        NEED(mil_get_ints(c, "output_shape", oshape, AF_MAX_RANK, &no, false));
        if (y && no >= 0) {
            bool same = no == 4;
            for (int i = 0; same && i < 4; i++) same = oshape[i] == y->shape.dim[i];
            if (!same) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "output_shape"), "output_shape differs from the shape the padding gives");
        }
    }
    if (y && bias) {
        int64_t d[3] = { af_shape_count(bias->shape), 1, 1 };
        y = af_add(y, mil_reshape_to(bias, 3, d));
    }
    return mil_out(c, 0, y, false);
}

static bool h_identity(call *c, int op) {
    (void)op;
    int cls;
    af_tensor *x = mil_targ(c, "x", true, &cls);
    NEED(x);
    return mil_out(c, 0, x, cls);
}

static bool h_clip(call *c, int op) {
    (void)op;
    double lo, hi;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "alpha", &lo, 0) && mil_get_float(c, "beta", &hi, 0));
    if (!mil_find(c, "alpha") || !mil_find(c, "beta")) return mil_cfail(c, AF_ERR_INVALID, NULL, "needs alpha and beta");
    af_shape s0 = { 0 };
    af_tensor *y = af_minimum(af_maximum(x, af_const_fill(x->g, s0, (float)lo)), af_const_fill(x->g, s0, (float)hi));
    return mil_out(c, 0, y, false);
}

static bool h_sdpa(call *c, int op) {
    (void)op;
    int mcls = 0;
    af_tensor *q = X_("query"), *k = q ? X_("key") : NULL, *v = k ? X_("value") : NULL;
    NEED(v);
    af_tensor *mask = mil_targ(c, "attn_mask", false, &mcls);
    bool mbool = mcls == MIL_VC_BOOL;
    if (!mask && c->M->diag->st) return false;
    af_tensor *s = af_muls(af_matmul(q, k, 0, 1), 1.0f / sqrtf((float)q->shape.dim[q->shape.rank - 1]));
    if (mask && mbool) s = s ? af_select(mask, s, af_const_fill(s->g, (af_shape){ 0 }, -INFINITY)) : NULL;
    else if (mask) s = af_add(s, mask);
    return mil_out(c, 0, af_matmul(af_softmax(s, -1), v, 0, 0), false);
}

static const mil_op_entry optab[] = {
    { "add", h_binary, IR_OP_ADD }, { "sub", h_binary, IR_OP_SUB }, { "mul", h_binary, IR_OP_MUL },
    { "real_div", h_binary, IR_OP_REAL_DIV }, { "maximum", h_binary, IR_OP_MAXIMUM }, { "minimum", h_binary, IR_OP_MINIMUM },
    { "pow", h_binary, IR_OP_POW },
    { "greater", h_compare, IR_OP_GREATER }, { "less", h_compare, IR_OP_LESS }, { "equal", h_compare, IR_OP_EQUAL },
    { "not_equal", h_compare, CMP_NE }, { "greater_equal", h_compare, CMP_GE }, { "less_equal", h_compare, CMP_LE },
    { "logical_and", h_compare, LOG_AND }, { "logical_or", h_compare, LOG_OR }, { "logical_not", h_compare, LOG_NOT },
    { "select", h_select, 0 },
    { "abs", h_unary, IR_OP_ABS }, { "square", h_unary, IR_OP_SQUARE }, { "sqrt", h_unary, IR_OP_SQRT },
    { "exp", h_unary, IR_OP_EXP }, { "tanh", h_unary, IR_OP_TANH }, { "sigmoid", h_unary, IR_OP_SIGMOID },
    { "relu", h_unary, IR_OP_RELU }, { "silu", h_unary, IR_OP_SILU }, { "sin", h_unary, IR_OP_SIN },
    { "cos", h_unary, IR_OP_COS }, { "erf", h_unary, IR_OP_ERF },
    { "atan", h_unary, IR_OP_ATAN }, { "asin", h_unary, IR_OP_ASIN }, { "acos", h_unary, IR_OP_ACOS }, { "atanh", h_unary, IR_OP_ATANH },
    { "rsqrt", h_eps_unary, IR_OP_RSQRT }, { "inverse", h_eps_unary, IR_OP_INVERSE }, { "log", h_eps_unary, IR_OP_LOG },
    { "gelu", h_gelu, 0 }, { "linear", h_linear, 0 }, { "matmul", h_matmul, 0 },
    { "reduce_sum", h_reduce, IR_OP_REDUCE_SUM }, { "reduce_mean", h_reduce, IR_OP_REDUCE_MEAN },
    { "reduce_max", h_reduce, IR_OP_REDUCE_MAX }, { "reduce_min", h_reduce, IR_OP_REDUCE_MIN },
    { "softmax", h_softmax, 0 }, { "transpose", h_transpose, 0 }, { "reshape", h_reshape, 0 },
    { "expand_dims", h_squeeze_expand, 1 }, { "squeeze", h_squeeze_expand, 0 },
    { "slice_by_size", h_slice_by_size, 0 }, { "slice_by_index", h_slice_by_index, 0 },
    { "concat", h_concat, 0 }, { "split", h_split, 0 },
    { "layer_norm", h_layer_norm, 0 }, { "instance_norm", h_instance_norm, 0 },
    { "avg_pool", h_pool, IR_OP_AVG_POOL }, { "max_pool", h_pool, IR_OP_MAX_POOL },
    { "conv", h_conv, IR_OP_CONV }, { "conv_transpose", h_conv, IR_OP_CONV_TRANSPOSE },
    { "identity", h_identity, 0 }, { "clip", h_clip, 0 },
    { "scaled_dot_product_attention", h_sdpa, 0 },
};

/* ---------------------------------------------------------------- the function */

static bool bind_const(mil_mapper *M, const mil_stmt *s) {
    const mil_arg *val = NULL;
    for (int i = 0; i < s->nargs; i++) {
        if (!strcmp(s->args[i].name, "val")) val = &s->args[i];
        else return mil_error(M->diag, AF_ERR_INVALID, s->args[i].line, s->args[i].col, "const: unexpected argument '%s'", s->args[i].name);
    }
    if (!val || val->val.kind != MIL_V_LIT) return mil_error(M->diag, AF_ERR_INVALID, s->line, s->col, "const needs val = <literal>");
    if (s->nout != 1) return mil_error(M->diag, AF_ERR_INVALID, s->line, s->col, "const declares %d outputs", s->nout);
    const mil_lit *lit = val->val.lit;
    mil_sym *sym = mil_lookup(M, s->out_names[0]);
    const mil_type *d = &sym->type, *l = &lit->type;
    bool same = d->kind == l->kind && d->dt == l->dt && d->rank == l->rank;
    for (int i = 0; same && i < d->rank; i++) same = d->dim[i] == l->dim[i];
    if (!same || l->kind != MIL_TY_TENSOR) {
        if (l->kind == MIL_TY_OTHER && d->kind == MIL_TY_OTHER) return true; /* dict/tuple consts: never inputs here */
        return mil_error(M->diag, AF_ERR_INVALID, val->line, val->col, "const '%s': the value's type differs from the declared type", sym->name);
    }
    sym->lit = lit;
    return true;
}

static bool count_use(mil_mapper *M, const mil_value *v, int line, int col) {
    if (v->kind == MIL_V_TUPLE) {
        for (int i = 0; i < v->n; i++) NEED(count_use(M, &v->items[i], line, col));
        return true;
    }
    if (v->kind != MIL_V_IDENT) return true;
    mil_sym *s = mil_lookup(M, v->ident);
    if (!s) return mil_error(M->diag, AF_ERR_INVALID, v->line, v->col, "'%s' is not defined before its use", v->ident);
    s->uses++;
    return true;
}

static af_tensor *fused_tensor(mil_mapper *M, const char *name, const mil_stmt *s) {
    call c = { .M = M, .s = s };
    mil_value v = { .kind = MIL_V_IDENT, .ident = name, .line = s->line, .col = s->col };
    mil_arg a = { name, v, s->line, s->col };
    return mil_value_tensor(&c, &v, &a, NULL);
}

static bool map_fused(mil_mapper *M, const mil_stmt *s, const mil_fused *fz) {
    call c = { .M = M, .s = s };
    af_tensor *x = fused_tensor(M, fz->x, s), *g = x ? fused_tensor(M, fz->gamma, s) : NULL;
    af_tensor *b = g && fz->beta ? fused_tensor(M, fz->beta, s) : NULL;
    if (!g || (fz->beta && !b)) return false;
    af_tensor *y = fz->kind == MIL_FUSE_RMS ? af_rms_norm(x, g, fz->eps)
                 : fz->kind == MIL_FUSE_LN ? af_layer_norm(x, g, b, fz->eps)
                 : fz->kind == MIL_FUSE_CLN ? af_channel_layer_norm(x, g, b, fz->eps)
                 : af_group_norm(x, fz->groups, g, b, fz->eps);
    return mil_out(&c, 0, y, false);
}

static const mil_op_entry *find_op(const char *name) {
    for (size_t k = 0; k < sizeof optab / sizeof optab[0]; k++)
        if (!strcmp(optab[k].name, name)) return &optab[k];
    for (const mil_op_entry *e = mil_ops_ext; e->name; e++)
        if (!strcmp(e->name, name)) return e;
    for (const mil_op_entry *e = mil_ops_layout; e->name; e++)
        if (!strcmp(e->name, name)) return e;
    for (const mil_op_entry *e = mil_ops_state; e->name; e++)
        if (!strcmp(e->name, name)) return e;
    return NULL;
}

bool mil_op_supported(const char *name) { return find_op(name) != NULL; }

bool mil_io_dtype(mil_dtype dt) {
    return dt == MIL_BOOL || dt == MIL_INT8 || dt == MIL_UINT8 || dt == MIL_INT16 || dt == MIL_UINT16 || dt == MIL_INT32 ||
           dt == MIL_FP16 || dt == MIL_FP32;
}

bool mil_map_function(mil_mapper *M) {
    const mil_func *f = M->f;
    int n = f->nparams;
    for (int i = 0; i < f->nstmts; i++) n += f->stmts[i].nout;
    M->capsyms = n + 1;
    M->tabcap = 16;
    while (M->tabcap < 2 * M->capsyms + 2) M->tabcap *= 2;
    M->syms = mil_alloc(M->arena, sizeof *M->syms * (size_t)M->capsyms);
    M->table = mil_alloc(M->arena, sizeof *M->table * (size_t)M->tabcap);
    M->fuse = mil_alloc(M->arena, sizeof *M->fuse * (size_t)(f->nstmts + 1));
    if (!M->syms || !M->table || !M->fuse) return mil_error(M->diag, AF_ERR_NOMEM, f->line, f->col, "out of memory");

    for (int i = 0; i < f->nparams; i++) {
        const mil_param *p = &f->params[i];
        mil_sym *s = mil_define(M, p->name, -1, &p->type, p->line, p->col);
        af_shape sh;
        NEED(s && mil_shape_of(M, &p->type, &sh, p->type.line, p->type.col));
        if (!mil_io_dtype(p->type.dt))
            return mil_error(M->diag, AF_ERR_UNSUPPORTED, p->type.line, p->type.col,
                             "argument '%s' is %s; arguments may be bool, int8, uint8, int16, uint16, int32, fp16 or fp32",
                             p->name, mil_dtype_name(p->type.dt));
        s->t = af_input(M->g, p->name, p->type.dt == MIL_FP16 ? AF_F16 : AF_F32, sh);
        if (!s->t) return mil_error(M->diag, AF_ERR_NOMEM, p->line, p->col, "out of memory");
        s->cls = mil_dtype_class(p->type.dt);
        if (s->cls != MIL_VC_FLOAT) s->t->flags |= IR_TF_EXACT;
        if (p->type.state) { /* read only through read_state (mil_map_state.c) */
            s->state = s->state_now = s->t;
            s->t = NULL;
            M->mod->nstates++;
        }
    }
    for (int i = 0; i < f->nstmts; i++) { /* a use before its definition is an error */
        const mil_stmt *s = &f->stmts[i];
        for (int k = 0; k < s->nargs; k++) NEED(count_use(M, &s->args[k].val, s->args[k].line, s->args[k].col));
        for (int k = 0; k < s->nout; k++) {
            if (s->out_types[k].state)
                return mil_error(M->diag, AF_ERR_UNSUPPORTED, s->line, s->col, "'%s' is declared a state; only function arguments are states", s->out_names[k]);
            NEED(mil_define(M, s->out_names[k], i, &s->out_types[k], s->line, s->col));
        }
        if (!strcmp(s->op, "const")) NEED(bind_const(M, s));
    }
    for (int i = 0; i < f->nret; i++) {
        mil_sym *s = mil_lookup(M, f->ret[i].name);
        if (!s) return mil_error(M->diag, AF_ERR_INVALID, f->ret[i].line, f->ret[i].col, "returned '%s' is not defined", f->ret[i].name);
        s->uses++;
    }
    mil_fuse(M);

    for (int i = 0; i < f->nstmts; i++) {
        const mil_stmt *s = &f->stmts[i];
        if (M->fuse[i].kind == MIL_FUSE_ABSORBED || !strcmp(s->op, "const")) continue;
        if (M->fuse[i].kind) { NEED(map_fused(M, s, &M->fuse[i])); continue; }
        const mil_op_entry *e = find_op(s->op);
        if (!e) {
            if (mil_coreml_op_known(s->op))
                return mil_error(M->diag, AF_ERR_UNSUPPORTED, s->line, s->col, "op '%s' is a Core ML op this reader does not support yet (see `aneforge ops --mil`)", s->op);
            return mil_error(M->diag, AF_ERR_UNSUPPORTED, s->line, s->col, "unknown op '%s'", s->op);
        }
        call c = { M, s, 0, M->g->n };
        NEED(e->fn(&c, e->op));
        for (int j = 0; j < s->nout; j++)
            if (!mil_lookup(M, s->out_names[j])->t) return mil_cfail(&c, AF_ERR_INVALID, NULL, "output '%s' is not produced", s->out_names[j]);
    }

    mil_module *m = M->mod;
    m->nin = f->nparams;
    m->nout = f->nret + m->nstates; /* each state's value after the run is a result too */
    m->in = ir_graph_own(M->g, calloc((size_t)m->nin + 1, sizeof *m->in));
    m->in_names = ir_graph_own(M->g, calloc((size_t)m->nin + 1, sizeof *m->in_names));
    m->out = ir_graph_own(M->g, calloc((size_t)m->nout + 1, sizeof *m->out));
    m->out_names = ir_graph_own(M->g, calloc((size_t)m->nout + 1, sizeof *m->out_names));
    m->in_types = ir_graph_own(M->g, calloc((size_t)m->nin + 1, sizeof *m->in_types));
    m->out_types = ir_graph_own(M->g, calloc((size_t)m->nout + 1, sizeof *m->out_types));
    if (!m->in || !m->in_names || !m->out || !m->out_names || !m->in_types || !m->out_types) return mil_error(M->diag, AF_ERR_NOMEM, f->line, f->col, "out of memory");
    for (int i = 0; i < m->nin; i++) {
        mil_sym *ps = mil_lookup(M, f->params[i].name);
        m->in[i] = ps->state ? ps->state : ps->t;
        m->in_names[i] = m->in[i]->name;
        m->in_types[i] = mil_dtype_name(f->params[i].type.dt);
    }
    for (int i = 0; i < f->nret; i++) {
        const mil_ret *r = &f->ret[i];
        mil_sym *s = mil_lookup(M, r->name);
        call c = { .M = M, .s = &(mil_stmt){ .op = "return", .line = r->line, .col = r->col } };
        mil_value v = { .kind = MIL_V_IDENT, .ident = r->name, .line = r->line, .col = r->col };
        mil_arg a = { r->name, v, r->line, r->col };
        NEED(mil_value_tensor(&c, &v, &a, NULL));
        if (s->type.kind != MIL_TY_TENSOR || !mil_io_dtype(s->type.dt))
            return mil_error(M->diag, AF_ERR_UNSUPPORTED, r->line, r->col,
                             "returned '%s' is not a bool, int8, uint8, int16, uint16, int32, fp16 or fp32 tensor", r->name);
        m->out_types[i] = mil_dtype_name(s->type.dt);
        m->out[i] = s->t;
        m->out_names[i] = ir_graph_own(M->g, ir_strdup(r->name));
        if (!m->out_names[i]) return mil_error(M->diag, AF_ERR_NOMEM, r->line, r->col, "out of memory");
    }
    for (int i = 0, k = f->nret; i < f->nparams; i++) { /* the states' values after the run */
        mil_sym *ps = mil_lookup(M, f->params[i].name);
        if (!ps->state) continue;
        m->out[k] = ps->state_now;
        m->out_types[k] = mil_dtype_name(f->params[i].type.dt);
        m->out_names[k] = ir_graph_own(M->g, ir_strdup(ps->name));
        if (!m->out_names[k++]) return mil_error(M->diag, AF_ERR_NOMEM, f->line, f->col, "out of memory");
    }
    if (af_graph_error(M->g)) return mil_error(M->diag, AF_ERR_INVALID, f->line, f->col, "%s", af_graph_error(M->g));
    return true;
}
