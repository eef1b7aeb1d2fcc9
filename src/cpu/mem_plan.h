/* The CPU executor's arena plan (mem_plan.c). */
#ifndef AF_CPU_MEM_PLAN_H
#define AF_CPU_MEM_PLAN_H
#include "compile/plan.h"
#include "cpu/fuse.h"

#define CPU_ALIGN_FLOATS 16 /* 64-byte alignment for every buffer */

/* A reshape re-labels its source's buffer instead of copying it (the executor points
 * it at the source's values each run), and so does a slice that is a contiguous run of
 * its source (whole trailing axes), at cpu_alias_offset floats in; constants keep their
 * copy so baked data is never shared with a writable buffer. */
bool cpu_is_alias(const af_tensor *t);
int64_t cpu_alias_offset(const af_tensor *t);

/* Fills offset[id] (floats into the arena, -1 for tensors without a buffer of their
 * own) for the plan's tensors, the arena size and the largest kernel scratch. With
 * fusion (f non-NULL) a fused head's buffer is its chain's tail's, taken when the head
 * runs, and absorbed nodes get none. */
bool cpu_plan_memory(const compile_plan *p, const cpu_fusion *f, int threads, int64_t *offset, int64_t *arena_floats,
                     int64_t *scratch_floats);
#endif
