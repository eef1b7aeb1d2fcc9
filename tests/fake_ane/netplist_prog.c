/* The fake daemon's net.plist compiler: the XML read back with aneforge's plist reader,
 * checked as a single-procedure program (netplist_parse), and rebuilt as an IR graph
 * unit by unit through each unit Type's reader (ane/netplist.h), which expresses the
 * unit with the project's own ops; the caller compiles that graph for ane-sim, so a
 * bridge op run this way gives ane-sim's bits. */
#include "fake_netplist.h"

#include "ane/netplist.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static af_tensor *lookup(char names[][NETPLIST_NAME], af_tensor **vals, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(names[k], name)) return vals[k];
    return NULL;
}

int fake_netplist_build(const uint8_t *xml, size_t len, const uint8_t *w1, size_t w1_len, mil_module *mod, char *err,
                        size_t errn) {
    memset(mod, 0, sizeof *mod);
    plist_value *doc = plist_read_xml((const char *)xml, len, err, errn);
    if (!doc) return 0;
    netplist_program p;
    bool ok = netplist_parse(doc, w1, w1_len, &p, err, errn);
    plist_free(doc);
    if (!ok) return 0;
    enum { MAXV = NETPLIST_MAX_INPUTS + NETPLIST_MAX_CONSTS + NETPLIST_MAX_UNITS };
    char names[MAXV][NETPLIST_NAME];
    af_tensor *vals[MAXV];
    int nv = 0;
    af_graph *g = af_graph_new();
    mod->g = g;
    mod->in = ir_graph_own(g, calloc((size_t)p.ninputs + 1, sizeof *mod->in));
    mod->out = ir_graph_own(g, calloc(2, sizeof *mod->out));
    mod->in_names = ir_graph_own(g, calloc((size_t)p.ninputs + 1, sizeof *mod->in_names));
    mod->out_names = ir_graph_own(g, calloc(2, sizeof *mod->out_names));
    ok = g && mod->in && mod->out && mod->in_names && mod->out_names;
    for (int k = 0; ok && k < p.ninputs; k++) {
        af_tensor *t = af_input(g, p.inputs[k].name, AF_F16, netplist_shape4(p.inputs[k].dims));
        mod->in[mod->nin] = t;
        mod->in_names[mod->nin++] = t ? t->name : NULL;
        snprintf(names[nv], NETPLIST_NAME, "%s", p.inputs[k].name);
        vals[nv++] = t;
        ok = t != NULL;
    }
    for (int k = 0; ok && k < p.nconsts; k++) { /* fp16 little-endian in weights.1 */
        const netplist_constant *c = &p.consts[k];
        int64_t n = netplist_dims_count(c->dims);
        uint16_t *h = malloc((size_t)n * sizeof *h + 2);
        float *f = malloc((size_t)n * sizeof *f + 4);
        ok = h && f && w1;
        for (int64_t i = 0; ok && i < n; i++)
            h[i] = (uint16_t)(w1[c->byte_offset + 2 * i] | (w1[c->byte_offset + 2 * i + 1] << 8));
        if (ok) ir_f16_to_f32_array(h, f, n);
        af_tensor *t = ok ? af_const(g, c->name, netplist_shape4(c->dims), f) : NULL;
        free(h);
        free(f);
        if (!w1) snprintf(err, errn, "net.plist: constant %s needs weights.1", c->name);
        snprintf(names[nv], NETPLIST_NAME, "%s", c->name);
        vals[nv++] = t;
        ok = t != NULL;
    }
    af_tensor *last = NULL;
    for (int k = 0; ok && k < p.nunits; k++) {
        const netplist_unit *u = &p.units[k];
        bridge_read_fn read = netplist_unit_reader(u->type);
        af_tensor *in[NETPLIST_MAX_BOTTOM];
        for (int b = 0; b < u->nbottom; b++) in[b] = lookup(names, vals, nv, u->bottom[b]);
        if (!read) {
            snprintf(err, errn, "ANECCompile() FAILED: unit %s has Type %s, which this engine model has no layer for",
                     u->name, u->type);
            ok = false;
        } else if (!read(u, in, u->nbottom, &last, err, errn) || !last) {
            if (!err[0] || af_graph_error(g)) snprintf(err, errn, "unit %s (%s): %s", u->name, u->type,
                                                        af_graph_error(g) ? af_graph_error(g) : "refused");
            ok = false;
        } else {
            snprintf(names[nv], NETPLIST_NAME, "%s", u->name);
            vals[nv++] = last;
        }
    }
    if (ok) {
        mod->out[0] = last;
        mod->out_names[0] = "y";
        mod->nout = 1;
    }
    netplist_free(&p);
    if (!ok) {
        af_graph_free(g);
        memset(mod, 0, sizeof *mod);
    }
    return ok;
}
