/* The bridge ops' unit table (bridge_units.def) and the program of one bridge node. */
#include "netplist/netplist.h"

#include <stdio.h>
#include <string.h>

#define BRIDGE(id, type, describe, read) \
    bool describe(const af_tensor *, netplist_program *, char *, size_t);
#include "netplist/bridge_units.def"
#undef BRIDGE
#define BRIDGE(id, type, describe, read) \
    bool read(const netplist_unit *, af_tensor *const *, int, af_tensor **, char *, size_t);
#include "netplist/bridge_units.def"
#undef BRIDGE

bool bridge_read_none(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    (void)in, (void)nin, (void)out;
    snprintf(err, errn, "net.plist: no reader for units of type %s (its bridge row has bridge_read_none)", u->type);
    return false;
}

static const bridge_unit_row rows[] = {
#define BRIDGE(id, type, describe, read) {IR_OP_##id, type, describe, read},
#include "netplist/bridge_units.def"
#undef BRIDGE
    {IR_OP_COUNT, NULL, NULL, NULL},
};

const bridge_spelling bridge_spellings[] = {
#define SPELLING(type, field, source, note) {type, field, BRIDGE_##source, note},
#include "netplist/bridge_spellings.def"
#undef SPELLING
    {NULL, NULL, BRIDGE_SEED, NULL},
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

bool bridge_read_transpose(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err,
                           size_t errn); /* bridge_sdpa.c */

bridge_read_fn netplist_unit_reader(const char *type) {
    const bridge_unit_row *row = bridge_unit_by_type(type);
    if (row) return row->read;
    return !strcmp(type, "Transpose") ? bridge_read_transpose : NULL;
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
