/* Builders: validate operands, infer the shape, add the node. Errors stick to the
 * graph (the first one wins) and every builder passes NULL through. */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool dims_valid(af_shape s) {
    if (s.rank < 0 || s.rank > AF_MAX_RANK) return false;
    for (int i = 0; i < s.rank; i++)
        if (s.dim[i] < 1) return false;
    return true;
}

/* Valid dims whose element count af_shape_count refuses: beyond AF_MAX_ELEMENTS. */
static bool too_many_elements(af_shape s) {
    return dims_valid(s) && af_shape_count(s) == 0;
}

#define TOO_MANY_FIX "holds more than AF_MAX_ELEMENTS = 2^40 elements (or its element count " \
                     "overflows int64); use smaller dimensions or split the tensor into parts"

static char *dup_name(af_graph *g, const char *name, const char *prefix) {
    char buf[64];
    if (!name || !*name) {
        snprintf(buf, sizeof buf, "%s_%d", prefix, g->anon++);
        name = buf;
    }
    return ir_strdup(name);
}

/* Shapes of the operands as "[2,3] and [4]" for messages. */
static void operand_shapes(int nsrc, af_tensor *const *src, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < nsrc && i < 4 && k + 1 < n; i++) {
        if (i) k += (size_t)snprintf(buf + k, n - k, i == nsrc - 1 ? " and " : ", ");
        if (k < n) k += (size_t)ir_shape_str(src[i]->shape, buf + k, n - k);
    }
    if (nsrc > 4 && k < n) snprintf(buf + k, n - k, ", ...");
}

/* Constants, parameters and what is computed only from them take their user's dtype;
 * so do exact (integer or bool) values, which are never rounded whatever their dtype. */
static bool adapts(const af_tensor *t) {
    return t->op == IR_OP_CONST || (t->flags & (IR_TF_PARAM | IR_TF_HOSTVAL | IR_TF_EXACT));
}

af_tensor *ir_build(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a) {
    const char *name = ir_ops[op].name;
    af_graph *g = NULL;
    for (int i = 0; i < nsrc; i++)
        if (src[i]) { g = src[i]->g; break; }
    for (int i = 0; i < nsrc; i++) {
        if (!src[i]) {
            /* A NULL after an earlier failure is the pass-through; otherwise it is new. */
            if (!g || !g->error) ir_graph_fail(g, "%s: operand %d is NULL; pass a tensor built in this graph", name, i);
            return NULL;
        }
        if (src[i]->g != g) {
            ir_graph_fail(g, "%s: operand %d belongs to another graph; build all operands in one graph", name, i);
            return NULL;
        }
    }
    if (!g) { ir_fail(AF_ERR_INVALID, "%s: no operands", name); return NULL; }
    if (g->error) return NULL;
    /* Mixed precision needs an explicit cast; baked constants and parameters (fp32
     * masters held on the host) and values computed only from them adapt to their user,
     * so an fp16 input meets an af_parameter without one. */
    for (int i = 1; i < nsrc; i++) {
        if (src[i]->dtype != src[0]->dtype && !adapts(src[i]) && !adapts(src[0])) {
            ir_graph_fail(g, "%s: operand %d is %s but operand 0 is %s; insert af_cast so both match", name, i,
                          src[i]->dtype == AF_F16 ? "fp16" : "fp32", src[0]->dtype == AF_F16 ? "fp16" : "fp32");
            return NULL;
        }
    }
    ir_attrs local = { 0 };
    if (!a) a = &local;
    af_shape out;
    char err[400], shapes[200];
    if (!ir_infer_shape(op, nsrc, src, a, &out, err, sizeof err)) {
        operand_shapes(nsrc, src, shapes, sizeof shapes);
        ir_graph_fail(g, "%s: %s (operand shapes %s)", name, err, shapes);
        return NULL;
    }
    if (too_many_elements(out)) {
        char os[120];
        ir_shape_str(out, os, sizeof os);
        operand_shapes(nsrc, src, shapes, sizeof shapes);
        ir_graph_fail(g, "%s: the result shape %s " TOO_MANY_FIX " (operand shapes %s)", name, os, shapes);
        return NULL;
    }
    af_dtype dt = src[0]->dtype;
    bool host = true;
    for (int i = 0; i < nsrc; i++) host &= adapts(src[i]);
    for (int i = 0; i < nsrc && !host; i++)
        if (!adapts(src[i])) { dt = src[i]->dtype; break; }
    if (op == IR_OP_CAST) dt = a->to;
    af_tensor *t = ir_node_new(g, op, nsrc, src, out, dt, a);
    if (t && host && op != IR_OP_CAST) t->flags |= IR_TF_HOSTVAL;
    return t;
}

/* ------------------------------------------------------------------ leaves */

static af_tensor *leaf(af_graph *g, ir_op op, const char *name, af_dtype dt, af_shape s, const float *data,
                       bool borrow, const char *what) {
    if (!g) { ir_fail(AF_ERR_INVALID, "%s: graph is NULL", what); return NULL; }
    if (g->error) return NULL;
    if (!dims_valid(s) || too_many_elements(s)) {
        char buf[120] = "(too many dims)";
        if (s.rank >= 0 && s.rank <= AF_MAX_RANK) ir_shape_str(s, buf, sizeof buf);
        if (dims_valid(s))
            ir_graph_fail(g, "%s '%s': shape %s " TOO_MANY_FIX, what, name ? name : "", buf);
        else
            ir_graph_fail(g, "%s '%s': shape %s is invalid; use 0..%d dimensions, each >= 1", what, name ? name : "",
                          buf, AF_MAX_RANK);
        return NULL;
    }
    if (dt != AF_F32 && dt != AF_F16) { ir_graph_fail(g, "%s: unknown dtype %d; use AF_F32 or AF_F16", what, (int)dt); return NULL; }
    af_tensor *t = ir_node_new(g, op, 0, NULL, s, dt, NULL);
    if (!t) return NULL;
    t->name = dup_name(g, name, op == IR_OP_CONST ? "const" : "input");
    if (borrow) { /* the caller's memory: tensor_free leaves it, nothing writes it */
        if (!t->name) { ir_graph_fail(g, "%s: out of memory", what); return NULL; }
        t->data = (float *)data;
        t->flags |= IR_TF_BORROWED;
    } else if (data || op == IR_OP_CONST) {
        size_t n = (size_t)af_shape_count(s);
        t->data = malloc(n * sizeof(float) + 1);
        if (!t->data || !t->name) { ir_graph_fail(g, "%s: out of memory", what); return NULL; }
        if (data) memcpy(t->data, data, n * sizeof(float));
        else memset(t->data, 0, n * sizeof(float));
    }
    return t;
}

af_tensor *af_input(af_graph *g, const char *name, af_dtype dt, af_shape s) {
    return leaf(g, IR_OP_INPUT, name, dt, s, NULL, false, "af_input");
}

af_tensor *af_const(af_graph *g, const char *name, af_shape s, const float *data) {
    if (g && !g->error && !data) { ir_graph_fail(g, "af_const '%s': data is NULL", name ? name : ""); return NULL; }
    return leaf(g, IR_OP_CONST, name, AF_F32, s, data, false, "af_const");
}

af_tensor *ir_const_borrow(af_graph *g, const char *name, af_shape s, const float *data) {
    if (g && !g->error && !data) { ir_graph_fail(g, "ir_const_borrow '%s': data is NULL", name ? name : ""); return NULL; }
    return leaf(g, IR_OP_CONST, name, AF_F32, s, data, true, "ir_const_borrow");
}

af_tensor *af_const_fill(af_graph *g, af_shape s, float value) {
    af_tensor *t = leaf(g, IR_OP_CONST, NULL, AF_F32, s, NULL, false, "af_const_fill");
    if (t)
        for (int64_t i = 0, n = af_shape_count(s); i < n; i++) t->data[i] = value;
    return t;
}

af_tensor *af_parameter(af_graph *g, const char *name, af_shape s, const float *init) {
    af_tensor *t = leaf(g, IR_OP_INPUT, name, AF_F32, s, NULL, false, "af_parameter");
    if (!t) return NULL;
    size_t n = (size_t)af_shape_count(s);
    t->data = calloc(n + 1, sizeof(float));
    if (!t->data) { ir_graph_fail(g, "af_parameter: out of memory"); return NULL; }
    if (init) memcpy(t->data, init, n * sizeof(float));
    t->flags |= IR_TF_PARAM;
    return t;
}

/* ------------------------------------------------------------------ elementwise */

static af_tensor *bin(ir_op op, af_tensor *a, af_tensor *b) {
    af_tensor *s[2] = { a, b };
    return ir_build(op, 2, s, NULL);
}
af_tensor *af_add(af_tensor *a, af_tensor *b) { return bin(IR_OP_ADD, a, b); }
af_tensor *af_sub(af_tensor *a, af_tensor *b) { return bin(IR_OP_SUB, a, b); }
af_tensor *af_mul(af_tensor *a, af_tensor *b) { return bin(IR_OP_MUL, a, b); }
af_tensor *af_div(af_tensor *a, af_tensor *b) { return bin(IR_OP_REAL_DIV, a, b); }
af_tensor *af_maximum(af_tensor *a, af_tensor *b) { return bin(IR_OP_MAXIMUM, a, b); }
af_tensor *af_minimum(af_tensor *a, af_tensor *b) { return bin(IR_OP_MINIMUM, a, b); }
af_tensor *af_pow(af_tensor *a, af_tensor *b) { return bin(IR_OP_POW, a, b); }
af_tensor *af_greater(af_tensor *a, af_tensor *b) { return bin(IR_OP_GREATER, a, b); }
af_tensor *af_less(af_tensor *a, af_tensor *b) { return bin(IR_OP_LESS, a, b); }
af_tensor *af_equal(af_tensor *a, af_tensor *b) { return bin(IR_OP_EQUAL, a, b); }

af_tensor *af_select(af_tensor *cond, af_tensor *a, af_tensor *b) {
    af_tensor *s[3] = { cond, a, b };
    return ir_build(IR_OP_SELECT, 3, s, NULL);
}

static af_tensor *scal(ir_op op, af_tensor *x, float v) {
    ir_attrs a = { .scalar = v };
    return ir_build(op, 1, &x, &a);
}
af_tensor *af_adds(af_tensor *x, float s) { return scal(IR_OP_ADDS, x, s); }
af_tensor *af_muls(af_tensor *x, float s) { return scal(IR_OP_MULS, x, s); }

static af_tensor *un(ir_op op, af_tensor *x) { return ir_build(op, 1, &x, NULL); }
af_tensor *af_neg(af_tensor *x) { return un(IR_OP_NEG, x); }
af_tensor *af_abs(af_tensor *x) { return un(IR_OP_ABS, x); }
af_tensor *af_square(af_tensor *x) { return un(IR_OP_SQUARE, x); }
af_tensor *af_sqrt(af_tensor *x) { return un(IR_OP_SQRT, x); }
af_tensor *af_rsqrt(af_tensor *x) { return un(IR_OP_RSQRT, x); }
af_tensor *af_inverse(af_tensor *x) { return un(IR_OP_INVERSE, x); }
af_tensor *af_exp(af_tensor *x) { return un(IR_OP_EXP, x); }
af_tensor *af_log(af_tensor *x) { return un(IR_OP_LOG, x); }
af_tensor *af_tanh(af_tensor *x) { return un(IR_OP_TANH, x); }
af_tensor *af_sigmoid(af_tensor *x) { return un(IR_OP_SIGMOID, x); }
af_tensor *af_relu(af_tensor *x) { return un(IR_OP_RELU, x); }
af_tensor *af_silu(af_tensor *x) { return un(IR_OP_SILU, x); }
af_tensor *af_sin(af_tensor *x) { return un(IR_OP_SIN, x); }
af_tensor *af_cos(af_tensor *x) { return un(IR_OP_COS, x); }
af_tensor *af_erf(af_tensor *x) { return un(IR_OP_ERF, x); }
af_tensor *af_floor(af_tensor *x) { return un(IR_OP_FLOOR, x); }
af_tensor *af_atan(af_tensor *x) { return un(IR_OP_ATAN, x); }
af_tensor *af_asin(af_tensor *x) { return un(IR_OP_ASIN, x); }
af_tensor *af_acos(af_tensor *x) { return un(IR_OP_ACOS, x); }
af_tensor *af_atanh(af_tensor *x) { return un(IR_OP_ATANH, x); }

af_tensor *af_gelu(af_tensor *x, af_gelu_mode mode) {
    if (x && mode != AF_GELU_EXACT && mode != AF_GELU_TANH) {
        ir_graph_fail(x->g, "gelu: mode %d is unknown; use AF_GELU_EXACT or AF_GELU_TANH", (int)mode);
        return NULL;
    }
    ir_attrs a = { .mode = mode };
    return ir_build(IR_OP_GELU, 1, &x, &a);
}

af_tensor *af_cast(af_tensor *x, af_dtype to) {
    if (x && to != AF_F32 && to != AF_F16) {
        ir_graph_fail(x->g, "cast: unknown dtype %d; use AF_F32 or AF_F16", (int)to);
        return NULL;
    }
    ir_attrs a = { .to = to };
    return ir_build(IR_OP_CAST, 1, &x, &a);
}

/* ------------------------------------------------------------------ matmul */

af_tensor *af_matmul_w(af_tensor *x, af_tensor *wt) {
    af_tensor *s[2] = { x, wt };
    return ir_build(IR_OP_MATMUL_W, 2, s, NULL);
}

af_tensor *af_matmul(af_tensor *a, af_tensor *b, int transpose_a, int transpose_b) {
    af_tensor *s[2] = { a, b };
    ir_attrs at = { .ta = !!transpose_a, .tb = !!transpose_b };
    return ir_build(IR_OP_MATMUL, 2, s, &at);
}

/* ------------------------------------------------------------------ reductions */

static af_tensor *reduce(ir_op op, af_tensor *x, int naxes, const int *axes, int keep_dims) {
    if (!x) return ir_build(op, 1, &x, NULL);
    if (x->g->error) return NULL;
    const char *name = ir_ops[op].name;
    if (naxes < 1 || !axes) {
        ir_graph_fail(x->g, "%s: give at least one axis (got %d)", name, naxes);
        return NULL;
    }
    unsigned mask = 0;
    for (int i = 0; i < naxes; i++) {
        int ax = ir_norm_axis(axes[i], x->shape.rank);
        if (ax < 0) {
            char s[100];
            ir_shape_str(x->shape, s, sizeof s);
            ir_graph_fail(x->g, "%s: axis %d is out of range for shape %s; use -%d..%d", name, axes[i], s,
                          x->shape.rank, x->shape.rank - 1);
            return NULL;
        }
        if (mask & (1u << ax)) {
            ir_graph_fail(x->g, "%s: axis %d is listed twice", name, axes[i]);
            return NULL;
        }
        mask |= 1u << ax;
    }
    ir_attrs a = { .naxes = naxes, .keep_dims = !!keep_dims };
    a.ints[0] = mask;
    return ir_build(op, 1, &x, &a);
}
af_tensor *af_reduce_sum(af_tensor *x, int n, const int *ax, int kd) { return reduce(IR_OP_REDUCE_SUM, x, n, ax, kd); }
af_tensor *af_reduce_mean(af_tensor *x, int n, const int *ax, int kd) { return reduce(IR_OP_REDUCE_MEAN, x, n, ax, kd); }
af_tensor *af_reduce_max(af_tensor *x, int n, const int *ax, int kd) { return reduce(IR_OP_REDUCE_MAX, x, n, ax, kd); }
af_tensor *af_reduce_min(af_tensor *x, int n, const int *ax, int kd) { return reduce(IR_OP_REDUCE_MIN, x, n, ax, kd); }

af_tensor *af_softmax(af_tensor *x, int axis) {
    ir_attrs a = { .axis = axis };
    return ir_build(IR_OP_SOFTMAX, 1, &x, &a);
}

/* ------------------------------------------------------------------ layout */

af_tensor *af_transpose(af_tensor *x, const int *perm) {
    ir_attrs a = { 0 };
    if (x && !x->g->error && !perm) { ir_graph_fail(x->g, "transpose: perm is NULL"); return NULL; }
    if (x) for (int i = 0; i < x->shape.rank; i++) a.ints[i] = perm[i];
    return ir_build(IR_OP_TRANSPOSE, 1, &x, &a);
}

af_tensor *af_reshape(af_tensor *x, af_shape s) {
    ir_attrs a = { .naxes = s.rank };
    if (s.rank >= 0 && s.rank <= AF_MAX_RANK) memcpy(a.sizes, s.dim, sizeof(int64_t) * (size_t)s.rank);
    return ir_build(IR_OP_RESHAPE, 1, &x, &a);
}

af_tensor *af_slice(af_tensor *x, const int64_t *begin, const int64_t *size) {
    ir_attrs a = { 0 };
    if (x && !x->g->error && (!begin || !size)) { ir_graph_fail(x->g, "slice_by_size: begin or size is NULL"); return NULL; }
    if (x) for (int i = 0; i < x->shape.rank; i++) { a.ints[i] = begin[i]; a.sizes[i] = size[i]; }
    return ir_build(IR_OP_SLICE_BY_SIZE, 1, &x, &a);
}

af_tensor *af_concat(int n, af_tensor *const *xs, int axis) {
    if (n < 1 || !xs) { ir_fail(AF_ERR_INVALID, "concat: needs at least one operand"); return NULL; }
    if (n == 1) return xs[0];
    ir_attrs a = { .axis = axis };
    return ir_build(IR_OP_CONCAT, n, xs, &a);
}

af_status af_split(af_tensor *x, int axis, int n, const int64_t *sizes, af_tensor **out) {
    if (!out || n < 1) return ir_fail(AF_ERR_INVALID, "split: needs n >= 1 and an output array");
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (!x) return ir_fail(AF_ERR_INVALID, "split: x is NULL (an earlier builder failed: see af_graph_error)");
    if (x->g->error) return ir_fail(AF_ERR_INVALID, "split: %s", x->g->error);
    int ax = ir_norm_axis(axis, x->shape.rank);
    if (ax < 0) {
        ir_graph_fail(x->g, "split: axis %d is out of range for rank %d", axis, x->shape.rank);
        return AF_ERR_INVALID;
    }
    int64_t extent = x->shape.dim[ax], total = 0;
    if (!sizes && extent % n) {
        ir_graph_fail(x->g, "split: axis %d of extent %lld does not divide into %d equal parts; pass sizes", axis, (long long)extent, n);
        return AF_ERR_SHAPE;
    }
    for (int i = 0; i < n; i++) {
        int64_t si = sizes ? sizes[i] : extent / n;
        if (si < 1 || si > extent - total) { /* checked before adding, so the sum cannot wrap */
            ir_graph_fail(x->g, "split: sizes[%d] = %lld is not in 1..%lld (what axis %d of extent %lld has left)", i,
                          (long long)si, (long long)(extent - total), axis, (long long)extent);
            return AF_ERR_SHAPE;
        }
        total += si;
    }
    if (total != extent) {
        ir_graph_fail(x->g, "split: sizes add up to %lld but axis %d has extent %lld", (long long)total, axis, (long long)extent);
        return AF_ERR_SHAPE;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        ir_attrs a = { .axis = ax };
        a.ints[0] = off;
        a.sizes[0] = sizes ? sizes[i] : extent / n;
        out[i] = ir_build(IR_OP_SPLIT, 1, &x, &a);
        if (!out[i]) return AF_ERR_SHAPE;
        off += a.sizes[0];
    }
    return AF_OK;
}

/* ------------------------------------------------------------------ transformer ops */

/* Token ids are whole numbers: fed or baked ones are held exactly at every precision. */
static void mark_ids_exact(af_tensor *ids) {
    if (ids && (ids->op == IR_OP_INPUT || ids->op == IR_OP_CONST)) ids->flags |= IR_TF_EXACT;
}

af_tensor *af_embedding(af_tensor *table, af_tensor *ids) {
    mark_ids_exact(ids);
    return ir_build(IR_OP_EMBEDDING, 2, (af_tensor *[]){ table, ids }, NULL);
}

af_tensor *af_embedding_grad(af_tensor *dy, af_tensor *ids, int64_t vocab) {
    mark_ids_exact(ids);
    ir_attrs a = { 0 };
    a.ints[0] = vocab;
    return ir_build(IR_OP_EMBEDDING_GRAD, 2, (af_tensor *[]){ dy, ids }, &a);
}

/* ------------------------------------------------------------------ norms */

/* Missing gamma/beta become baked ones/zeros laid out along the normalised axis. */
static af_tensor *affine_default(af_tensor *x, int axis, float v) {
    af_shape s = { .rank = x->shape.rank };
    for (int i = 0; i < s.rank; i++) s.dim[i] = i == axis ? x->shape.dim[i] : 1;
    return af_const_fill(x->g, s, v);
}

static af_tensor *norm(ir_op op, af_tensor *x, af_tensor *gamma, af_tensor *beta, float eps, int groups) {
    if (!x) { /* ir_build records "operand 0 is NULL" unless an earlier error explains it */
        af_tensor *s[3] = { x, gamma, beta };
        return ir_build(op, op == IR_OP_RMS_NORM ? 2 : 3, s, NULL);
    }
    if (x->g->error) return NULL;
    int axis = (op == IR_OP_CHANNEL_LAYER_NORM || op == IR_OP_GROUP_NORM) ? 1 : x->shape.rank - 1;
    if (axis < 0 || axis >= x->shape.rank) {
        ir_graph_fail(x->g, "%s: x has rank %d; needs rank >= %d", ir_ops[op].name, x->shape.rank, axis + 1);
        return NULL;
    }
    if (!gamma) gamma = affine_default(x, axis, 1.0f);
    if (!beta && op != IR_OP_RMS_NORM) beta = affine_default(x, axis, 0.0f);
    ir_attrs a = { .eps = eps, .groups = groups };
    af_tensor *s[3] = { x, gamma, beta };
    return ir_build(op, op == IR_OP_RMS_NORM ? 2 : 3, s, &a);
}
af_tensor *af_rms_norm(af_tensor *x, af_tensor *gamma, float eps) { return norm(IR_OP_RMS_NORM, x, gamma, NULL, eps, 0); }
af_tensor *af_layer_norm(af_tensor *x, af_tensor *g, af_tensor *b, float eps) { return norm(IR_OP_LAYER_NORM, x, g, b, eps, 0); }
af_tensor *af_channel_layer_norm(af_tensor *x, af_tensor *g, af_tensor *b, float eps) { return norm(IR_OP_CHANNEL_LAYER_NORM, x, g, b, eps, 0); }
af_tensor *af_group_norm(af_tensor *x, int groups, af_tensor *g, af_tensor *b, float eps) { return norm(IR_OP_GROUP_NORM, x, g, b, eps, groups); }

/* ------------------------------------------------------------------ pool and conv */

static void pair(int dst[2], const int *src, int dflt) {
    dst[0] = src ? src[0] : dflt;
    dst[1] = src ? src[1] : dflt;
}

static af_tensor *pool(ir_op op, af_tensor *x, const int k[2], const int s[2], const int p[2]) {
    if (x && !x->g->error && !k) { ir_graph_fail(x->g, "%s: kernel is NULL", ir_ops[op].name); return NULL; }
    ir_attrs a = { 0 };
    pair(a.kernel, k, 1);
    pair(a.stride, s, 1);
    if (!s) pair(a.stride, k, 1);
    pair(a.pad, p, 0);
    return ir_build(op, 1, &x, &a);
}
af_tensor *af_avg_pool(af_tensor *x, const int k[2], const int s[2], const int p[2]) { return pool(IR_OP_AVG_POOL, x, k, s, p); }
af_tensor *af_max_pool(af_tensor *x, const int k[2], const int s[2], const int p[2]) { return pool(IR_OP_MAX_POOL, x, k, s, p); }

af_tensor *af_conv(af_tensor *x, af_tensor *w, const int stride[2], const int pad[2], const int dilation[2], int groups) {
    ir_attrs a = { .groups = groups };
    pair(a.stride, stride, 1);
    pair(a.pad, pad, 0);
    pair(a.dilation, dilation, 1);
    af_tensor *s[2] = { x, w };
    return ir_build(IR_OP_CONV, 2, s, &a);
}

af_tensor *ir_pool_grad(ir_op op, af_tensor *x, af_tensor *dy, const ir_attrs *pool) {
    ir_attrs a = { 0 };
    for (int i = 0; i < 2; i++) {
        a.kernel[i] = pool->kernel[i];
        a.stride[i] = pool->stride[i];
        a.pad[i] = pool->pad[i];
    }
    af_tensor *s[2] = { x, dy };
    return ir_build(op, 2, s, &a);
}

af_tensor *ir_conv_weight_grad(af_tensor *x, af_tensor *dy, int kh, int kw, const int stride[2], const int pad[2],
                               const int dilation[2]) {
    ir_attrs a = { .groups = 1, .kernel = { kh, kw } };
    pair(a.stride, stride, 1);
    pair(a.pad, pad, 0);
    pair(a.dilation, dilation, 1);
    af_tensor *s[2] = { x, dy };
    return ir_build(IR_OP_CONV_WEIGHT_GRAD, 2, s, &a);
}

af_tensor *ir_causal_attention(af_tensor *q, af_tensor *k, af_tensor *v, float scale, int layout) {
    ir_attrs a = { .scalar = scale, .mode = layout };
    af_tensor *s[3] = { q, k, v };
    return ir_build(IR_OP_CAUSAL_ATTENTION, 3, s, &a);
}

af_tensor *ir_causal_attention_grad(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *dy, float scale, int layout) {
    ir_attrs a = { .scalar = scale, .mode = layout };
    af_tensor *s[4] = { q, k, v, dy };
    return ir_build(IR_OP_CAUSAL_ATTENTION_GRAD, 4, s, &a);
}

void ir_attention_dims(const af_tensor *t, int64_t *heads, int64_t *seq) {
    af_shape q = t->src[0]->shape;
    *heads = q.dim[t->a.mode ? 2 : 1];
    *seq = q.dim[t->a.mode ? 1 : 2];
}

af_tensor *ir_rope(af_tensor *x, af_tensor *cos_t, af_tensor *sin_t, bool inverse) {
    ir_attrs a = { .mode = inverse ? 1 : 0 };
    af_tensor *s[3] = { x, cos_t, sin_t };
    return ir_build(IR_OP_ROPE, 3, s, &a);
}

af_tensor *ir_swiglu(af_tensor *a, af_tensor *b) {
    af_tensor *s[2] = { a, b };
    return ir_build(IR_OP_SWIGLU, 2, s, NULL);
}

af_tensor *ir_swiglu_grad(af_tensor *a, af_tensor *b, af_tensor *dy, bool of_b) {
    ir_attrs at = { .mode = of_b ? 1 : 0 };
    af_tensor *s[3] = { a, b, dy };
    return ir_build(IR_OP_SWIGLU_GRAD, 3, s, &at);
}

af_tensor *ir_softmax_xent(af_tensor *logits, af_tensor *targets) {
    af_tensor *s[2] = { logits, targets };
    return ir_build(IR_OP_SOFTMAX_XENT, 2, s, NULL);
}

af_tensor *ir_softmax_xent_grad(af_tensor *logits, af_tensor *targets, af_tensor *dy, bool unit_rows) {
    ir_attrs at = { .mode = unit_rows ? 1 : 0 };
    af_tensor *s[3] = { logits, targets, dy };
    return ir_build(IR_OP_SOFTMAX_XENT_GRAD, 3, s, &at);
}

af_tensor *af_conv_transpose(af_tensor *x, af_tensor *w, const int stride[2], const int pad[2], const int dilation[2]) {
    ir_attrs a = { .groups = 1 };
    pair(a.stride, stride, 1);
    pair(a.pad, pad, 0);
    pair(a.dilation, dilation, 1);
    af_tensor *s[2] = { x, w };
    return ir_build(IR_OP_CONV_TRANSPOSE, 2, s, &a);
}
