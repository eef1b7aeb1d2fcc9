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
/* Calls fn(ctx, b, e) over disjoint ranges covering [0, n) and returns when all are
 * done. Runs inline when p is NULL, has one thread, or n < 2 * min_chunk. Not
 * re-entrant: fn must not call cpu_pool_for on the same pool. */
void      cpu_pool_for(cpu_pool *p, int64_t n, int64_t min_chunk, cpu_range_fn fn, void *ctx);
#endif
