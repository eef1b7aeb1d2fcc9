/* A compiled model: the target-neutral plan and the backend that runs it. */
#ifndef AF_MODEL_MODEL_H
#define AF_MODEL_MODEL_H
#include "compile/backend.h"

#include <pthread.h>

struct af_model {
    compile_plan plan;
    const backend_iface *be;
    void *state;       /* the backend's */
    backend_cfg cfg;
    af_stats stats;
    unsigned char *state_bound; /* per input: bound as resident state (not fed) */
    pthread_mutex_t lock;       /* one run or state access at a time, whatever the thread */
};
#endif
