/* Shared pieces of the bridge ops' net.plist units. */
#include "ane/bridge_unit_util.h"
#include "ane/bridge_gates.h"
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
