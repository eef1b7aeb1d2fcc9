/* Every GEMM path on this machine, side by side, on the products the built-in nets run
 * and on a square one: each of our micro-kernels the CPU has, and the linked BLAS (with
 * the core OpenBLAS picked; run under OPENBLAS_CORETYPE=Prescott to see what OpenBLAS
 * does on a CPU it cannot name). Time is the measuring thread's CPU time, best of 7 rounds with
 * the paths interleaved, so a busy shared machine disturbs it little; one thread.
 *   ./build/bench_gemm_kernels            prints one line per product */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#endif

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct { const char *what; int64_t m, n, k; int ta, tb; } product;

int main(void) {
    static const product prods[] = {
        { "mlp forward x W^T", 64, 128, 784, 0, 1 },     { "mlp weight grad g^T x", 128, 784, 64, 1, 0 },
        { "cnn conv2 per image", 32, 196, 144, 0, 0 },  { "cnn conv2 input grad", 288, 196, 32, 1, 0 },
        { "cnn conv1 per image", 16, 784, 9, 0, 0 },    { "cnn conv2 weight grad", 32, 144, 12544, 0, 1 },
        { "cnn conv1 weight grad", 16, 9, 50176, 0, 1 }, { "square", 512, 512, 512, 0, 1 },
    };
    gemm_ukernel ks[4];
    int nk = 0;
    if (gemm_ukernel_avx512(&ks[nk])) nk++;
    if (gemm_ukernel_avx2(&ks[nk])) nk++;
    if (gemm_ukernel_neon(&ks[nk])) nk++;
    gemm_ukernel_portable(&ks[nk++]);
    bool blas = cpu_have_blas();
    const char *core = cpu_blas_core();
    cpu_blas_set_threads(1);
    printf("cpu: %s; features: %s; cpu_sgemm runs %s; blas: %s%s%s\n", cpu_model_name(), cpu_features_string(),
           cpu_gemm_path(), blas ? cpu_blas_name() : "none", core ? " " : "", core ? core : "");
    printf("GFLOP/s, one thread, CPU time:\n");
    for (size_t s = 0; s < sizeof prods / sizeof prods[0]; s++) {
        const product *p = &prods[s];
        int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
        float *a = malloc(sizeof(float) * (size_t)(p->m * p->k)), *b = malloc(sizeof(float) * (size_t)(p->k * p->n));
        float *c = malloc(sizeof(float) * (size_t)(p->m * p->n));
        if (!a || !b || !c) return 1;
        for (int64_t i = 0; i < p->m * p->k; i++) a[i] = (float)(i % 7) * 0.1f;
        for (int64_t i = 0; i < p->k * p->n; i++) b[i] = (float)(i % 5) * 0.1f;
        double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k, best[5];
        int paths = nk + blas, iters = flops > 1e8 ? 5 : (int)(2e8 / flops) + 1;
        for (int q = 0; q < paths; q++) best[q] = 1e30;
        for (int r = 0; r < 7; r++)
            for (int q = 0; q < paths; q++) {
                double t0 = cpu_now();
                for (int i = 0; i < iters; i++) {
                    if (q < nk)
                        cpu_sgemm_with(&ks[q], NULL, p->ta, p->tb, p->m, p->n, p->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                                       p->n, NULL);
                    else
                        cpu_sgemm_blas(NULL, p->ta, p->tb, p->m, p->n, p->k, 1.0f, a, lda, b, ldb, 0.0f, c, p->n);
                }
                double t = (cpu_now() - t0) / iters;
                if (t < best[q]) best[q] = t;
            }
        printf("  %-22s %4lldx%-4lldx%-5lld", p->what, (long long)p->m, (long long)p->n, (long long)p->k);
        for (int q = 0; q < paths; q++) printf("  %s %6.1f", q < nk ? ks[q].name : cpu_blas_name(), flops / best[q] * 1e-9);
        printf("\n");
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
