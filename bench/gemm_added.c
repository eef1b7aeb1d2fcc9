/* A product plus a tensor of its shape (a residual x W^T + r; a gradient's second path
 * added to its first, dy W + s) as the executor ran it before fusion, the product into
 * its own buffer and then an add pass reading both, against the fused product, which
 * adds the tensor in its epilogue while each tile is in cache (fuse.c, gemm.h). Operands
 * cold (each call on another of enough buffers that none is cached, as in a training
 * step), the two ways alternating, median over rounds, wall time.
 *   build/bench_gemm_added [threads [rounds]]   one JSON line per product */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct { const char *what; int64_t m, n, k; int tb; } product;

/* llama b (seq 512) and Stories110M (seq 256): the attention output and the FFN's down
 * projection forward (x W^T + r), the input gradient's second path (dy W + s; K 2048 is
 * gemm.c's deep product) */
static const product prods[] = {
    { "b x Wo^T + r", 512, 768, 768, 1 }, { "b dy W + s", 512, 768, 768, 0 }, { "b dy W1 + s", 512, 768, 2048, 0 },
    { "s x W2^T + r", 256, 768, 2048, 1 }, { "s dy W1 + s", 256, 768, 2048, 0 },
};

typedef struct { const float *a, *b; float *out; } add_job;

CPU_VECTOR_CLONES static void add_range(void *p, int64_t i0, int64_t i1) {
    const add_job *j = p;
    for (int64_t i = i0; i < i1; i++) j->out[i] = j->a[i] + j->b[i];
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int main(int argc, char **argv) {
    enum { COLD = 16, MAX_ROUNDS = 101 };
    int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 21;
    if (threads < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench_gemm_added [threads [rounds (1..%d)]]\n", MAX_ROUNDS);
        return 2;
    }
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    if (threads > 1 && !pool) return 1;
    for (size_t s = 0; s < sizeof prods / sizeof prods[0]; s++) {
        const product *p = &prods[s];
        int64_t mn = p->m * p->n;
        float *a[COLD], *b[COLD], *r[COLD], *t[COLD], *o[COLD];
        for (int q = 0; q < COLD; q++) {
            a[q] = malloc(sizeof(float) * (size_t)(p->m * p->k));
            b[q] = malloc(sizeof(float) * (size_t)(p->k * p->n));
            r[q] = malloc(sizeof(float) * (size_t)mn);
            t[q] = malloc(sizeof(float) * (size_t)mn);
            o[q] = malloc(sizeof(float) * (size_t)mn);
            if (!a[q] || !b[q] || !r[q] || !t[q] || !o[q]) return 1;
            for (int64_t i = 0; i < p->m * p->k; i++) a[q][i] = (float)((i + q) % 7) * 0.1f;
            for (int64_t i = 0; i < p->k * p->n; i++) b[q][i] = (float)((i + q) % 5) * 0.1f;
            for (int64_t i = 0; i < mn; i++) r[q][i] = (float)(i % 3), t[q][i] = o[q][i] = 0.0f;
        }
        double ms[2][MAX_ROUNDS];
        int call = 0;
        for (int round = 0; round < rounds; round++)
            for (int w = 0; w < 2; w++) {
                int fused = round & 1 ? 1 - w : w; /* alternate which goes first */
                double t0 = now();
                for (int i = 0; i < COLD; i++, call++) {
                    int q = call % COLD;
                    if (fused) {
                        cpu_epilogue ep = { .add = r[q], .ld_add = p->n };
                        cpu_sgemm_ep(pool, 0, p->tb, p->m, p->n, p->k, 1.0f, a[q], p->k, b[q], p->tb ? p->k : p->n, 0.0f,
                                     o[q], p->n, &ep);
                    } else {
                        cpu_sgemm(pool, 0, p->tb, p->m, p->n, p->k, 1.0f, a[q], p->k, b[q], p->tb ? p->k : p->n, 0.0f,
                                  t[q], p->n);
                        add_job j = { t[q], r[q], o[q] };
                        if (pool) cpu_pool_for(pool, mn, 16384, add_range, &j);
                        else add_range(&j, 0, mn);
                    }
                }
                ms[fused][round] = (now() - t0) / COLD * 1e3;
            }
        qsort(ms[0], (size_t)rounds, sizeof(double), by_value);
        qsort(ms[1], (size_t)rounds, sizeof(double), by_value);
        double sep = ms[0][rounds / 2], fus = ms[1][rounds / 2];
        printf("{\"product\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"threads\":%d,\"rounds\":%d,\"separate_ms\":%.3f,"
               "\"fused_ms\":%.3f,\"fused_over_separate\":%.3f,\"cpu\":\"%s\"}\n",
               p->what, (long long)p->m, (long long)p->n, (long long)p->k, threads, rounds, sep, fus, fus / sep,
               cpu_model_name());
        for (int q = 0; q < COLD; q++) free(a[q]), free(b[q]), free(r[q]), free(t[q]), free(o[q]);
    }
    cpu_pool_free(pool);
    return 0;
}
