/* What packing a weight costs the GEMM, against what moving its bytes costs: the llama
 * weights packed as the blocked product packs its op(B) (K blocks of the kernel's kc, N
 * blocks of at most 1024 columns into one L2-sized panel), transposed (x W^T, the
 * forward) and as stored (dy W, the input gradient), with the weight cold (each call on
 * another of enough copies that none is cached, as in a training step, where the
 * optimizer wrote it long ago) and warm (the same copy every call). Beside each, the
 * same bytes copied piece by piece into the panel without rearranging (memcpy of each
 * row's piece) and read in one stream: the rates the memory gives a core for this
 * pattern. One thread, CPU time, best of 5 rounds; GB/s of weight bytes.
 *   build/bench_gemm_pack            one JSON line per weight, direction and case */
#define _POSIX_C_SOURCE 200809L
#include "cpu/gemm.h"
#include "cpu/gemm_ukernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct { const char *what; int64_t rows, cols; } weight; /* [out, in], row-major */

static const weight weights[] = {
    { "W 768x768", 768, 768 }, { "W1 2048x768", 2048, 768 }, { "W2 768x2048", 768, 2048 },
};

enum { COLD = 24, NB = 1024 };

typedef enum { PACK, COPY, READ } method;

static float sink; /* keeps the reads */

/* One pass over weight w as op(B) = W^T (tb 1: K = cols, N = rows) or W (tb 0: K = rows,
 * N = cols), in kc x NB blocks. */
static void pass(method how, int tb, const float *w, const weight *s, int kc, float *panel) {
    int64_t K = tb ? s->cols : s->rows, N = tb ? s->rows : s->cols, ld = s->cols;
    for (int64_t j = 0; j < N; j += NB)
        for (int64_t p = 0; p < K; p += kc) {
            int64_t nb = N - j < NB ? N - j : NB, kb = K - p < kc ? K - p : kc;
            const float *src = tb ? w + j * ld + p : w + p * ld + j;
            int64_t pieces = tb ? nb : kb, len = tb ? kb : nb; /* rows of the source block */
            if (how == PACK) {
                if (!cpu_sgemm_pack_b(tb, kb, nb, src, ld, panel)) {
                    fprintf(stderr, "bench_gemm_pack: products go to BLAS here; nothing to measure\n");
                    exit(2);
                }
            } else if (how == COPY) {
                for (int64_t r = 0; r < pieces; r++) memcpy(panel + r * len, src + r * ld, (size_t)len * sizeof(float));
            } else {
                float acc[16] = { 0 };
                for (int64_t r = 0; r < pieces; r++)
                    for (int64_t c = 0; c + 16 <= len; c += 16)
                        for (int q = 0; q < 16; q++) acc[q] += src[r * ld + c + q];
                for (int q = 0; q < 16; q++) sink += acc[q];
            }
        }
}

int main(void) {
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    const char *names[] = { "pack", "memcpy", "read" };
    float *panel = aligned_alloc(64, sizeof(float) * (size_t)uk->kc * NB);
    if (!panel) return 1;
    memset(panel, 0, sizeof(float) * (size_t)uk->kc * NB);
    for (size_t s = 0; s < sizeof weights / sizeof weights[0]; s++) {
        const weight *ws = &weights[s];
        size_t n = (size_t)(ws->rows * ws->cols);
        float *w[COLD];
        for (int q = 0; q < COLD; q++) {
            if (!(w[q] = malloc(n * sizeof(float)))) return 1;
            for (size_t i = 0; i < n; i++) w[q][i] = (float)((i + (size_t)q) % 7) * 0.1f;
        }
        for (int tb = 1; tb >= 0; tb--)
            for (int cold = 0; cold <= 1; cold++) {
                printf("{\"weight\":\"%s\",\"as\":\"%s\",\"case\":\"%s\"", ws->what, tb ? "W^T (x W^T)" : "W (dy W)",
                       cold ? "cold" : "warm");
                for (int how = PACK; how <= READ; how++) {
                    double best = 1e30;
                    for (int r = 0; r < 5; r++) {
                        double t0 = cpu_now();
                        for (int i = 0; i < 2 * COLD; i++) pass(how, tb, w[cold ? i % COLD : 0], ws, uk->kc, panel);
                        double t = (cpu_now() - t0) / (2 * COLD);
                        if (t < best) best = t;
                    }
                    printf(",\"%s_gbs\":%.1f", names[how], (double)n * sizeof(float) / best * 1e-9);
                }
                printf("}\n");
            }
        for (int q = 0; q < COLD; q++) free(w[q]);
    }
    free(panel);
    return sink == 12345.0f; /* never: the reads stay */
}
