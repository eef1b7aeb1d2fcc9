/* The CPU executor's own order of a plan's nodes (sched.c). */
#ifndef AF_CPU_SCHED_H
#define AF_CPU_SCHED_H
#include "compile/plan.h"

/* Fills q with p's request and a reordered schedule (q owns sched and last_read; free
 * them with cpu_sched_free): a node whose result is larger than its computed sources
 * together runs just before its first reader instead of where the graph made it, so
 * the larger value is held for less of the run (a tied embedding's classifier gradient,
 * [vocab, dim], made at the start of the backward and read only by the sum at its end).
 * Every node still runs after its sources. False when out of memory. */
bool cpu_sched_sink(const compile_plan *p, compile_plan *q);
void cpu_sched_free(compile_plan *q);
#endif
