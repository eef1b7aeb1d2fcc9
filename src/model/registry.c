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
