#define _POSIX_C_SOURCE 200809L /* mkdir */
/* aneforge op NAME: runs one op-table row, fused or bridge, on .npy inputs.
 *   aneforge op NAME --in SRC=FILE.npy ... [--attr KEY=VALUE ...] [--target T] [--fp32|--fp16] [--out DIR]
 * The node is built with the library's own validation (ir_build), so a bad shape or
 * attribute fails with the op's own message; results print as a summary and, with
 * --out, are written as DIR/y.npy (float32). */
#include "cli.h"
#include "cli_args.h"
#include "cli_env.h"
#include "mil_npy.h"
#include "aneforge.h"
#include "ir/ir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CMD "aneforge op"
#define MAX_IN 8

/* Where an attribute goes in ir_attrs. */
typedef enum {
    A_AXIS, A_AXES, A_KEEP, A_PERM, A_BEGIN, A_SIZE, A_SHAPE, A_TA, A_TB, A_MODE, A_GROUPS, A_KERNEL, A_STRIDE, A_PAD,
    A_DILATION, A_SCALAR, A_EPS, A_BETA, A_TO, A_INT0, A_INT1, A_INT2, A_INT3, A_SIZE0, A_FY, A_FX, A_SEW
} slot;

typedef struct { const char *key; slot s; const char *help; } attr_def;

/* Keys every op of a kind reads (by kind), then the bridge ops' own names (by op). */
static const struct { ir_op_kind kind; attr_def a; } kind_attrs[] = {
    { IR_KIND_SCALAR, { "scalar", A_SCALAR, "the scalar (adds: x + s, muls: x * s)" } },
    { IR_KIND_UNARY, { "mode", A_MODE, "gelu: 0 exact, 1 tanh" } },
    { IR_KIND_MATMUL, { "transpose_a", A_TA, "0 or 1" } },
    { IR_KIND_MATMUL, { "transpose_b", A_TB, "0 or 1" } },
    { IR_KIND_REDUCE, { "axes", A_AXES, "comma-separated axes, e.g. 0,-1" } },
    { IR_KIND_REDUCE, { "keep_dims", A_KEEP, "0 or 1" } },
    { IR_KIND_SOFTMAX, { "axis", A_AXIS, "the axis" } },
    { IR_KIND_LAYOUT, { "perm", A_PERM, "transpose: the permutation, e.g. 1,0" } },
    { IR_KIND_LAYOUT, { "shape", A_SHAPE, "reshape: the new shape, one dim may be -1" } },
    { IR_KIND_LAYOUT, { "begin", A_BEGIN, "slice_by_size: the first index per axis" } },
    { IR_KIND_LAYOUT, { "size", A_SIZE, "slice_by_size: sizes per axis (-1: to the end)" } },
    { IR_KIND_LAYOUT, { "axis", A_AXIS, "concat: the axis" } },
    { IR_KIND_NORM, { "eps", A_EPS, "epsilon" } },
    { IR_KIND_NORM, { "groups", A_GROUPS, "group_norm: the number of groups" } },
    { IR_KIND_POOL, { "kernel", A_KERNEL, "kh,kw" } },
    { IR_KIND_POOL, { "stride", A_STRIDE, "sh,sw (default 1,1)" } },
    { IR_KIND_POOL, { "pad", A_PAD, "ph,pw (default 0,0)" } },
    { IR_KIND_CONV, { "stride", A_STRIDE, "sh,sw (default 1,1)" } },
    { IR_KIND_CONV, { "pad", A_PAD, "ph,pw (default 0,0)" } },
    { IR_KIND_CONV, { "dilation", A_DILATION, "dh,dw (default 1,1)" } },
    { IR_KIND_CONV, { "groups", A_GROUPS, "groups (default 1)" } },
    { IR_KIND_CAST, { "to", A_TO, "fp16 or fp32" } },
};
static const struct { ir_op op; attr_def a; } op_attrs[] = {
    { IR_OP_SORT, { "key_lane", A_INT0, "the channel whose values order W (default 0)" } },
    { IR_OP_SORT, { "descending", A_INT1, "0 or 1" } },
    { IR_OP_SORT, { "indices", A_INT2, "1: return the order instead of the values" } },
    { IR_OP_TOPK, { "k", A_INT3, "how many (3 and 4 are refused on the engines)" } },
    { IR_OP_TOPK, { "key_lane", A_INT0, "the channel whose values order W (default 0)" } },
    { IR_OP_TOPK, { "largest", A_INT1, "1: the largest (default 0: the smallest)" } },
    { IR_OP_TOPK, { "indices", A_INT2, "1: return the order instead of the values" } },
    { IR_OP_ARGMINMAX, { "channel", A_INT0, "0: spatial (an index per channel), 1: channel (per position)" } },
    { IR_OP_ARGMINMAX, { "max", A_INT1, "1: argmax, 0: argmin" } },
    { IR_OP_GLOBAL_ARGMINMAX, { "axis", A_AXIS, "the axis (W -1, H -2, C -3)" } },
    { IR_OP_GLOBAL_ARGMINMAX, { "max", A_INT1, "1: argmax, 0: argmin" } },
    { IR_OP_COST_VOLUME, { "max_disparity", A_INT0, "R: the result is [R + 1, Wa]" } },
    { IR_OP_FPS, { "k", A_INT0, "how many points to choose" } },
    { IR_OP_FPS, { "indices", A_INT1, "1: return the indices instead of the points" } },
    { IR_OP_RADIUS_SEARCH, { "radius", A_SCALAR, "the L2 radius" } },
    { IR_OP_DYNAMIC_SLICE, { "axis", A_AXIS, "the sliced axis" } },
    { IR_OP_DYNAMIC_SLICE, { "size", A_SIZE0, "the slice's extent" } },
    { IR_OP_LRN, { "alpha", A_SCALAR, "the effective alpha" } },
    { IR_OP_LRN, { "beta", A_BETA, "the exponent" } },
    { IR_OP_LRN, { "k", A_EPS, "the bias" } },
    { IR_OP_MINMAX_NORM, { "axis", A_AXIS, "-1 (W) or -2 (H)" } },
    { IR_OP_MINMAX_NORM, { "eps", A_EPS, "epsilon" } },
    { IR_OP_SCALED_ELEMENTWISE, { "op", A_SEW, "add, min or max (sub and mult are refused)" } },
    { IR_OP_SCALED_ELEMENTWISE, { "scale", A_SCALAR, "the scale" } },
    { IR_OP_SDPA, { "scale", A_SCALAR, "the score scale (default 1/sqrt(d))" } },
    { IR_OP_CAUSAL_ATTENTION, { "scale", A_SCALAR, "the score scale (default 1/sqrt(d))" } },
    { IR_OP_ROPE, { "mode", A_MODE, "0 turns forward, 1 back" } },
    { IR_OP_SWIGLU_GRAD, { "mode", A_MODE, "0: the gradient for a, 1: for b" } },
    { IR_OP_CAUSAL_ATTENTION_GRAD, { "scale", A_SCALAR, "the score scale (default 1/sqrt(d))" } },
    { IR_OP_DROPOUT, { "rate", A_SCALAR, "0 only" } },
    { IR_OP_BROADCAST, { "axis", A_AXIS, "the length-1 axis" } },
    { IR_OP_BROADCAST, { "size", A_INT0, "its new length" } },
    { IR_OP_INPUT_VIEW, { "offset", A_INT0, "the first value" } },
    { IR_OP_INPUT_VIEW, { "size", A_SIZE0, "how many values" } },
};
#define COUNT(a) (sizeof a / sizeof a[0])

static const attr_def *find_attr(ir_op op, const char *key) {
    for (size_t i = 0; i < COUNT(op_attrs); i++)
        if (op_attrs[i].op == op && !strcmp(op_attrs[i].a.key, key)) return &op_attrs[i].a;
    if (ir_ops[op].kind == IR_KIND_REARRANGE) {
        static const attr_def fy = { "fy", A_FY, "factor along H" }, fx = { "fx", A_FX, "factor along W" };
        if (!strcmp(key, "fy")) return &fy;
        if (!strcmp(key, "fx")) return &fx;
    }
    for (size_t i = 0; i < COUNT(kind_attrs); i++)
        if (kind_attrs[i].kind == ir_ops[op].kind && !strcmp(kind_attrs[i].a.key, key)) return &kind_attrs[i].a;
    return NULL;
}

/* The names of op's sources, as --in takes them (a variadic op: x0, x1, ...). */
static const char *source_name(ir_op op, int k, char *buf, size_t n) {
    static const struct { ir_op op; const char *names[3]; } named[] = {
        { IR_OP_SELECT, { "cond", "a", "b" } },          { IR_OP_MATMUL_W, { "x", "wt" } },
        { IR_OP_RMS_NORM, { "x", "gamma" } },            { IR_OP_LAYER_NORM, { "x", "gamma", "beta" } },
        { IR_OP_CHANNEL_LAYER_NORM, { "x", "gamma", "beta" } }, { IR_OP_GROUP_NORM, { "x", "gamma", "beta" } },
        { IR_OP_CONV, { "x", "w" } },                    { IR_OP_CONV_TRANSPOSE, { "x", "w" } },
        { IR_OP_EMBEDDING, { "table", "ids" } },         { IR_OP_EMBEDDING_GRAD, { "dy", "ids" } },
        { IR_OP_CONV_WEIGHT_GRAD, { "x", "dy" } },       { IR_OP_AVG_POOL_GRAD, { "x", "dy" } },
        { IR_OP_MAX_POOL_GRAD, { "x", "dy" } },          { IR_OP_CROSS_CORRELATION, { "x", "template" } },
        { IR_OP_COST_VOLUME, { "aux", "ref" } },         { IR_OP_RADIUS_SEARCH, { "points", "centroids" } },
        { IR_OP_DYNAMIC_SLICE, { "x", "start" } },       { IR_OP_SCALED_ELEMENTWISE, { "x", "z" } },
        { IR_OP_FPS, { "points" } },                    { IR_OP_SDPA, { "q", "k", "v" } },
        { IR_OP_ROPE, { "x", "cos", "sin" } },            { IR_OP_SWIGLU_GRAD, { "a", "b", "dy" } },
    };
    if (op == IR_OP_SDPA && k == 3) return "mask"; /* optional */
    if ((op == IR_OP_CAUSAL_ATTENTION || op == IR_OP_CAUSAL_ATTENTION_GRAD) && k < 4) return (const char *[]){ "q", "k", "v", "dy" }[k];
    for (size_t i = 0; i < COUNT(named); i++)
        if (named[i].op == op && k < 3 && named[i].names[k]) return named[i].names[k];
    if (ir_ops[op].arity < 0) { snprintf(buf, n, "x%d", k); return buf; }
    return ir_ops[op].arity == 1 ? "x" : k == 0 ? "a" : k == 1 ? "b" : "c";
}

static int find_op(const char *name) {
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (!strcmp(ir_ops[op].name, name)) return op;
    return -1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge op NAME --in SRC=FILE.npy ... [--attr KEY=VALUE ...] [--target T] [--fp32|--fp16] [--out DIR]\n"
               "       aneforge op NAME --help     the op's sources and attributes\n\n"
               "Runs one op of the op table (`aneforge ops` lists them), fused or bridge, on .npy inputs\n"
               "(any numeric dtype, read as float), and prints the result's shape and first values.\n"
               "  --in SRC=FILE.npy   a source by its name (NAME --help lists them) or its index\n"
               "  --attr KEY=VALUE    an attribute; lists are comma-separated (--attr axes=0,-1)\n"
               "  --target T          cpu (default), ane-sim[:m1..m5] or ane (ANEFORGE_TARGET also works)\n"
               "  --fp32 | --fp16     numerics (default: fp32 on cpu, fp16 on the engines)\n"
               "  --out DIR           also write the result as DIR/y.npy (float32)\n");
}

static void op_help(ir_op op) {
    char buf[16];
    int n = op == IR_OP_SDPA ? 4 : ir_ops[op].arity < 0 ? 2 : ir_ops[op].arity;
    printf("op %s (kind %s%s): sources", ir_ops[op].name, ir_op_kind_name(ir_ops[op].kind), ir_ops[op].flags & OPF_BRIDGE ? ", a net.plist bridge op" : "");
    for (int k = 0; k < n; k++) printf(" %s", source_name(op, k, buf, sizeof buf));
    printf("%s\nattributes:\n", op == IR_OP_SDPA ? " (mask optional)" : ir_ops[op].arity < 0 ? " ... (any number)" : "");
    int shown = 0;
    for (size_t i = 0; i < COUNT(op_attrs); i++)
        if (op_attrs[i].op == op) { printf("  %-14s %s\n", op_attrs[i].a.key, op_attrs[i].a.help); shown++; }
    if (ir_ops[op].kind == IR_KIND_REARRANGE) { printf("  %-14s %s\n  %-14s %s\n", "fy", "factor along H", "fx", "factor along W"); shown++; }
    for (size_t i = 0; i < COUNT(kind_attrs); i++)
        if (kind_attrs[i].kind == ir_ops[op].kind) {
            printf("  %-14s %s\n", kind_attrs[i].a.key, kind_attrs[i].a.help);
            shown++;
        }
    if (!shown) printf("  (none)\n");
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

/* Sets one attribute; 0, or 2 after printing the problem. rank0: source 0's rank. */
static int set_attr(ir_op op, const char *kv, ir_attrs *a, int rank0) {
    char key[64];
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) return cli_usage_error(CMD, "--attr needs KEY=VALUE, got '%s'", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    const char *val = eq + 1;
    const attr_def *d = find_attr(op, key);
    if (!d) return cli_usage_error(CMD, "op %s has no attribute '%s' (aneforge op %s --help lists them)", ir_ops[op].name, key, ir_ops[op].name);
    int64_t v[AF_MAX_RANK];
    float f = 0;
    bool is_float = d->s == A_SCALAR || d->s == A_EPS || d->s == A_BETA;
    int n = 0;
    if (d->s == A_TO) {
        if (strcmp(val, "fp16") && strcmp(val, "fp32")) return cli_usage_error(CMD, "--attr to= takes fp16 or fp32, not '%s'", val);
        a->to = val[2] == '1' ? AF_F16 : AF_F32;
        return 0;
    }
    if (d->s == A_SEW) {
        static const char *const names[5] = { "add", "sub", "mult", "min", "max" };
        for (int i = 0; i < 5; i++)
            if (!strcmp(val, names[i])) { a->mode = i; return 0; }
        return cli_usage_error(CMD, "--attr op= takes add, min or max, not '%s'", val);
    }
    if (is_float ? cli_parse_float(val, &f) : (n = int_list(val, v)) < 1)
        return cli_usage_error(CMD, "--attr %s: '%s' is not %s", key, val, is_float ? "a number" : "an integer or a comma-separated list of them");
    bool pair = d->s == A_KERNEL || d->s == A_STRIDE || d->s == A_PAD || d->s == A_DILATION;
    bool list = pair || d->s == A_AXES || d->s == A_PERM || d->s == A_BEGIN || d->s == A_SIZE || d->s == A_SHAPE;
    if (!is_float && !list && n != 1) return cli_usage_error(CMD, "--attr %s takes one integer, got '%s'", key, val);
    if (pair && n != 2) return cli_usage_error(CMD, "--attr %s takes two integers h,w, got '%s'", key, val);
    switch (d->s) {
    case A_AXIS: a->axis = (int)v[0]; break;
    case A_AXES:
        a->ints[0] = 0;
        for (int i = 0; i < n; i++) {
            int ax = ir_norm_axis((int)v[i], rank0);
            if (ax < 0) return cli_usage_error(CMD, "--attr axes: axis %lld is out of range for rank %d", (long long)v[i], rank0);
            a->ints[0] |= 1ll << ax;
        }
        a->naxes = n;
        break;
    case A_KEEP: a->keep_dims = v[0] != 0; break;
    case A_PERM: case A_BEGIN: memcpy(a->ints, v, sizeof(int64_t) * (size_t)n); break;
    case A_SIZE: memcpy(a->sizes, v, sizeof(int64_t) * (size_t)n); break;
    case A_SHAPE: memcpy(a->sizes, v, sizeof(int64_t) * (size_t)n); a->naxes = n; break;
    case A_TA: a->ta = v[0] != 0; break;
    case A_TB: a->tb = v[0] != 0; break;
    case A_MODE: a->mode = (int)v[0]; break;
    case A_GROUPS: a->groups = (int)v[0]; break;
    case A_KERNEL: a->kernel[0] = (int)v[0]; a->kernel[1] = (int)v[1]; break;
    case A_STRIDE: a->stride[0] = (int)v[0]; a->stride[1] = (int)v[1]; break;
    case A_PAD: a->pad[0] = (int)v[0]; a->pad[1] = (int)v[1]; break;
    case A_DILATION: a->dilation[0] = (int)v[0]; a->dilation[1] = (int)v[1]; break;
    case A_SCALAR: a->scalar = f; break;
    case A_EPS: a->eps = f; break;
    case A_BETA: a->beta = f; break;
    case A_INT0: case A_INT1: case A_INT2: case A_INT3: a->ints[d->s - A_INT0] = v[0]; break;
    case A_SIZE0: a->sizes[0] = v[0]; break;
    case A_FY: a->kernel[0] = (int)v[0]; break;
    case A_FX: a->kernel[1] = (int)v[0]; break;
    default: break;
    }
    return 0;
}

/* Attributes an op reads when the user gives none: unit strides and dilations, one
 * group, slices to the end, factors of 1. */
static ir_attrs defaults(ir_op op) {
    ir_attrs a = { .groups = 1, .stride = { 1, 1 }, .dilation = { 1, 1 } };
    if (op == IR_OP_SLICE_BY_SIZE)
        for (int i = 0; i < AF_MAX_RANK; i++) a.sizes[i] = -1;
    if (ir_ops[op].kind == IR_KIND_REARRANGE) a.kernel[0] = a.kernel[1] = 1;
    if (op == IR_OP_LRN) a.beta = 0.75f, a.eps = 1.0f;
    if (op == IR_OP_DYNAMIC_SLICE) a.sizes[0] = 1;
    return a;
}

static void summary(const char *name, const float *y, af_shape s) {
    char sh[120];
    int64_t n = af_shape_count(s);
    ir_shape_str(s, sh, sizeof sh);
    printf("%s %s:", name, sh);
    for (int64_t i = 0; i < n && i < 16; i++) printf(" %.6g", y[i]);
    printf("%s\n", n > 16 ? " ..." : "");
}

int cmd_op(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int op = find_op(argv[1]);
    if (op < 0) return cli_usage_error(CMD, "unknown op '%s' (aneforge ops lists the op table)", argv[1]);
    if (ir_ops[op].flags & OPF_LEAF) return cli_usage_error(CMD, "%s is a leaf (an input or a constant), not an op to run", argv[1]);
    const char *in_spec[MAX_IN] = { 0 }, *attrs[32], *target = NULL, *outdir = NULL;
    int nattr = 0, nin_given = 0, precision = -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { op_help((ir_op)op); return 0; }
        if (!strcmp(a, "--fp32") || !strcmp(a, "--fp16")) { precision = a[4] == '1' ? AF_PRECISION_FP16 : AF_PRECISION_FP32; continue; }
        if (!v) return cli_usage_error(CMD, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--target")) target = v;
        else if (!strcmp(a, "--out")) outdir = v;
        else if (!strcmp(a, "--attr")) {
            if (nattr == 32) return cli_usage_error(CMD, "more than 32 --attr");
            attrs[nattr++] = v;
        } else if (!strcmp(a, "--in")) {
            const char *eq = strchr(v, '=');
            char buf[16];
            int k = -1, n = ir_ops[op].arity < 0 ? MAX_IN : ir_ops[op].arity;
            for (int j = 0; eq && j < n && k < 0; j++) {
                const char *nm = source_name((ir_op)op, j, buf, sizeof buf);
                char idx[16];
                snprintf(idx, sizeof idx, "%d", j);
                if ((strlen(nm) == (size_t)(eq - v) && !strncmp(v, nm, (size_t)(eq - v))) || (strlen(idx) == (size_t)(eq - v) && !strncmp(v, idx, (size_t)(eq - v)))) k = j;
            }
            if (!eq || k < 0) return cli_usage_error(CMD, "--in '%s': give SRC=FILE.npy with SRC a source of %s (aneforge op %s --help)", v, argv[1], argv[1]);
            if (!in_spec[k]) nin_given++;
            in_spec[k] = eq + 1;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    int nsrc = ir_ops[op].arity < 0 ? nin_given : ir_ops[op].arity;
    if (op == IR_OP_SDPA) nsrc = in_spec[3] ? 4 : 3; /* q, k, v and an optional mask */
    char buf[16];
    if (nsrc < 1) return cli_usage_error(CMD, "%s takes any number of sources: give --in x0=FILE.npy, x1=...", argv[1]);
    for (int k = 0; k < nsrc; k++)
        if (!in_spec[k]) return cli_usage_error(CMD, "%s needs source '%s' (--in %s=FILE.npy)", argv[1], source_name((ir_op)op, k, buf, sizeof buf), source_name((ir_op)op, k, buf, sizeof buf));

    af_compile_opts o = { .target = AF_TARGET_CPU };
    char err[400];
    if (target && af_target_parse(target, &o.target, &o.family) != AF_OK)
        return cli_usage_error(CMD, "--target '%s' is not a target: use cpu, ane-sim[:m1..m5] or ane", target);
    if (cli_env_compile(&o, target != NULL, err, sizeof err)) return cli_usage_error(CMD, "%s", err);
    o.precision = precision >= 0 ? (af_precision)precision : o.target == AF_TARGET_CPU ? AF_PRECISION_FP32 : AF_PRECISION_FP16;

    int rc = 1;
    float *data[MAX_IN] = { 0 }, *y = NULL;
    af_graph *g = af_graph_new();
    af_model *m = NULL;
    af_tensor *src[MAX_IN] = { 0 }, *out = NULL;
    for (int k = 0; k < nsrc; k++) {
        int rank;
        int64_t dims[AF_MAX_RANK];
        if (mil_npy_read(in_spec[k], "fp32", &data[k], &rank, dims, err, sizeof err)) {
            fprintf(stderr, CMD ": %s\n", err); /* err names the file */
            goto done;
        }
        src[k] = af_input(g, source_name((ir_op)op, k, buf, sizeof buf), o.target == AF_TARGET_CPU ? AF_F32 : AF_F16, af_shape_make(rank, dims));
    }
    ir_attrs a = defaults((ir_op)op);
    for (int i = 0; i < nattr; i++)
        if (set_attr((ir_op)op, attrs[i], &a, src[0] ? src[0]->shape.rank : 0)) { rc = 2; goto done; }
    if (op == IR_OP_DYNAMIC_SLICE) src[1]->flags |= IR_TF_EXACT; /* as af_dynamic_slice does */
    if ((op == IR_OP_SDPA || op == IR_OP_CAUSAL_ATTENTION || op == IR_OP_CAUSAL_ATTENTION_GRAD) && a.scalar == 0 &&
        src[0]->shape.rank == 4)
        a.scalar = 1.0f / sqrtf((float)src[0]->shape.dim[3]); /* as af_sdpa */
    out = ir_build((ir_op)op, nsrc, src, &a);
    if (!out) { fprintf(stderr, CMD ": %s\n", af_graph_error(g)); goto done; }
    m = af_compile(g, nsrc, src, 1, &out, &o);
    if (!m) { fprintf(stderr, CMD ": compiling %s for %s: %s\n", argv[1], target ? target : "cpu", af_error_message()); goto done; }
    af_buffer bi[MAX_IN], bo;
    for (int k = 0; k < nsrc; k++) bi[k] = AF_BUF_F32(data[k], af_shape_count(src[k]->shape));
    int64_t n = af_shape_count(out->shape);
    y = malloc((size_t)n * sizeof *y + sizeof *y);
    bo = AF_BUF_F32(y, n);
    if (!y || af_run(m, bi, &bo) != AF_OK) { fprintf(stderr, CMD ": running %s: %s\n", argv[1], af_error_message()); goto done; }
    summary(argv[1], y, out->shape);
    if (outdir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/y.npy", outdir);
        if (mkdir(outdir, 0777) && errno != EEXIST) { fprintf(stderr, CMD ": cannot create %s: %s\n", outdir, strerror(errno)); goto done; }
        if (af_npy_write(path, y, out->shape.rank, out->shape.dim) != AF_OK) { fprintf(stderr, CMD ": %s\n", af_error_message()); goto done; }
        printf("wrote %s\n", path);
    }
    rc = 0;
done:
    for (int k = 0; k < MAX_IN; k++) free(data[k]);
    free(y);
    af_model_free(m);
    af_graph_free(g);
    return rc;
}
