/* MIL -> IR for Core ML's indexing and layout ops: gather, scatter and
 * scatter_along_axis (along axis 0 the embedding rows; elsewhere exact picks: a select against one-hot matches and a max or sum,
 * never a multiply), stack, flatten2d, shape, fill, range_1d, reverse, prelu, crop,
 * depth_to_space / space_to_depth / pixel_shuffle / pixel_unshuffle (reshape and
 * transpose), upsample_bilinear (two interpolation matmuls), einsum with two operands,
 * and the constant-folded constexpr_cast and constexpr_blockwise_shift_scale. */
#include "mil/mil_call.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static af_tensor *fill(af_tensor *like, float v) { return like ? af_const_fill(like->g, (af_shape){ 0 }, v) : NULL; }

static af_tensor *exact_const(af_graph *g, af_shape s, const float *v) {
    af_tensor *t = af_const(g, NULL, s, v);
    if (t) t->flags |= IR_TF_EXACT;
    return t;
}

/* 0 .. d-1 at position axis of a rank-`rank` shape of ones. */
static af_tensor *iota(af_graph *g, int rank, int axis, int64_t d) {
    af_shape s = { .rank = rank };
    for (int i = 0; i < rank; i++) s.dim[i] = i == axis ? d : 1;
    float *v = malloc(sizeof(float) * (size_t)(d + 1));
    if (!v) return NULL;
    for (int64_t i = 0; i < d; i++) v[i] = (float)i;
    af_tensor *t = exact_const(g, s, v);
    free(v);
    return t;
}

static bool cap_ok(call *c, double elems) {
    if (elems <= (double)(1 << 24)) return true;
    return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "an intermediate would hold %.0f elements (at most 2^24)", elems);
}

/* Indices below zero count from the end of an axis of d. */
static af_tensor *wrap_index(af_tensor *idx, int64_t d) {
    float dv = (float)d;
    af_tensor *dt = idx ? exact_const(idx->g, (af_shape){ 0 }, &dv) : NULL;
    return idx ? af_add(idx, af_mul(af_less(idx, fill(idx, 0)), dt)) : NULL;
}

/* Indices wrapped as wrap_index does, every node of it held exactly (never rounded to
 * fp16), for the embedding rows, which read ids above 2048 too. */
static af_tensor *exact_rows(af_tensor *idx, int64_t d) {
    af_tensor *w = wrap_index(idx, d);
    if (!w) return NULL;
    w->flags |= IR_TF_EXACT;                       /* add(idx, mul(less(idx, 0), d)) */
    w->src[1]->flags |= IR_TF_EXACT;
    w->src[1]->src[0]->flags |= IR_TF_EXACT;
    return w;
}

/* Core ML counts indices -d..-1 from the end (ios15/16; later opsets leave them
 * undefined unless validate_indices = true, which makes them out of range). */
bool mil_guard_indices(call *c, const char *op, af_tensor *idx, int64_t d) {
    bool validate;
    NEED(mil_get_bool(c, "validate_indices", &validate, false));
    const char *os = c->M->f->opset ? c->M->f->opset : "";
    bool late = !strcmp(os, "ios17") || !strcmp(os, "ios18") || (!strncmp(os, "CoreML", 6) && strcmp(os, "CoreML5") &&
                strcmp(os, "CoreML6"));
    mil_index_guard gd = { op, c->s->line, c->s->col, idx, d, !(validate && late) };
    char why[300];
    if (idx->op == IR_OP_CONST && idx->data) /* known now: fail the statement, naming the index */
        return !mil_index_bad(&gd, idx->data, why, sizeof why) || mil_cfail(c, AF_ERR_INVALID, mil_find(c, "indices"), "%s", why);
    if (c->M->nguards == c->M->capguards) {
        int cap = c->M->capguards ? 2 * c->M->capguards : 8;
        mil_index_guard *ng = realloc(c->M->guards, sizeof *ng * (size_t)cap);
        if (!ng) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
        c->M->guards = ng;
        c->M->capguards = cap;
    }
    c->M->guards[c->M->nguards++] = gd;
    return true;
}

/* gather: y[pre, I, post] = x[pre, indices[I], post]. Along axis 0 it is the embedding
 * row (a row copy, what the emitter writes for it); elsewhere an exact one-hot pick. */
static bool h_gather(call *c, int op) {
    (void)op;
    int64_t axis, bd;
    af_tensor *x = X_("x"), *idx = x ? mil_targ(c, "indices", true, NULL) : NULL;
    NEED(idx && mil_get_int(c, "axis", &axis, 0) && mil_get_int(c, "batch_dims", &bd, 0));
    if (bd != 0) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "batch_dims"), "batch_dims other than 0 is not supported");
    int r = x->shape.rank, a = ir_norm_axis((int)axis, r), ri = idx->shape.rank;
    if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    NEED(mil_guard_indices(c, "gather", idx, x->shape.dim[a]));
    if (a == 0 && ri + r - 1 <= AF_MAX_RANK) return mil_out(c, 0, af_embedding(x, exact_rows(idx, x->shape.dim[0])), MIL_VC_SAME);
    int npre = a, npost = r - a - 1, R = npre + ri + 1 + npost;
    if (R > AF_MAX_RANK) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "x's rank plus the indices' rank is above %d", AF_MAX_RANK);
    int64_t d = x->shape.dim[a];
    NEED(cap_ok(c, (double)af_shape_count(x->shape) * (double)af_shape_count(idx->shape)));
    int64_t hd[AF_MAX_RANK], xd[AF_MAX_RANK], od[AF_MAX_RANK];
    int k = 0, o = 0;
    for (int i = 0; i < npre; i++) { hd[k] = 1; xd[k] = x->shape.dim[i]; od[o++] = x->shape.dim[i]; k++; }
    for (int i = 0; i < ri; i++) { hd[k] = idx->shape.dim[i]; xd[k] = 1; od[o++] = idx->shape.dim[i]; k++; }
    hd[k] = 1; xd[k] = d; k++;
    for (int i = a + 1; i < r; i++) { hd[k] = 1; xd[k] = x->shape.dim[i]; od[o++] = x->shape.dim[i]; k++; }
    af_tensor *hot = af_equal(mil_reshape_to(wrap_index(idx, d), R, hd), iota(x->g, R, npre + ri, d));
    int red = npre + ri;
    af_tensor *y = af_reduce_max(af_select(hot, mil_reshape_to(x, R, xd), fill(x, -INFINITY)), 1, &red, false);
    if (y && y->shape.rank != o) y = mil_reshape_to(y, o, od);
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* scatter (indices [N] along axis) and scatter_along_axis (indices shaped as updates):
 * out = data with the updates written (update), added (add), subtracted (sub), or
 * combined by max / min at the indexed positions along axis. Duplicate indices in
 * update mode keep the largest update (MIL leaves the order unspecified). */
static bool h_scatter(call *c, int along) {
    int64_t axis;
    const char *mode;
    af_tensor *data = mil_targ(c, "data", true, NULL);
    af_tensor *idx = data ? mil_targ(c, "indices", true, NULL) : NULL, *upd = idx ? mil_targ(c, "updates", true, NULL) : NULL;
    NEED(upd && mil_get_int(c, "axis", &axis, 0) && mil_get_str(c, "mode", &mode, "add"));
    int r = data->shape.rank, a = ir_norm_axis((int)axis, r);
    if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    if (r + 1 > AF_MAX_RANK) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "data's rank must be below %d", AF_MAX_RANK);
    if (upd->shape.rank != r) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "updates"), "updates need data's rank");
    int64_t n = upd->shape.dim[a], d = data->shape.dim[a];
    if (along ? idx->shape.rank != r : (idx->shape.rank != 1 || idx->shape.dim[0] != n))
        return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "indices"), along ? "indices need updates' shape" : "indices need one entry per update along axis");
    NEED(mil_guard_indices(c, along ? "scatter_along_axis" : "scatter", idx, d));
    if (!along && a == 0 && !strcmp(mode, "add")) /* the embedding's gradient row, as the emitter writes it */
        return mil_out(c, 0, af_add(data, af_embedding_grad(upd, exact_rows(idx, d), d)), MIL_VC_SAME);
    NEED(cap_ok(c, (double)af_shape_count(upd->shape) * (double)d));
    int64_t id[AF_MAX_RANK], ud[AF_MAX_RANK];
    for (int i = 0, k = 0; i <= r; i++) {
        if (i == a + 1) { id[i] = 1; ud[i] = 1; continue; }
        id[i] = along ? idx->shape.dim[k] : (k == a ? n : 1);
        ud[i] = upd->shape.dim[k];
        k++;
    }
    af_tensor *hot = af_equal(mil_reshape_to(wrap_index(idx, d), r + 1, id), iota(data->g, r + 1, a + 1, d));
    af_tensor *u = mil_reshape_to(upd, r + 1, ud);
    int red = a;
    af_tensor *y;
    if (!strcmp(mode, "add") || !strcmp(mode, "sub")) {
        af_tensor *s = af_reduce_sum(af_select(hot, u, fill(data, 0)), 1, &red, false);
        y = mode[0] == 'a' ? af_add(data, s) : af_sub(data, s);
    } else if (!strcmp(mode, "update") || !strcmp(mode, "max") || !strcmp(mode, "min")) {
        bool mn = !strcmp(mode, "min");
        af_tensor *any = af_reduce_max(hot, 1, &red, false);
        af_tensor *v = mn ? af_neg(af_reduce_max(af_select(hot, af_neg(u), fill(data, -INFINITY)), 1, &red, false))
                          : af_reduce_max(af_select(hot, u, fill(data, -INFINITY)), 1, &red, false);
        if (mode[0] == 'm') v = mn ? af_minimum(v, data) : af_maximum(v, data);
        y = af_select(any, v, data);
    } else {
        return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "mode"), "mode '%s' is not supported (update, add, sub, max, min)", mode);
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

static bool h_stack(call *c, int op) {
    (void)op;
    int64_t axis;
    const mil_arg *a = mil_find(c, "values");
    if (!a || a->val.kind != MIL_V_TUPLE || a->val.n < 1) return mil_cfail(c, AF_ERR_INVALID, a, "values must be a tuple (a, b, ...)");
    NEED(mil_get_int(c, "axis", &axis, 0));
    af_tensor **xs = mil_alloc(c->M->arena, sizeof *xs * (size_t)a->val.n);
    if (!xs) return mil_cfail(c, AF_ERR_NOMEM, a, "out of memory");
    for (int i = 0; i < a->val.n; i++) {
        NEED(xs[i] = mil_value_tensor(c, &a->val.items[i], a, NULL));
        int r = xs[i]->shape.rank, ax = ir_norm_axis((int)axis, r + 1);
        if (ax < 0 || r + 1 > AF_MAX_RANK) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
        int64_t d[AF_MAX_RANK];
        for (int j = 0, k = 0; j <= r; j++) d[j] = j == ax ? 1 : xs[i]->shape.dim[k++];
        NEED(xs[i] = mil_reshape_to(xs[i], r + 1, d));
    }
    return mil_out(c, 0, af_concat(a->val.n, xs, ir_norm_axis((int)axis, xs[0]->shape.rank)), MIL_VC_SAME);
}

static bool h_flatten2d(call *c, int op) {
    (void)op;
    int64_t axis;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, "axis", &axis, 1));
    int r = x->shape.rank, a = (int)(axis < 0 ? axis + r : axis);
    if (a < 0 || a > r) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axis"), "axis %lld is out of range", (long long)axis);
    int64_t d[2] = { 1, 1 };
    for (int i = 0; i < r; i++) d[i >= a] *= x->shape.dim[i];
    return mil_out(c, 0, mil_reshape_to(x, 2, d), MIL_VC_SAME);
}

static bool h_shape(call *c, int op) {
    (void)op;
    af_tensor *x = X_("x");
    NEED(x);
    float v[AF_MAX_RANK + 1];
    for (int i = 0; i < x->shape.rank; i++) v[i] = (float)x->shape.dim[i];
    af_shape s = { .rank = 1, .dim = { x->shape.rank } };
    if (!x->shape.rank) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "the shape of a scalar is an empty tensor, which the IR cannot hold");
    return mil_out(c, 0, exact_const(x->g, s, v), MIL_VC_INT);
}

/* The class of a scalar argument's literal (float when absent). */
static int lit_class(call *c, const char *name) {
    bool present;
    const mil_lit *l = mil_const_arg(c, name, &present, NULL);
    return present && l ? mil_dtype_class(l->type.dt) : MIL_VC_FLOAT;
}

static bool h_fill(call *c, int op) {
    (void)op;
    int64_t d[AF_MAX_RANK];
    int n;
    double v;
    NEED(mil_get_ints(c, "shape", d, AF_MAX_RANK, &n, true) && mil_get_float(c, "value", &v, 0));
    af_shape s = { .rank = n };
    double total = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] < 1) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "shape"), "shape entries must be >= 1");
        s.dim[i] = d[i];
        total *= (double)d[i];
    }
    NEED(cap_ok(c, total));
    int cls = lit_class(c, "value");
    af_tensor *t = af_const_fill(c->M->g, s, (float)v);
    if (t && cls != MIL_VC_FLOAT) t->flags |= IR_TF_EXACT;
    return mil_out(c, 0, t, cls == MIL_VC_BOOL ? MIL_VC_BOOL : cls);
}

static bool h_range(call *c, int op) {
    (void)op;
    double start, end, step;
    NEED(mil_get_float(c, "start", &start, 0) && mil_get_float(c, "end", &end, 0) && mil_get_float(c, "step", &step, 1));
    if (!mil_find(c, "end")) return mil_cfail(c, AF_ERR_INVALID, NULL, "missing argument 'end' (a constant)");
    double cnt = step != 0 ? ceil((end - start) / step) : -1;
    if (!(cnt >= 1) || cnt > (1 << 24)) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "range_1d needs constants giving 1..2^24 values");
    float *v = malloc(sizeof(float) * (size_t)cnt);
    if (!v) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < (int64_t)cnt; i++) v[i] = (float)(start + (double)i * step);
    af_shape s = { .rank = 1, .dim = { (int64_t)cnt } };
    int cls = lit_class(c, "start");
    af_tensor *t = cls == MIL_VC_FLOAT ? af_const(c->M->g, NULL, s, v) : exact_const(c->M->g, s, v);
    free(v);
    return mil_out(c, 0, t, cls);
}

static bool h_reverse(call *c, int op) {
    (void)op;
    int64_t ax[AF_MAX_RANK];
    int n;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "axes", ax, AF_MAX_RANK, &n, false));
    int r = x->shape.rank;
    if (n < 0) { n = r; for (int i = 0; i < r; i++) ax[i] = i; }
    af_tensor *y = x;
    for (int j = 0; j < n && y; j++) {
        int a = ir_norm_axis((int)ax[j], r);
        if (a < 0) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "axes"), "axis %lld is out of range", (long long)ax[j]);
        int64_t d = y->shape.dim[a], b[AF_MAX_RANK] = { 0 }, s[AF_MAX_RANK];
        if (d == 1) continue;
        if (d > 1024) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "axes"), "reverse along an axis of %lld (at most 1024)", (long long)d);
        for (int i = 0; i < r; i++) s[i] = i == a ? 1 : y->shape.dim[i];
        af_tensor **parts = malloc(sizeof *parts * (size_t)d);
        if (!parts) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
        for (int64_t k = 0; k < d; k++) { b[a] = d - 1 - k; parts[k] = af_slice(y, b, s); }
        y = af_concat((int)d, parts, a);
        free(parts);
    }
    return mil_out(c, 0, y, MIL_VC_SAME);
}

static bool h_prelu(call *c, int op) {
    (void)op;
    af_tensor *x = X_("x"), *al = x ? X_("alpha") : NULL;
    NEED(al);
    int r = x->shape.rank;
    if (r < 3 || al->shape.rank != 1 || al->shape.dim[0] != x->shape.dim[1])
        return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "alpha"), "x needs rank >= 3 and alpha one value per channel (axis 1)");
    int64_t d[AF_MAX_RANK];
    for (int i = 0; i < r; i++) d[i] = i == 1 ? x->shape.dim[1] : 1;
    af_tensor *y = af_select(af_greater(x, fill(x, 0)), x, af_mul(x, mil_reshape_to(al, r, d)));
    return mil_out(c, 0, y, MIL_VC_SAME);
}

static bool h_crop(call *c, int op) {
    (void)op;
    int64_t ch[2], cw[2];
    int nh, nw;
    af_tensor *x = X_("x");
    NEED(x && mil_get_ints(c, "crop_height", ch, 2, &nh, true) && mil_get_ints(c, "crop_width", cw, 2, &nw, true));
    int r = x->shape.rank;
    if (r < 2 || nh != 2 || nw != 2) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank >= 2 and crops of 2 entries each");
    int64_t b[AF_MAX_RANK] = { 0 }, s[AF_MAX_RANK];
    for (int i = 0; i < r; i++) s[i] = x->shape.dim[i];
    int64_t h = x->shape.dim[r - 2], w = x->shape.dim[r - 1];
    if (ch[0] < 0 || ch[1] < 0 || cw[0] < 0 || cw[1] < 0 || ch[0] + ch[1] >= h || cw[0] + cw[1] >= w)
        return mil_cfail(c, AF_ERR_INVALID, NULL, "the crops leave nothing of the %lld x %lld image", (long long)h, (long long)w);
    b[r - 2] = ch[0]; s[r - 2] = h - ch[0] - ch[1];
    b[r - 1] = cw[0]; s[r - 1] = w - cw[0] - cw[1];
    return mil_out(c, 0, af_slice(x, b, s), MIL_VC_SAME);
}

/* Block rearrangements of [N, C, H, W] as one rank-6 reshape, transpose, reshape. */
enum { DEPTH_TO_SPACE, SPACE_TO_DEPTH, PIXEL_SHUFFLE, PIXEL_UNSHUFFLE };

static bool h_blocks(call *c, int op) {
    static const char *const arg[] = { "block_size", "block_size", "upscale_factor", "downscale_factor" };
    static const int perm[4][6] = { { 0, 3, 4, 1, 5, 2 }, { 0, 3, 5, 1, 2, 4 }, { 0, 1, 4, 2, 5, 3 }, { 0, 1, 3, 5, 2, 4 } };
    int64_t b;
    af_tensor *x = X_("x");
    NEED(x && mil_get_int(c, arg[op], &b, 0));
    if (x->shape.rank != 4) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank 4 [N, C, H, W]");
    int64_t n = x->shape.dim[0], ch = x->shape.dim[1], h = x->shape.dim[2], w = x->shape.dim[3];
    bool up = op == DEPTH_TO_SPACE || op == PIXEL_SHUFFLE;
    if (b < 1 || b > 64 || (up ? ch % (b * b) : h % b || w % b))
        return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, arg[op]), "%s %lld does not divide the %s", arg[op], (long long)b, up ? "channels" : "image");
    int64_t d6[6], o[4];
    if (op == DEPTH_TO_SPACE) { int64_t t[6] = { n, b, b, ch / (b * b), h, w }; memcpy(d6, t, sizeof t); }
    else if (op == PIXEL_SHUFFLE) { int64_t t[6] = { n, ch / (b * b), b, b, h, w }; memcpy(d6, t, sizeof t); }
    else { int64_t t[6] = { n, ch, h / b, b, w / b, b }; memcpy(d6, t, sizeof t); }
    if (up) { o[0] = n; o[1] = ch / (b * b); o[2] = h * b; o[3] = w * b; }
    else { o[0] = n; o[1] = ch * b * b; o[2] = h / b; o[3] = w / b; }
    af_tensor *y = af_transpose(mil_reshape_to(x, 6, d6), perm[op]);
    return mil_out(c, 0, y ? mil_reshape_to(y, 4, o) : NULL, MIL_VC_SAME);
}

/* The [out, in] matrix of bilinear weights along one axis (coremltools' sampling:
 * align_corners maps the corners onto each other; else half-pixel centres, or plain
 * dst / scale when half_pixel_centers is false). */
static af_tensor *interp(af_graph *g, int64_t in, int64_t out, double scale, bool align, bool half) {
    float *m = calloc((size_t)(in * out), sizeof(float));
    if (!m) return NULL;
    for (int64_t o = 0; o < out; o++) {
        double src = align ? (out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0)
                   : half ? ((double)o + 0.5) / scale - 0.5 : (double)o / scale;
        if (src < 0) src = 0;
        if (src > (double)(in - 1)) src = (double)(in - 1);
        int64_t i0 = (int64_t)floor(src), i1 = i0 + 1 < in ? i0 + 1 : i0;
        double f = src - (double)i0;
        m[o * in + i0] += (float)(1 - f);
        m[o * in + i1] += (float)f;
    }
    af_shape s = { .rank = 2, .dim = { out, in } };
    af_tensor *t = af_const(g, NULL, s, m);
    free(m);
    return t;
}

static bool h_upsample_bilinear(call *c, int op) {
    (void)op;
    double sh, sw;
    bool align, half;
    af_tensor *x = X_("x");
    NEED(x && mil_get_float(c, "scale_factor_height", &sh, 1) && mil_get_float(c, "scale_factor_width", &sw, 1) &&
         mil_get_bool(c, "align_corners", &align, true));
    NEED(mil_get_bool(c, "half_pixel_centers", &half, !align));
    if (x->shape.rank != 4) return mil_cfail(c, AF_ERR_SHAPE, NULL, "x needs rank 4 [N, C, H, W]");
    int64_t n = x->shape.dim[0], ch = x->shape.dim[1], h = x->shape.dim[2], w = x->shape.dim[3];
    int64_t ho = (int64_t)floor((double)h * sh), wo = (int64_t)floor((double)w * sw);
    if (!(sh > 0 && sw > 0) || ho < 1 || wo < 1 || ho > 16384 || wo > 16384) return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "scale factors must give 1..16384 rows and columns");
    NEED(cap_ok(c, (double)(n * ch) * (double)ho * (double)wo) && cap_ok(c, (double)(h * ho + w * wo)));
    af_tensor *aw = interp(x->g, w, wo, sw, align, half), *ah = interp(x->g, h, ho, sh, align, half);
    int64_t d2[2] = { n * ch * h, w }, d3[3] = { n * ch, h, wo }, e2[2] = { n * ch * wo, h }, e4[4] = { n, ch, wo, ho };
    int p3[3] = { 0, 2, 1 }, p4[4] = { 0, 1, 3, 2 };
    af_tensor *y = af_matmul(mil_reshape_to(x, 2, d2), aw, 0, 1);                  /* [.., h, wo] */
    y = y ? af_transpose(mil_reshape_to(y, 3, d3), p3) : NULL;                       /* [nc, wo, h] */
    y = y ? af_matmul(mil_reshape_to(y, 2, e2), ah, 0, 1) : NULL;                    /* [nc*wo, ho] */
    y = y ? af_transpose(mil_reshape_to(y, 4, e4), p4) : NULL;                       /* [n, c, ho, wo] */
    return mil_out(c, 0, y, MIL_VC_SAME);
}

/* einsum of two operands, each index letter at most once per operand, checked here and
 * built by af_einsum (src/nn/einsum.c): the engine's native "nchw,nwhu->nchu" layer
 * reads back as the einsum op, every other equation as its decomposition. */
static bool h_einsum(call *c, int op) {
    (void)op;
    const char *eq;
    const mil_arg *va = mil_find(c, "values");
    if (!va || va->val.kind != MIL_V_TUPLE || va->val.n != 2) return mil_cfail(c, AF_ERR_UNSUPPORTED, va, "einsum needs values = (a, b): two operands");
    NEED(mil_get_str(c, "equation", &eq, NULL));
    af_tensor *t[2];
    for (int i = 0; i < 2; i++) NEED(t[i] = mil_value_tensor(c, &va->val.items[i], va, NULL));
    char in[2][AF_MAX_RANK + 1] = { "", "" }, outs[AF_MAX_RANK + 1] = "";
    const char *comma = strchr(eq, ','), *arrow = strstr(eq, "->");
    const mil_arg *ea = mil_find(c, "equation");
    if (!comma || !arrow || arrow < comma || comma - eq > AF_MAX_RANK || arrow - comma - 1 > AF_MAX_RANK || strlen(arrow + 2) > AF_MAX_RANK)
        return mil_cfail(c, AF_ERR_UNSUPPORTED, ea, "equation '%s' is not of the form ab,bc->ac with at most %d indices each", eq, AF_MAX_RANK);
    memcpy(in[0], eq, (size_t)(comma - eq));
    memcpy(in[1], comma + 1, (size_t)(arrow - comma - 1));
    strcpy(outs, arrow + 2);
    int64_t size[128] = { 0 };
    for (int k = 0; k < 2; k++) {
        if ((int)strlen(in[k]) != t[k]->shape.rank) return mil_cfail(c, AF_ERR_SHAPE, ea, "operand %d has rank %d but '%s' names %d axes", k, t[k]->shape.rank, in[k], (int)strlen(in[k]));
        for (int i = 0; in[k][i]; i++) {
            unsigned char ch = (unsigned char)in[k][i];
            if (ch >= 128 || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) || strchr(in[k] + i + 1, ch))
                return mil_cfail(c, AF_ERR_UNSUPPORTED, ea, "equation '%s': indices must be letters, each at most once per operand", eq);
            if (size[ch] && size[ch] != t[k]->shape.dim[i]) return mil_cfail(c, AF_ERR_SHAPE, ea, "index '%c' has two sizes", ch);
            size[ch] = t[k]->shape.dim[i];
        }
    }
    for (int i = 0; outs[i]; i++)
        if ((unsigned char)outs[i] >= 128 || !size[(unsigned char)outs[i]] || strchr(outs + i + 1, outs[i]))
            return mil_cfail(c, AF_ERR_UNSUPPORTED, ea, "equation '%s': each result index must come from an operand, once", eq);
    /* af_einsum decomposes it (or builds the native nchw,nwhu->nchu layer) */
    return mil_out(c, 0, af_einsum(t[0]->g, eq, 2, t), MIL_VC_SAME);
}

/* constexpr_cast: a constant in another dtype (fp16 rounds it). */
static bool h_constexpr_cast(call *c, int op) {
    (void)op;
    const char *dt;
    af_tensor *x = X_("source_val");
    NEED(x && mil_get_str(c, "output_dtype", &dt, NULL));
    if (!strcmp(dt, "fp16") || !strcmp(dt, "fp32")) return mil_out(c, 0, af_cast(x, dt[2] == '1' ? AF_F16 : AF_F32), MIL_VC_FLOAT);
    return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "output_dtype"), "output_dtype '%s' is not supported (fp16, fp32)", dt);
}

/* constexpr_blockwise_shift_scale: scale * (data - offset), scale and offset holding
 * one value per block (the block size on each axis is data's size over theirs). */
static af_tensor *blockwise(call *c, af_tensor *data, af_tensor *p, const char *name) {
    int r = data->shape.rank;
    if (p->shape.rank != r) { mil_cfail(c, AF_ERR_SHAPE, mil_find(c, name), "%s needs data's rank", name); return NULL; }
    for (int i = 0; i < r; i++)
        if (p->shape.dim[i] < 1 || data->shape.dim[i] % p->shape.dim[i]) { mil_cfail(c, AF_ERR_SHAPE, mil_find(c, name), "%s's axis %d does not divide data's", name, i); return NULL; }
    /* expand p to data's shape on the host: it is a constant */
    if (p->op != IR_OP_CONST || !p->data) { mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, name), "%s must be a constant", name); return NULL; }
    int64_t n = af_shape_count(data->shape), st[AF_MAX_RANK], ps[AF_MAX_RANK];
    ir_strides(data->shape, st);
    ir_strides(p->shape, ps);
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    if (!v) { mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory"); return NULL; }
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0, rem = e;
        for (int i = 0; i < r; i++) {
            int64_t coord = rem / st[i];
            rem %= st[i];
            off += coord / (data->shape.dim[i] / p->shape.dim[i]) * ps[i];
        }
        v[e] = p->data[off];
    }
    af_tensor *t = af_const(data->g, NULL, data->shape, v);
    free(v);
    return t;
}

static bool h_blockwise_shift_scale(call *c, int op) {
    (void)op;
    af_tensor *d = X_("data"), *s = d ? X_("scale") : NULL;
    NEED(s);
    af_tensor *o = mil_targ(c, "offset", false, NULL);
    if (!o && c->M->diag->st) return false;
    NEED(cap_ok(c, (double)af_shape_count(d->shape)));
    af_tensor *se = blockwise(c, d, s, "scale"), *oe = o ? blockwise(c, d, o, "offset") : NULL;
    NEED(se && (!o || oe));
    af_tensor *y = af_mul(oe ? af_sub(d, oe) : d, se);
    return mil_out(c, 0, y, MIL_VC_FLOAT);
}

/* constexpr_lut_to_dense, folded when read: each index picks its palette entry.
 * iOS 16: indices are uint8 bytes of packed nbits-wide indices (LSB first), lut holds
 * 2^nbits values and shape the result's shape. iOS 18: indices are a uintN tensor of
 * the result's shape and lut [blocks..., 2^nbits, 1] gives each block its palette
 * (vector_size 1). */
static bool h_lut(call *c, int op) {
    (void)op;
    int cls = MIL_VC_FLOAT;
    af_tensor *ind = X_("indices"), *lut = ind ? mil_targ(c, "lut", true, &cls) : NULL;
    NEED(lut);
    if (ind->op != IR_OP_CONST || lut->op != IR_OP_CONST || !ind->data || !lut->data)
        return mil_cfail(c, AF_ERR_UNSUPPORTED, NULL, "indices and lut must be constants");
    int64_t shp[AF_MAX_RANK];
    int ns;
    NEED(mil_get_ints(c, "shape", shp, AF_MAX_RANK, &ns, false));
    af_shape os = { 0 };
    float *v = NULL;
    if (ns >= 0) { /* iOS 16 */
        int64_t k = af_shape_count(lut->shape), n = 1;
        int bits = 0;
        while ((1 << bits) < k && bits < 8) bits++;
        if (lut->shape.rank != 1 || (1 << bits) != k || !bits) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "lut"), "lut needs 2, 4, 16, 64 or 256 entries");
        os.rank = ns;
        for (int i = 0; i < ns; i++) {
            if (shp[i] < 1) return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "shape"), "shape entries must be >= 1");
            os.dim[i] = shp[i];
            n *= shp[i];
            if (n > (1 << 24)) return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "shape"), "the result is too large");
        }
        if (af_shape_count(ind->shape) * 8 < n * bits) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "indices"), "indices hold fewer than %lld %d-bit entries", (long long)n, bits);
        if (!(v = malloc(sizeof(float) * (size_t)n))) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = i * bits;
            unsigned byte0 = (unsigned)ind->data[pos / 8], byte1 = pos / 8 + 1 < af_shape_count(ind->shape) ? (unsigned)ind->data[pos / 8 + 1] : 0;
            unsigned q = ((byte0 | byte1 << 8) >> (pos % 8)) & ((1u << bits) - 1);
            v[i] = lut->data[q];
        }
    } else { /* iOS 18 */
        int r = ind->shape.rank;
        if (lut->shape.rank != r + 2 || lut->shape.dim[r + 1] != 1)
            return mil_cfail(c, AF_ERR_UNSUPPORTED, mil_find(c, "lut"), "lut must be [blocks per axis..., palette, 1] (vector_size 1)");
        int64_t k = lut->shape.dim[r], n = af_shape_count(ind->shape), st[AF_MAX_RANK], ls[AF_MAX_RANK + 2];
        for (int i = 0; i < r; i++)
            if (ind->shape.dim[i] % lut->shape.dim[i]) return mil_cfail(c, AF_ERR_SHAPE, mil_find(c, "lut"), "lut's axis %d does not divide the indices'", i);
        os = ind->shape;
        ir_strides(ind->shape, st);
        ir_strides(lut->shape, ls);
        if (!(v = malloc(sizeof(float) * (size_t)(n + 1)))) return mil_cfail(c, AF_ERR_NOMEM, NULL, "out of memory");
        for (int64_t e = 0; e < n; e++) {
            float q = ind->data[e];
            if (!(q >= 0 && q < (float)k)) { free(v); return mil_cfail(c, AF_ERR_INVALID, mil_find(c, "indices"), "index %g is outside the palette of %lld", q, (long long)k); }
            int64_t off = (int64_t)q * ls[r], rem = e;
            for (int i = 0; i < r; i++) {
                off += rem / st[i] / (ind->shape.dim[i] / lut->shape.dim[i]) * ls[i];
                rem %= st[i];
            }
            v[e] = lut->data[off];
        }
    }
    af_tensor *t = af_const(c->M->g, NULL, os, v);
    free(v);
    if (t && cls != MIL_VC_FLOAT) t->flags |= IR_TF_EXACT;
    return mil_out(c, 0, t, cls);
}

const mil_op_entry mil_ops_layout[] = {
    { "constexpr_lut_to_dense", h_lut, 0 },
    { "gather", h_gather, 0 }, { "scatter", h_scatter, 0 }, { "scatter_along_axis", h_scatter, 1 },
    { "stack", h_stack, 0 }, { "flatten2d", h_flatten2d, 0 }, { "shape", h_shape, 0 }, { "fill", h_fill, 0 },
    { "range_1d", h_range, 0 }, { "reverse", h_reverse, 0 }, { "prelu", h_prelu, 0 }, { "crop", h_crop, 0 },
    { "depth_to_space", h_blocks, DEPTH_TO_SPACE }, { "space_to_depth", h_blocks, SPACE_TO_DEPTH },
    { "pixel_shuffle", h_blocks, PIXEL_SHUFFLE }, { "pixel_unshuffle", h_blocks, PIXEL_UNSHUFFLE },
    { "upsample_bilinear", h_upsample_bilinear, 0 }, { "einsum", h_einsum, 0 },
    { "constexpr_cast", h_constexpr_cast, 0 }, { "constexpr_blockwise_shift_scale", h_blockwise_shift_scale, 0 },
    { NULL, NULL, 0 },
};
