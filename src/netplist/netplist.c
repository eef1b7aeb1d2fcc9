/* net.plist programs: building one, its plist document, and reading a document back. */
#include "netplist/netplist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool netplist_dims_of(af_shape s, netplist_dims *d) {
    if (s.rank > 4) return false;
    *d = (netplist_dims){1, 1, 1, 1};
    switch (s.rank) {
    case 4: d->n = s.dim[0], d->c = s.dim[1], d->h = s.dim[2], d->w = s.dim[3]; break;
    case 3: d->c = s.dim[0], d->h = s.dim[1], d->w = s.dim[2]; break;
    case 2: d->c = s.dim[0], d->w = s.dim[1]; break;
    case 1: d->w = s.dim[0]; break;
    default: break;
    }
    return true;
}

int64_t netplist_dims_count(netplist_dims d) { return d.n * d.c * d.h * d.w; }

static const char *const axis_names[4] = {"Batch", "Channel", "Height", "Width"};

const char *netplist_axis_name(int rank, int axis) {
    static const int of_rank[5][4] = {{-1}, {3}, {1, 3}, {1, 2, 3}, {0, 1, 2, 3}};
    if (rank < 1 || rank > 4 || axis < 0 || axis >= rank) return NULL;
    return axis_names[of_rank[rank][axis]];
}

int netplist_axis_index(const char *name) {
    for (int k = 0; name && k < 4; k++)
        if (!strcmp(name, axis_names[k])) return k;
    return -1;
}

af_shape netplist_shape4(netplist_dims d) { return (af_shape){.rank = 4, .dim = {d.n, d.c, d.h, d.w}}; }

static int64_t align64(int64_t x) { return (x + 63) / 64 * 64; }
int64_t netplist_row_stride(netplist_dims d) { return align64(d.w * 2); }
int64_t netplist_plane_stride(netplist_dims d) { return align64(netplist_row_stride(d) * d.h); }

void netplist_init(netplist_program *p) { memset(p, 0, sizeof *p); }

void netplist_free(netplist_program *p) {
    for (int k = 0; k < p->nunits; k++) plist_free(p->units[k].params);
    free(p->weights0);
    free(p->weights1);
    memset(p, 0, sizeof *p);
}

bool netplist_add_input(netplist_program *p, netplist_dims d) {
    if (p->ninputs >= NETPLIST_MAX_INPUTS) return false;
    netplist_input *in = &p->inputs[p->ninputs];
    snprintf(in->name, sizeof in->name, "x%d", p->ninputs);
    in->dims = d;
    p->ninputs++;
    return true;
}

static bool declared(const netplist_program *p, const char *name) {
    for (int k = 0; k < p->ninputs; k++)
        if (!strcmp(p->inputs[k].name, name)) return true;
    for (int k = 0; k < p->nconsts; k++)
        if (!strcmp(p->consts[k].name, name)) return true;
    for (int k = 0; k < p->nunits; k++)
        if (!strcmp(p->units[k].name, name)) return true;
    return false;
}

netplist_unit *netplist_add_unit(netplist_program *p, const char *type, int nbottom, const char *const *bottom,
                                 int64_t out_channels, char *err, size_t errn) {
    if (p->nunits >= NETPLIST_MAX_UNITS || nbottom > NETPLIST_MAX_BOTTOM || nbottom < 0) {
        snprintf(err, errn, "net.plist: more than %d units or %d bottoms in one program", NETPLIST_MAX_UNITS,
                 NETPLIST_MAX_BOTTOM);
        return NULL;
    }
    if (strlen(type) >= NETPLIST_NAME) {
        snprintf(err, errn, "net.plist: unit type '%s' is too long", type);
        return NULL;
    }
    netplist_unit *u = &p->units[p->nunits];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "u%d", p->nunits);
    snprintf(u->type, sizeof u->type, "%s", type);
    for (int k = 0; k < nbottom; k++) {
        if (!declared(p, bottom[k]) || strlen(bottom[k]) >= NETPLIST_NAME) {
            snprintf(err, errn, "net.plist: unit %s reads '%s', which is no input, constant or earlier unit", u->name,
                     bottom[k]);
            return NULL;
        }
        snprintf(u->bottom[k], NETPLIST_NAME, "%s", bottom[k]);
    }
    u->nbottom = nbottom;
    u->out_channels = out_channels;
    u->params = plist_dict();
    if (!u->params) {
        snprintf(err, errn, "net.plist: out of memory");
        return NULL;
    }
    p->nunits++;
    return u;
}

bool netplist_add_constant_in(netplist_program *p, int file, bool u16, const char *name, netplist_dims d,
                              const uint16_t *bits, char *err, size_t errn) {
    if (p->nconsts >= NETPLIST_MAX_CONSTS || strlen(name) >= NETPLIST_NAME || declared(p, name) || (file != 0 && file != 1)) {
        snprintf(err, errn, "net.plist: cannot declare constant '%s' (full, name too long or taken)", name);
        return false;
    }
    unsigned char **buf = file ? &p->weights1 : &p->weights0;
    size_t *len = file ? &p->weights1_len : &p->weights0_len;
    int64_t count = netplist_dims_count(d);
    size_t off = (size_t)align64((int64_t)*len), bytes = (size_t)count * 2;
    unsigned char *w = realloc(*buf, off + bytes);
    if (!w) {
        snprintf(err, errn, "net.plist: out of memory for constant '%s'", name);
        return false;
    }
    memset(w + *len, 0, off - *len);
    for (int64_t k = 0; k < count; k++) { /* little-endian, as the engine reads it */
        w[off + 2 * k] = (unsigned char)(bits[k] & 0xff);
        w[off + 2 * k + 1] = (unsigned char)(bits[k] >> 8);
    }
    *buf = w;
    *len = off + bytes;
    netplist_constant *c = &p->consts[p->nconsts++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->dims = d;
    c->file = file;
    c->u16 = u16;
    c->byte_offset = (int64_t)off;
    return true;
}

bool netplist_add_constant(netplist_program *p, const char *name, netplist_dims d, const uint16_t *fp16, char *err,
                           size_t errn) {
    return netplist_add_constant_in(p, 1, false, name, d, fp16, err, errn);
}

netplist_weights netplist_weights_of(const netplist_program *p) {
    return (netplist_weights){ { p->weights0, p->weights1 }, { p->weights0_len, p->weights1_len } };
}

/* ---- the document ---- */

static const char *consumer_of(const netplist_program *p, const char *name) {
    for (int u = 0; u < p->nunits; u++)
        for (int b = 0; b < p->units[u].nbottom; b++)
            if (!strcmp(p->units[u].bottom[b], name)) return p->units[u].name;
    return p->units[0].name;
}

/* The sizes an input carries in both of its entries (InputList and the network's). */
static void input_sizes(plist_value *e, const netplist_input *in) {
    plist_set_int(e, "BatchSize", in->dims.n);
    plist_set_int(e, "InputChannels", in->dims.c);
    plist_set_int(e, "InputHeight", in->dims.h);
    plist_set_int(e, "InputWidth", in->dims.w);
    plist_set_int(e, "InputInterleave", 1);
    plist_set_str(e, "InputType", "Float16");
}

plist_value *netplist_document(const netplist_program *p, char *err, size_t errn) {
    if (p->nunits < 1) {
        snprintf(err, errn, "net.plist: the program has no units");
        return NULL;
    }
    const char *last = p->units[p->nunits - 1].name;
    plist_value *doc = plist_dict();
    plist_set_str(doc, "Version", NETPLIST_VERSION);
    plist_push_str(plist_set(doc, "Networks", plist_array()), "net");

    plist_value *proc = plist_push(plist_set(doc, "ProcedureList", plist_array()), plist_dict());
    plist_set_str(proc, "Name", "procedure_0");
    plist_value *inlist = plist_set(proc, "InputList", plist_array());
    for (int k = 0; k < p->ninputs; k++) {
        const netplist_input *in = &p->inputs[k];
        plist_value *e = plist_push(inlist, plist_dict());
        input_sizes(e, in);
        plist_set_int(e, "InputDepth", 1);
        plist_set_str(e, "InputName", in->name);
        plist_set_str(e, "Name", consumer_of(p, in->name));
        plist_set_str(e, "OperationName", "op0");
    }
    plist_value *op = plist_push(plist_set(proc, "OperationList", plist_array()), plist_dict());
    plist_set_str(op, "NetworkName", "net");
    plist_set_str(op, "OperationName", "op0");
    plist_value *out = plist_push(plist_set(proc, "OutputList", plist_array()), plist_dict());
    plist_set_str(out, "Name", last);
    plist_set_str(out, "OperationName", "op0");
    plist_set_int(out, "OutputInterleave", 1);
    plist_set_str(out, "OutputName", "y");
    const char *out_type = p->units[p->nunits - 1].out_u8 ? "UInt8" : "Float16";
    plist_set_str(out, "OutputType", out_type);

    plist_value *net = plist_set(doc, "net", plist_dict());
    plist_value *units = plist_set(net, "Units", plist_array());
    for (int k = 0; k < p->nunits; k++) plist_push_str(units, p->units[k].name);
    plist_value *weights = plist_set(net, "Weights", plist_array());
    plist_push_str(weights, "weights.0");
    plist_push_str(weights, "weights.1");
    if (p->nconsts) {
        plist_value *cs = plist_set(net, "Constants", plist_array());
        for (int k = 0; k < p->nconsts; k++) plist_push_str(cs, p->consts[k].name);
    }
    for (int k = 0; k < p->ninputs; k++) {
        const netplist_input *in = &p->inputs[k];
        plist_value *e = plist_set(net, in->name, plist_dict());
        input_sizes(e, in);
        plist_set_int(e, "InputRowStride", netplist_row_stride(in->dims));
        plist_set_int(e, "InputPlaneStride", netplist_plane_stride(in->dims));
    }
    for (int k = 0; k < p->nconsts; k++) {
        const netplist_constant *c = &p->consts[k];
        plist_value *e = plist_set(net, c->name, plist_dict());
        plist_set_str(e, "ConstantName", c->name);
        plist_set_str(e, "ConstantType", c->u16 ? "UInt16" : "Float16");
        plist_set_int(e, "ConstantIndex", c->file);
        plist_set_int(e, "ConstantByteOffset", c->byte_offset);
        plist_set_int(e, "ConstantBatchSize", c->dims.n);
        plist_set_int(e, "ConstantChannels", c->dims.c);
        plist_set_int(e, "ConstantDepth", 1);
        plist_set_int(e, "ConstantHeight", c->dims.h);
        plist_set_int(e, "ConstantWidth", c->dims.w);
        plist_set_int(e, "ConstantInterleave", 1);
    }
    for (int k = 0; k < p->nunits; k++) {
        const netplist_unit *u = &p->units[k];
        plist_value *e = plist_set(net, u->name, plist_dict());
        plist_set_str(e, "Name", u->name);
        plist_set_str(e, "Type", u->type);
        plist_value *bottom = plist_set(e, "Bottom", plist_array());
        plist_value *types = plist_set(e, "InputType", plist_array());
        for (int b = 0; b < u->nbottom; b++) {
            plist_push_str(bottom, u->bottom[b]);
            plist_push_str(types, "Float16");
        }
        plist_set_str(e, "OutputType", u->out_u8 ? "UInt8" : "Float16");
        plist_set_int(e, "OutputChannels", u->out_channels);
        /* a copy: the program keeps its own Params */
        plist_set(e, "Params", u->params ? plist_clone(u->params) : plist_dict());
    }
    plist_value *y = plist_set(net, "y", plist_dict());
    plist_set_str(y, "Bottom", last);
    plist_set_str(y, "OutputType", out_type);
    plist_set_int(y, "OutputInterleave", 1);
    plist_set_str(y, "OutputName", "y");
    plist_set_int(y, "OutputRowStride", netplist_row_stride(p->out));
    plist_set_int(y, "OutputPlaneStride", netplist_plane_stride(p->out));
    return doc;
}
