/* The pipeline plan's host work (seed 002): the RMSNorm backward that one step runs
 * (2 per layer + the final norm, channel-first [B, dim, seq]) as the scalar strided double
 * loop the pipeline had (kept here as the baseline) and as the library's vectorised
 * kernel (cpu_rms_norm_bwd_cf), sampled round-robin; whole pipeline steps of
 * af_net_llama on the CPU target; and one step's kernel dispatches alone (the 8 kernels
 * compiled for the CPU, run as often as a step runs them), so the step's host time (the
 * embedding, residuals, RMSNorm backward, dW GEMMs, cross-entropy, Adam: what stays on
 * the CPU when the kernels run on the engine) is the step less its kernels. With 1
 * thread all times are the thread's CPU time, which a busy machine disturbs less.
 * Prints one JSON line; figures are medians.
 *   build/bench_llama_pipeline_host [dim layers heads hidden vocab seq batch [steps [threads [samples]]]]
 *   build/bench_llama_pipeline_host 768 12 12 2048 512 256 1 5 1 15     (stories110m's shape) */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_llama.h"
#include "cpu/norm_bwd.h"
#include "nn/llama_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The pipeline's RMSNorm backward before vectorising (src/train/llama_pipeline.c at c8b60a7). */
static void rms_bwd_scalar(int B, int64_t C, int64_t S, const float *x, const float *dy, const float *w, const float *resid,
                           float *out, float *dw) {
    for (int b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            const float *xb = x + b * C * S + s, *db = dy + b * C * S + s;
            double ss = 0, dot = 0;
            for (int64_t c = 0; c < C; c++) {
                ss += (double)xb[c * S] * xb[c * S];
                dot += (double)db[c * S] * w[c] * xb[c * S];
            }
            double r = 1.0 / sqrt(ss / (double)C + 1e-5f), k = r * r * r * dot / (double)C;
            for (int64_t c = 0; c < C; c++) {
                int64_t i = b * C * S + c * S + s;
                out[i] = (resid ? resid[i] : 0.0f) + (float)(r * db[c * S] * w[c] - k * xb[c * S]);
                dw[c] += (float)(db[c * S] * xb[c * S] * r);
            }
        }
}

int main(int argc, char **argv) {
    int v[10] = { 768, 12, 12, 2048, 512, 256, 1, 5, 1, 15 };
    for (int i = 1; i < argc && i <= 10; i++) v[i - 1] = atoi(argv[i]);
    int D = v[0], L = v[1], H = v[2], F = v[3], V = v[4], T = v[5], B = v[6], steps = v[7], threads = v[8], samples = v[9];
    if (steps < 2 || samples < 1) { fprintf(stderr, "steps >= 2 and samples >= 1\n"); return 2; }
    if (threads == 1) clock_id = CLOCK_THREAD_CPUTIME_ID;
    char cpu[256] = "?";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    for (char line[512]; ci && fgets(line, sizeof line, ci);)
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n\"")] = 0;
            break;
        }
    if (ci) fclose(ci);

    /* RMSNorm backward: one step's 2L + 1 calls, scalar then vectorised, round-robin. */
    int64_t n = (int64_t)B * D * T;
    float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)D), *dw = calloc((size_t)D, sizeof(float));
    float *scratch = malloc(sizeof(float) * 2 * (size_t)B * T);
    unsigned long long s = 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
        dy[i] = x[i] * 0.3f + 0.01f;
        res[i] = -x[i];
    }
    for (int c = 0; c < D; c++) w[c] = 1.0f + 0.001f * c;
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    double *ts = malloc(sizeof(double) * (size_t)samples), *tv = malloc(sizeof(double) * (size_t)samples);
    int calls = 2 * L + 1;
    for (int k = -1; k < samples; k++) { /* k = -1: warm-up */
        double t0 = now_s();
        for (int c = 0; c < calls; c++) rms_bwd_scalar(B, D, T, x, dy, w, c ? res : NULL, out, dw);
        double t1 = now_s();
        for (int c = 0; c < calls; c++) cpu_rms_norm_bwd_cf(pool, B, D, T, 1e-5f, x, dy, w, c ? res : NULL, out, dw, scratch);
        double t2 = now_s();
        if (k >= 0) ts[k] = t1 - t0, tv[k] = t2 - t1;
    }
    double scalar_ms = 1e3 * median(ts, samples), vector_ms = 1e3 * median(tv, samples);

    /* Whole pipeline steps on the CPU target (compiling excluded: the first step is dropped). */
    af_llama_config c = { D, F, L, H, H, V, T, 1 };
    af_llama_weights *wt = af_llama_weights_new(&c);
    if (!wt) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    float *d = af_llama_weights_data(wt);
    for (int64_t i = 0, cnt = af_llama_weight_count(&c); i < cnt; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = ((float)(s >> 40) / 16777216.0f - 0.5f) * 0.04f;
    }
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.plan = AF_PLAN_PIPELINE;
    o.batch = o.eval_batch = B;
    o.compile.threads = threads;
    af_net net = af_net_llama(wt, T);
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    if (!t) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    float *tok = malloc(sizeof(float) * (size_t)B * T), *y = calloc((size_t)B * T * V, sizeof(float));
    for (int i = 0; i < B * T; i++) {
        tok[i] = (float)(i * 7 % V);
        y[(int64_t)i * V + (i * 7 + 1) % V] = 1;
    }
    double *step = malloc(sizeof(double) * (size_t)steps);
    for (int k = 0; k < steps; k++) {
        double t0 = now_s();
        if (af_trainer_step(t, tok, y, NULL)) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
        step[k] = now_s() - t0;
    }
    double step_ms = 1e3 * median(step + 1, steps - 1);

    /* One step's dispatches: 6 kernels per layer, clsFwd and clsBwd once (one block: the CPU has no W/H limit). */
    lk_shape sh = { D, F, H, H, T, B, V };
    af_graph *g = af_graph_new();
    af_model *km[LK_COUNT] = { 0 };
    af_buffer kin[LK_COUNT][LK_MAXIO], kout[LK_COUNT][LK_MAXIO];
    af_compile_opts co = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
    for (int k = 0; k < LK_COUNT; k++) {
        lk_program pr;
        if (lk_build(g, (lk_kind)k, &sh, AF_F32, &pr) || !(km[k] = af_compile(g, pr.nin, pr.in, pr.nout, pr.out, &co))) {
            fprintf(stderr, "%s: %s\n", lk_names[k], af_error_message());
            return 1;
        }
        for (int i = 0; i < pr.nin + pr.nout; i++) {
            af_tensor *tt = i < pr.nin ? pr.in[i] : pr.out[i - pr.nin];
            int64_t cnt = af_shape_count(af_tensor_shape(tt));
            float *buf = calloc((size_t)cnt, sizeof(float));
            for (int64_t j = 0; j < cnt; j++) buf[j] = k == LK_SDPA_BWD2 && i == 0 ? 1.0f / T : 0.01f * (float)(j % 97) - 0.3f;
            if (i < pr.nin) kin[k][i] = AF_BUF_F32(buf, cnt);
            else kout[k][i - pr.nin] = AF_BUF_F32(buf, cnt);
        }
    }
    double *kt = malloc(sizeof(double) * (size_t)steps);
    for (int r = -1; r < steps - 1; r++) {
        double t0 = now_s();
        for (int k = 0; k < LK_COUNT; k++)
            for (int l = 0; l < (k >= LK_CLS_FWD ? 1 : L); l++)
                if (af_run(km[k], kin[k], kout[k])) { fprintf(stderr, "%s: %s\n", lk_names[k], af_error_message()); return 1; }
        if (r >= 0) kt[r] = now_s() - t0;
    }
    double kernels_ms = 1e3 * median(kt, steps - 1);
    printf("{\"cpu\":\"%s\",\"threads\":%d,\"clock\":\"%s\",\"dim\":%d,\"layers\":%d,\"seq\":%d,\"batch\":%d,"
           "\"rms_bwd_calls_per_step\":%d,\"rms_bwd_scalar_ms_per_step\":%.3f,\"rms_bwd_vector_ms_per_step\":%.3f,"
           "\"rms_bwd_speedup\":%.2f,\"pipeline_step_ms\":%.1f,\"kernels_ms\":%.1f,\"host_ms\":%.1f}\n",
           cpu, threads, threads == 1 ? "thread_cpu" : "monotonic", D, L, T, B, calls, scalar_ms, vector_ms, scalar_ms / vector_ms,
           step_ms, kernels_ms, step_ms - kernels_ms);
    af_trainer_free(t);
    af_llama_weights_free(wt);
    if (pool) cpu_pool_free(pool);
    free(x), free(dy), free(res), free(out), free(w), free(dw), free(scratch), free(ts), free(tv), free(tok), free(y), free(step);
    return 0;
}
