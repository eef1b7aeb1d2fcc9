/* The GEMM micro-kernel alone, as the blocked loop runs it (src/cpu/gemm.c): one packed A
 * sliver (MR x kc) held in L1 while the kernel sweeps a panel of packed B slivers (kc x
 * NR each) from L2, accumulating into C tiles, against the machine's fp32 FMA peak on
 * one thread. The panel widths run from one sliver (everything in L1) to past the L2, so
 * the line shows what the kernel loses to each level before any packing or cold operand
 * (which bench_gemm_cold adds). One thread, CPU time.
 *   build/bench_gemm_ukernel [kc]      one JSON line per panel width */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/gemm_ukernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* aligned_alloc wants a multiple of the alignment (C11; macOS refuses anything else). */
static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) & ~(size_t)63); }

/* GFLOP/s of the kernel sweeping `slivers` B slivers with each of `arows` A slivers, C
 * tiles laid out as rows of slivers * NR floats (best of 3). */
static double sweep(const gemm_ukernel *uk, int kc, int slivers, int arows) {
    const int mr = uk->mr, nr = uk->nr;
    int64_t ldc = (int64_t)slivers * nr;
    float *a = alloc64(sizeof(float) * (size_t)(mr * kc * arows));
    float *b = alloc64(sizeof(float) * (size_t)(nr * kc) * (size_t)slivers);
    float *c = alloc64(sizeof(float) * (size_t)(ldc * mr * arows));
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return -1;
    }
    for (int64_t i = 0; i < (int64_t)mr * kc * arows; i++) a[i] = 1e-3f * (float)(i % 7);
    for (int64_t i = 0; i < (int64_t)nr * kc * slivers; i++) b[i] = 1e-3f * (float)(i % 5);
    for (int64_t i = 0; i < ldc * mr * arows; i++) c[i] = 0;
    int64_t calls = 0, target = 100000000 / kc / mr / nr; /* about 0.2 GFLOP a round */
    double best = 0;
    for (int round = 0; round < 3; round++) {
        double t0 = cpu_now();
        for (calls = 0; calls < target;)
            for (int s = 0; s < arows; s++)
                for (int j = 0; j < slivers; j++, calls++)
                    uk->fn(kc, a + (int64_t)s * mr * kc, b + (int64_t)j * nr * kc, c + s * mr * ldc + j * nr, ldc, 1,
                           mr, nr);
        double t = cpu_now() - t0, g = 2.0 * mr * nr * kc * (double)calls / t * 1e-9;
        best = g > best ? g : best;
    }
    free(a), free(b), free(c);
    return best;
}

int main(int argc, char **argv) {
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    int kc = argc > 1 ? atoi(argv[1]) : uk->kc;
    if (kc < 8 || kc > 4096) {
        fprintf(stderr, "usage: bench_gemm_ukernel [kc: 8..4096]\n");
        return 2;
    }
    const int widths[] = { 1, 8, 32, 64, 128 };
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        int w = widths[i], arows = w == 1 ? 1 : 22; /* 22 A slivers: a 264-row M block */
        double kib = (double)w * uk->nr * kc * sizeof(float) / 1024.0, g = sweep(uk, kc, w, arows);
        if (g < 0) {
            fprintf(stderr, "bench_gemm_ukernel: out of memory for a %.0f KiB panel\n", kib);
            return 1;
        }
        printf("{\"kernel\":\"%s %dx%d\",\"kc\":%d,\"b_slivers\":%d,\"b_panel_kib\":%.0f,\"l2_kib\":%lld,\"gflops\":%.1f}\n",
               uk->name, uk->mr, uk->nr, kc, w, kib, (long long)(cpu_l2_bytes() / 1024), g);
    }
    return 0;
}
