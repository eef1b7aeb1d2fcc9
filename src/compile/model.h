/* A compiled model: the schedule, the memory plan and the backend state. */
#ifndef AF_COMPILE_MODEL_H
#define AF_COMPILE_MODEL_H
#include "ir/ir.h"
#include "cpu/pool.h"

struct af_model {
    af_graph *g;           /* retained by the model (af_graph_retain), released with it */
    af_graph *owned_graph; /* a graph the model made for itself (the MIL round trip), freed with it */
    af_target target;
    int fp16;              /* fp16-storage numerics: every result rounded to fp16 */
    int fp16_accum;        /* reduce_sum accumulates in fp16 (ane-sim) */
    int nin, nout;
    af_tensor **in, **out;
    int nsched;
    af_tensor **sched;     /* non-leaf nodes in execution order */
    int ntensors;          /* graph size at compile time: ids below this are planned */
    int64_t *offset;       /* per tensor id: float offset into the arena, or -1 */
    float **val;           /* per tensor id: where its values are during a run */
    float *arena;
    int64_t arena_floats;
    float *scratch;
    int64_t scratch_floats;
    float **baked;         /* per tensor id: the model's copy of a constant (fp16-rounded in fp16 models), or NULL */
    const float **srcptr;  /* room for the widest node's source pointers */
    cpu_pool *pool;
    int threads;           /* the pool's threads (scratch holds a slice per thread) */
    af_family_id family;   /* resolved family on ANE targets */
    af_stats stats;
    int *state_out;        /* per input: the output copied onto it after a run, or -1 */
    /* ane-sim (compile/target.h, src/ane): */
    unsigned char *quirk;  /* per schedule index: AF_QUIRK_* bits, or NULL on the CPU target */
    int64_t run_flops;     /* flop estimate of one run, for the stats */
    uint64_t program_key[2];  /* content hash of the program: the program-cache key */
    uint64_t program_gen;  /* the cache generation the model registered in */
    int program_held;      /* registered with the program cache */
};

#endif
