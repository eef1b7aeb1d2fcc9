/* The backends, one line each. Adding a backend: a folder with its backend_iface and
 * one line here. */
#include "ane/backend.h"
#include "cpu/backend.h"
#include "sim/backend.h"

static const backend_iface *const backends[] = {
    &cpu_backend,
    &ane_sim_backend,
    &ane_backend,
};

const backend_iface *backend_for(af_target target) {
    for (unsigned i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (backends[i]->target == target) return backends[i];
    return 0;
}

/* What a target is, asked by name: the answers are its backend's fields. */
const char *af_target_name(af_target t) {
    const backend_iface *be = backend_for(t);
    return be ? be->name : "?";
}

int af_target_is_engine(af_target t) {
    const backend_iface *be = backend_for(t);
    return be && be->engine;
}

bool backend_fp16(const backend_iface *be, const af_compile_opts *opts) {
    af_precision p = opts ? opts->precision : AF_PRECISION_DEFAULT;
    return p == AF_PRECISION_FP16 || (p == AF_PRECISION_DEFAULT && be && be->fp16_by_default);
}

int af_compile_opts_fp16(const af_compile_opts *opts) {
    return backend_fp16(backend_for(opts ? opts->target : AF_TARGET_CPU), opts);
}
