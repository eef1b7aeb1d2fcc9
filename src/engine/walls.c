/* The engine's compiler walls: rejects at compile time what the engine's compiler
 * rejects, each error naming the wall and its remedy (the ane and ane-sim backends both
 * check them). Sources: seed 000 (fusion wall, wide-row wall, conv weight, crop DMA) and
 * ane-formats.md §4.4 (limits) and §6 (numerics). */
#include "engine/walls.h"
#include "engine/family.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const compile_plan *m;
    const ane_family_info *fi;
    char *msg;
    size_t n;
} ctx;

/* Writes "ane-sim A13 (M1): the <wall> at <node>: <detail>. Remedy: <remedy>". */
static af_status wall(ctx *c, af_status st, const af_tensor *t, const char *name, const char *remedy, const char *fmt, ...) {
    char detail[400], shape[100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    ir_shape_str(t->shape, shape, sizeof shape);
    const char *tn = af_tensor_name(t);
    snprintf(c->msg, c->n, "ane-sim %s (%s): the %s at %s %s%s%s(node %d) %s: %s. Remedy: %s", c->fi->name, c->fi->chips, name,
             ir_ops[t->op].name, *tn ? "'" : "", tn, *tn ? "' " : "", t->id, shape, detail, remedy);
    return st;
}

/* Layout ops are free re-indexings; the compiler sees through them when fusing. */
static const af_tensor *through_layout(const af_tensor *t) {
    while (t->op == IR_OP_RESHAPE || t->op == IR_OP_TRANSPOSE) t = t->src[0];
    return t;
}

static bool is_reduce_sum_or_mean(const af_tensor *t) {
    t = through_layout(t);
    return t->op == IR_OP_REDUCE_SUM || t->op == IR_OP_REDUCE_MEAN;
}

/* A baked constant that is all zeros once stored as fp16. */
static bool is_zero_const(const af_tensor *t) {
    t = through_layout(t);
    if (t->op != IR_OP_CONST || !t->data) return false;
    for (int64_t i = 0, n = af_shape_count(t->shape); i < n; i++)
        if (af_round_f16(t->data[i]) != 0.0f) return false;
    return true;
}

static const char *const fusion_remedy =
    "build constants as (t - t) + c rather than t * 0 + c (the library's const_like), or zero a reduce output with r - r";

static af_status check_fusion(ctx *c, const af_tensor *t) {
    if (t->op == IR_OP_MULS && is_reduce_sum_or_mean(t->src[0]) && af_round_f16(t->a.scalar) == 0.0f)
        return wall(c, AF_ERR_UNSUPPORTED, t, "reduce*0 fusion wall", fusion_remedy,
                    "a %s output multiplied by 0 fails to fuse in ANECCompile", ir_ops[through_layout(t->src[0])->op].name);
    if (t->op == IR_OP_MUL)
        for (int k = 0; k < 2; k++)
            if (is_reduce_sum_or_mean(t->src[k]) && is_zero_const(t->src[1 - k]))
                return wall(c, AF_ERR_UNSUPPORTED, t, "reduce*0 fusion wall", fusion_remedy,
                            "a %s output multiplied by a zero constant fails to fuse in ANECCompile",
                            ir_ops[through_layout(t->src[k])->op].name);
    return AF_OK;
}

/* A reshape that flattens several rows into one row wider than the envelope. */
static bool is_wide_row(const af_tensor *t, int64_t max) {
    if (t->op != IR_OP_RESHAPE || t->shape.rank < 1) return false;
    int r = t->shape.rank;
    for (int i = 0; i < r - 1; i++)
        if (t->shape.dim[i] != 1) return false;
    af_shape xs = t->src[0]->shape;
    return t->shape.dim[r - 1] > max && (xs.rank == 0 || xs.dim[xs.rank - 1] != t->shape.dim[r - 1]);
}

/* Checked at the reshape, before its own extent, so the error names this wall. */
static af_status check_wide_row(ctx *c, int s) {
    const af_tensor *t = c->m->sched[s];
    if (!is_wide_row(t, c->fi->wide_row_max)) return AF_OK;
    for (int u = s + 1; u < c->m->nsched; u++) {
        const af_tensor *user = c->m->sched[u];
        if (user->op != IR_OP_CONCAT) continue;
        for (int k = 0; k < user->nsrc; k++)
            if (user->src[k] == t)
                return wall(c, AF_ERR_UNSUPPORTED, t, "wide-row wall",
                            "keep each tensor's natural row width and stack along axis 0 (concat([w,m,v], 0) -> [3*rows, cols]), "
                            "or compile one program per tensor",
                            "reshaping to a single %lld-wide row (over %lld) that feeds a concat (node %d) crashes ANECCompile",
                            (long long)t->shape.dim[t->shape.rank - 1], (long long)c->fi->wide_row_max, user->id);
    }
    return AF_OK;
}

static af_status check_conv(ctx *c, const af_tensor *t) {
    if (t->op != IR_OP_CONV && t->op != IR_OP_CONV_TRANSPOSE) return AF_OK;
    const af_tensor *w = t->src[1];
    if (through_layout(w)->op != IR_OP_CONST)
        return wall(c, AF_ERR_UNSUPPORTED, t, "conv-weight wall",
                    "bake the weight with af_const, or train it with af_conv_param + af_conv2d (im2col and a matmul)",
                    "the weight '%s' is a %s, but the native conv needs a constant weight (a runtime weight is "
                    "\"not supported on any backend\")", af_tensor_name(w), ir_ops[w->op].name);
    if (t->op == IR_OP_CONV_TRANSPOSE && (t->a.stride[0] > 1 || t->a.stride[1] > 1))
        return wall(c, AF_ERR_UNSUPPORTED, t, "conv_transpose stride wall",
                    "use stride 1 and upsample by another route (e.g. concat/reshape nearest-neighbour) first",
                    "stride %dx%d needs an output_padding the engine's conv_transpose lacks", t->a.stride[0], t->a.stride[1]);
    int64_t kw = w->shape.dim[3];
    if (kw > c->fi->max_kernel_w)
        return wall(c, AF_ERR_UNSUPPORTED, t, "kernel-width limit",
                    "split the kernel into column groups of at most the limit and add the shifted results, or use af_conv2d (im2col)",
                    "kernel width %lld exceeds %lld on %s (13 on A13, 15 from A14)", (long long)kw, (long long)c->fi->max_kernel_w,
                    c->fi->name);
    return AF_OK;
}

static af_status check_matmul_k(ctx *c, const af_tensor *t) {
    int64_t k = 0;
    if (t->op == IR_OP_MATMUL) {
        af_shape a = t->src[0]->shape;
        k = a.rank < 2 ? a.dim[0] : t->a.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
    } else if (t->op == IR_OP_MATMUL_W) {
        k = t->src[1]->shape.dim[1];
    }
    if (k > c->fi->max_spatial)
        return wall(c, AF_ERR_UNSUPPORTED, t, "axis-extent limit",
                    "split K into chunks within the limit and add the partial products",
                    "the contraction K = %lld exceeds %lld on %s (16384 before A16, 65536 from A16)", (long long)k,
                    (long long)c->fi->max_spatial, c->fi->name);
    return AF_OK;
}

/* Token embedding. The engine has no scatter, so the table's gradient row is walled
 * (seed 002 runs it on the host; on the engine it is one-hot(ids)^T @ dy). The gather
 * reads ids from an fp16 port, where whole numbers are exact only up to 2048. */
static af_status check_embedding(ctx *c, const af_tensor *t) {
    if (t->op == IR_OP_EMBEDDING_GRAD)
        return wall(c, AF_ERR_UNSUPPORTED, t, "no-scatter rule",
                    "compute the table gradient as af_matmul(onehot, dy, 1, 0) with onehot = af_equal(ids as [N, 1], a constant "
                    "0..V-1 as [1, V]) and dy as [N, row], or keep the embedding on the host (AF_TARGET_CPU) as seed 002 does",
                    "the engine has no scatter op, so the scatter-add of rows into a [%lld, ...] table cannot run there",
                    (long long)t->shape.dim[0]);
    int64_t v = t->src[0]->shape.dim[0];
    if (t->op == IR_OP_EMBEDDING && v > 2049 && t->src[1]->op != IR_OP_CONST)
        return wall(c, AF_ERR_UNSUPPORTED, t, "fp16 id limit",
                    "gather the rows on the host (AF_TARGET_CPU) and feed them, or split the table into blocks of at most 2048 rows",
                    "ids reach the engine through fp16 ports, exact only up to 2048, but the table has %lld rows", (long long)v);
    return AF_OK;
}

/* Rank, static shape and axis extents. Activations also keep W (last axis) and H
 * (the one before) within the spatial limit; constants are laid out by the compiler. */
static af_status check_shape(ctx *c, const af_tensor *t, bool activation) {
    af_shape s = t->shape;
    const ane_family_info *fi = c->fi;
    if (s.rank > fi->max_rank)
        return wall(c, AF_ERR_UNSUPPORTED, t, "rank limit", "fold leading axes together with af_reshape",
                    "rank %d exceeds %lld (the engine is NCHW plus depth)", s.rank, (long long)fi->max_rank);
    for (int i = 0; i < s.rank; i++) {
        if (s.dim[i] < 1)
            return wall(c, AF_ERR_UNSUPPORTED, t, "static-shape rule", "give every axis a fixed extent >= 1",
                        "axis %d has extent %lld; the engine compiles static shapes only", i, (long long)s.dim[i]);
        if (s.dim[i] > fi->max_axis)
            return wall(c, AF_ERR_UNSUPPORTED, t, "axis-extent limit", "split the axis into chunks within the limit (slice, compute, concat)",
                        "axis %d has extent %lld; channels and every other axis are limited to %lld", i, (long long)s.dim[i],
                        (long long)fi->max_axis);
    }
    if (!activation) return AF_OK;
    for (int j = 0; j < 2 && j < s.rank; j++) {
        int64_t d = s.dim[s.rank - 1 - j];
        if (d > fi->max_spatial)
            return wall(c, AF_ERR_UNSUPPORTED, t, "axis-extent limit",
                        "split the axis into chunks within the limit (slice, compute, concat), or move it to the channel axis (up to 65536)",
                        "%s (axis %d%s) = %lld exceeds %lld on %s (16384 before A16, 65536 from A16)", j ? "H" : "W",
                        s.rank - 1 - j, j ? "" : ", the last", (long long)d, (long long)fi->max_spatial, fi->name);
    }
    return AF_OK;
}

/* The runtime binds each input to its own surface, and the engine takes only so many. */
static af_status check_input_count(ctx *c) {
    if (c->m->nin <= c->fi->max_inputs) return AF_OK;
    return wall(c, AF_ERR_UNSUPPORTED, c->m->in[c->fi->max_inputs], "input-count limit",
                "concat several inputs into one (along the channel axis) and slice them apart inside the program, or split the "
                "program into several",
                "the program has %d inputs; %s binds at most %lld (input %lld is the first over)", c->m->nin, c->fi->name,
                (long long)c->fi->max_inputs, (long long)c->fi->max_inputs);
}

/* Program size: every constant is compiled into the program (as fp16, 2 bytes an
 * element); the wall names the constant that takes the total over the limit. */
static af_status check_weight_bytes(ctx *c) {
    bool *seen = calloc((size_t)c->m->ntensors + 1, sizeof *seen);
    if (!seen) { snprintf(c->msg, c->n, "out of memory"); return AF_ERR_NOMEM; }
    int64_t total = 0;
    af_status st = AF_OK;
    for (int s = 0; s < c->m->nsched && !st; s++) {
        const af_tensor *t = c->m->sched[s];
        for (int k = 0; k < t->nsrc && !st; k++) {
            const af_tensor *w = t->src[k];
            if (w->op != IR_OP_CONST || seen[w->id]) continue;
            seen[w->id] = true;
            total += 2 * af_shape_count(w->shape);
            if (total > c->fi->max_weight_bytes)
                st = wall(c, AF_ERR_UNSUPPORTED, w, "program-size limit",
                          "feed large weights as inputs (parameters are inputs already) or split the program into several",
                          "the program's constants reach %lld bytes (fp16) with this one, over the %lld bytes one program "
                          "holds on %s", (long long)total, (long long)c->fi->max_weight_bytes, c->fi->name);
        }
    }
    free(seen);
    return st;
}

static const char *const io_remedy_in =
    "declare the input AF_F16 (af_run still takes fp32 host buffers and rounds them to fp16; parameters keep their fp32 master on the host)";

af_status ane_rules_validate(const compile_plan *m, af_family_id family, char *msg, size_t n) {
    ctx c = { .m = m, .fi = ane_family_info_of(family), .msg = msg, .n = n };
    if (!c.fi) { snprintf(msg, n, "ane-sim: unknown family %d", (int)family); return AF_ERR_INVALID; }
    af_status st = check_input_count(&c);
    for (int i = 0; i < m->nin && !st; i++) {
        const af_tensor *t = m->in[i];
        if (t->dtype == AF_F32 && !(t->flags & IR_TF_PARAM))
            st = wall(&c, AF_ERR_UNSUPPORTED, t, "fp16-only I/O rule", io_remedy_in,
                      "input %d is fp32, but engine programs take fp16 inputs (no fp32 or int32 ports)", i);
        if (!st) st = check_shape(&c, t, true);
    }
    for (int s = 0; s < m->nsched && !st; s++) {
        const af_tensor *t = m->sched[s];
        for (int k = 0; k < t->nsrc && !st; k++)
            if (t->src[k]->op == IR_OP_CONST) st = check_shape(&c, t->src[k], false);
        if (!st) st = check_fusion(&c, t);
        if (!st) st = check_wide_row(&c, s);
        if (!st) st = check_conv(&c, t);
        if (!st) st = check_matmul_k(&c, t);
        if (!st) st = check_embedding(&c, t);
        if (!st) st = check_shape(&c, t, true);
    }
    if (!st) st = check_weight_bytes(&c);
    if (st) return st;
    /* An output is declared fp32 when an af_cast to fp32 (or an fp32 input) reaches it
     * through nodes that stay fp32. */
    bool *wide = calloc((size_t)m->ntensors + 1, sizeof *wide);
    if (!wide) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    for (int i = 0; i < m->nin; i++) wide[m->in[i]->id] = m->in[i]->dtype == AF_F32 && !(m->in[i]->flags & IR_TF_PARAM);
    for (int s = 0; s < m->nsched; s++) {
        const af_tensor *t = m->sched[s];
        bool w = t->op == IR_OP_CAST && t->a.to == AF_F32;
        for (int k = 0; k < t->nsrc && !w && t->dtype == AF_F32; k++) w = wide[t->src[k]->id];
        wide[t->id] = w;
    }
    for (int i = 0; i < m->nout && !st; i++)
        if (wide[m->out[i]->id])
            st = wall(&c, AF_ERR_UNSUPPORTED, m->out[i], "fp16-only I/O rule",
                      "drop the af_cast to AF_F32: af_run widens fp16 results into fp32 host buffers",
                      "output %d is fp32, but engine programs write fp16 outputs (no fp32 or int32 ports)", i);
    free(wide);
    return st;
}

const char *ane_node_unsupported(const af_tensor *t) {
    if (ir_ops[t->op].flags & OPF_CPU_ONLY)
        return "a CPU-only kernel with no engine form, made on graphs targeted at the CPU (by af_backward, af_causal_attention); build the "
               "graph without af_graph_set_target(g, AF_TARGET_CPU) to compile it for an engine target";
    return NULL;
}
