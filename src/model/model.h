/* A compiled model: the target-neutral plan and the backend that runs it. */
#ifndef AF_MODEL_MODEL_H
#define AF_MODEL_MODEL_H
#include "compile/backend.h"
#include "compile/segment.h"

#include <pthread.h>
#include <stdbool.h>

struct af_model {
    compile_plan plan;
    const backend_iface *be;
    void *state;       /* the backend's */
    backend_cfg cfg;
    af_stats stats;
    unsigned char *state_bound; /* per input: bound as resident state (not fed) */
    pthread_mutex_t lock;       /* one run or state access at a time, whatever the thread */
    bool lock_ready;            /* lock was initialised (pthread_mutex_init), so it is destroyed */
    /* A graph with bridge ops on an engine target: its segments, one model each, run in
     * order by the host (segmented.c); state is then NULL. */
    segment_plan seg;
    af_model **sub;             /* per segment */
    float **vals;               /* per host value at or past plan.nin: its fp32 array */
};

/* Bounds on outputs' largest |x| where the backend offers them (backend_iface's
 * track_bounds): asked for once, read after each run; false where the model (a
 * segmented one) or its backend offers none, or for an output it does not bound. */
bool model_track_output_bounds(af_model *m);
bool model_output_bound(const af_model *m, int out_index, float *bound);

/* Cuts the plan into segments and compiles each for opts' target; AF_OK or the status
 * with msg set. */
af_status model_compile_segments(af_model *m, const af_compile_opts *opts, char *msg, size_t n);
af_status model_run_segments(af_model *m, const af_buffer *in, af_buffer *out);
void model_free_segments(af_model *m);
size_t model_segments_memory(const af_model *m);
#endif
