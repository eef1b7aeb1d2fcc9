/* net.plist units of the structural bridge layers: Flatten, Dropout (rate 0), Broadcast
 * and InputView (seed 004; Params spellings from ane-formats.md §5). */
#include "netplist/netplist.h"

#include <stdio.h>
#include <string.h>

static const char *const x0[] = {"x0"};

bool bridge_describe_flatten(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    if (p->inputs[0].dims.n != 1) {
        snprintf(err, errn, "flatten: the engine's Flatten layer takes one [C, H, W] tensor (batch 1); this input has "
                 "batch %lld: reshape the batch into C first", (long long)p->inputs[0].dims.n);
        return false;
    }
    (void)t;
    return netplist_add_unit(p, "Flatten", 1, x0, 1, err, errn) != NULL;
}

bool bridge_describe_dropout(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    if (t->a.scalar != 0) { /* the builder refuses it too; a hand-made node must not reach the engine */
        snprintf(err, errn, "dropout: rate %g; the engine's Dropout layer is the inference-time identity (rate 0 only)",
                 (double)t->a.scalar);
        return false;
    }
    return netplist_add_unit(p, "Dropout", 1, x0, p->out.c, err, errn) != NULL;
}

bool bridge_describe_broadcast(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *dim = netplist_axis_name(t->shape.rank, t->a.axis);
    if (!dim) {
        snprintf(err, errn, "broadcast: axis %d of a rank-%d tensor has no engine axis", t->a.axis, t->shape.rank);
        return false;
    }
    netplist_unit *u = netplist_add_unit(p, "Broadcast", 1, x0, p->out.c, err, errn);
    if (!u) return false;
    plist_value *info = plist_push(plist_set(u->params, "BroadcastInfo", plist_array()), plist_dict());
    plist_set_str(info, "Dimension", dim);
    plist_set_int(info, "Size", t->a.ints[0]);
    return true;
}

bool bridge_describe_input_view(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    /* the values as one row: the same contiguous bytes */
    p->inputs[0].dims = (netplist_dims){1, 1, 1, af_shape_count(t->src[0]->shape)};
    p->out = (netplist_dims){1, 1, 1, t->a.sizes[0]};
    netplist_unit *u = netplist_add_unit(p, "InputView", 1, x0, 1, err, errn);
    if (!u) return false;
    plist_set_str(u->params, "Dimension", "Width");
    plist_set_int(u->params, "Offset", t->a.ints[0]);
    plist_set_int(u->params, "Size", t->a.sizes[0]);
    return true;
}

/* ---- readers: each unit as IR ops over [N, C, H, W] ---- */

static bool one_input(const netplist_unit *u, int nin, char *err, size_t errn) {
    if (nin == 1) return true;
    snprintf(err, errn, "net.plist: a %s unit reads one tensor; %s reads %d", u->type, u->name, nin);
    return false;
}

static af_tensor *as_row(af_tensor *x) {
    return x ? af_reshape(x, AF_SHAPE(1, 1, 1, af_shape_count(x->shape))) : NULL;
}

bool bridge_read_flatten(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    if (!one_input(u, nin, err, errn)) return false;
    return (*out = as_row(af_flatten(in[0]))) != NULL;
}

bool bridge_read_dropout(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    if (!one_input(u, nin, err, errn)) return false;
    return (*out = af_dropout(in[0], 0)) != NULL;
}

bool bridge_read_broadcast(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    if (!one_input(u, nin, err, errn)) return false;
    const plist_value *info = plist_get_kind(u->params, "BroadcastInfo", PLIST_ARRAY);
    af_tensor *x = in[0];
    for (int k = 0; info && k < info->n; k++) {
        int64_t size = 0;
        int axis = netplist_axis_index(plist_get_str(info->items[k], "Dimension"));
        if (axis < 0 || !plist_get_int(info->items[k], "Size", &size)) {
            snprintf(err, errn, "net.plist: %s: BroadcastInfo entry %d needs Dimension (Batch/Channel/Height/Width) and Size",
                     u->name, k);
            return false;
        }
        x = af_broadcast(x, axis, size);
    }
    if (!info || !info->n) {
        snprintf(err, errn, "net.plist: %s: Broadcast without BroadcastInfo", u->name);
        return false;
    }
    return (*out = x) != NULL;
}

bool bridge_read_input_view(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err,
                            size_t errn) {
    if (!one_input(u, nin, err, errn)) return false;
    int64_t off = -1, size = 0;
    const char *dim = plist_get_str(u->params, "Dimension");
    if (!dim || strcmp(dim, "Width") || !plist_get_int(u->params, "Offset", &off) || !plist_get_int(u->params, "Size", &size)) {
        snprintf(err, errn, "net.plist: %s: InputView needs Dimension Width, Offset and Size", u->name);
        return false;
    }
    return (*out = as_row(af_input_view(in[0], off, size))) != NULL;
}
