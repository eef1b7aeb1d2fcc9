/* MIL -> IR for the rest of Core ML's op set: casts between every I/O dtype, rounding,
 * integer division, the activations, reductions, index outputs (argmax), one_hot,
 * cumsum, tile, pad, band_part, upsampling and (de)quantization. Each is a composition
 * of IR ops with the op's exact semantics; integer and bool results are computed on
 * IR_TF_EXACT nodes (mil_out marks them), so they stay whole numbers at fp16 precision.
 * Constants that hold indices are flagged exact here, as they are built. */
#include "mil/mil_call.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static af_shape scalar_shape(void) { return (af_shape){ 0 }; }
static af_tensor *fill(af_tensor *like, float v) { return like ? af_const_fill(like->g, scalar_shape(), v) : NULL; }

/* An exact constant (index values above 2048 must not be rounded to fp16). */
static af_tensor *exact_const(af_graph *g, af_shape s, const float *v) {
    af_tensor *t = af_const(g, NULL, s, v);
    if (t) t->flags |= IR_TF_EXACT;
    return t;
}

/* A scalar that must keep its value at fp16 precision (a count or a type's range). */
static af_tensor *xfill(af_tensor *like, float v) { return like ? exact_const(like->g, scalar_shape(), &v) : NULL; }

/* 0, 1, ..., d-1 along `axis` of a rank-`rank` shape of ones elsewhere. */
static af_tensor *iota(af_graph *g, int rank, int axis, int64_t d) {
    af_shape s = { .rank = rank };
    for (int i = 0; i < rank; i++) s.dim[i] = i == axis ? d : 1;
    float *v = malloc(sizeof(float) * (size_t)d);
    if (!v) return NULL;
    for (int64_t i = 0; i < d; i++) v[i] = (float)i;
    af_tensor *t = exact_const(g, s, v);
    free(v);
    return t;
}

/* Whether a result of base elements times the factors stays within the reader's
 * tensor cap; an error otherwise (untrusted sizes never reach an allocation). */
static bool fits_cap(call *c, int64_t base, int n, const int64_t *factor) {
    double total = (double)base;
    for (int i = 0; i < n; i++) total *= (double)factor[i];
    if (total <= (double)(1 << 24)) return true;
    return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "the result would hold %.0f elements (at most 2^24)", total);
}

static af_tensor *floor_of(af_tensor *x) { return x ? ir_build(IR_OP_FLOOR, 1, &x, NULL) : NULL; }
static af_tensor *ceil_of(af_tensor *x) { return x ? af_neg(floor_of(af_neg(x))) : NULL; }
static af_tensor *trunc_of(af_tensor *x) { return x ? af_select(af_less(x, fill(x, 0)), ceil_of(x), floor_of(x)) : NULL; }

/* Round half to even (NumPy's np.round, which coremltools' value inference uses).
 * Whole numbers pass unchanged, so x + 0.5 is only formed where it is exact. */
static af_tensor *round_even(af_tensor *x) {
    if (!x) return NULL;
    af_tensor *r = floor_of(af_adds(x, 0.5f));
    af_tensor *tie = af_equal(af_sub(r, x), fill(x, 0.5f));
    af_tensor *odd = af_sub(r, af_muls(floor_of(af_muls(r, 0.5f)), 2.0f));
    af_tensor *y = af_sub(r, af_mul(tie, odd));
    return af_select(af_equal(floor_of(x), x), x, y);
}

static af_tensor *floor_div(af_tensor *x, af_tensor *y) { return x && y ? floor_of(af_div(x, y)) : NULL; }
static af_tensor *mod_of(af_tensor *x, af_tensor *y) { return x && y ? af_sub(x, af_mul(floor_div(x, y), y)) : NULL; }

/* ---------------------------------------------------------------- cast */

static bool int_range(const char *dt, double *lo, double *hi) {
    static const struct { const char *n; double lo, hi; } r[] = {
        { "int8", -128, 127 }, { "uint8", 0, 255 }, { "int16", -32768, 32767 }, { "uint16", 0, 65535 },
        { "int32", -2147483648.0, 2147483647.0 }, { "uint32", 0, 4294967295.0 },
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (!strcmp(dt, r[i].n)) { *lo = r[i].lo; *hi = r[i].hi; return true; }
    return false;
}

/* cast: to fp16/fp32 rounds; to bool is x != 0; to an integer type truncates toward
 * zero and wraps into the type's range (NumPy's astype, which coremltools follows). */
static bool h_cast(call *c, int op) {
    (void)op;
    const char *dt = NULL;
    int cls;
    double lo, hi;
    af_tensor *x = mil_targ(c, "x", true, &cls);
    NEED(x && mil_get_str(c, "dtype", &dt, NULL));
    if (!strcmp(dt, "fp16") || !strcmp(dt, "fp32")) {
        af_dtype to = dt[2] == '1' ? AF_F16 : AF_F32;
        return mil_out(c, 0, x->dtype == to && cls == MIL_VC_FLOAT ? x : af_cast(x, to), MIL_VC_FLOAT);
    }
    if (!strcmp(dt, "bool")) return mil_out(c, 0, cls == MIL_VC_BOOL ? x : af_sub(fill(x, 1), af_equal(x, fill(x, 0))), MIL_VC_BOOL);
    if (!int_range(dt, &lo, &hi))
        return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "dtype"), "cast to %s is not supported (bool, int8, uint8, int16, uint16, int32, uint32, fp16, fp32)", dt);
    af_tensor *y = cls == MIL_VC_FLOAT ? trunc_of(x) : x;
    if (hi - lo < 65536) { /* wrap: lo + (y - lo) mod 2^bits; powers of two divide exactly */
        af_tensor *span = xfill(x, (float)(hi - lo + 1)), *low = xfill(x, (float)lo);
        y = af_add(mod_of(af_sub(y, low), span), low);
    }
    return mil_out(c, 0, y, MIL_VC_INT);
}

/* ---------------------------------------------------------------- elementwise */

enum { U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_EXP2, U_TAN, U_SINH, U_COSH, U_SOFTPLUS, U_SOFTSIGN, U_RELU6, U_TRUNC };

static bool h_unary_ext(call *c, int op) {
    af_tensor *x = X_("x"), *y = NULL;
    NEED(x);
    switch (op) {
    case U_FLOOR: y = floor_of(x); break;
    case U_CEIL: y = ceil_of(x); break;
    case U_ROUND: y = round_even(x); break;
    case U_SIGN: y = af_sub(af_greater(x, fill(x, 0)), af_less(x, fill(x, 0))); break;
    case U_EXP2: y = mil_b2(IR_OP_POW, fill(x, 2), x); break;
    case U_TAN: y = af_div(af_sin(x), af_cos(x)); break;
    case U_SINH: y = af_muls(af_sub(af_exp(x), af_exp(af_neg(x))), 0.5f); break;
    case U_COSH: y = af_muls(af_add(af_exp(x), af_exp(af_neg(x))), 0.5f); break;
    case U_SOFTPLUS: /* relu(x) + log(1 + exp(-|x|)): no overflow for large |x| */
        y = af_add(af_relu(x), af_log(af_adds(af_exp(af_neg(af_abs(x))), 1.0f)));
        break;
    case U_SOFTSIGN: y = af_div(x, af_adds(af_abs(x), 1.0f)); break;
    case U_RELU6: y = af_minimum(af_relu(x), fill(x, 6)); break;
    default: break;
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* Activations with alpha (and beta) attributes. */
enum { A_LEAKY, A_ELU, A_THRESHOLDED, A_HARD_SIGMOID, A_SCALED_TANH, A_LINEAR, A_THRESHOLD, A_CLAMPED };

static bool h_act(call *c, int op) {
    static const double dflt_alpha[] = { 0.01, 1.0, 1.0, 0.2, 1.0, 1.0, 0.0, 0.0 };
    static const double dflt_beta[] = { 0, 0, 0, 0.5, 1.0, 0.0, 0, 6.0 };
    double a, b;
    af_tensor *x = X_("x"), *y = NULL;
    NEED(x && mil_get_float(c, "alpha", &a, dflt_alpha[op]) && mil_get_float(c, "beta", &b, dflt_beta[op]));
    af_tensor *pos = af_greater(x, fill(x, 0));
    switch (op) {
    case A_LEAKY: y = af_select(pos, x, af_muls(x, (float)a)); break;
    case A_ELU: y = af_select(pos, x, af_muls(af_adds(af_exp(x), -1.0f), (float)a)); break;
    case A_THRESHOLDED: y = af_select(af_greater(x, fill(x, (float)a)), x, fill(x, 0)); break;
    case A_HARD_SIGMOID: y = af_minimum(af_maximum(af_adds(af_muls(x, (float)a), (float)b), fill(x, 0)), fill(x, 1)); break;
    case A_SCALED_TANH: y = af_muls(af_tanh(af_muls(x, (float)b)), (float)a); break;
    case A_LINEAR: y = af_adds(af_muls(x, (float)a), (float)b); break;
    case A_THRESHOLD: y = af_maximum(x, fill(x, (float)a)); break;
    case A_CLAMPED: y = af_minimum(af_select(af_less(x, fill(x, 0)), af_muls(x, (float)a), x), fill(x, (float)b)); break;
    default: break;
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

enum { B_FLOOR_DIV, B_MOD, B_XOR };

static bool h_binary_ext(call *c, int op) {
    af_tensor *x = X_("x"), *y = x ? X_("y") : NULL;
    NEED(y);
    if (op == B_XOR) return mil_out(c, 0, af_abs(af_sub(x, y)), MIL_VC_BOOL);
    return mil_out(c, 0, op == B_FLOOR_DIV ? floor_div(x, y) : mod_of(x, y), MIL_VC_SAME);
}

/* ---------------------------------------------------------------- reductions */

/* The axes argument (default: all), normalised; false with an error. */
static bool axes_of(call *c, af_tensor *x, const char *name, int *axes, int *n) {
    int64_t ax[AF_MAX_RANK];
    NEED(mil_get_ints(c, name, ax, AF_MAX_RANK, n, false));
    int r = x->shape.rank;
    if (*n < 0) { *n = r; for (int i = 0; i < r; i++) ax[i] = i; }
    for (int i = 0; i < *n; i++) {
        int a = ir_norm_axis((int)ax[i], r);
        if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, name), "axis %lld is out of range for rank %d", (long long)ax[i], r);
        axes[i] = a;
    }
    return true;
}

/* The shape of x with `axes` removed (keep false) or set to 1. */
static af_tensor *drop_axes(af_tensor *y, af_tensor *x, int n, const int *axes, bool keep) {
    if (!y || keep) return y;
    int64_t d[AF_MAX_RANK];
    int k = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        bool gone = false;
        for (int j = 0; j < n; j++) gone = gone || axes[j] == i;
        if (!gone) d[k++] = x->shape.dim[i];
    }
    return mil_reshape_to(y, k, d);
}

enum { R_L2, R_L1, R_SUMSQ, R_LOGSUM, R_LSE, R_PROD };

static bool h_reduce_ext(call *c, int op) {
    int axes[AF_MAX_RANK], n;
    bool keep;
    af_tensor *x = X_("x"), *y = NULL;
    NEED(x && axes_of(c, x, "axes", axes, &n) && mil_get_bool(c, "keep_dims", &keep, false));
    if (n == 0) return mil_out(c, 0, x, MIL_VC_SAME);
    switch (op) {
    case R_L2: y = af_sqrt(af_reduce_sum(af_square(x), n, axes, true)); break;
    case R_L1: y = af_reduce_sum(af_abs(x), n, axes, true); break;
    case R_SUMSQ: y = af_reduce_sum(af_square(x), n, axes, true); break;
    case R_LOGSUM: y = af_log(af_reduce_sum(x, n, axes, true)); break;
    case R_LSE: {
        af_tensor *m = af_reduce_max(x, n, axes, true);
        y = af_add(af_log(af_reduce_sum(af_exp(af_sub(x, m)), n, axes, true)), m);
        break;
    }
    case R_PROD: { /* the product of the slices along each axis, in order */
        y = x;
        for (int j = 0; j < n && y; j++) {
            int64_t d = y->shape.dim[axes[j]];
            if (d > 256) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "axes"), "reduce_prod over an axis of %lld (at most 256)", (long long)d);
            int64_t b[AF_MAX_RANK] = { 0 }, s[AF_MAX_RANK];
            for (int i = 0; i < y->shape.rank; i++) s[i] = i == axes[j] ? 1 : y->shape.dim[i];
            af_tensor *p = af_slice(y, b, s);
            for (int64_t k = 1; k < d && p; k++) { b[axes[j]] = k; p = af_mul(p, af_slice(y, b, s)); }
            y = p;
        }
        break;
    }
    default: break;
    }
    return mil_out(c, 0, drop_axes(y, x, n, axes, keep), MIL_VC_SAME);
}

/* reduce_argmax / reduce_argmin: the first index of the extreme along axis (int32). */
static bool h_argext(call *c, int op) {
    int64_t axis;
    bool keep;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "axis", &axis, -1) && mil_get_bool(c, "keep_dims", &keep, false));
    int a = ir_norm_axis((int)axis, x->shape.rank);
    if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    int64_t d = x->shape.dim[a];
    af_tensor *m = op ? af_reduce_min(x, 1, &a, true) : af_reduce_max(x, 1, &a, true);
    af_tensor *cand = af_select(af_equal(x, m), iota(x->g, x->shape.rank, a, d), xfill(x, (float)d));
    af_tensor *y = af_reduce_min(cand, 1, &a, true);
    return mil_out(c, 0, drop_axes(y, x, 1, &a, keep), MIL_VC_INT);
}

/* ---------------------------------------------------------------- tensor ops */

/* one_hot: indices (negative counted from the end... of nothing: out of range gives an
 * all-off row) against 0..size-1 on a new axis. */
static bool h_one_hot(call *c, int op) {
    (void)op;
    int64_t size, axis;
    double on, offv;
    bool present;
    af_tensor *idx = mil_targ(c, "indices", true, NULL);
    NEED(idx && mil_get_int(c, "one_hot_vector_size", &size, -1) && mil_get_int(c, "axis", &axis, -1) &&
         mil_get_float(c, "on_value", &on, 1) && mil_get_float(c, "off_value", &offv, 0));
    if (size < 1 || size > 65536) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "one_hot_vector_size"), "one_hot_vector_size must be a constant in 1..65536");
    int r = idx->shape.rank + 1;
    if (r > AF_MAX_RANK) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "the result's rank exceeds %d", AF_MAX_RANK);
    int a = ir_norm_axis((int)axis, r);
    if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    NEED(fits_cap(c, af_shape_count(idx->shape), 1, &size));
    int64_t d[AF_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) d[i] = i == a ? 1 : idx->shape.dim[k++];
    af_tensor *hot = af_equal(mil_reshape_to(idx, r, d), iota(idx->g, r, a, size));
    const mil_lit *ol = mil_const_arg(c, "on_value", &present, NULL);
    int cls = present && ol ? mil_dtype_class(ol->type.dt) : MIL_VC_INT;
    af_tensor *y = cls == MIL_VC_FLOAT ? af_select(hot, fill(idx, (float)on), fill(idx, (float)offv))
                                       : af_select(hot, xfill(idx, (float)on), xfill(idx, (float)offv));
    return mil_out(c, 0, y, cls == MIL_VC_BOOL ? MIL_VC_INT : cls);
}

/* x with `axis` moved last and flattened to [rows, d]; the inverse below. */
static bool h_cumsum(call *c, int op) {
    (void)op;
    int64_t axis;
    bool excl, rev;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "axis", &axis, 0) && mil_get_bool(c, "exclusive", &excl, false) && mil_get_bool(c, "reverse", &rev, false));
    int r = x->shape.rank, a = ir_norm_axis((int)axis, r);
    if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    int64_t d = x->shape.dim[a];
    if (d > 2048) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "axis"), "cumsum along an axis of %lld (at most 2048)", (long long)d);
    /* y[.., i] = sum_j x[.., j] * T[j][i], T the (strict, reversed) triangle */
    float *tv = calloc((size_t)(d * d), sizeof(float));
    if (!tv) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
    for (int64_t j = 0; j < d; j++)
        for (int64_t i = 0; i < d; i++) {
            bool in = rev ? (excl ? j > i : j >= i) : (excl ? j < i : j <= i);
            tv[j * d + i] = in ? 1.0f : 0.0f;
        }
    af_shape ts = { .rank = 2, .dim = { d, d } };
    af_tensor *tri = exact_const(x->g, ts, tv);
    free(tv);
    int perm[AF_MAX_RANK], inv[AF_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) if (i != a) perm[k++] = i;
    perm[r - 1] = a;
    for (int i = 0; i < r; i++) inv[perm[i]] = i;
    af_tensor *xt = a == r - 1 ? x : af_transpose(x, perm);
    int64_t rows = af_shape_count(x->shape) / d, flat[2] = { rows, d };
    af_tensor *y = af_matmul(mil_reshape_to(xt, 2, flat), tri, 0, 0);
    if (y && xt) y = mil_reshape_to(y, r, xt->shape.dim);
    if (y && a != r - 1) y = af_transpose(y, inv);
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* band_part: keeps the band lower below / upper above the diagonal of the last two axes
 * (a negative bound keeps that whole triangle). */
static bool h_band_part(call *c, int op) {
    (void)op;
    int64_t lo, up;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "lower", &lo, -1) && mil_get_int(c, "upper", &up, -1));
    int r = x->shape.rank;
    if (r < 2) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank >= 2");
    int64_t m = x->shape.dim[r - 2], n = x->shape.dim[r - 1];
    if (m * n > (1 << 22)) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "the band is too large (%lld x %lld)", (long long)m, (long long)n);
    float *v = malloc(sizeof(float) * (size_t)(m * n));
    if (!v) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) v[i * n + j] = (lo < 0 || i - j <= lo) && (up < 0 || j - i <= up);
    af_shape s = { .rank = 2, .dim = { m, n } };
    af_tensor *mask = exact_const(x->g, s, v);
    free(v);
    return mil_out(c, 0, af_select(mask, x, fill(x, 0)), MIL_VC_SAME);
}

static bool h_tile(call *c, int op) {
    (void)op;
    int64_t reps[AF_MAX_RANK];
    int n;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "reps", reps, AF_MAX_RANK, &n, true));
    if (n != x->shape.rank) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "reps"), "reps has %d entries for a rank-%d x", n, x->shape.rank);
    for (int i = 0; i < n; i++)
        if (reps[i] < 1 || reps[i] > 1024) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "reps"), "reps must be in 1..1024");
    NEED(fits_cap(c, af_shape_count(x->shape), n, reps));
    af_tensor *y = x;
    for (int i = 0; i < n && y; i++) {
        if (reps[i] == 1) continue;
        af_tensor **xs = malloc(sizeof *xs * (size_t)reps[i]);
        if (!xs) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
        for (int64_t k = 0; k < reps[i]; k++) xs[k] = y;
        y = af_concat((int)reps[i], xs, i);
        free(xs);
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* pad: the pad list covers the last len/2 axes, [before, after] each; constant,
 * reflect (mirror without the edge) and replicate (repeat the edge). */
static bool h_pad(call *c, int op) {
    (void)op;
    int64_t p[2 * AF_MAX_RANK];
    int n;
    const char *mode;
    double cv;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "pad", p, 2 * AF_MAX_RANK, &n, true) && mil_get_str(c, "mode", &mode, "constant") &&
         mil_get_float(c, "constant_val", &cv, 0));
    int r = x->shape.rank;
    if (n % 2 || n / 2 > r) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "pad"), "pad needs an even count of at most %d entries", 2 * r);
    int m = strcmp(mode, "constant") ? strcmp(mode, "reflect") ? strcmp(mode, "replicate") ? -1 : 2 : 1 : 0;
    if (m < 0) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "mode"), "mode '%s' is not one of constant, reflect, replicate", mode);
    int64_t grow[AF_MAX_RANK];
    for (int k = 0; k < n / 2; k++) {
        int64_t d = x->shape.dim[r - n / 2 + k];
        grow[k] = p[2 * k] < 0 || p[2 * k + 1] < 0 || p[2 * k] > 1024 || p[2 * k + 1] > 1024 ? 1 : (d + p[2 * k] + p[2 * k + 1] + d - 1) / d;
    }
    NEED(fits_cap(c, af_shape_count(x->shape), n / 2, grow));
    af_tensor *y = x;
    for (int k = 0; k < n / 2 && y; k++) {
        int ax = r - n / 2 + k;
        int64_t d = y->shape.dim[ax], before = p[2 * k], after = p[2 * k + 1];
        if (before < 0 || after < 0 || before > 1024 || after > 1024) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "pad"), "pad entries must be in 0..1024");
        if (m == 1 && (before >= d || after >= d)) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "pad"), "reflect padding of %lld needs an axis longer than that", (long long)(before > after ? before : after));
        af_tensor *parts[2050];
        int np = 0;
        int64_t b[AF_MAX_RANK] = { 0 }, s[AF_MAX_RANK];
        for (int i = 0; i < r; i++) s[i] = y->shape.dim[i];
        for (int side = 0; side < 2; side++) {
            int64_t cnt = side ? after : before;
            if (side) parts[np++] = y;
            if (!cnt) continue;
            if (m == 0) { /* cnt copies of constant_val, broadcast from a one-thick slice: no large constant */
                af_shape os = { .rank = r };
                for (int i = 0; i < r; i++) os.dim[i] = i == ax ? cnt : 1;
                s[ax] = 1;
                parts[np++] = af_select(af_const_fill(y->g, os, 1.0f), fill(y, (float)cv), af_slice(y, b, s));
                s[ax] = d;
                continue;
            }
            s[ax] = 1;
            for (int64_t j = 0; j < cnt; j++) { /* outermost first */
                int64_t src = m == 2 ? (side ? d - 1 : 0) : side ? d - 2 - j : cnt - j;
                b[ax] = src;
                parts[np++] = af_slice(y, b, s);
            }
            s[ax] = d;
            b[ax] = 0;
        }
        if (np > 1) y = af_concat(np, parts, ax);
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* l2_norm: x / sqrt(sum(x^2) + epsilon) over the last three axes (coremltools' iOS 15
 * definition; all axes for rank < 3), or over `axes` where an older program gives them. */
static bool h_l2_norm(call *c, int op) {
    (void)op;
    int axes[AF_MAX_RANK], n;
    double eps;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "epsilon", &eps, 1e-6));
    if (mil_find(c, "axes")) NEED(axes_of(c, x, "axes", axes, &n));
    else {
        int r = x->shape.rank;
        n = r < 3 ? r : 3;
        for (int i = 0; i < n; i++) axes[i] = r - n + i;
    }
    af_tensor *ss = af_reduce_sum(af_square(x), n, axes, true);
    return mil_out(c, 0, af_div(x, af_sqrt(af_adds(ss, (float)eps))), MIL_VC_SAME);
}

/* upsample_nearest_neighbor with whole scale factors: each pixel repeated. */
static bool h_upsample_nn(call *c, int op) {
    (void)op;
    double sh, sw;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "scale_factor_height", &sh, 1) && mil_get_float(c, "scale_factor_width", &sw, 1));
    if (x->shape.rank != 4) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank 4 [N, C, H, W]");
    if (sh != floor(sh) || sw != floor(sw) || sh < 1 || sw < 1 || sh > 64 || sw > 64)
        return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "only whole scale factors 1..64 are supported");
    int64_t f2[2] = { (int64_t)sh, (int64_t)sw };
    NEED(fits_cap(c, af_shape_count(x->shape), 2, f2));
    const int64_t *d = x->shape.dim;
    int64_t e[5] = { d[0] * d[1], d[2], 1, d[3], 1 };
    af_shape os = { .rank = 5, .dim = { 1, 1, (int64_t)sh, 1, (int64_t)sw } };
    af_tensor *y = af_mul(mil_reshape_to(x, 5, e), af_const_fill(x->g, os, 1.0f)); /* x * 1 is exact */
    int64_t o[4] = { d[0], d[1], d[2] * (int64_t)sh, d[3] * (int64_t)sw };
    return mil_out(c, 0, y ? mil_reshape_to(y, 4, o) : NULL, MIL_VC_SAME);
}

/* dequantize and constexpr_affine_dequantize: (x - zero_point) * scale; quantize:
 * clip(round(x / scale) + zero_point)
 * into the output dtype's range. Per-channel scale and zero point lie along axis. */
static af_tensor *along(call *c, af_tensor *x, const char *name, int64_t axis, bool *ok) {
    af_tensor *p = mil_targ(c, name, false, NULL);
    *ok = p || !c->M->diag->st;
    if (!p || p->shape.rank == 0 || (p->shape.rank == 1 && p->shape.dim[0] == 1)) return p;
    int a = ir_norm_axis((int)axis, x->shape.rank);
    if (a < 0 || p->shape.rank != 1) { *ok = mil_cfail(c, AF_ERR_SHAPE, mil_find(c, name), "%s needs one value or one per entry of axis", name); return NULL; }
    int64_t d[AF_MAX_RANK];
    for (int i = 0; i < x->shape.rank; i++) d[i] = i == a ? p->shape.dim[0] : 1;
    return mil_reshape_to(p, x->shape.rank, d);
}

/* The quantized tensor `name`, its scale and zero point (NULL when absent) placed to
 * broadcast along axis; false with an error. */
static bool quant_args(call *c, const char *name, af_tensor **x, af_tensor **scale, af_tensor **zp) {
    int64_t axis;
    bool ok;
    *x = mil_targ(c, name, true, NULL);
    NEED(*x && mil_get_int(c, "axis", &axis, 0));
    *scale = along(c, *x, "scale", axis, &ok);
    NEED(ok);
    *zp = along(c, *x, "zero_point", axis, &ok);
    return ok && *scale;
}

static bool h_quant(call *c, int op) {
    const char *odt = "int8";
    af_tensor *x, *scale, *zp;
    NEED(quant_args(c, op == 2 ? "quantized_data" : "input", &x, &scale, &zp));
    if (op != 1) /* dequantize, and constexpr_affine_dequantize, whose inputs are constants */
        return mil_out(c, 0, af_mul(zp ? af_sub(x, zp) : x, scale), MIL_VC_FLOAT);
    double lo, hi;
    NEED(mil_get_str(c, "output_dtype", &odt, "int8"));
    if (!int_range(odt, &lo, &hi) || hi > 255) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "output_dtype"), "output_dtype must be int8 or uint8");
    af_tensor *q = round_even(af_div(x, scale));
    if (zp) q = af_add(q, zp);
    q = af_minimum(af_maximum(q, fill(x, (float)lo)), fill(x, (float)hi));
    return mil_out(c, 0, q, MIL_VC_INT);
}

/* batch_norm over axis 1: (x - mean) / sqrt(variance + epsilon) * gamma + beta. */
static bool h_batch_norm(call *c, int op) {
    (void)op;
    double eps;
    bool ok = true;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "epsilon", &eps, 1e-5));
    if (x->shape.rank < 2) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank >= 2");
    af_tensor *p[4];
    const char *names[4] = { "mean", "variance", "gamma", "beta" };
    for (int i = 0; i < 4 && ok; i++) {
        p[i] = along(c, x, names[i], 1, &ok);
        if (ok && !p[i] && i < 2) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument '%s'", names[i]);
    }
    NEED(ok);
    af_tensor *y = af_div(af_sub(x, p[0]), af_sqrt(af_adds(p[1], (float)eps)));
    if (p[2]) y = af_mul(y, p[2]);
    if (p[3]) y = af_add(y, p[3]);
    return mil_out(c, 0, y, MIL_VC_FLOAT);
}

/* gather_along_axis: y[.., i, ..] = x[.., indices[.., i, ..], ..] along axis, picked
 * exactly (a select and a max over one-hot matches; negative indices count back). */
static bool h_gather_along(call *c, int op) {
    (void)op;
    int64_t axis;
    af_tensor *x = X_("x"), *idx = x ? mil_targ(c, "indices", true, NULL) : NULL;
    NEED(idx && mil_get_int(c, "axis", &axis, 0));
    int r = x->shape.rank, a = ir_norm_axis((int)axis, r);
    if (a < 0 || idx->shape.rank != r || r + 1 > AF_MAX_RANK) return mil_cfail(c, AF_ERR_SHAPE, NULL, "indices need x's rank (at most %d) and axis in range", AF_MAX_RANK - 1);
    for (int i = 0; i < r; i++)
        if (i != a && idx->shape.dim[i] != x->shape.dim[i]) return mil_cfail(c, AF_ERR_SHAPE, NULL, "indices differ from x on axis %d", i);
    int64_t d = x->shape.dim[a], n = idx->shape.dim[a], xd[AF_MAX_RANK], id[AF_MAX_RANK];
    NEED(mil_guard_indices(c, "gather_along_axis", idx, d));
    NEED(fits_cap(c, af_shape_count(idx->shape), 1, &d));
    /* x as [.., 1, d, ..], indices as [.., n, 1, ..] */
    for (int i = 0, k = 0; i <= r; i++) {
        if (i == a) { xd[i] = 1; id[i] = n; continue; }
        if (i == a + 1) { xd[i] = d; id[i] = 1; k++; continue; }
        xd[i] = x->shape.dim[k];
        id[i] = idx->shape.dim[k];
        k++;
    }
    af_tensor *wrapped = af_add(idx, af_mul(af_less(idx, fill(idx, 0)), xfill(idx, (float)d)));
    af_tensor *hot = af_equal(mil_reshape_to(wrapped, r + 1, id), iota(x->g, r + 1, a + 1, d));
    int red = a + 1;
    af_tensor *y = af_reduce_max(af_select(hot, mil_reshape_to(x, r + 1, xd), fill(x, -INFINITY)), 1, &red, false);
    return mil_out(c, 0, y, MIL_VC_SAME);
}

const mil_op_entry mil_ops_ext[] = {
    { "cast", h_cast, 0 },
    { "floor", h_unary_ext, U_FLOOR }, { "ceil", h_unary_ext, U_CEIL }, { "round", h_unary_ext, U_ROUND },
    { "sign", h_unary_ext, U_SIGN }, { "exp2", h_unary_ext, U_EXP2 }, { "tan", h_unary_ext, U_TAN },
    { "sinh", h_unary_ext, U_SINH }, { "cosh", h_unary_ext, U_COSH }, { "softplus", h_unary_ext, U_SOFTPLUS },
    { "softsign", h_unary_ext, U_SOFTSIGN }, { "relu6", h_unary_ext, U_RELU6 },
    { "leaky_relu", h_act, A_LEAKY }, { "elu", h_act, A_ELU }, { "thresholded_relu", h_act, A_THRESHOLDED },
    { "sigmoid_hard", h_act, A_HARD_SIGMOID }, { "scaled_tanh", h_act, A_SCALED_TANH },
    { "linear_activation", h_act, A_LINEAR }, { "threshold", h_act, A_THRESHOLD }, { "clamped_relu", h_act, A_CLAMPED },
    { "floor_div", h_binary_ext, B_FLOOR_DIV }, { "mod", h_binary_ext, B_MOD }, { "logical_xor", h_binary_ext, B_XOR },
    { "reduce_l2_norm", h_reduce_ext, R_L2 }, { "reduce_l1_norm", h_reduce_ext, R_L1 },
    { "reduce_sum_square", h_reduce_ext, R_SUMSQ }, { "reduce_log_sum", h_reduce_ext, R_LOGSUM },
    { "reduce_log_sum_exp", h_reduce_ext, R_LSE }, { "reduce_prod", h_reduce_ext, R_PROD },
    { "reduce_argmax", h_argext, 0 }, { "reduce_argmin", h_argext, 1 },
    { "one_hot", h_one_hot, 0 }, { "cumsum", h_cumsum, 0 }, { "band_part", h_band_part, 0 },
    { "tile", h_tile, 0 }, { "pad", h_pad, 0 }, { "l2_norm", h_l2_norm, 0 },
    { "upsample_nearest_neighbor", h_upsample_nn, 0 },
    { "dequantize", h_quant, 0 }, { "quantize", h_quant, 1 },
    { "constexpr_affine_dequantize", h_quant, 2 },
    { "batch_norm", h_batch_norm, 0 }, { "gather_along_axis", h_gather_along, 0 },
    { NULL, NULL, 0 },
};
