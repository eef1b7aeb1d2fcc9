/* Deployment targets iOS 15 to 18: the emitter writes one program (iOS 17+ signatures,
 * fp16 inputs and outputs); this pass rewrites it, in place, into what the target's op
 * set accepts, as coremltools' op definitions state it (converters/mil/mil/ops/defs,
 * iOS15 .. iOS18, and its op registry's first version of each op):
 *   - an op the target's opset lacks is refused, naming the op and the first target
 *     that has it;
 *   - inputs a later opset added (gather's batch_dims in iOS 16, validate_indices in
 *     iOS 17) are dropped where they hold the older behaviour, refused otherwise;
 *   - before iOS 17 a float scalar (layer_norm's and rsqrt's epsilon) must have x's
 *     dtype: an fp32 scalar beside fp16 tensors becomes fp16 (refused where the fp16
 *     rounding is 0 or infinite, which would change the result);
 *   - iOS 15 has no fp16 input or output features: fp16 arguments become fp32 with a
 *     cast to fp16 first, fp16 results are cast to fp32 last (what ct.convert writes
 *     for iOS 15 in fp16 compute precision). */
#include "coreml/coreml.h"
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Ops absent from iOS 15's opset: the first iOS that has them. */
static const struct { const char *op; int ios; } newer_ops[] = {
    { "constexpr_affine_dequantize", 16 }, { "constexpr_cast", 16 }, { "constexpr_lut_to_dense", 16 },
    { "constexpr_sparse_to_dense", 16 }, { "fill_like", 16 }, { "pixel_unshuffle", 16 }, { "reshape_like", 16 },
    { "quantize", 17 }, { "dequantize", 17 }, { "resize", 17 },
    { "constexpr_blockwise_shift_scale", 18 }, { "constexpr_lut_to_sparse", 18 },
    { "constexpr_sparse_blockwise_shift_scale", 18 }, { "read_state", 18 }, { "coreml_update_state", 18 },
    { "scaled_dot_product_attention", 18 }, { "slice_update", 18 },
};

/* Inputs a later opset added to an op: before `ios` the input does not exist; dropped
 * when it holds `dflt` (the older opset's behaviour), else refused. */
static const struct { const char *op, *arg; int ios; double dflt; } newer_args[] = {
    { "gather", "batch_dims", 16, 0 },   { "gather_nd", "batch_dims", 16, 0 },
    { "gather", "validate_indices", 17, 0 }, { "gather_nd", "validate_indices", 17, 0 },
    { "gather_along_axis", "validate_indices", 17, 0 }, { "scatter", "validate_indices", 17, 0 },
    { "scatter_nd", "validate_indices", 17, 0 }, { "scatter_along_axis", "validate_indices", 17, 0 },
};

typedef struct {
    mil_func *f;
    mil_arena *a;
    int ios;
    char *why;
    size_t nwhy;
} target;

/* The statement before `before` defining name, -1 for an argument or an unknown name.
 * Searched backwards: the emitter writes each const just before its reader. */
static int def_of(const mil_func *f, const char *name, int before) {
    for (int i = before - 1; i >= 0; i--)
        for (int k = 0; k < f->stmts[i].nout; k++)
            if (!strcmp(f->stmts[i].out_names[k], name)) return i;
    return -1;
}

static const mil_type *type_of(const mil_func *f, const char *name, int before) {
    for (int i = 0; i < f->nparams; i++)
        if (!strcmp(f->params[i].name, name)) return &f->params[i].type;
    int d = def_of(f, name, before);
    if (d < 0) return NULL;
    for (int k = 0; k < f->stmts[d].nout; k++)
        if (!strcmp(f->stmts[d].out_names[k], name)) return &f->stmts[d].out_types[k];
    return NULL;
}

/* The literal of the const statement (before `before`) defining v, or v's own literal;
 * NULL if none. */
static mil_lit *lit_of(const mil_func *f, const mil_value *v, int before, int *stmt) {
    *stmt = -1;
    if (v->kind == MIL_V_LIT) return v->lit;
    if (v->kind != MIL_V_IDENT) return NULL;
    int d = def_of(f, v->ident, before);
    if (d < 0 || strcmp(f->stmts[d].op, "const") || f->stmts[d].nargs != 1 || f->stmts[d].args[0].val.kind != MIL_V_LIT)
        return NULL;
    *stmt = d;
    return f->stmts[d].args[0].val.lit;
}

static int uses(const mil_func *f, const char *name) {
    int n = 0;
    for (int i = 0; i < f->nstmts; i++)
        for (int k = 0; k < f->stmts[i].nargs; k++) {
            const mil_value *v = &f->stmts[i].args[k].val;
            for (int j = 0; j < (v->kind == MIL_V_TUPLE ? v->n : 1); j++) {
                const mil_value *x = v->kind == MIL_V_TUPLE ? &v->items[j] : v;
                n += x->kind == MIL_V_IDENT && !strcmp(x->ident, name);
            }
        }
    for (int i = 0; i < f->nret; i++) n += !strcmp(f->ret[i].name, name);
    return n;
}

static void remove_stmt(mil_func *f, int i) {
    memmove(&f->stmts[i], &f->stmts[i + 1], sizeof *f->stmts * (size_t)(f->nstmts - i - 1));
    f->nstmts--;
}

static bool check_ops(target *t) {
    for (int i = 0; i < t->f->nstmts; i++)
        for (size_t k = 0; k < sizeof newer_ops / sizeof newer_ops[0]; k++)
            if (!strcmp(t->f->stmts[i].op, newer_ops[k].op) && t->ios < newer_ops[k].ios) {
                snprintf(t->why, t->nwhy, "op %s (%s) is in Core ML's opset from iOS %d on, not in iOS %d's; choose "
                         "--ios %d or later", newer_ops[k].op, t->f->stmts[i].out_names[0], newer_ops[k].ios, t->ios,
                         newer_ops[k].ios);
                return false;
            }
    return true;
}

/* Drops the inputs the target's op definition does not have (and their consts). */
static bool drop_newer_args(target *t) {
    mil_func *f = t->f;
    for (int i = 0; i < f->nstmts; i++) {
        mil_stmt *s = &f->stmts[i];
        for (int a = 0; a < s->nargs; a++)
            for (size_t k = 0; k < sizeof newer_args / sizeof newer_args[0]; k++) {
                if (t->ios >= newer_args[k].ios || strcmp(s->op, newer_args[k].op) || strcmp(s->args[a].name, newer_args[k].arg))
                    continue;
                int d;
                const mil_lit *l = lit_of(f, &s->args[a].val, i, &d);
                if (!l || !l->v || l->count != 1 || l->v[0] != newer_args[k].dflt) {
                    snprintf(t->why, t->nwhy, "op %s (%s) sets %s, which iOS %d's %s lacks; choose --ios %d or later",
                             s->op, s->out_names[0], newer_args[k].arg, t->ios, s->op, newer_args[k].ios);
                    return false;
                }
                const char *name = s->args[a].val.kind == MIL_V_IDENT ? s->args[a].val.ident : NULL;
                memmove(&s->args[a], &s->args[a + 1], sizeof *s->args * (size_t)(s->nargs - a - 1));
                s->nargs--;
                a--;
                if (name && d >= 0 && !uses(f, name)) {
                    remove_stmt(f, d);
                    if (d < i) i--, s = &f->stmts[i];
                }
                break;
            }
    }
    return true;
}

/* Before iOS 17: a float scalar input has the dtype of the op's tensors (type domain T). */
static bool match_scalars(target *t) {
    mil_func *f = t->f;
    for (int i = 0; i < f->nstmts; i++) {
        mil_stmt *s = &f->stmts[i];
        if (!strcmp(s->op, "const") || !strcmp(s->op, "cast")) continue;
        bool fp16 = false;
        for (int a = 0; a < s->nargs && !fp16; a++) {
            const mil_type *ty = s->args[a].val.kind == MIL_V_IDENT ? type_of(f, s->args[a].val.ident, i) : NULL;
            fp16 = ty && ty->dt == MIL_FP16 && ty->rank > 0;
        }
        for (int a = 0; fp16 && a < s->nargs; a++) {
            int d;
            mil_lit *l = lit_of(f, &s->args[a].val, i, &d);
            if (!l || l->type.dt != MIL_FP32 || l->type.rank || l->blob || !l->v || l->count != 1) continue;
            float h = af_f16_to_f32(af_f32_to_f16((float)l->v[0]));
            if ((h == 0 && l->v[0] != 0) || (isinf(h) && !isinf(l->v[0]))) {
                snprintf(t->why, t->nwhy, "op %s (%s): its %s %g rounds to %g in fp16, and iOS %d's %s takes it in x's "
                         "dtype fp16; choose --ios 17 or later, or precision fp32", s->op, s->out_names[0],
                         s->args[a].name, l->v[0], h, t->ios, s->op);
                return false;
            }
            l->type.dt = MIL_FP16;
            if (d >= 0) f->stmts[d].out_types[0].dt = MIL_FP16;
        }
    }
    return true;
}

/* A name not yet used in f: base + suffix (+ a number if taken). */
static const char *fresh(target *t, const char *base, const char *suffix) {
    char buf[300];
    for (int k = 0; k < 1000; k++) {
        if (k) snprintf(buf, sizeof buf, "%s%s_%d", base, suffix, k);
        else snprintf(buf, sizeof buf, "%s%s", base, suffix);
        if (!type_of(t->f, buf, t->f->nstmts)) return mil_strndup(t->a, buf, strlen(buf));
    }
    return NULL;
}

/* stmts[at], stmts[at + 1]: `dtype` const and cast(x = x, dtype) named out, of type ty. */
static bool make_cast(target *t, mil_stmt *at, const char *x, const char *out, const mil_type *ty, mil_dtype dt) {
    const char *cname = fresh(t, out, "_dtype");
    mil_lit *lit = mil_alloc(t->a, sizeof *lit);
    mil_arg *args = mil_alloc(t->a, sizeof *args * 3);
    mil_type *types = mil_alloc(t->a, sizeof *types * 2);
    const char **names = mil_alloc(t->a, sizeof *names * 2);
    const char *dname = dt == MIL_FP16 ? "fp16" : "fp32";
    if (!cname || !lit || !args || !types || !names || !(lit->s = mil_strndup(t->a, dname, 4))) return false;
    lit->type = (mil_type){ .kind = MIL_TY_TENSOR, .dt = MIL_STRING };
    lit->count = 1;
    types[0] = lit->type;
    names[0] = cname;
    args[0] = (mil_arg){ .name = "val", .val = { .kind = MIL_V_LIT, .lit = lit } };
    at[0] = (mil_stmt){ .nout = 1, .out_types = &types[0], .out_names = &names[0], .op = "const", .nargs = 1, .args = &args[0] };
    types[1] = *ty;
    types[1].dt = dt;
    names[1] = out;
    args[1] = (mil_arg){ .name = "dtype", .val = { .kind = MIL_V_IDENT, .ident = cname } };
    args[2] = (mil_arg){ .name = "x", .val = { .kind = MIL_V_IDENT, .ident = x } };
    at[1] = (mil_stmt){ .nout = 1, .out_types = &types[1], .out_names = &names[1], .op = "cast", .nargs = 2, .args = &args[1] };
    return true;
}

static void rename_uses(mil_func *f, int from, const char *old, const char *now) {
    for (int i = from; i < f->nstmts; i++)
        for (int k = 0; k < f->stmts[i].nargs; k++) {
            mil_value *v = &f->stmts[i].args[k].val;
            for (int j = 0; j < (v->kind == MIL_V_TUPLE ? v->n : 1); j++) {
                mil_value *x = v->kind == MIL_V_TUPLE ? &v->items[j] : v;
                if (x->kind == MIL_V_IDENT && !strcmp(x->ident, old)) x->ident = now;
            }
        }
}

/* iOS 15: fp32 features, with the program's fp16 values cast at both ends. */
static bool fp32_io(target *t) {
    mil_func *f = t->f;
    int nin = 0, nout = 0;
    for (int i = 0; i < f->nparams; i++) nin += f->params[i].type.dt == MIL_FP16;
    for (int i = 0; i < f->nret; i++) {
        const mil_type *ty = type_of(f, f->ret[i].name, f->nstmts);
        nout += ty && ty->dt == MIL_FP16 && def_of(f, f->ret[i].name, f->nstmts) >= 0;
    }
    if (!nin && !nout) return true;
    mil_stmt *stmts = mil_alloc(t->a, sizeof *stmts * (size_t)(f->nstmts + 2 * (nin + nout)));
    if (!stmts) return false;
    int n = 0;
    for (int i = 0; i < f->nparams; i++) {
        mil_param *p = &f->params[i];
        if (p->type.dt != MIL_FP16) continue;
        const char *cast = fresh(t, p->name, "_to_fp16");
        if (!cast) return false;
        rename_uses(f, 0, p->name, cast); /* a result that is an argument stays the (fp32) argument */
        if (!make_cast(t, &stmts[n], p->name, cast, &p->type, MIL_FP16)) return false;
        n += 2;
        p->type.dt = MIL_FP32;
    }
    memcpy(&stmts[n], f->stmts, sizeof *stmts * (size_t)f->nstmts);
    int body = n;
    n += f->nstmts;
    f->stmts = stmts;
    f->nstmts = n;
    for (int i = 0; i < f->nret; i++) {
        const char *r = f->ret[i].name;
        int d = def_of(f, r, f->nstmts);
        if (d < 0 || d < body) continue; /* an argument returned as is: fp32 already */
        mil_stmt *s = &f->stmts[d];
        int k = 0;
        while (strcmp(s->out_names[k], r)) k++;
        if (s->out_types[k].dt != MIL_FP16) continue;
        const char *inner = fresh(t, r, "_cast_fp16");
        if (!inner) return false;
        s->out_names[k] = inner;
        rename_uses(f, d + 1, r, inner);
        mil_type ty = s->out_types[k];
        if (!make_cast(t, &f->stmts[f->nstmts], inner, r, &ty, MIL_FP32)) return false;
        f->nstmts += 2;
    }
    return true;
}

af_status coreml_target(mil_func *f, mil_arena *a, int ios) {
    char why[400] = "";
    target t = { f, a, ios, why, sizeof why };
    bool ok = check_ops(&t) && drop_newer_args(&t) && (ios >= 17 || match_scalars(&t)) && (ios >= 16 || fp32_io(&t));
    if (ok) return AF_OK;
    if (!why[0]) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory adapting the program to iOS %d", ios);
    return ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_export: deployment target iOS %d: %s", ios, why);
}
