/* The per-node timer the profilers (llama_profile.c, cnn_profile.c, hf_lora_profile.c)
 * hang on the CPU executor's after_node hook: each node is charged the time since the
 * previous node ended. Header-only: each profiler is one program. */
#ifndef BENCH_NODE_TIMER_H
#define BENCH_NODE_TIMER_H
#include "aneforge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The n params (in[2..]) fed as their values (bin[2..]) and their gradients' buffers
 * (bout[1..], malloc'd) for the step the profilers run: inputs x, y, then the params;
 * outputs the loss, then one gradient per param. */
static inline void feed_params(int n, af_tensor *const *in, af_buffer *bin, af_buffer *bout) {
    for (int i = 0; i < n; i++) {
        int64_t cnt = af_shape_count(af_tensor_shape(in[2 + i]));
        bin[2 + i] = AF_BUF_F32(af_tensor_value(in[2 + i]), cnt);
        bout[1 + i] = AF_BUF_F32(malloc((size_t)cnt * sizeof(float)), cnt);
    }
}

/* Nodes grouped by a key the profiler makes (op, output and operand shapes), their time
 * and FLOPs summed, printed slowest group first. */
typedef struct {
    char (*key)[320];
    double *s, *fl;
    int *n, count;
} node_groups;

static inline int groups_new(node_groups *g, int cap) {
    *g = (node_groups){ calloc((size_t)cap, sizeof *g->key), calloc((size_t)cap, sizeof(double)),
                        calloc((size_t)cap, sizeof(double)), calloc((size_t)cap, sizeof(int)), 0 };
    return g->key && g->s && g->fl && g->n ? 0 : -1;
}

static inline void groups_add(node_groups *g, const char *key, double s, double fl) {
    int gi = 0;
    while (gi < g->count && strcmp(g->key[gi], key)) gi++;
    if (gi == g->count) snprintf(g->key[g->count++], sizeof g->key[0], "%s", key);
    g->s[gi] += s;
    g->fl[gi] += fl;
    g->n[gi]++;
}

/* The `limit` slowest groups, per run of `runs`; the group times are used up. */
static inline void groups_print(node_groups *g, int runs, int limit) {
    for (int shown = 0; shown < limit && shown < g->count; shown++) {
        int best = 0;
        for (int gi = 1; gi < g->count; gi++) best = g->s[gi] > g->s[best] ? gi : best;
        printf("  %8.2f ms %3d x %s  %.1f GFLOP/s\n", 1000 * g->s[best] / runs, g->n[best], g->key[best],
               g->s[best] > 0 ? g->fl[best] * runs / g->s[best] * 1e-9 : 0.0);
        g->s[best] = -1;
    }
}

static inline void groups_free(node_groups *g) {
    free(g->key), free(g->s), free(g->fl), free(g->n);
}
#endif
