/* The backend interface: what af_compile and af_run ask of a target. A backend is a
 * table of functions over an opaque per-model state, in the manner of ggml's backend
 * interface; src/model/registry.c lists them, one line each. af_compile does the
 * target-neutral work (compile_plan) and hands the plan to the backend, which owns its
 * memory plan, its programs and its execution. */
#ifndef AF_COMPILE_BACKEND_H
#define AF_COMPILE_BACKEND_H
#include "compile/plan.h"

#include <stddef.h>

/* What a backend is asked to build: the caller's options with defaults filled in. */
typedef struct {
    af_target target;
    af_family_id family;      /* resolved on engine targets, AF_FAMILY_DEFAULT on the CPU */
    af_family_id family_asked;/* as the caller gave it (AF_FAMILY_DEFAULT: none named) */
    af_precision precision;   /* as asked */
    bool fp16;                /* fp16 storage: every stored value is rounded to fp16 */
    int threads;              /* >= 1 */
    bool via_mil;             /* run the program as parsed back from its MIL */
    bool precision_check;     /* ane-sim: the near-equal subtraction check */
    const char *ane_framework;/* the AppleNeuralEngine binary to load (NULL: the system's) */
    struct af_sim_engine *sim_engine; /* ane-sim: its program cache and budget (NULL: the default) */
} backend_cfg;

typedef struct {
    const char *name;  /* "cpu", "ane-sim", "ane" */
    af_target target;
    /* Computes as the Neural Engine does: it has an engine family (resolved before the
     * plan is built), the engine's limits, and bridge ops cut its programs into segments
     * (af_target_is_engine). */
    bool engine;
    /* AF_PRECISION_DEFAULT means fp16 storage here (af_compile_opts_fp16). */
    bool fp16_by_default;
    /* Settles what depends on the machine (the engine family of the device) before the
     * plan is built; AF_OK or the status with msg set (optional). */
    af_status (*configure)(backend_cfg *cfg, char *msg, size_t n);
    /* NULL when the backend can run node t under cfg; otherwise why not, with the remedy. */
    const char *(*unsupported)(const backend_cfg *cfg, const af_tensor *t);
    /* Whole-program checks (compiler walls, limits): AF_OK, or the status with msg set. */
    af_status (*validate)(const backend_cfg *cfg, const compile_plan *p, char *msg, size_t n);
    /* Plans memory and prepares the program (compiling it where the target compiles,
     * counted in stats); the plan outlives the state. */
    af_status (*init)(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n);
    /* Runs once. Buffers are already checked against the plan's shapes; an output with
     * NULL data is not delivered, an input bound as state is not read. Adds what the run
     * cost to stats. Errors go through ir_fail. */
    af_status (*run)(void *state, const af_buffer *in, af_buffer *out, af_stats *stats);
    /* Resident state (indices already checked): after each run output o is copied onto
     * input i; write/read move count(shape) floats in and out of it. */
    af_status (*bind_state)(void *state, int in_index, int out_index);
    af_status (*write_state)(void *state, int in_index, const float *src);
    af_status (*read_state)(void *state, int in_index, float *dst);
    size_t (*memory_bytes)(const void *state);  /* intermediate memory held */
    /* Optional (NULL: not offered). From the next run on, a bound on the largest |x| of
     * the outputs the backend can bound as it computes them; after a run, output_bound
     * gives it (INFINITY when an inf or nan is inside) or false for an output it does
     * not bound. */
    af_status (*track_bounds)(void *state);
    bool (*output_bound)(const void *state, int out_index, float *bound);
    void (*free)(void *state);
} backend_iface;

/* The backend for a target, or NULL (src/model/registry.c). */
const backend_iface *backend_for(af_target target);
/* Whether opts (NULL: the defaults) compile for fp16 storage on be. */
bool backend_fp16(const backend_iface *be, const af_compile_opts *opts);
#endif
