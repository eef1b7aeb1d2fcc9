/* net.plist units of the geometry bridge ops (seed 004). Points are rows: points [N, 3]
 * as H = N rows of W = 3 (RadiusSearch's output is "Np rows x Nc cols"); a map [H, W]
 * as one [1, 1, H, W] plane. Params are the seed's where it names them (FPS
 * CentroidCount/DistanceMetric, RadiusSearch Radius, DynamicSlice SliceSize) and none
 * otherwise; OutputChannels follows the seed's unit examples (FPS 3, RadiusSearch 1). */
#include "netplist/bridge_unit_util.h"
#include "ir/op_cases.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static netplist_dims rows(af_shape s) { return (netplist_dims){ 1, 1, s.rank == 2 ? s.dim[0] : 1, s.dim[s.rank - 1] }; }

static bool one_unit(const af_tensor *t, netplist_program *p, const char *type, int nb, const char *const *b, int64_t out_c,
                     netplist_unit **u, char *err, size_t errn) {
    *u = bridge_unit(t, p, type, nb, b, err, errn);
    if (*u && out_c) (*u)->out_channels = out_c;
    return *u != NULL;
}

bool bridge_describe_geometry(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *b2[2] = { "x0", "x1" };
    netplist_unit *u;
    switch (t->op) {
    case IR_OP_CROSS_PRODUCT: return one_unit(t, p, "CrossProduct", 2, b2, 0, &u, err, errn);
    case IR_OP_CROSS_CORRELATION:
        p->inputs[0].dims = rows(t->src[0]->shape);
        p->inputs[1].dims = rows(t->src[1]->shape);
        p->out = rows(t->shape);
        return one_unit(t, p, "CrossCorrelation", 2, b2, 1, &u, err, errn);
    case IR_OP_COST_VOLUME: /* aux, ref: [R + 1, Wa] costs, one channel per disparity */
        return one_unit(t, p, "CostVolume", 2, b2, 0, &u, err, errn);
    case IR_OP_FPS:
        p->inputs[0].dims = rows(t->src[0]->shape);
        p->out = rows(t->shape);
        if (!one_unit(t, p, "FurthestPointSampling", 1, b2, 3, &u, err, errn)) return false;
        plist_set_int(u->params, "CentroidCount", t->a.ints[0]);
        plist_set_str(u->params, "DistanceMetric", "L2");
        return true;
    case IR_OP_RADIUS_SEARCH: { /* Bottom: centroids first, then points */
        const char *b[2] = { "x1", "x0" };
        p->inputs[0].dims = rows(t->src[0]->shape);
        p->inputs[1].dims = rows(t->src[1]->shape);
        p->out = (netplist_dims){ 1, 1, t->shape.dim[0], t->shape.dim[1] };
        if (!one_unit(t, p, "RadiusSearch", 2, b, 1, &u, err, errn)) return false;
        u->out_u8 = true; /* a uint8 membership mask, not fp16 (unverified: bridge_spellings.def) */
        plist_set_real(u->params, "Radius", t->a.scalar);
        return true;
    }
    case IR_OP_DYNAMIC_SLICE: { /* seed 004 binds the start "through a netplist constant
                * (overwrites the index constant in weights.1)": a UInt16 constant the
                * runtime rewrites before a run (bridge_dslice_start); x is the only input. */
        p->ninputs = 1;
        float s0 = t->src[1]->op == IR_OP_CONST && t->src[1]->data ? t->src[1]->data[0] : 0.0f;
        uint16_t start = (uint16_t)bridge_dslice_start(t, s0);
        const char *b[2] = { "x0", "start" };
        if (!netplist_add_constant_in(p, 1, true, "start", (netplist_dims){ 1, 1, 1, 1 }, &start, err, errn)) return false;
        if (!one_unit(t, p, "DynamicSlice", 2, b, 0, &u, err, errn)) return false;
        plist_set_str(u->params, "Dimension", "Width");
        plist_set_int(u->params, "SliceSize", t->a.sizes[0]);
        return true;
    }
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, GEOMETRY, id)
#include "ir/ops.def"
#undef X
        snprintf(err, errn, "op %s reached the net.plist unit of another kind", ir_ops[t->op].name);
        return false;
    }
    return false;
}

/* As the CPU kernel reads it (cpu_dynamic_slice_start): rounded half up, clamped into
 * the axis, so the constant holds the start every target uses. */
int64_t bridge_dslice_start(const af_tensor *t, float start) {
    int64_t extent = t->src[0]->shape.dim[t->a.axis], size = t->a.sizes[0];
    double s = floor((double)start + 0.5);
    if (!(s > 0)) return 0; /* also NaN */
    return s > (double)(extent - size) ? extent - size : (int64_t)s;
}

static af_shape rows_shape(netplist_dims d) { return d.h > 1 ? (af_shape){ .rank = 2, .dim = { d.h, d.w } } : (af_shape){ .rank = 1, .dim = { d.w } }; }

static bool decode_geometry(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                          int *order, char *err, size_t errn) {
    (void)order;
    *a = (ir_attrs){ 0 };
    int64_t v;
    if (nin < 1) return false;
    if (!strcmp(u->type, "CrossProduct") && nin == 2) {
        *op = IR_OP_CROSS_PRODUCT;
        shapes[0] = shapes[1] = bridge_shape_of(in[0], 2);
    } else if (!strcmp(u->type, "CrossCorrelation") && nin == 2) {
        *op = IR_OP_CROSS_CORRELATION;
        shapes[0] = (af_shape){ .rank = 2, .dim = { in[0].h, in[0].w } };
        shapes[1] = (af_shape){ .rank = 2, .dim = { in[1].h, in[1].w } };
    } else if (!strcmp(u->type, "CostVolume") && nin == 2) {
        *op = IR_OP_COST_VOLUME;
        a->ints[0] = u->out_channels - 1;
        shapes[0] = rows_shape(in[0]);
        shapes[1] = rows_shape(in[1]);
    } else if (!strcmp(u->type, "FurthestPointSampling")) {
        if (!bridge_param_int(u, "CentroidCount", &v, err, errn)) return false;
        *op = IR_OP_FPS;
        a->ints[0] = v;
        shapes[0] = (af_shape){ .rank = 2, .dim = { in[0].h, in[0].w } };
    } else if (!strcmp(u->type, "RadiusSearch") && nin == 2) { /* in: centroids, points */
        const plist_value *r = plist_get_kind(u->params, "Radius", PLIST_REAL);
        if (!r) { bridge_param_str(u, "Radius", err, errn); return false; }
        *op = IR_OP_RADIUS_SEARCH;
        a->scalar = (float)r->r;
        order[0] = 1; /* the op's points are the unit's second bottom */
        order[1] = 0;
        shapes[0] = (af_shape){ .rank = 2, .dim = { in[1].h, in[1].w } };
        shapes[1] = (af_shape){ .rank = 2, .dim = { in[0].h, in[0].w } };
    } else if (!strcmp(u->type, "DynamicSlice") && nin == 2) {
        if (!bridge_param_int(u, "SliceSize", &v, err, errn)) return false;
        *op = IR_OP_DYNAMIC_SLICE;
        a->axis = 3;
        a->sizes[0] = v;
        shapes[0] = bridge_shape_of(in[0], 4);
        shapes[1] = (af_shape){ .rank = 1, .dim = { 1 } };
    } else {
        snprintf(err, errn, "net.plist: no reader for a %s unit with %d bottoms", u->type, nin);
    return false;
    }
    return true;
}
bool bridge_read_geometry(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_geometry, u, in, nin, out, err, errn);
}
