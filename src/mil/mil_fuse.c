/* Fusion on read: finds the canonical decompositions mil_lower.c writes for ops that
 * have no single MIL op and marks them to become that op again, so emit -> parse gives
 * back rms_norm, layer_norm, channel_layer_norm and group_norm (and their exact fp16
 * results) instead of a chain of rounded intermediate steps:
 *   rms_norm     y = mul(mul(x, rsqrt(reduce_mean(mul(x, x), [-1], keep), eps)), gamma)
 *   layer_norm   y = add(mul(layer_norm(x, [-1] or [1], eps), gamma), beta)
 *   group_norm   y = add(mul(reshape(layer_norm(reshape(x, [N, G, K]), [2], eps), x.shape), gamma), beta)
 * A chain fuses only when each intermediate has exactly one use and gamma/beta lie
 * along the normalised axis (so the fused op broadcasts them the same way). Anything
 * else maps op by op. Roots are tried last statement first; a statement joins at most
 * one fusion. */
#include "mil/mil_ast.h"

#include <string.h>

static const mil_value *argv_of(const mil_stmt *s, const char *name) {
    for (int i = 0; i < s->nargs; i++)
        if (!strcmp(s->args[i].name, name)) return &s->args[i].val;
    return NULL;
}

static const char *ident_arg(const mil_stmt *s, const char *name) {
    const mil_value *v = argv_of(s, name);
    return v && v->kind == MIL_V_IDENT ? v->ident : NULL;
}

/* The single-output, single-use statement defining name with op `op`, not yet claimed. */
static int def_stmt(mil_mapper *M, const char *name, const char *op, int nargs) {
    mil_sym *s = name ? mil_lookup(M, name) : NULL;
    if (!s || s->def < 0 || s->uses != 1 || M->fuse[s->def].kind) return -1;
    const mil_stmt *st = &M->f->stmts[s->def];
    return st->nout == 1 && !strcmp(st->op, op) && st->nargs == nargs ? s->def : -1;
}

static const mil_type *type_of(mil_mapper *M, const char *name) {
    mil_sym *s = name ? mil_lookup(M, name) : NULL;
    return s && s->type.kind == MIL_TY_TENSOR && !s->type.dynamic ? &s->type : NULL;
}

/* gamma/beta broadcast against x only along `axis`: right-aligned, every other dim 1. */
static bool affine_ok(mil_mapper *M, const char *name, const mil_type *x, int axis) {
    const mil_type *g = type_of(M, name);
    if (!g || g->rank > x->rank || !(g->dt == MIL_FP16 || g->dt == MIL_FP32)) return false;
    for (int j = 0; j < g->rank; j++) {
        int a = j + x->rank - g->rank;
        if (g->dim[j] != (a == axis ? x->dim[axis] : 1)) return false;
    }
    return g->rank >= x->rank - axis || x->dim[axis] == 1;
}

static bool ints_of(mil_mapper *M, const mil_stmt *s, const char *name, int64_t *out, int max, int *n) {
    const mil_value *v = argv_of(s, name);
    const mil_lit *lit = NULL;
    if (v && v->kind == MIL_V_LIT) lit = v->lit;
    else if (v && v->kind == MIL_V_IDENT) {
        mil_sym *sym = mil_lookup(M, v->ident);
        lit = sym ? sym->lit : NULL;
    }
    if (!lit || !lit->v || lit->count > max || !mil_dtype_is_int(lit->type.dt)) return false;
    for (int64_t i = 0; i < lit->count; i++) out[i] = (int64_t)lit->v[i];
    *n = (int)lit->count;
    return true;
}

static bool one_axis(mil_mapper *M, const mil_stmt *s, int rank, int want) {
    int64_t ax[2];
    int n;
    return ints_of(M, s, "axes", ax, 2, &n) && n == 1 && (ax[0] < 0 ? ax[0] + rank : ax[0]) == want;
}

static bool eps_of(mil_mapper *M, const mil_stmt *s, double dflt, float *eps) {
    const mil_value *v = argv_of(s, "epsilon");
    double d = dflt;
    if (v && !mil_scalar_of(M, v, &d)) return false;
    if (!(d >= 0)) return false;
    *eps = (float)d;
    return true;
}

static void claim(mil_mapper *M, const int *st, int n) {
    for (int i = 0; i < n; i++) M->fuse[st[i]].kind = MIL_FUSE_ABSORBED;
}

static bool match_rms(mil_mapper *M, int root) {
    const mil_stmt *s5 = &M->f->stmts[root];
    const char *a = ident_arg(s5, "x"), *gamma = ident_arg(s5, "y");
    int i4 = def_stmt(M, a, "mul", 2);
    if (i4 < 0 || !gamma) return false;
    const mil_stmt *s4 = &M->f->stmts[i4];
    const char *x = ident_arg(s4, "x");
    int i3 = def_stmt(M, ident_arg(s4, "y"), "rsqrt", 2);
    if (i3 < 0 || !x) return false;
    const mil_stmt *s3 = &M->f->stmts[i3];
    int i2 = def_stmt(M, ident_arg(s3, "x"), "reduce_mean", 3);
    float eps;
    if (i2 < 0 || !eps_of(M, s3, 1e-12, &eps)) return false;
    const mil_stmt *s2 = &M->f->stmts[i2];
    int i1 = def_stmt(M, ident_arg(s2, "x"), "mul", 2);
    const mil_type *xt = type_of(M, x);
    const mil_value *keep = argv_of(s2, "keep_dims");
    double kd;
    if (i1 < 0 || !xt || xt->rank < 1 || !keep || !mil_scalar_of(M, keep, &kd) || kd != 1 || !one_axis(M, s2, xt->rank, xt->rank - 1))
        return false;
    const mil_stmt *s1 = &M->f->stmts[i1];
    const char *x1 = ident_arg(s1, "x"), *x2 = ident_arg(s1, "y");
    if (!x1 || !x2 || strcmp(x1, x) || strcmp(x2, x) || !affine_ok(M, gamma, xt, xt->rank - 1)) return false;
    int st[4] = { i1, i2, i3, i4 };
    claim(M, st, 4);
    M->fuse[root] = (mil_fused){ .kind = MIL_FUSE_RMS, .eps = eps, .x = x, .gamma = gamma };
    return true;
}

/* add(mul(<inner>, gamma), beta): returns the inner name and the two statements. */
static const char *affine_tail(mil_mapper *M, int root, const char **gamma, const char **beta, int *i_mul) {
    const mil_stmt *s = &M->f->stmts[root];
    *beta = ident_arg(s, "y");
    *i_mul = def_stmt(M, ident_arg(s, "x"), "mul", 2);
    if (*i_mul < 0 || !*beta) return NULL;
    *gamma = ident_arg(&M->f->stmts[*i_mul], "y");
    return *gamma ? ident_arg(&M->f->stmts[*i_mul], "x") : NULL;
}

static bool match_ln(mil_mapper *M, int root) {
    const char *gamma, *beta;
    int im;
    const char *ln = affine_tail(M, root, &gamma, &beta, &im);
    int il = def_stmt(M, ln, "layer_norm", 3);
    if (il < 0) return false;
    const mil_stmt *s = &M->f->stmts[il];
    const char *x = ident_arg(s, "x");
    const mil_type *xt = type_of(M, x);
    float eps;
    if (!xt || xt->rank < 1 || !eps_of(M, s, 1e-5, &eps)) return false;
    int axis = one_axis(M, s, xt->rank, xt->rank - 1) ? xt->rank - 1 : one_axis(M, s, xt->rank, 1) && xt->rank >= 2 ? 1 : -1;
    if (axis < 0 || !affine_ok(M, gamma, xt, axis) || !affine_ok(M, beta, xt, axis)) return false;
    int st[2] = { il, im };
    claim(M, st, 2);
    M->fuse[root] = (mil_fused){ .kind = axis == xt->rank - 1 ? MIL_FUSE_LN : MIL_FUSE_CLN, .eps = eps, .x = x, .gamma = gamma, .beta = beta };
    return true;
}

static bool same_dims(const int64_t *d, int n, const mil_type *t) {
    if (n != t->rank) return false;
    for (int i = 0; i < n; i++)
        if (d[i] != t->dim[i]) return false;
    return true;
}

static bool match_gn(mil_mapper *M, int root) {
    const char *gamma, *beta;
    int im, n;
    int64_t d[MIL_MAX_RANK];
    const char *r2 = affine_tail(M, root, &gamma, &beta, &im);
    int i3 = def_stmt(M, r2, "reshape", 2);
    if (i3 < 0) return false;
    const mil_stmt *s3 = &M->f->stmts[i3];
    int i2 = def_stmt(M, ident_arg(s3, "x"), "layer_norm", 3);
    if (i2 < 0) return false;
    const mil_stmt *s2 = &M->f->stmts[i2];
    int i1 = def_stmt(M, ident_arg(s2, "x"), "reshape", 2);
    float eps;
    if (i1 < 0 || !eps_of(M, s2, 1e-5, &eps) || !one_axis(M, s2, 3, 2)) return false;
    const mil_stmt *s1 = &M->f->stmts[i1];
    const char *x = ident_arg(s1, "x");
    const mil_type *xt = type_of(M, x);
    if (!xt || xt->rank < 2 || !ints_of(M, s3, "shape", d, MIL_MAX_RANK, &n) || !same_dims(d, n, xt)) return false;
    if (!ints_of(M, s1, "shape", d, MIL_MAX_RANK, &n) || n != 3) return false;
    int64_t count = 1;
    for (int i = 0; i < xt->rank; i++) count *= xt->dim[i];
    int64_t groups = d[1];
    if (d[0] != xt->dim[0] || groups < 1 || groups > xt->dim[1] || xt->dim[1] % groups || d[0] * groups * d[2] != count) return false;
    if (!affine_ok(M, gamma, xt, 1) || !affine_ok(M, beta, xt, 1)) return false;
    int st[4] = { i1, i2, i3, im };
    claim(M, st, 4);
    M->fuse[root] = (mil_fused){ .kind = MIL_FUSE_GN, .eps = eps, .groups = (int)groups, .x = x, .gamma = gamma, .beta = beta };
    return true;
}

void mil_fuse(mil_mapper *M) {
    for (int i = M->f->nstmts - 1; i >= 0; i--) {
        const mil_stmt *s = &M->f->stmts[i];
        if (M->fuse[i].kind || s->nout != 1 || s->nargs != 2) continue;
        if (!strcmp(s->op, "mul")) match_rms(M, i);
        else if (!strcmp(s->op, "add") && !match_gn(M, i)) match_ln(M, i);
    }
}
