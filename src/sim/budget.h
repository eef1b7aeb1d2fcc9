/* The engine's per-process budgets and the program cache that keeps long runs inside
 * them: about 119 compiles per process, 128 loaded programs. Programs are keyed by a
 * content hash of the compiled subgraph (ops, shapes, attributes, fp16 constant bytes,
 * family), so recompiling the same program is a cache hit, and loaded programs beyond
 * 128 are evicted least-recently-used and reloaded on their next run. Entry points:
 * ane_program_acquire/use/release and af_ane_budget* (aneforge.h). */
#ifndef AF_ANE_SIM_BUDGET_H
#define AF_ANE_SIM_BUDGET_H
#include "compile/plan.h"

#include <stddef.h>

#define AF_ANE_COMPILE_LIMIT 119 /* compiles per process before the compiler fails (maderix, Orion) */
#define AF_ANE_LOAD_LIMIT 128    /* loaded programs per process (the 129th load fails; ANEForge) */

/* The content hash of m's program: the cache key. */
void ane_program_key(const compile_plan *m, af_family_id family, uint64_t key[2]);

/* A model's hold on its program in the cache. */
typedef struct {
    uint64_t key[2];  /* content hash of the program: the cache key */
    uint64_t gen;     /* the cache generation it registered in */
    int held;         /* registered with the cache */
    af_sim_engine *engine; /* the engine whose cache holds it (retained while held) */
} ane_program;

/* Registers the program of plan m for the family (a compile on a miss, a hit
 * otherwise; *compiled says which) and loads it; fails when a miss would exceed the
 * compile budget. use reloads the program if it was evicted and marks it most
 * recently used; release drops the hold. Thread-safe. */
af_status ane_program_acquire(ane_program *prog, af_sim_engine *engine, const compile_plan *m, af_family_id family,
                              bool *compiled, char *msg, size_t n);
void      ane_program_use(ane_program *prog);
void      ane_program_release(ane_program *prog);
#endif
