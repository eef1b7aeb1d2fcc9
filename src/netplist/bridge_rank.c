/* net.plist units of the rank bridge ops (seed 004): Sort, TopK, ArgMinMax and
 * GlobalArgMinMax. Sort and TopK see x [..., C, W] as batch x [C, 1, W]: the W axis
 * sorted (SortDimension), every channel permuted by the key lane (VectorDimension
 * Channel, SortIndices); Indices asks for the order instead of the values. */
#include "netplist/bridge_unit_util.h"

#include <stdio.h>

static const char *const directions[2] = { "Ascending", "Descending" };
static const char *const minmax[2] = { "Min", "Max" };

static bool describe_sorted(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    af_shape x = t->src[0]->shape;
    int64_t C = x.dim[x.rank - 2], W = x.dim[x.rank - 1], B = af_shape_count(x) / (C * W), k = t->shape.dim[t->shape.rank - 1];
    bool indices = t->a.ints[2] != 0;
    p->inputs[0].dims = (netplist_dims){ B, C, 1, W };
    p->out = (netplist_dims){ B, indices ? 1 : C, 1, k };
    const char *b[1] = { "x0" };
    netplist_unit *u = bridge_unit(t, p, t->op == IR_OP_SORT ? "Sort" : "TopK", 1, b, err, errn);
    if (!u) return false;
    if (t->op == IR_OP_SORT) plist_set_str(u->params, "Direction", directions[t->a.ints[1] != 0]);
    else {
        plist_set_str(u->params, "Type", minmax[t->a.ints[1] != 0]);
        plist_set_int(u->params, "K", k);
    }
    plist_set_str(u->params, "SortDimension", "Width");
    plist_set_str(u->params, "VectorDimension", "Channel");
    plist_set_int(u->params, "SortIndices", t->a.ints[0]);
    plist_set_bool(u->params, "Indices", indices);
    return true;
}
bool bridge_describe_sort(const af_tensor *t, netplist_program *p, char *err, size_t errn) { return describe_sorted(t, p, err, errn); }
bool bridge_describe_topk(const af_tensor *t, netplist_program *p, char *err, size_t errn) { return describe_sorted(t, p, err, errn); }

static bool read_sorted(const netplist_unit *u, const netplist_dims *in, ir_op *op, ir_attrs *a, af_shape *shapes, char *err,
                        size_t errn) {
    int64_t lane, k = 0;
    const plist_value *ind = plist_get_kind(u->params, "Indices", PLIST_BOOL);
    bool topk = *op == IR_OP_TOPK;
    int dir = topk ? bridge_pick(bridge_param_str(u, "Type", err, errn), minmax, 2, "Type", err, errn)
                   : bridge_pick(bridge_param_str(u, "Direction", err, errn), directions, 2, "Direction", err, errn);
    if (dir < 0 || !bridge_param_int(u, "SortIndices", &lane, err, errn) || (topk && !bridge_param_int(u, "K", &k, err, errn)))
        return false;
    *a = (ir_attrs){ .ints = { lane, dir, ind && ind->b, k } };
    shapes[0] = in[0].n > 1 ? (af_shape){ .rank = 3, .dim = { in[0].n, in[0].c, in[0].w } } : bridge_shape_of(in[0], 2);
    return true;
}
static bool decode_sort(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                      int *order, char *err, size_t errn) {
    (void)order;
    (void)nin;
    *op = IR_OP_SORT;
    return read_sorted(u, in, op, a, shapes, err, errn);
}
static bool decode_topk(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                      int *order, char *err, size_t errn) {
    (void)order;
    (void)nin;
    *op = IR_OP_TOPK;
    return read_sorted(u, in, op, a, shapes, err, errn);
}

/* Spatial modes: one window over the whole H x W plane (an index per channel); channel
 * modes: a 1 x 1 window (a channel index per position). No padding. */
static const char *const modes[4] = { "SpatialArgMin", "SpatialArgMax", "ChannelArgMin", "ChannelArgMax" };

bool bridge_describe_argminmax(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *b[1] = { "x0" };
    netplist_unit *u = bridge_unit(t, p, "ArgMinMax", 1, b, err, errn);
    if (!u) return false;
    bool channel = t->a.ints[0] != 0;
    plist_set_str(u->params, "Mode", modes[2 * channel + (t->a.ints[1] != 0)]);
    plist_set_int(u->params, "KernelWidth", channel ? 1 : p->inputs[0].dims.w);
    plist_set_int(u->params, "KernelHeight", channel ? 1 : p->inputs[0].dims.h);
    plist_set_int(u->params, "PadTop", 0);
    plist_set_int(u->params, "PadBot", 0);
    plist_set_int(u->params, "PadLeft", 0);
    plist_set_int(u->params, "PadRight", 0);
    return true;
}

static bool decode_argminmax(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                           int *order, char *err, size_t errn) {
    (void)order;
    (void)nin;
    int m = bridge_pick(bridge_param_str(u, "Mode", err, errn), modes, 4, "Mode", err, errn);
    if (m < 0) return false;
    *op = IR_OP_ARGMINMAX;
    *a = (ir_attrs){ .ints = { m / 2, m % 2 } };
    shapes[0] = bridge_shape_of(in[0], in[0].n > 1 ? 4 : 3);
    return true;
}

static const char *const dimensions[3] = { "Channel", "Height", "Width" };

/* The engine's name of axis ax of a rank-r shape, in netplist_dims_of's view (rank 2 is
 * [C, W]); the gate has refused the batch axis. */
static const char *dimension_of(int ax, int r) {
    if (r == 2) return ax == 0 ? "Channel" : "Width";
    return dimensions[ax - (r - 3)];
}

bool bridge_describe_global_argminmax(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *b[1] = { "x0" };
    netplist_unit *u = bridge_unit(t, p, "GlobalArgMinMax", 1, b, err, errn);
    if (!u) return false;
    plist_set_str(u->params, "Type", minmax[t->a.ints[1] != 0]);
    plist_set_str(u->params, "Dimension", dimension_of(t->a.axis, t->src[0]->shape.rank));
    return true;
}

static bool decode_global_argminmax(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a,
                                  af_shape *shapes, int *order, char *err, size_t errn) {
    (void)order;
    (void)nin;
    int ty = bridge_pick(bridge_param_str(u, "Type", err, errn), minmax, 2, "Type", err, errn);
    int d = ty < 0 ? -1 : bridge_pick(bridge_param_str(u, "Dimension", err, errn), dimensions, 3, "Dimension", err, errn);
    if (d < 0) return false;
    *op = IR_OP_GLOBAL_ARGMINMAX;
    *a = (ir_attrs){ .axis = 1 + d, .ints = { 0, ty } };
    shapes[0] = bridge_shape_of(in[0], 4);
    return true;
}
bool bridge_read_sort(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_sort, u, in, nin, out, err, errn);
}
bool bridge_read_topk(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_topk, u, in, nin, out, err, errn);
}
bool bridge_read_argminmax(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_argminmax, u, in, nin, out, err, errn);
}
bool bridge_read_global_argminmax(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_global_argminmax, u, in, nin, out, err, errn);
}
