/* The fake daemon's net.plist compiler: the XML read back with aneforge's plist reader,
 * checked as a single-procedure program (netplist_parse), and rebuilt as an IR graph
 * unit by unit from the project's own ops (netplist_graph); the caller compiles that
 * graph for ane-sim, so a bridge op run this way gives ane-sim's bits. */
#define _DEFAULT_SOURCE 1 /* strdup */
#include "fake_netplist.h"

#include "netplist/netplist.h"

#include <stdlib.h>
#include <string.h>

int fake_netplist_build(const uint8_t *xml, size_t len, const uint8_t *w0, size_t w0_len, const uint8_t *w1,
                        size_t w1_len, mil_module *mod, int *out_u8, char *err, size_t errn) {
    netplist_weights w = { { w0, w1 }, { w0_len, w1_len } };
    memset(mod, 0, sizeof *mod);
    plist_value *doc = plist_read_xml((const char *)xml, len, err, errn);
    if (!doc) return 0;
    netplist_program p;
    bool ok = netplist_parse(doc, &w, &p, err, errn);
    plist_free(doc);
    if (!ok) return 0;
    af_graph *g = af_graph_new();
    mod->g = g;
    mod->in = g ? ir_graph_own(g, calloc((size_t)p.ninputs + 1, sizeof *mod->in)) : NULL;
    mod->out = g ? ir_graph_own(g, calloc(2, sizeof *mod->out)) : NULL;
    mod->in_names = g ? ir_graph_own(g, calloc((size_t)p.ninputs + 1, sizeof *mod->in_names)) : NULL;
    mod->out_names = g ? ir_graph_own(g, calloc(2, sizeof *mod->out_names)) : NULL;
    ok = mod->in && mod->out && mod->in_names && mod->out_names &&
         netplist_graph(&p, &w, g, mod->in, &mod->out[0], err, errn);
    if (ok) {
        mod->nin = p.ninputs;
        for (int k = 0; k < p.ninputs; k++) mod->in_names[k] = mod->in[k]->name;
        mod->out_names[0] = ir_graph_own(g, strdup(p.units[p.nunits - 1].name)); /* OutputList's Name */
        ok = mod->out_names[0] != NULL;
        mod->nout = 1;
        *out_u8 = p.units[p.nunits - 1].out_u8; /* evaluate writes its result as UInt8 cells */
    }
    netplist_free(&p);
    if (!ok) {
        af_graph_free(g);
        memset(mod, 0, sizeof *mod);
    }
    return ok;
}
