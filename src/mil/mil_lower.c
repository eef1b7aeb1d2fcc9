/* Op lowerings: the MIL statements each IR op becomes. Ops with a MIL twin map to it;
 * the rest are decomposed into MIL ops in a fixed canonical form that the reader's
 * fusion pass (mil_fuse.c) recognises, so a round trip restores the original op.
 * Argument names and defaults follow coremltools' op definitions (iOS15..iOS18). */
#include "mil/mil_emit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh name "<v>_<suffix>" for an intermediate. */
static const char *sub(mil_emitter *e, const char *v, const char *suffix) {
    char b[300];
    snprintf(b, sizeof b, "%s_%s", v, suffix);
    return mil_unique_name(e, b);
}

static const char *cname(const char *v, const char *arg, char *buf, size_t n) {
    snprintf(buf, n, "%s_%s", v, arg);
    return buf;
}

#define TYPE(buf, dt, shape) char buf[200]; mil_type_str(buf, sizeof buf, dt, shape)
#define CN(arg) cname(v, arg, nb, sizeof nb)

/* gamma/beta in the layout MIL broadcasts against x: [D] for the last axis, [C, 1, ...]
 * for the channel axis. A constant is re-emitted in that shape; a computed one reshaped. */
static const char *affine(mil_emitter *e, const char *v, const char *what, af_tensor *p, af_shape want) {
    char nb[300];
    if (ir_shape_eq(p->shape, want)) return mil_operand(e, p);
    if (p->op == IR_OP_CONST) return mil_const_f16(e, cname(v, what, nb, sizeof nb), want, p->data);
    const char *x = mil_operand(e, p);
    const char *shape = mil_const_ints(e, cname(v, what, nb, sizeof nb), want.rank, want.dim, false);
    const char *r = sub(e, v, what);
    TYPE(ty, "fp16", want);
    mil_kv kv[2] = { { "shape", shape }, { "x", x } };
    mil_stmt(e, ty, r, "reshape", 2, kv);
    return r;
}

/* layer_norm without gamma/beta (its epsilon fp32, exact), then mul gamma, add beta. */
static void norm_affine(mil_emitter *e, af_tensor *t, const char *v, const char *x, af_shape xs, int axis,
                        af_shape want) {
    char nb[300];
    int64_t ax = axis;
    const char *axes = mil_const_ints(e, CN("axes"), 1, &ax, false);
    const char *eps = mil_const_f32_scalar(e, CN("epsilon"), t->a.eps);
    const char *ln = sub(e, v, "ln");
    TYPE(ty, "fp16", xs);
    mil_kv kv[3] = { { "axes", axes }, { "epsilon", eps }, { "x", x } };
    mil_stmt(e, ty, ln, "layer_norm", 3, kv);
    if (t->op == IR_OP_GROUP_NORM) { /* back to x's shape */
        const char *shape = mil_const_ints(e, CN("shape"), t->shape.rank, t->shape.dim, false);
        const char *r = sub(e, v, "ungrouped");
        TYPE(tx, "fp16", t->shape);
        mil_kv kr[2] = { { "shape", shape }, { "x", ln } };
        mil_stmt(e, tx, r, "reshape", 2, kr);
        ln = r;
    }
    TYPE(tx, "fp16", t->shape);
    const char *g = affine(e, v, "gamma", t->src[1], want);
    const char *sc = sub(e, v, "scaled");
    mil_kv km[2] = { { "x", ln }, { "y", g } };
    mil_stmt(e, tx, sc, "mul", 2, km);
    const char *b = affine(e, v, "beta", t->src[2], want);
    mil_kv ka[2] = { { "x", sc }, { "y", b } };
    mil_stmt(e, tx, v, "add", 2, ka);
}

static void lower_norm(mil_emitter *e, af_tensor *t, const char *v, const char *x) {
    char nb[300];
    af_shape xs = t->shape, want = { .rank = 1 };
    int r = xs.rank;
    bool channel = t->op == IR_OP_CHANNEL_LAYER_NORM || t->op == IR_OP_GROUP_NORM;
    want.dim[0] = channel ? xs.dim[1] : xs.dim[r - 1];
    if (channel) {
        want.rank = r - 1;
        for (int i = 1; i < want.rank; i++) want.dim[i] = 1;
    }
    TYPE(tx, "fp16", xs);
    if (t->op == IR_OP_RMS_NORM) { /* x * rsqrt(mean(x*x) + eps) * gamma */
        const char *sq = sub(e, v, "sq");
        mil_kv k1[2] = { { "x", x }, { "y", x } };
        mil_stmt(e, tx, sq, "mul", 2, k1);
        int64_t ax = r - 1;
        const char *axes = mil_const_ints(e, CN("axes"), 1, &ax, false);
        const char *keep = mil_const_bool(e, CN("keep_dims"), true);
        af_shape ms = xs;
        ms.dim[r - 1] = 1;
        TYPE(tm, "fp16", ms);
        const char *mean = sub(e, v, "ms");
        mil_kv k2[3] = { { "axes", axes }, { "keep_dims", keep }, { "x", sq } };
        mil_stmt(e, tm, mean, "reduce_mean", 3, k2);
        const char *eps = mil_const_f32_scalar(e, CN("epsilon"), t->a.eps);
        const char *rs = sub(e, v, "rs");
        mil_kv k3[2] = { { "epsilon", eps }, { "x", mean } };
        mil_stmt(e, tm, rs, "rsqrt", 2, k3);
        const char *xn = sub(e, v, "xn");
        mil_kv k4[2] = { { "x", x }, { "y", rs } };
        mil_stmt(e, tx, xn, "mul", 2, k4);
        const char *g = affine(e, v, "gamma", t->src[1], want);
        mil_kv k5[2] = { { "x", xn }, { "y", g } };
        mil_stmt(e, tx, v, "mul", 2, k5);
        return;
    }
    if (t->op != IR_OP_GROUP_NORM) {
        norm_affine(e, t, v, x, xs, t->op == IR_OP_LAYER_NORM ? r - 1 : 1, want);
        return;
    }
    /* group_norm: [N, C, ...] -> [N, G, C/G * ...], layer_norm over the last axis. */
    af_shape gs = { .rank = 3, .dim = { xs.dim[0], t->a.groups, af_shape_count(xs) / (xs.dim[0] * t->a.groups) } };
    const char *shape = mil_const_ints(e, CN("groups_shape"), 3, gs.dim, false);
    const char *grouped = sub(e, v, "grouped");
    TYPE(tg, "fp16", gs);
    mil_kv kr[2] = { { "shape", shape }, { "x", x } };
    mil_stmt(e, tg, grouped, "reshape", 2, kr);
    norm_affine(e, t, v, grouped, gs, 2, want);
}

static void lower_pool_conv(mil_emitter *e, af_tensor *t, const char *v, const char *x, const char *y) {
    char nb[300];
    TYPE(ty, "fp16", t->shape);
    int64_t pad[4] = { t->a.pad[0], t->a.pad[0], t->a.pad[1], t->a.pad[1] };
    int64_t st[2] = { t->a.stride[0], t->a.stride[1] };
    mil_kv kv[9];
    int n = 0;
    if (t->op == IR_OP_AVG_POOL || t->op == IR_OP_MAX_POOL) {
        int64_t k[2] = { t->a.kernel[0], t->a.kernel[1] };
        kv[n++] = (mil_kv){ "kernel_sizes", mil_const_ints(e, CN("kernel_sizes"), 2, k, false) };
    } else {
        int64_t d[2] = { t->a.dilation[0], t->a.dilation[1] };
        kv[n++] = (mil_kv){ "dilations", mil_const_ints(e, CN("dilations"), 2, d, false) };
        kv[n++] = (mil_kv){ "groups", mil_const_int(e, CN("groups"), t->op == IR_OP_CONV ? t->a.groups : 1) };
        kv[n++] = (mil_kv){ "weight", y };
    }
    kv[n++] = (mil_kv){ "pad", mil_const_ints(e, CN("pad"), 4, pad, false) };
    kv[n++] = (mil_kv){ "pad_type", mil_const_string(e, CN("pad_type"), "custom") };
    kv[n++] = (mil_kv){ "strides", mil_const_ints(e, CN("strides"), 2, st, false) };
    if (t->op == IR_OP_AVG_POOL || t->op == IR_OP_MAX_POOL)
        kv[n++] = (mil_kv){ "ceil_mode", mil_const_bool(e, CN("ceil_mode"), false) };
    if (t->op == IR_OP_AVG_POOL)
        kv[n++] = (mil_kv){ "exclude_padding_from_average", mil_const_bool(e, CN("exclude_padding_from_average"), false) };
    kv[n++] = (mil_kv){ "x", x };
    mil_stmt(e, ty, v, ir_ops[t->op].name, n, kv);
}

/* embedding: gather(table, cast(ids, int32), axis 0). embedding_grad: scatter with mode
 * add of dy's rows (flattened to [N, row...]) into a zero [V, row...] table at the ids
 * (flattened to [N]). The reader maps both back to their rows. */
static void lower_embedding(mil_emitter *e, af_tensor *t, const char *v, const char *x, const char *ids) {
    char nb[300];
    af_tensor *it = t->src[1];
    int64_t n = af_shape_count(it->shape);
    af_shape flat = { .rank = 1, .dim = { n } };
    mil_kv kv[6];
    if (t->op == IR_OP_EMBEDDING_GRAD && it->shape.rank != 1) {
        TYPE(tf, "fp16", flat);
        const char *f = sub(e, v, "ids_flat");
        kv[0] = (mil_kv){ "shape", mil_const_ints(e, CN("ids_shape"), 1, flat.dim, false) }, kv[1] = (mil_kv){ "x", ids };
        mil_stmt(e, tf, f, "reshape", 2, kv);
        ids = f;
        af_shape ds = t->shape; /* [N, row...] */
        ds.dim[0] = n;
        TYPE(td, "fp16", ds);
        const char *d = sub(e, v, "dy_rows");
        kv[0] = (mil_kv){ "shape", mil_const_ints(e, CN("dy_shape"), ds.rank, ds.dim, false) }, kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, td, d, "reshape", 2, kv);
        x = d;
    }
    TYPE(ti, "int32", t->op == IR_OP_EMBEDDING ? it->shape : flat);
    const char *ii = sub(e, v, "ids");
    kv[0] = (mil_kv){ "dtype", mil_const_string(e, CN("dtype"), "int32") }, kv[1] = (mil_kv){ "x", ids };
    mil_stmt(e, ti, ii, "cast", 2, kv);
    TYPE(ty, "fp16", t->shape);
    kv[0] = (mil_kv){ "axis", mil_const_int(e, CN("axis"), 0) };
    kv[1] = (mil_kv){ "validate_indices", mil_const_bool(e, CN("validate_indices"), false) };
    if (t->op == IR_OP_EMBEDDING) {
        kv[2] = (mil_kv){ "batch_dims", mil_const_int(e, CN("batch_dims"), 0) };
        kv[3] = (mil_kv){ "indices", ii }, kv[4] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "gather", 5, kv);
        return;
    }
    int64_t cnt = af_shape_count(t->shape);
    float *zeros = calloc((size_t)cnt + 1, sizeof *zeros);
    if (!zeros) { e->st = AF_ERR_NOMEM; return; }
    kv[2] = (mil_kv){ "data", mil_const_f16(e, CN("zeros"), t->shape, zeros) };
    free(zeros);
    kv[3] = (mil_kv){ "indices", ii };
    kv[4] = (mil_kv){ "mode", mil_const_string(e, CN("mode"), "add") };
    kv[5] = (mil_kv){ "updates", x };
    mil_stmt(e, ty, v, "scatter", 6, kv);
}

bool mil_lower(mil_emitter *e, af_tensor *t, const char *v) {
    char nb[300];
    TYPE(ty, "fp16", t->shape);
    const char *x = t->nsrc > 0 ? mil_operand(e, t->src[0]) : NULL;
    /* norms place gamma/beta themselves (affine) */
    const char *y = t->nsrc > 1 && ir_ops[t->op].kind != IR_KIND_NORM ? mil_operand(e, t->src[1]) : NULL;
    const char *name = ir_ops[t->op].name;
    mil_kv kv[6];
    switch (t->op) {
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_REAL_DIV:
    case IR_OP_MAXIMUM: case IR_OP_MINIMUM: case IR_OP_POW:
        kv[0] = (mil_kv){ "x", x }, kv[1] = (mil_kv){ "y", y };
        mil_stmt(e, ty, v, name, 2, kv);
        return true;
    case IR_OP_GREATER: case IR_OP_LESS: case IR_OP_EQUAL: { /* bool result, cast back to fp16 */
        TYPE(tb, "bool", t->shape);
        const char *b = sub(e, v, "bool");
        kv[0] = (mil_kv){ "x", x }, kv[1] = (mil_kv){ "y", y };
        mil_stmt(e, tb, b, name, 2, kv);
        kv[0] = (mil_kv){ "dtype", mil_const_string(e, CN("dtype"), "fp16") }, kv[1] = (mil_kv){ "x", b };
        mil_stmt(e, ty, v, "cast", 2, kv);
        return true;
    }
    case IR_OP_SELECT: { /* cond != 0 as a bool, then select */
        TYPE(tb, "bool", t->src[0]->shape);
        const char *a = y, *b = mil_operand(e, t->src[2]);
        const char *zero = mil_const_f16_scalar(e, CN("zero"), 0.0f);
        const char *c = sub(e, v, "cond");
        kv[0] = (mil_kv){ "x", x }, kv[1] = (mil_kv){ "y", zero };
        mil_stmt(e, tb, c, "not_equal", 2, kv);
        kv[0] = (mil_kv){ "a", a }, kv[1] = (mil_kv){ "b", b }, kv[2] = (mil_kv){ "cond", c };
        mil_stmt(e, ty, v, "select", 3, kv);
        return true;
    }
    case IR_OP_ADDS: case IR_OP_MULS: case IR_OP_NEG:
        kv[0] = (mil_kv){ "x", x };
        kv[1] = (mil_kv){ "y", mil_const_f16_scalar(e, CN("y"), t->op == IR_OP_NEG ? -1.0f : t->a.scalar) };
        mil_stmt(e, ty, v, t->op == IR_OP_ADDS ? "add" : "mul", 2, kv);
        return true;
    case IR_OP_ABS: case IR_OP_SQUARE: case IR_OP_SQRT: case IR_OP_EXP: case IR_OP_TANH: case IR_OP_SIGMOID:
    case IR_OP_RELU: case IR_OP_SILU: case IR_OP_SIN: case IR_OP_COS: case IR_OP_ERF: case IR_OP_FLOOR:
    case IR_OP_ATAN: case IR_OP_ASIN: case IR_OP_ACOS: case IR_OP_ATANH:
        kv[0] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, name, 1, kv);
        return true;
    case IR_OP_RSQRT: case IR_OP_INVERSE: case IR_OP_LOG: /* exact: epsilon 0, not the MIL default */
        kv[0] = (mil_kv){ "epsilon", mil_const_f16_scalar(e, CN("epsilon"), 0.0f) }, kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, name, 2, kv);
        return true;
    case IR_OP_GELU:
        kv[0] = (mil_kv){ "mode", mil_const_string(e, CN("mode"), t->a.mode == AF_GELU_TANH ? "TANH_APPROXIMATION" : "EXACT") };
        kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "gelu", 2, kv);
        return true;
    case IR_OP_MATMUL_W:
        if (t->src[1]->op == IR_OP_CONST && t->src[0]->shape.rank <= 3) {
            kv[0] = (mil_kv){ "weight", y }, kv[1] = (mil_kv){ "x", x };
            mil_stmt(e, ty, v, "linear", 2, kv);
            return true;
        }
        kv[0] = (mil_kv){ "transpose_x", mil_const_bool(e, CN("transpose_x"), false) };
        kv[1] = (mil_kv){ "transpose_y", mil_const_bool(e, CN("transpose_y"), true) };
        kv[2] = (mil_kv){ "x", x }, kv[3] = (mil_kv){ "y", y };
        mil_stmt(e, ty, v, "matmul", 4, kv);
        return true;
    case IR_OP_MATMUL:
        kv[0] = (mil_kv){ "transpose_x", mil_const_bool(e, CN("transpose_x"), t->a.ta) };
        kv[1] = (mil_kv){ "transpose_y", mil_const_bool(e, CN("transpose_y"), t->a.tb) };
        kv[2] = (mil_kv){ "x", x }, kv[3] = (mil_kv){ "y", y };
        mil_stmt(e, ty, v, "matmul", 4, kv);
        return true;
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: {
        int64_t axes[AF_MAX_RANK];
        int n = 0;
        for (int i = 0; i < t->src[0]->shape.rank; i++)
            if ((unsigned)t->a.ints[0] & (1u << i)) axes[n++] = i;
        kv[0] = (mil_kv){ "axes", mil_const_ints(e, CN("axes"), n, axes, false) };
        kv[1] = (mil_kv){ "keep_dims", mil_const_bool(e, CN("keep_dims"), t->a.keep_dims) };
        kv[2] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, name, 3, kv);
        return true;
    }
    case IR_OP_SOFTMAX:
        kv[0] = (mil_kv){ "axis", mil_const_int(e, CN("axis"), t->a.axis) }, kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "softmax", 2, kv);
        return true;
    case IR_OP_TRANSPOSE:
        kv[0] = (mil_kv){ "perm", mil_const_ints(e, CN("perm"), t->shape.rank, t->a.ints, false) }, kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "transpose", 2, kv);
        return true;
    case IR_OP_RESHAPE:
        kv[0] = (mil_kv){ "shape", mil_const_ints(e, CN("shape"), t->shape.rank, t->shape.dim, false) }, kv[1] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "reshape", 2, kv);
        return true;
    case IR_OP_SLICE_BY_SIZE: case IR_OP_SPLIT: {
        int r = t->shape.rank;
        int64_t begin[AF_MAX_RANK] = { 0 };
        if (t->op == IR_OP_SLICE_BY_SIZE) memcpy(begin, t->a.ints, sizeof(int64_t) * (size_t)r);
        else begin[t->a.axis] = t->a.ints[0];
        kv[0] = (mil_kv){ "begin", mil_const_ints(e, CN("begin"), r, begin, false) };
        kv[1] = (mil_kv){ "size", mil_const_ints(e, CN("size"), r, t->shape.dim, false) };
        kv[2] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "slice_by_size", 3, kv);
        return true;
    }
    case IR_OP_CONCAT: {
        mil_sb tuple = { 0 };
        for (int k = 0; k < t->nsrc; k++) mil_sb_printf(&tuple, "%s%s", k ? ", " : "(", mil_operand(e, t->src[k]));
        mil_sb_printf(&tuple, ")");
        if (tuple.oom) { free(tuple.s); e->st = AF_ERR_NOMEM; return true; }
        kv[0] = (mil_kv){ "axis", mil_const_int(e, CN("axis"), t->a.axis) };
        kv[1] = (mil_kv){ "interleave", mil_const_bool(e, CN("interleave"), false) };
        kv[2] = (mil_kv){ "values", tuple.s };
        mil_stmt(e, ty, v, "concat", 3, kv);
        free(tuple.s);
        return true;
    }
    case IR_OP_RMS_NORM: case IR_OP_LAYER_NORM: case IR_OP_CHANNEL_LAYER_NORM: case IR_OP_GROUP_NORM:
        lower_norm(e, t, v, x);
        return true;
    case IR_OP_AVG_POOL: case IR_OP_MAX_POOL: case IR_OP_CONV: case IR_OP_CONV_TRANSPOSE:
        lower_pool_conv(e, t, v, x, y);
        return true;
    case IR_OP_EMBEDDING: case IR_OP_EMBEDDING_GRAD:
        lower_embedding(e, t, v, x, y);
        return true;
    case IR_OP_EINSUM: { /* the native layer (seed 004) */
        char vals[300];
        snprintf(vals, sizeof vals, "(%s, %s)", x, y);
        kv[0] = (mil_kv){ "equation", mil_const_string(e, CN("equation"), "nchw,nwhu->nchu") };
        kv[1] = (mil_kv){ "values", vals };
        mil_stmt(e, ty, v, "einsum", 2, kv);
        return true;
    }
    case IR_OP_CAST: /* the engine is fp16 throughout: a cast is a rename */
        kv[0] = (mil_kv){ "x", x };
        mil_stmt(e, ty, v, "identity", 1, kv);
        return true;
    default: /* mil_emit fails naming the op ("op X has no MIL lowering"); CPU-only and bridge ops never get here */
        return false;
    }
}
