/* ane-sim through MIL: the program runs as the engine would receive it, emitted to MIL
 * text and a MILBlob weight file and parsed back, so every ane-sim run can double as a
 * test of the emitter and the reader. */
#include "ane/mil.h"
#include "compile/model.h"
#include "compile/target.h"

#include <stdatomic.h>

static atomic_llong models_via_mil; /* lets tests prove a program really took the MIL path */
long long af_sim_via_mil_count(void) { return atomic_load(&models_via_mil); }

af_model *af_sim_compile_via_mil(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                                 const af_compile_opts *opts) {
    af_mil_module mod = { 0 };
    af_status st = af_mil_roundtrip(g, nin, in, nout, out, &mod);
    if (st) {
        af_fail(st, "af_compile (ane-sim through MIL): %s", af_error_message());
        return NULL;
    }
    af_compile_opts o = *opts;
    o.via_mil = -1;
    af_model *m = af_compile(mod.g, mod.nin, mod.in, mod.nout, mod.out, &o);
    if (!m) {
        af_graph_free(mod.g);
        return NULL;
    }
    m->owned_graph = mod.g;
    atomic_fetch_add(&models_via_mil, 1);
    return m;
}
