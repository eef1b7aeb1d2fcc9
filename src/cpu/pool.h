/* A small fixed thread pool for data-parallel loops. */
#ifndef AF_CPU_POOL_H
#define AF_CPU_POOL_H
#include <stdint.h>

typedef void (*cpu_range_fn)(void *ctx, int64_t begin, int64_t end);
typedef struct cpu_pool cpu_pool;

int       cpu_num_cores(void);
cpu_pool *cpu_pool_new(int threads);          /* threads <= 0: one per core; NULL on failure */
void      cpu_pool_free(cpu_pool *p);
int       cpu_pool_threads(const cpu_pool *p); /* 1 for NULL */
/* The process's pool of `threads` threads (<= 0: one per core), shared by every
 * executor, trainer and generator that asks for that count, so that a training step's
 * programs and its optimizer never keep more threads running than there are cores
 * (two pools each polling for work on two cores time-slice against each other).
 * Reference counted: each cpu_pool_shared is paired with one cpu_pool_release; the
 * last release stops the threads. NULL on failure. */
cpu_pool *cpu_pool_shared(int threads);
void      cpu_pool_release(cpu_pool *p);
/* Calls fn(ctx, b, e) over disjoint ranges covering [0, n) and returns when all are
 * done. Runs inline when p is NULL, has one thread, n < 2 * min_chunk, or the caller
 * is itself running a chunk of some pool's job (nested loops run on the calling thread). */
void      cpu_pool_for(cpu_pool *p, int64_t n, int64_t min_chunk, cpu_range_fn fn, void *ctx);
#endif
