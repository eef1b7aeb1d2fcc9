/* The bf16 GEMM against our fp32 GEMM on the llama step's products: GFLOP/s of each path
 * this CPU has (fp32 cpu_sgemm; bf16 on AMX tiles and on AVX512-BF16 dot products), the
 * paths sampled round-robin, medians of the rounds (a shared machine's busy moments hit
 * every path). Packing (the bf16 rounding) is inside the timed call, as a caller sees it.
 * The last shapes carry the step's transposed operands: the forward x @ W^T (W stored
 * [N, K], "tb") and the weight gradient dy^T x (dy stored [K, M], "ta").
 *   build/bench_gemm_bf16 [threads [rounds]]      one JSON line per shape */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1, rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (threads < 1 || threads > 256 || rounds < 1 || rounds > 101) {
        fprintf(stderr, "usage: bench_gemm_bf16 [threads [rounds]]\n");
        return 2;
    }
    cpu_pool *pool = cpu_pool_new(threads);
    /* M N K ta tb: llama shape b's w1 forward (seq 512, dim 768 -> hidden 2048), its w2
     * forward, shape a's wq (batch 4 x seq 256, dim 288), a square; then as the step runs
     * them: shape b's w1 forward against W as stored, its weight gradient, shape a's wq
     * forward. */
    static const long shapes[][5] = {{512, 2048, 768, 0, 0}, {512, 768, 2048, 0, 0},  {1024, 288, 288, 0, 0},
                                     {1024, 1024, 1024, 0, 0}, {512, 2048, 768, 0, 1}, {2048, 768, 512, 1, 0},
                                     {1024, 288, 288, 0, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        long M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        int ta = (int)shapes[s][3], tb = (int)shapes[s][4];
        long lda = ta ? M : K, ldb = tb ? K : N;
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
        for (long i = 0; i < M * K; i++) A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        for (long i = 0; i < K * N; i++) B[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
        double t[3][101];
        int have[3] = {1, cpu_sgemm_bf16_t(pool, CPU_BF16_AMX, ta, tb, M, N, K, A, lda, B, ldb, C, N),
                       cpu_sgemm_bf16_t(pool, CPU_BF16_AVX512, ta, tb, M, N, K, A, lda, B, ldb, C, N)};
        cpu_sgemm(pool, ta, tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
        for (int r = 0; r < rounds; r++)
            for (int q = 0; q < 3; q++) {
                int p = (q + r) % 3;
                if (!have[p]) continue;
                int reps = 0;
                double t0 = now_s(), dt;
                do {
                    if (p == 0) cpu_sgemm(pool, ta, tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
                    else cpu_sgemm_bf16_t(pool, p == 1 ? CPU_BF16_AMX : CPU_BF16_AVX512, ta, tb, M, N, K, A, lda, B, ldb, C, N);
                    reps++;
                } while ((dt = now_s() - t0) < 0.05);
                t[p][r] = dt / reps;
            }
        double g[3] = {0};
        for (int p = 0; p < 3; p++)
            if (have[p]) {
                qsort(t[p], (size_t)rounds, sizeof(double), cmp);
                g[p] = 2.0 * M * N * K / t[p][rounds / 2] * 1e-9;
            }
        printf("{\"m\":%ld,\"n\":%ld,\"k\":%ld,", M, N, K);
        if (ta || tb) printf("\"ta\":%d,\"tb\":%d,", ta, tb);
        printf("\"threads\":%d,\"fp32_gflops\":%.1f", threads, g[0]);
        if (have[1]) printf(",\"amx_bf16_gflops\":%.1f,\"amx_over_fp32\":%.2f", g[1], g[1] / g[0]);
        if (have[2]) printf(",\"avx512bf16_gflops\":%.1f,\"avx512bf16_over_fp32\":%.2f", g[2], g[2] / g[0]);
        printf(",\"cpu\":\"%s\"}\n", cpu_model_name());
        free(A), free(B), free(C);
    }
    cpu_pool_free(pool);
    return 0;
}
