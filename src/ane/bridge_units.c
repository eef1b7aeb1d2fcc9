/* The bridge ops' unit table (bridge_units.def) and the program of one bridge node. */
#include "ane/netplist.h"

#include <stdio.h>
#include <string.h>

#define BRIDGE(id, type, describe, read) \
    bool describe(const af_tensor *, netplist_program *, char *, size_t);
#include "ane/bridge_units.def"
#undef BRIDGE
#define BRIDGE(id, type, describe, read) \
    bool read(const netplist_unit *, const netplist_dims *, int, ir_op *, ir_attrs *, af_shape *, char *, size_t);
#include "ane/bridge_units.def"
#undef BRIDGE

bool bridge_read_none(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a,
                      af_shape *in_shapes, char *err, size_t errn) {
    (void)in, (void)nin, (void)op, (void)a, (void)in_shapes;
    snprintf(err, errn, "net.plist: no reader for units of type %s (its bridge row has bridge_read_none)", u->type);
    return false;
}

static const bridge_unit_row rows[] = {
#define BRIDGE(id, type, describe, read) {IR_OP_##id, type, describe, read},
#include "ane/bridge_units.def"
#undef BRIDGE
    {IR_OP_COUNT, NULL, NULL, NULL},
};

const bridge_unit_row *bridge_unit_info(ir_op op) {
    for (const bridge_unit_row *r = rows; r->type; r++)
        if (r->op == op) return r;
    return NULL;
}

const bridge_unit_row *bridge_unit_by_type(const char *type) {
    for (const bridge_unit_row *r = rows; r->type; r++)
        if (!strcmp(r->type, type)) return r;
    return NULL;
}

bool netplist_for_node(const af_tensor *t, af_family_id family, netplist_program *p, char *err, size_t errn) {
    netplist_init(p);
    p->family = family;
    const bridge_unit_row *row = bridge_unit_info(t->op);
    if (!row) {
        snprintf(err, errn, "%s has no net.plist unit: it is not a bridge op", ir_ops[t->op].name);
        return false;
    }
    for (int k = 0; k < t->nsrc; k++) {
        netplist_dims d;
        if (!netplist_dims_of(t->src[k]->shape, &d)) {
            snprintf(err, errn, "%s: source %d has rank %d; the engine's tensors have at most 4 axes (N, C, H, W)",
                     ir_ops[t->op].name, k, t->src[k]->shape.rank);
            return false;
        }
        if (!netplist_add_input(p, d)) {
            snprintf(err, errn, "%s: more than %d sources", ir_ops[t->op].name, NETPLIST_MAX_INPUTS);
            return false;
        }
    }
    if (!netplist_dims_of(t->shape, &p->out)) {
        snprintf(err, errn, "%s: the output has rank %d; at most 4 axes", ir_ops[t->op].name, t->shape.rank);
        return false;
    }
    if (!row->describe(t, p, err, errn)) {
        netplist_free(p);
        return false;
    }
    return true;
}
