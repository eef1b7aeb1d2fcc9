/* The engine's per-process budgets and the program cache that keeps long runs inside
 * them: about 119 compiles per process, 128 loaded programs. Programs are keyed by a
 * content hash of the compiled subgraph (ops, shapes, attributes, fp16 constant bytes,
 * family), so recompiling the same program is a cache hit, and loaded programs beyond
 * 128 are evicted least-recently-used and reloaded on their next run. Entry points:
 * af_sim_program_acquire/use/release (compile/target.h) and af_ane_budget* (aneforge.h). */
#ifndef AF_ANE_SIM_BUDGET_H
#define AF_ANE_SIM_BUDGET_H
#include "compile/target.h"

#define AF_ANE_COMPILE_LIMIT 119 /* compiles per process before the compiler fails (maderix, Orion) */
#define AF_ANE_LOAD_LIMIT 128    /* loaded programs per process (the 129th load fails; ANEForge) */

/* The content hash of m's program: the cache key. */
void af_sim_program_key(const af_model *m, uint64_t key[2]);
#endif
