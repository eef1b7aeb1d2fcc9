/* A net.plist document back into a program: what the fake framework runs and what the
 * round-trip tests compare. Everything is checked: a document that does not describe
 * one procedure over declared inputs, constants and units in order is refused. */
#include "netplist/netplist.h"

#include <stdio.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errn, "net.plist: " __VA_ARGS__); goto fail; } while (0)

static bool name_ok(const char *s) { return s && s[0] && strlen(s) < NETPLIST_NAME; }

static bool read_dims(const plist_value *d, const char *n, const char *c, const char *h, const char *w,
                      netplist_dims *out) {
    int64_t v[4];
    if (!plist_get_int(d, n, &v[0]) || !plist_get_int(d, c, &v[1]) || !plist_get_int(d, h, &v[2]) ||
        !plist_get_int(d, w, &v[3]))
        return false;
    for (int k = 0; k < 4; k++)
        if (v[k] < 1 || v[k] > (1 << 24)) return false;
    *out = (netplist_dims){v[0], v[1], v[2], v[3]};
    return netplist_dims_count(*out) <= ((int64_t)1 << 31);
}

bool netplist_parse(const plist_value *doc, const netplist_weights *w, netplist_program *p, char *err, size_t errn) {
    netplist_init(p);
    if (!doc || doc->kind != PLIST_DICT) BAD("the document is not a dict");
    if (!plist_get_str(doc, "Version")) BAD("no Version string");
    const plist_value *nets = plist_get_kind(doc, "Networks", PLIST_ARRAY);
    if (!nets || nets->n != 1 || nets->items[0]->kind != PLIST_STRING) BAD("Networks must name exactly one network");
    const plist_value *net = plist_get_kind(doc, nets->items[0]->s, PLIST_DICT);
    if (!net) BAD("the network '%s' is not in the document", nets->items[0]->s);
    const plist_value *procs = plist_get_kind(doc, "ProcedureList", PLIST_ARRAY);
    if (!procs || procs->n != 1 || procs->items[0]->kind != PLIST_DICT)
        BAD("ProcedureList must hold exactly one procedure (in-memory models take single-procedure netplists)");
    const plist_value *proc = procs->items[0];

    const plist_value *inlist = plist_get_kind(proc, "InputList", PLIST_ARRAY);
    if (!inlist || inlist->n > NETPLIST_MAX_INPUTS) BAD("InputList is missing or has more than %d inputs", NETPLIST_MAX_INPUTS);
    for (int k = 0; k < inlist->n; k++) {
        const plist_value *e = inlist->items[k];
        const char *name = plist_get_str(e, "InputName");
        netplist_dims d;
        if (!name_ok(name)) BAD("input %d has no usable InputName", k);
        if (!read_dims(e, "BatchSize", "InputChannels", "InputHeight", "InputWidth", &d))
            BAD("input %s lacks BatchSize/InputChannels/InputHeight/InputWidth in 1..2^24", name);
        netplist_input *in = &p->inputs[p->ninputs++];
        snprintf(in->name, sizeof in->name, "%s", name);
        in->dims = d;
    }

    const plist_value *consts = plist_get(net, "Constants");
    if (consts && (consts->kind != PLIST_ARRAY || consts->n > NETPLIST_MAX_CONSTS))
        BAD("Constants must be an array of at most %d names", NETPLIST_MAX_CONSTS);
    for (int k = 0; consts && k < consts->n; k++) {
        const plist_value *cn = consts->items[k];
        if (cn->kind != PLIST_STRING || !name_ok(cn->s)) BAD("Constants entry %d is not a usable name", k);
        const plist_value *e = plist_get_kind(net, cn->s, PLIST_DICT);
        netplist_dims d;
        int64_t index = -1, off = -1;
        if (!e) BAD("constant %s is listed but not declared", cn->s);
        if (!read_dims(e, "ConstantBatchSize", "ConstantChannels", "ConstantHeight", "ConstantWidth", &d))
            BAD("constant %s lacks its sizes", cn->s);
        if (!plist_get_int(e, "ConstantIndex", &index) || (index != 0 && index != 1))
            BAD("constant %s must live in weights.0 or weights.1 (ConstantIndex 0 or 1)", cn->s);
        const char *type = plist_get_str(e, "ConstantType");
        if (!type || (strcmp(type, "Float16") && strcmp(type, "UInt16")))
            BAD("constant %s: ConstantType must be Float16 or UInt16", cn->s);
        if (!plist_get_int(e, "ConstantByteOffset", &off) || off < 0) BAD("constant %s has no byte offset", cn->s);
        if (w && w->bytes[index] && (uint64_t)off + (uint64_t)netplist_dims_count(d) * 2 > w->len[index])
            BAD("constant %s runs past the end of weights.%lld (%zu bytes)", cn->s, (long long)index, w->len[index]);
        netplist_constant *c = &p->consts[p->nconsts++];
        snprintf(c->name, sizeof c->name, "%s", cn->s);
        c->dims = d;
        c->file = (int)index;
        c->u16 = !strcmp(type, "UInt16");
        c->byte_offset = off;
    }

    const plist_value *units = plist_get_kind(net, "Units", PLIST_ARRAY);
    if (!units || units->n < 1 || units->n > NETPLIST_MAX_UNITS) BAD("Units must list 1 to %d units", NETPLIST_MAX_UNITS);
    for (int k = 0; k < units->n; k++) {
        const plist_value *un = units->items[k];
        if (un->kind != PLIST_STRING || !name_ok(un->s)) BAD("Units entry %d is not a usable name", k);
        const plist_value *e = plist_get_kind(net, un->s, PLIST_DICT);
        if (!e) BAD("unit %s is listed but not declared", un->s);
        const char *type = plist_get_str(e, "Type");
        if (!name_ok(type)) BAD("unit %s has no usable Type", un->s);
        const plist_value *bottom = plist_get(e, "Bottom");
        const plist_value *one[1] = {bottom};
        const plist_value *const *bl = one;
        int nb = 1;
        if (bottom && bottom->kind == PLIST_ARRAY) bl = (const plist_value *const *)bottom->items, nb = bottom->n;
        if (!bottom || nb > NETPLIST_MAX_BOTTOM) BAD("unit %s has no Bottom or more than %d", un->s, NETPLIST_MAX_BOTTOM);
        const char *names[NETPLIST_MAX_BOTTOM];
        for (int b = 0; b < nb; b++) {
            if (bl[b]->kind != PLIST_STRING) BAD("unit %s: Bottom entry %d is not a name", un->s, b);
            names[b] = bl[b]->s;
        }
        int64_t oc = 0;
        if (!plist_get_int(e, "OutputChannels", &oc)) BAD("unit %s has no OutputChannels", un->s);
        const char *ot = plist_get_str(e, "OutputType");
        if (ot && strcmp(ot, "Float16") && strcmp(ot, "UInt8")) BAD("unit %s: OutputType must be Float16 or UInt8", un->s);
        netplist_unit *u = netplist_add_unit(p, type, nb, names, oc, err, errn);
        if (!u) goto fail;
        u->out_u8 = ot && !strcmp(ot, "UInt8");
        snprintf(u->name, sizeof u->name, "%s", un->s);
        const plist_value *params = plist_get(e, "Params");
        if (params) {
            if (params->kind != PLIST_DICT) BAD("unit %s: Params is not a dict", un->s);
            plist_free(u->params);
            u->params = plist_clone(params);
            if (!u->params) BAD("out of memory");
        }
    }

    const plist_value *outs = plist_get_kind(proc, "OutputList", PLIST_ARRAY);
    const char *out_unit = outs && outs->n == 1 ? plist_get_str(outs->items[0], "Name") : NULL;
    if (!out_unit) BAD("OutputList must name exactly one output unit");
    if (strcmp(out_unit, p->units[p->nunits - 1].name))
        BAD("the output reads unit %s; it must be the last unit, %s", out_unit, p->units[p->nunits - 1].name);
    const char *yt = plist_get_str(outs->items[0], "OutputType");
    if (yt && strcmp(yt, p->units[p->nunits - 1].out_u8 ? "UInt8" : "Float16"))
        BAD("the output's OutputType %s is not its unit %s's", yt, out_unit);
    return true;
fail:
    netplist_free(p);
    return false;
}
