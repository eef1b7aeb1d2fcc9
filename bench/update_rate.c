/* The memory's rate for the optimizer's traffic, against AdamW itself: over N parameters
 * (default Stories110M's 110M), a plain pass that reads four arrays (w, m, v, g) and
 * writes three (the 28 bytes a parameter PyTorch's fused AdamW and our update's store
 * move), and the AdamW update on the same arrays, split over the pool as the trainer's
 * host optimizer splits it. Best of 5, wall time, GB/s of those 28 bytes: when the two
 * agree the update runs at what the memory gives, and only fewer bytes make it faster.
 *   build/bench_update_rate [threads [millions of parameters]]   one JSON line */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct { float *w, *m, *v; const float *g; } state;

CPU_VECTOR_CLONES static void stream_range(void *p, int64_t j0, int64_t j1) {
    const state *s = p;
    float *restrict w = s->w, *restrict m = s->m, *restrict v = s->v;
    const float *restrict g = s->g;
    for (int64_t j = j0; j < j1; j++) {
        float x = g[j] + w[j] + m[j] + v[j];
        m[j] = x, v[j] = 0.5f * x, w[j] = 0.25f * x;
    }
}

CPU_VECTOR_CLONES static void adamw_range(void *p, int64_t j0, int64_t j1) {
    const state *s = p;
    float *restrict w = s->w, *restrict m = s->m, *restrict v = s->v;
    const float *restrict g = s->g;
    const float b1 = 0.9f, b2 = 0.999f, lr_t = 1e-3f, eps = 1e-8f, decay = 1.0f - 1e-4f;
    for (int64_t j = j0; j < j1; j++) {
        float mj = b1 * m[j] + (1.0f - b1) * g[j], vj = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
        m[j] = mj, v[j] = vj, w[j] = w[j] * decay - lr_t * mj / (sqrtf(vj) + eps);
    }
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    double millions = argc > 2 ? atof(argv[2]) : 110.0;
    if (threads < 1 || !(millions > 0 && millions <= 4000)) {
        fprintf(stderr, "usage: bench_update_rate [threads [millions of parameters (at most 4000)]]\n");
        return 2;
    }
    int64_t n = (int64_t)(millions * 1e6);
    float *a[4];
    for (int i = 0; i < 4; i++) {
        if (!(a[i] = malloc(sizeof(float) * (size_t)n))) {
            fprintf(stderr, "bench_update_rate: out of memory for %.0f M parameters\n", millions);
            return 1;
        }
        for (int64_t j = 0; j < n; j++) a[i][j] = i == 0 ? 0.01f : i == 3 ? 1e-3f : 0.0f;
    }
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    state s = { a[0], a[1], a[2], a[3] };
    double best[2] = { 1e30, 1e30 };
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 2; k++) {
            double t0 = now();
            if (pool) cpu_pool_for(pool, n, 32768, k ? adamw_range : stream_range, &s);
            else (k ? adamw_range : stream_range)(&s, 0, n);
            double t = now() - t0;
            if (t < best[k]) best[k] = t;
        }
    double bytes = 28.0 * (double)n;
    printf("{\"params_m\":%.1f,\"threads\":%d,\"stream_ms\":%.1f,\"stream_gbs\":%.1f,\"adamw_ms\":%.1f,\"adamw_gbs\":%.1f,"
           "\"cpu\":\"%s\"}\n",
           millions, threads, best[0] * 1e3, bytes / best[0] * 1e-9, best[1] * 1e3, bytes / best[1] * 1e-9,
           cpu_model_name());
    cpu_pool_free(pool);
    for (int i = 0; i < 4; i++) free(a[i]);
    return 0;
}
