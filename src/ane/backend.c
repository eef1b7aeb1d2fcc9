/* The ane backend (placeholder until the runtime binding lands). */
#include "ane/backend.h"

#include <stdio.h>

static af_status ane_init(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n) {
    snprintf(msg, n, "the ANE runtime target is not available yet; use AF_TARGET_ANE_SIM");
    return AF_ERR_UNSUPPORTED;
}

const backend_iface ane_backend = {
    .name = "ane",
    .target = AF_TARGET_ANE,
    .init = ane_init,
};
