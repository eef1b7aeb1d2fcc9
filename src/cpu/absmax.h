/* Bounds on |x| kept as float bit patterns: non-negative floats order as their patterns
 * do, so the largest |x| of many is the largest (pattern & 0x7fffffff), a max over
 * integers that vectorises and merges across threads with one atomic. Inf and NaN
 * patterns lie above every finite one, and so does any pattern with the sign bit set
 * (a max over raw patterns, as of v, which is never negative): each reads back as
 * INFINITY. Used by the GEMM epilogues' bounds (gemm.h, gemm_bf16.h), the executor that
 * reports them (exec.c) and the host optimizer's screen (host_opt.c). */
#ifndef AF_CPU_ABSMAX_H
#define AF_CPU_ABSMAX_H
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* *a = max(*a, pattern), merged with a compare-and-swap. */
static inline void cpu_absmax_merge(_Atomic uint32_t *a, uint32_t pattern) {
    uint32_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (pattern > cur &&
           !atomic_compare_exchange_weak_explicit(a, &cur, pattern, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* The largest value a max over patterns stands for: the float, or INFINITY. */
static inline float cpu_absmax_value(uint32_t pattern) {
    if (pattern >= 0x7f800000u) return INFINITY;
    float f;
    memcpy(&f, &pattern, sizeof f);
    return f;
}
#endif
