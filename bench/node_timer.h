/* The per-node timer the profilers (llama_profile.c, cnn_profile.c, hf_lora_profile.c)
 * hang on the CPU executor's after_node hook: each node is charged the time since the
 * previous node ended. Header-only: each profiler is one program. */
#ifndef BENCH_NODE_TIMER_H
#define BENCH_NODE_TIMER_H
#include "aneforge.h"

#include <stdio.h>
#include <time.h>

typedef struct {
    double last, *node_s;
} prof;

/* CLOCK_THREAD_CPUTIME_ID on one thread: steady on a busy machine (others' load does not count). */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void after(void *ctx, int s, const af_tensor *t, float *out, const float *const *ins) {
    (void)t, (void)out, (void)ins;
    prof *p = ctx;
    double n = now_s();
    p->node_s[s] += n - p->last;
    p->last = n;
}

static void shape_str(af_shape s, char *buf, size_t cap) {
    int k = snprintf(buf, cap, "[");
    for (int i = 0; i < s.rank; i++) k += snprintf(buf + k, cap - (size_t)k, i ? ",%lld" : "%lld", (long long)s.dim[i]);
    snprintf(buf + k, cap - (size_t)k, "]");
}
#endif
