/* OpenBLAS's own threading against cpu_sgemm's split over the pool, for square sizes,
 * each measured in its own block with a pause between (OpenBLAS's workers spin after a
 * threaded call and would slow whatever runs next). Prints one JSON line per size.
 *   ./build/bench_gemm_threads [threads]        (built only with OpenBLAS) */
#define _POSIX_C_SOURCE 200809L
#include "cpu/gemm.h"
#include "cpu/pool.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int n);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pause_ms(long ms) {
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : cpu_num_cores();
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    for (int n = 256; n <= 2048; n *= 2) {
        float *a = calloc((size_t)n * n, sizeof *a), *b = calloc((size_t)n * n, sizeof *b), *c = calloc((size_t)n * n, sizeof *c);
        for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
        int iters = n <= 512 ? 100 : n == 1024 ? 20 : 4;
        double flops = 2.0 * n * n * (double)n * iters, best_native = 1e30, best_split = 1e30;
        for (int round = 0; round < 3; round++) {
            openblas_set_num_threads(threads);
            double t0 = now();
            for (int i = 0; i < iters; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double t1 = now();
            openblas_set_num_threads(1);
            pause_ms(1000); /* let OpenBLAS's spinning workers go to sleep */
            double t2 = now();
            for (int i = 0; i < iters; i++) cpu_sgemm(pool, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double t3 = now();
            if (t1 - t0 < best_native) best_native = t1 - t0;
            if (t3 - t2 < best_split) best_split = t3 - t2;
        }
        printf("{\"n\":%d,\"threads\":%d,\"openblas_threaded_gflops\":%.1f,\"pool_split_gflops\":%.1f,\"ratio\":%.3f}\n", n, threads,
               flops / best_native * 1e-9, flops / best_split * 1e-9, best_native / best_split);
        free(a);
        free(b);
        free(c);
    }
    cpu_pool_free(pool);
    return 0;
}
