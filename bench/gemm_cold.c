/* Our GEMM on the llama step's products with operands warm (the same buffers every call,
 * in cache) and cold (each call on another of enough buffers that none is still cached,
 * as in a training step, where a product reads what the step wrote long ago). One
 * thread (CPU time) or more (wall time), best of 5 rounds; bench/gemm_cold.sh runs it
 * beside PyTorch's.
 *   build/bench_gemm_cold [abc [threads]]  one JSON line per product and case; abc names
 *                                    the operands the cold case rotates (default all
 *                                    three: "c" keeps A and B cached, C cold) */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(clock_id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct { const char *what; int64_t m, n, k; int ta, tb; } product;

/* llama b (seq 512, dim 768, hidden 2048) and Stories110M (seq 256): forward x W^T,
 * input gradient dy W, weight gradient dy^T x */
static const product prods[] = {
    { "b x W^T", 512, 768, 768, 0, 1 },  { "b dy W", 512, 768, 768, 0, 0 },  { "b dy^T x", 768, 768, 512, 1, 0 },
    { "s x W1^T", 256, 2048, 768, 0, 1 }, { "s dy W1", 256, 768, 2048, 0, 0 }, { "s dy^T x", 2048, 768, 256, 1, 0 },
};

int main(int argc, char **argv) {
    const char *rot = argc > 1 ? argv[1] : "abc";
    bool ra = strchr(rot, 'a') != NULL, rb = strchr(rot, 'b') != NULL, rc = strchr(rot, 'c') != NULL;
    enum { COLD = 24 }; /* 24 x (A, B, C) of the largest product: ~250 MB, beyond any cache */
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads < 1) return 2;
    if (threads > 1) clock_id = CLOCK_MONOTONIC; /* the other threads' work counts */
    cpu_pool *pool = cpu_pool_new(threads);
    if (!pool) return 1;
    for (size_t s = 0; s < sizeof prods / sizeof prods[0]; s++) {
        const product *p = &prods[s];
        int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
        float *a[COLD], *b[COLD], *c[COLD];
        for (int q = 0; q < COLD; q++) {
            a[q] = malloc(sizeof(float) * (size_t)(p->m * p->k));
            b[q] = malloc(sizeof(float) * (size_t)(p->k * p->n));
            c[q] = malloc(sizeof(float) * (size_t)(p->m * p->n));
            if (!a[q] || !b[q] || !c[q]) return 1;
            for (int64_t i = 0; i < p->m * p->k; i++) a[q][i] = (float)((i + q) % 7) * 0.1f;
            for (int64_t i = 0; i < p->k * p->n; i++) b[q][i] = (float)((i + q) % 5) * 0.1f;
            for (int64_t i = 0; i < p->m * p->n; i++) c[q][i] = 0.0f;
        }
        double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
        for (int cold = 0; cold <= 1; cold++) {
            double best = 1e30;
            for (int r = 0; r < 5; r++) {
                double t0 = cpu_now();
                for (int i = 0; i < 2 * COLD; i++) {
                    int q = cold ? i % COLD : 0, qa = ra ? q : 0, qb = rb ? q : 0, qc = rc ? q : 0;
                    cpu_sgemm(pool, p->ta, p->tb, p->m, p->n, p->k, 1.0f, a[qa], lda, b[qb], ldb, 0.0f, c[qc], p->n);
                }
                double t = (cpu_now() - t0) / (2 * COLD);
                if (t < best) best = t;
            }
            printf("{\"product\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"threads\":%d,\"case\":\"%s\",\"gflops\":%.1f}\n",
                   p->what, (long long)p->m, (long long)p->n, (long long)p->k, threads, cold ? "cold" : "warm",
                   flops / best * 1e-9);
        }
        for (int q = 0; q < COLD; q++) free(a[q]), free(b[q]), free(c[q]);
    }
    cpu_pool_free(pool);
    return 0;
}
