/* net.plist units of the normalization bridge ops (seed 004). The parameters the
 * engine parses as fp16 tokens are written as fp16 bit patterns (a float there would
 * truncate to about 0): LRN Alpha, MinMaxNormalization Epsilon, ScaledElementWise
 * Scale. LRN's Alpha is alpha * C: the engine divides it by KernelChannel = C. */
#include "netplist/bridge_unit_util.h"
#include "ir/op_cases.h"

#include <stdio.h>

#include <string.h>

static const char *const sew_types[5] = { "Add", "Sub", "Mult", "Min", "Max" };

bool bridge_describe_norm(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *b[2] = { "x0", "x1" };
    netplist_unit *u;
    af_shape x = t->src[0]->shape;
    switch (t->op) {
    case IR_OP_LRN: {
        int64_t C = x.dim[x.rank - 3];
        if (!(u = bridge_unit(t, p, "LocalResponseNormalization", 1, b, err, errn))) return false;
        plist_set_int(u->params, "Alpha", bridge_f16_bits(t->a.scalar * (float)C));
        plist_set_real(u->params, "Beta", t->a.beta);
        plist_set_real(u->params, "K", t->a.eps);
        plist_set_int(u->params, "KernelChannel", C);
        return true;
    }
    case IR_OP_MINMAX_NORM:
        if (x.rank == 2) p->inputs[0].dims = p->out = (netplist_dims){ 1, 1, x.dim[0], x.dim[1] }; /* rows, not [C, W] */
        if (!(u = bridge_unit(t, p, "MinMaxNormalization", 1, b, err, errn))) return false;
        plist_set_str(u->params, "Dimension", t->a.axis == x.rank - 1 ? "Width" : "Height");
        plist_set_int(u->params, "Epsilon", bridge_f16_bits(t->a.eps));
        return true;
    case IR_OP_SCALED_ELEMENTWISE: /* Sub and Mult never reach here (the builder refuses them) */
        if (!(u = bridge_unit(t, p, "ScaledElementWise", 2, b, err, errn))) return false;
        plist_set_str(u->params, "Type", sew_types[t->a.mode]);
        plist_set_int(u->params, "Scale", bridge_f16_bits(t->a.scalar));
        return true;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BNORM, id)
#include "ir/ops.def"
#undef X
        snprintf(err, errn, "op %s reached the net.plist unit of another kind", ir_ops[t->op].name);
        return false;
    }
    return false;
}

static bool decode_norm(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                      int *order, char *err, size_t errn) {
    (void)order;
    *a = (ir_attrs){ 0 };
    int64_t v, c;
    int rank = in[0].n > 1 ? 4 : 3;
    if (!strcmp(u->type, "LocalResponseNormalization")) {
        const plist_value *beta = plist_get_kind(u->params, "Beta", PLIST_REAL), *k = plist_get_kind(u->params, "K", PLIST_REAL);
        if (!bridge_param_int(u, "Alpha", &v, err, errn) || !bridge_param_int(u, "KernelChannel", &c, err, errn)) return false;
        if (!beta || !k || c < 1) { bridge_param_str(u, "Beta and Params.K", err, errn); return false; }
        *op = IR_OP_LRN;
        a->scalar = bridge_f16_value(v) / (float)c;
        a->beta = (float)beta->r;
        a->eps = (float)k->r;
        shapes[0] = bridge_shape_of(in[0], rank);
        return true;
    }
    if (!strcmp(u->type, "MinMaxNormalization")) {
        static const char *const dims[2] = { "Width", "Height" };
        int d = bridge_pick(bridge_param_str(u, "Dimension", err, errn), dims, 2, "Dimension", err, errn);
        if (d < 0 || !bridge_param_int(u, "Epsilon", &v, err, errn)) return false;
        *op = IR_OP_MINMAX_NORM;
        a->axis = rank - 1 - d;
        a->eps = bridge_f16_value(v);
        shapes[0] = bridge_shape_of(in[0], rank);
        return true;
    }
    if (!strcmp(u->type, "ScaledElementWise") && nin == 2) {
        int ty = bridge_pick(bridge_param_str(u, "Type", err, errn), sew_types, 5, "Type", err, errn);
        if (ty < 0 || !bridge_param_int(u, "Scale", &v, err, errn)) return false;
        *op = IR_OP_SCALED_ELEMENTWISE;
        a->mode = ty;
        a->scalar = bridge_f16_value(v);
        shapes[0] = shapes[1] = bridge_shape_of(in[0], 4);
        return true;
    }
    snprintf(err, errn, "net.plist: no reader for a %s unit with %d bottoms", u->type, nin);
    return false;
}
bool bridge_read_norm(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_norm, u, in, nin, out, err, errn);
}
