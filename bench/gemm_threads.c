/* OpenBLAS's own threading against cpu_sgemm's split over the pool, for square sizes or
 * for the llama steps' products (shapes a and b of bench/compare_llama.sh, with their
 * transposes), each measured in its own block with a pause between (OpenBLAS's workers
 * spin after a threaded call and would slow whatever runs next). Operands warm, best of
 * the rounds. Prints one JSON line per product.
 *   ./build/bench_gemm_threads [threads [llama [rounds]]]   (built only with OpenBLAS) */
#define _POSIX_C_SOURCE 200809L
#include "cpu/gemm.h"
#include "cpu/pool.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* C [M, N] = op(A) op(B) over K, op(X) = X^T where the flag is set. */
typedef struct { const char *name; int M, N, K, ta, tb; } product;

/* llama b (dim 768, hidden 2048, seq 512) and llama a (dim 288, hidden 768, 4 x 256 rows):
 * each layer's forward x W^T, backward dy W and weight gradient dy^T x. */
static const product llama[] = {
    { "b x W1^T", 512, 2048, 768, 0, 1 },   { "b h W2^T", 512, 768, 2048, 0, 1 },
    { "b x Wq^T", 512, 768, 768, 0, 1 },    { "b dh W1", 512, 768, 2048, 0, 0 },
    { "b dq Wq", 512, 768, 768, 0, 0 },     { "b dW1", 2048, 768, 512, 1, 0 },
    { "b dW2", 768, 2048, 512, 1, 0 },      { "b dWq", 768, 768, 512, 1, 0 },
    { "a x W1^T", 1024, 768, 288, 0, 1 },   { "a h W2^T", 1024, 288, 768, 0, 1 },
    { "a x Wq^T", 1024, 288, 288, 0, 1 },   { "a dh W1", 1024, 288, 768, 0, 0 },
    { "a dq Wq", 1024, 288, 288, 0, 0 },    { "a dW1", 768, 288, 1024, 1, 0 },
    { "a dW2", 288, 768, 1024, 1, 0 },      { "a dWq", 288, 288, 1024, 1, 0 },
};

/* The best time of `iters` calls of p, over `rounds` rounds: OpenBLAS on its own threads
 * (blas), then cpu_sgemm split over the pool (ours), each in its own block. */
static void best_pair(const product *p, int threads, cpu_pool *pool, int rounds, int iters, double *blas, double *ours) {
    size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N, nc = (size_t)p->M * p->N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = calloc(nc, sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gemm_threads: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < na; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 5) * 0.1f;
    int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
    *blas = *ours = 1e30;
    for (int round = 0; round < rounds; round++) {
        openblas_set_num_threads(threads);
        double t0 = now();
        for (int i = 0; i < iters; i++)
            cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->M, p->N,
                        p->K, 1.0f, a, lda, b, ldb, 0.0f, c, p->N);
        double t1 = now();
        openblas_set_num_threads(1);
        pause_ms(1000); /* let OpenBLAS's spinning workers go to sleep */
        double t2 = now();
        for (int i = 0; i < iters; i++) cpu_sgemm(pool, p->ta, p->tb, p->M, p->N, p->K, 1.0f, a, lda, b, ldb, 0.0f, c, p->N);
        double t3 = now();
        pause_ms(20); /* past the pool's poll: its workers asleep before OpenBLAS runs */
        if (t1 - t0 < *blas) *blas = t1 - t0;
        if (t3 - t2 < *ours) *ours = t3 - t2;
    }
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : cpu_num_cores();
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (threads < 1 || threads > 256 || rounds < 1 || (argc > 2 && strcmp(argv[2], "llama") != 0)) {
        fprintf(stderr, "usage: bench_gemm_threads [threads: 1..256 [llama [rounds]]]\n");
        return 2;
    }
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    double blas, ours;
    if (argc > 2) {
        for (size_t q = 0; q < sizeof llama / sizeof *llama; q++) {
            const product *p = &llama[q];
            double flop = 2.0 * p->M * p->N * (double)p->K;
            int iters = (int)(2e9 / flop) + 1; /* about 2 GFLOP a block */
            best_pair(p, threads, pool, rounds, iters, &blas, &ours);
            printf("{\"product\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"ta\":%d,\"tb\":%d,\"threads\":%d,"
                   "\"openblas_gflops\":%.1f,\"ours_gflops\":%.1f,\"ratio\":%.3f}\n",
                   p->name, p->M, p->N, p->K, p->ta, p->tb, threads, flop * iters / blas * 1e-9, flop * iters / ours * 1e-9,
                   blas / ours);
            fflush(stdout);
        }
    } else {
        for (int n = 256; n <= 2048; n *= 2) {
            product p = { "square", n, n, n, 0, 1 };
            int iters = n <= 512 ? 100 : n == 1024 ? 20 : 4;
            double flops = 2.0 * n * n * (double)n * iters;
            best_pair(&p, threads, pool, 3, iters, &blas, &ours);
            printf("{\"n\":%d,\"threads\":%d,\"openblas_threaded_gflops\":%.1f,\"pool_split_gflops\":%.1f,\"ratio\":%.3f}\n",
                   n, threads, flops / blas * 1e-9, flops / ours * 1e-9, blas / ours);
        }
    }
    cpu_pool_free(pool);
    return 0;
}
