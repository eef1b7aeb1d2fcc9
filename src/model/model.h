/* A compiled model: the target-neutral plan and the backend that runs it. */
#ifndef AF_MODEL_MODEL_H
#define AF_MODEL_MODEL_H
#include "compile/backend.h"

struct af_model {
    compile_plan plan;
    const backend_iface *be;
    void *state;       /* the backend's */
    backend_cfg cfg;
    af_stats stats;
    unsigned char *state_bound; /* per input: bound as resident state (not fed) */
};
#endif
