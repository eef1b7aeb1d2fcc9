/* The machine's fp32 multiply-add peak: every thread runs a loop of independent fused
 * multiply-adds in the widest vectors the CPU has (AVX-512, AVX2+FMA, NEON; scalar
 * multiply-adds elsewhere), twelve chains deep so their latency is hidden, and the
 * threads' rates add up. Where the CPU has them, the bf16 peaks the same way: AVX512-BF16
 * dot products (vdpbf16ps: 16 lanes x 2 bf16 products into fp32, 64 FLOP each) and AMX
 * tiles (tdpbf16ps: a 16x32 by 32x16 bf16 product into 16x16 fp32, 16,384 FLOP each). No real kernel reaches it (loads, packing, edges), so it is the
 * ceiling a GEMM's or a whole training step's GFLOP/s are read against: compare_llama
 * divides a step's FLOPs by it to give the fastest step this machine could run at all.
 *   build/bench_fma_peak [threads [seconds]]      prints one JSON line */
#define _GNU_SOURCE
#include "cpu/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

enum { CHAINS = 12 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Each loop returns a value made from its accumulators so the compiler keeps the work;
 * the factors keep them finite (a -> a * 0.999999 + 1e-7 converges to 1e-1). */
#ifdef HAVE_X86
__attribute__((target("avx512f"))) static float loop_avx512(long n) {
    __m512 a[CHAINS], b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++) a[j] = _mm512_set1_ps(1.0f + (float)j * 1e-7f);
    for (long i = 0; i < n; i++)
        for (int j = 0; j < CHAINS; j++) a[j] = _mm512_fmadd_ps(a[j], b, c);
    float r = 0;
    for (int j = 0; j < CHAINS; j++) r += _mm512_reduce_add_ps(a[j]);
    return r;
}

__attribute__((target("avx2,fma"))) static float loop_avx2(long n) {
    __m256 a[CHAINS], b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++) a[j] = _mm256_set1_ps(1.0f + (float)j * 1e-7f);
    for (long i = 0; i < n; i++)
        for (int j = 0; j < CHAINS; j++) a[j] = _mm256_fmadd_ps(a[j], b, c);
    float out[8], r = 0;
    for (int j = 0; j < CHAINS; j++) {
        _mm256_storeu_ps(out, a[j]);
        for (int k = 0; k < 8; k++) r += out[k];
    }
    return r;
}
#endif

#ifdef HAVE_X86
/* vdpbf16ps: a[j] += pairs of b x c, in fp32. b is 1.0 and c tiny so the sums stay finite. */
__attribute__((target("avx512f,avx512bf16"))) static float loop_bf16dot(long n) {
    __m512 a[CHAINS];
    __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    __m512bh c = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
    for (int j = 0; j < CHAINS; j++) a[j] = _mm512_set1_ps((float)j * 1e-7f);
    for (long i = 0; i < n; i++)
        for (int j = 0; j < CHAINS; j++) a[j] = _mm512_dpbf16_ps(a[j], b, c);
    float r = 0;
    for (int j = 0; j < CHAINS; j++) r += _mm512_reduce_add_ps(a[j]);
    return r;
}

/* AMX: four 16x16 fp32 accumulator tiles fed by two A and two B tiles (bf16 zeros:
 * the tile unit's rate does not depend on the values). */
typedef struct {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} tile_config;

__attribute__((target("amx-tile,amx-bf16"))) static float loop_amx(long n) {
    static unsigned short buf[16 * 32] __attribute__((aligned(64)));
    tile_config cfg = { .palette = 1 };
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    for (long i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    static float out[16 * 16] __attribute__((aligned(64)));
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/* Linux hands a process the AMX tile state only on request. */
static int amx_permit(void) {
#if defined(__linux__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return 0;
#endif
}
#endif

#if defined(__aarch64__)
static float loop_neon(long n) {
    float32x4_t a[CHAINS], b = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
    for (int j = 0; j < CHAINS; j++) a[j] = vdupq_n_f32(1.0f + (float)j * 1e-7f);
    for (long i = 0; i < n; i++)
        for (int j = 0; j < CHAINS; j++) a[j] = vfmaq_f32(c, a[j], b);
    float r = 0;
    for (int j = 0; j < CHAINS; j++) r += vaddvq_f32(a[j]);
    return r;
}
#endif

static float loop_scalar(long n) {
    float a[CHAINS];
    for (int j = 0; j < CHAINS; j++) a[j] = 1.0f + (float)j * 1e-7f;
    for (long i = 0; i < n; i++)
        for (int j = 0; j < CHAINS; j++) a[j] = a[j] * 0.999999f + 1e-7f; /* fmaf may be a library call */
    float r = 0;
    for (int j = 0; j < CHAINS; j++) r += a[j];
    return r;
}

typedef struct {
    float (*loop)(long);
    long iters;
    double seconds, cpu_seconds;
    float sink;
} job;

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *run_job(void *p) {
    job *j = p;
    double t0 = now_s(), c0 = thread_cpu_s();
    j->sink = j->loop(j->iters);
    j->seconds = now_s() - t0;
    j->cpu_seconds = thread_cpu_s() - c0;
    return NULL;
}

/* The rate per second of the thread's own CPU time, summed over threads: what the cores
 * do while they run this process, the ceiling for bench_llama_profile's one-thread CPU
 * times; on a machine shared with other jobs the wall-clock peak is lower. */
static double cpu_gflops;

/* Runs loop on every thread for about want_s seconds; returns GFLOP/s summed over them. */
static double measure(float (*loop)(long), double flop_per_iter, int threads, double want_s, double *slowest) {
    /* Size the loop on one thread so a run lasts about want_s. */
    long iters = 1 << 10;
    for (;;) {
        double t0 = now_s();
        volatile float s = loop(iters);
        (void)s;
        double dt = now_s() - t0;
        if (dt > 0.05 || iters > (1L << 40)) {
            iters = (long)((double)iters * want_s / (dt > 0 ? dt : 1e-9));
            break;
        }
        iters *= 4;
    }
    job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!jobs || !tid) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){ loop, iters, 0, 0, 0 };
        if (pthread_create(&tid[t], NULL, run_job, &jobs[t])) { fprintf(stderr, "pthread_create failed\n"); exit(1); }
    }
    double gflops = 0;
    *slowest = 0;
    cpu_gflops = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        gflops += (double)iters * flop_per_iter / jobs[t].seconds * 1e-9;
        cpu_gflops += (double)iters * flop_per_iter / jobs[t].cpu_seconds * 1e-9;
        *slowest = jobs[t].seconds > *slowest ? jobs[t].seconds : *slowest;
    }
    free(jobs);
    free(tid);
    return gflops;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double want_s = argc > 2 ? atof(argv[2]) : 1.0;
    if (threads < 1 || threads > 256 || !(want_s > 0 && want_s <= 60)) {
        fprintf(stderr, "usage: bench_fma_peak [threads 1..256 [seconds 0..60]]\n");
        return 2;
    }
    const cpu_features *f = cpu_features_get();
    float (*loop)(long) = loop_scalar;
    const char *isa = "scalar";
    int lanes = 1;
#ifdef HAVE_X86
    if (f->avx512f) loop = loop_avx512, isa = "avx512", lanes = 16;
    else if (f->avx2 && f->fma) loop = loop_avx2, isa = "avx2", lanes = 8;
#elif defined(__aarch64__)
    if (f->neon) loop = loop_neon, isa = "neon", lanes = 4;
#endif
    double slowest;
    double gflops = measure(loop, (double)CHAINS * lanes * 2, threads, want_s, &slowest);
    printf("{\"isa\":\"%s\",\"threads\":%d,\"seconds\":%.2f,\"peak_gflops\":%.1f,\"per_thread_gflops\":%.1f,"
           "\"cpu_time_peak_gflops\":%.1f", isa, threads, slowest, gflops, gflops / threads, cpu_gflops);
    /* The bf16 peaks (wall clock, and per second of the threads' CPU time): null where the
     * CPU lacks the instructions. */
    double dot = 0, amx = 0, dot_cpu = 0, amx_cpu = 0, s2;
#ifdef HAVE_X86
    if (f->avx512bf16) dot = measure(loop_bf16dot, (double)CHAINS * 64, threads, want_s, &s2), dot_cpu = cpu_gflops;
    if (f->amx_bf16 && amx_permit())
        amx = measure(loop_amx, 4.0 * 16 * 16 * 32 * 2, threads, want_s, &s2), amx_cpu = cpu_gflops;
#endif
    (void)s2;
    if (dot > 0) printf(",\"bf16_dot_gflops\":%.1f,\"bf16_dot_cpu_time_gflops\":%.1f", dot, dot_cpu);
    else printf(",\"bf16_dot_gflops\":null");
    if (amx > 0) printf(",\"amx_bf16_gflops\":%.1f,\"amx_bf16_cpu_time_gflops\":%.1f", amx, amx_cpu);
    else printf(",\"amx_bf16_gflops\":null");
    printf(",\"cpu\":\"%s\",\"features\":\"%s\"}\n", cpu_model_name(), cpu_features_string());
    return 0;
}
