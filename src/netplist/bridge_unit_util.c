/* Shared pieces of the bridge ops' net.plist units. */
#include "netplist/bridge_unit_util.h"
#include "netplist/bridge_gates.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <string.h>

netplist_unit *bridge_unit(const af_tensor *t, netplist_program *p, const char *type, int nbottom, const char *const *bottom,
                           char *err, size_t errn) {
    if (!ane_bridge_gate_msg(t, p->family, err, errn)) return NULL;
    return netplist_add_unit(p, type, nbottom, bottom, p->out.c, err, errn);
}

int64_t bridge_f16_bits(float v) {
    uint16_t h;
    ir_f32_to_f16_array(&v, &h, 1);
    return h;
}

float bridge_f16_value(int64_t bits) {
    uint16_t h = (uint16_t)bits;
    float v;
    ir_f16_to_f32_array(&h, &v, 1);
    return v;
}

af_shape bridge_shape_of(netplist_dims d, int rank) {
    int64_t all[4] = { d.n, d.c, d.h, d.w };
    af_shape s = { .rank = rank };
    if (rank == 2) { s.dim[0] = d.c; s.dim[1] = d.w; return s; }
    for (int i = 0; i < rank; i++) s.dim[i] = all[4 - rank + i];
    return s;
}

bool bridge_param_int(const netplist_unit *u, const char *key, int64_t *v, char *err, size_t errn) {
    if (plist_get_int(u->params, key, v)) return true;
    snprintf(err, errn, "net.plist: %s unit %s has no integer Params.%s", u->type, u->name, key);
    return false;
}

const char *bridge_param_str(const netplist_unit *u, const char *key, char *err, size_t errn) {
    const char *s = plist_get_str(u->params, key);
    if (!s) snprintf(err, errn, "net.plist: %s unit %s has no string Params.%s", u->type, u->name, key);
    return s;
}

int bridge_pick(const char *s, const char *const *names, int n, const char *key, char *err, size_t errn) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    if (s) snprintf(err, errn, "net.plist: Params.%s = '%s' is not one this reader knows", key, s);
    return -1;
}

bool bridge_read_decoded(bridge_decode_fn decode, const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out,
                         char *err, size_t errn) {
    netplist_dims d[2];
    int order[2] = { 0, 1 };
    if (nin < 1 || nin > 2) {
        snprintf(err, errn, "net.plist: a %s unit reads 1 or 2 tensors; %s reads %d", u->type, u->name, nin);
        return false;
    }
    for (int k = 0; k < nin; k++) {
        af_shape s = in[k]->shape;
        if (s.rank != 4) {
            snprintf(err, errn, "net.plist: %s: bottom %d is not [N, C, H, W]", u->name, k);
            return false;
        }
        d[k] = (netplist_dims){ s.dim[0], s.dim[1], s.dim[2], s.dim[3] };
    }
    ir_op op = IR_OP_COUNT;
    ir_attrs a;
    af_shape shapes[2];
    if (!decode(u, d, nin, &op, &a, shapes, order, err, errn)) return false;
    af_tensor *src[2];
    for (int k = 0; k < nin; k++) src[k] = af_reshape(in[order[k]], shapes[k]);
    af_tensor *y = ir_build(op, nin, src, &a);
    if (!y) {
        snprintf(err, errn, "net.plist: %s: %s", u->name, af_graph_error(in[0]->g));
        return false;
    }
    netplist_program p;
    if (!netplist_for_node(y, AF_FAMILY_A16, &p, err, errn)) return false;
    netplist_dims o = p.out;
    netplist_free(&p);
    return (*out = af_reshape(y, AF_SHAPE(o.n, o.c, o.h, o.w))) != NULL;
}
