/* Engine gates of the bridge ops. Seed 004 measured these limits on its host (M1,
 * A13) and says nothing of other families, so every family gets the same gate until a
 * family is measured otherwise; the message names the family the program is for. */
#include "netplist/bridge_gates.h"
#include "ir/op_cases.h"

#include <stdarg.h>
#include <stdio.h>

static bool refuse(ane_gate_fail *f, const char *wall, const char *remedy, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, ap);
    va_end(ap);
    f->wall = wall;
    f->remedy = remedy;
    return true;
}

static bool index_range(ane_gate_fail *f, int64_t n, const char *what) {
    if (n <= AF_BRIDGE_MAX_INDEX_RANGE) return false;
    return refuse(f, "fp16 index limit",
                  "split the indexed axis into blocks of at most 2048 and combine the blocks' results, or run the op on the CPU target",
                  "indices come back fp16-encoded, exact only below 2048, but %s has %lld positions", what, (long long)n);
}

static bool rank_gate(const af_tensor *t, ane_gate_fail *f) {
    af_shape x = t->src[0]->shape;
    int r = x.rank;
    switch (t->op) {
    case IR_OP_TOPK:
        if (t->a.ints[3] == 3 || t->a.ints[3] == 4)
            return refuse(f, "top_k k wall", "ask for k = 5 and keep the first 3 or 4 (af_slice), or use af_sort",
                          "k = %lld fails in ANECCompile (k = 3 and k = 4 are rejected)", (long long)t->a.ints[3]);
        return index_range(f, x.dim[r - 1], "the sorted W axis");
    case IR_OP_SORT: return index_range(f, x.dim[r - 1], "the sorted W axis");
    case IR_OP_ARGMINMAX:
        return t->a.ints[0] ? index_range(f, x.dim[r - 3], "the channel axis")
                            : index_range(f, x.dim[r - 2] * x.dim[r - 1], "the flattened H * W plane");
    case IR_OP_GLOBAL_ARGMINMAX: /* Dimension is Width, Height or Channel */
        if (t->a.axis < r - 3)
            return refuse(f, "Dimension rule", "transpose the axis to W, H or C (one of the last three) first",
                          "axis %d is not one of W, H, C (the last three axes of rank %d)", t->a.axis, r);
        return index_range(f, x.dim[t->a.axis], "the reduced axis");
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, RANK, id)
#include "ir/ops.def"
#undef X
        return false;
    }
    return false;
}

static bool geometry_gate(const af_tensor *t, ane_gate_fail *f) {
    af_shape x = t->src[0]->shape;
    if (t->op == IR_OP_FPS) {
        if (t->a.ints[0] > AF_BRIDGE_FPS_MAX_K || x.dim[0] > AF_BRIDGE_FPS_MAX_N)
            return refuse(f, "furthest-point-sampling limit", "sample from at most 8192 points (subsample first) and ask for at most 1024",
                          "k = %lld of N = %lld points; the layer takes k <= %d and N <= %d", (long long)t->a.ints[0],
                          (long long)x.dim[0], AF_BRIDGE_FPS_MAX_K, AF_BRIDGE_FPS_MAX_N);
        if (t->a.ints[1])
            return refuse(f, "furthest-point-sampling output rule",
                          "sample the points themselves (indices = 0), or take the indices on the CPU target",
                          "the layer writes the chosen points [k, 3], not their indices");
        return false;
    }
    if (t->op == IR_OP_DYNAMIC_SLICE && (t->a.axis != x.rank - 1 || x.dim[x.rank - 1] != 4 || t->a.sizes[0] != 2))
        return refuse(f, "dynamic-slice variant rule",
                      "slice 2 of 4 along the last axis (reshape to [..., 4]), or use af_slice when the start is known when building",
                      "size %lld along axis %d of extent %lld; the only accepted variant is size 2 along the last axis of extent 4",
                      (long long)t->a.sizes[0], t->a.axis, (long long)x.dim[t->a.axis]);
    return false;
}

bool ane_bridge_gate(const af_tensor *t, const ane_family_info *fi, ane_gate_fail *f) {
    (void)fi;
    if (!(ir_ops[t->op].flags & OPF_BRIDGE)) return false;
    af_shape x = t->src[0]->shape;
    switch (ir_ops[t->op].kind) {
    case IR_KIND_RANK: return rank_gate(t, f);
    case IR_KIND_REARRANGE: {
        int64_t n = t->op == IR_OP_BATCH_TO_SPACE ? t->shape.dim[0] : x.dim[0];
        if (n != 1)
            return refuse(f, "batch-1 rule", "run one image at a time (af_split the batch, rearrange each, af_concat)",
                          "the native rearrange layers take one image, but x holds %lld", (long long)n);
        return false;
    }
    case IR_KIND_GEOMETRY: return geometry_gate(t, f);
    case IR_KIND_BNORM:
        if (t->op == IR_OP_LRN && x.dim[x.rank - 3] > AF_BRIDGE_LRN_MAX_C)
            return refuse(f, "LRN channel limit", "use af_local_response_norm (fused ops, any C), or split the channels into groups of at most 15",
                          "C = %lld channels; the layer compiles only for C <= %d", (long long)x.dim[x.rank - 3], AF_BRIDGE_LRN_MAX_C);
        return false;
    case IR_KIND_ATTENTION: case IR_KIND_STRUCTURAL: return false; /* no shared gate: sdpa's describe checks its bounds */
    case IR_KIND_LEAF: case IR_KIND_BINARY: case IR_KIND_SELECT: case IR_KIND_SCALAR: case IR_KIND_UNARY: case IR_KIND_MATMUL:
    case IR_KIND_REDUCE: case IR_KIND_SOFTMAX: case IR_KIND_LAYOUT: case IR_KIND_NORM: case IR_KIND_POOL: case IR_KIND_CONV:
    case IR_KIND_CAST: case IR_KIND_EINSUM: case IR_KIND_COUNT:
        return false; /* no bridge op has these kinds (OPF_BRIDGE is checked above) */
    }
    return false;
}

bool ane_bridge_gate_msg(const af_tensor *t, af_family_id family, char *err, size_t errn) {
    const ane_family_info *fi = ane_family_info_of(family);
    ane_gate_fail f;
    if (!ane_bridge_gate(t, fi, &f)) return true;
    snprintf(err, errn, "%s: the %s on %s: %s. Remedy: %s", ir_ops[t->op].name, f.wall, fi ? fi->name : "the default family",
             f.detail, f.remedy);
    return false;
}
