/* aneforge bench ops: micro-benchmarks of the CPU executor against the baselines it
 * should approach, printed as one JSON object on stdout (progress goes to stderr).
 * bench/README.md describes every number.
 *
 *   gemm         af_matmul_w (and af_matmul at 1024) compiled and run through af_run vs
 *                the direct GEMMs on the machine (our packed kernel, and BLAS when
 *                linked), same thread count, samples interleaved; the kernel path,
 *                GFLOP/s medians, the machine's peak and the ratios.
 *   elementwise  af_add / af_mul (row broadcast) / af_relu on large fp32 tensors vs
 *                memcpy of the same size (one thread and split over the pool); GB/s.
 *   softmax      rows/s of af_softmax over the last axis, two shapes.
 *   layer_norm   rows/s of af_layer_norm, two shapes.
 *   compile      ms to build and to af_compile a 1,000-node graph, a 4,000-node one
 *                (scaling) and a ~1,000-node MLP training graph.
 *
 * Method: every workload is warmed up and calibrated so one sample lasts at least
 * --min-ms; a sample's time per iteration comes from clock_gettime(CLOCK_MONOTONIC);
 * results are medians over --repeat samples. Workloads that are compared are sampled
 * round-robin (A,B then B,A ...) so they see the same machine conditions. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "cli_out.h"
#include "aneforge.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
/* OpenBLAS introspection, resolved only when OpenBLAS is linked in. */
extern char *openblas_get_config(void) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));
extern char *openblas_get_corename(void) __attribute__((weak));
#define AF_BENCH_OPENBLAS_WEAK 1
#endif

/* ------------------------------------------------------------------ options */

typedef struct {
    bool quick;
    bool check;       /* exit 1 when a target misses */
    int repeat;       /* samples per measurement */
    int threads;      /* 0 = one per core */
    double min_s;     /* minimum duration of one sample */
    int64_t elements; /* elementwise tensor size */
    char only[128];   /* comma-separated sections, "" = all */
} bench_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge bench ops [options]\n\n"
            "Micro-benchmarks of the CPU executor. Prints one JSON object on stdout;\n"
            "progress lines go to stderr.\n\n"
            "sections:\n"
            "  gemm         af_matmul_w through af_compile/af_run vs the best direct GEMM on\n"
            "               the machine (our kernel, and BLAS when linked), square sizes 256,\n"
            "               512, 1024, 2048; kernel path, GFLOP/s, peak and ratio\n"
            "  elementwise  af_add, af_mul (row broadcast), af_relu vs memcpy; GB/s and ratio\n"
            "  softmax      rows/s of af_softmax(last axis) on [4096,1024] and [32768,128]\n"
            "  layer_norm   rows/s of af_layer_norm on the same shapes\n"
            "  compile      ms to build and af_compile a 1,000-node graph of elementwise and\n"
            "               matmul nodes, the same at 4,000 nodes (scaling), and a ~1,000-node\n"
            "               MLP training graph (forward, MSE, backward; 182 parameters)\n\n"
            "options:\n"
            "  --quick        fewer samples and a shorter minimum sample (finishes in ~10 s)\n"
            "  --repeat N     samples per measurement (default 9; --quick: 3)\n"
            "  --threads N    executor and BLAS threads for both sides (default: one per core)\n"
            "  --min-ms MS    minimum length of one sample in ms (default 40; --quick: 15)\n"
            "  --elements N   elementwise tensor size in floats (default 16777216)\n"
            "  --only LIST    run only these sections, comma-separated (e.g. gemm,compile)\n"
            "  --check        exit with status 1 when a target misses\n"
            "  -h, --help     show this help\n\n"
            "targets (reported under \"targets\"):\n"
            "  gemm_vs_best      executor GEMM >= 90%% of the best direct GEMM on the machine for\n"
            "                    sizes 256..2048 (median of per-round ratios, \"ratio_paired\")\n"
            "  elementwise       af_add GB/s >= 50%% of memcpy GB/s\n"
            "  compile_1000      af_compile of a 1,000-node graph < 20 ms\n");
}

static bool want(const bench_opts *o, const char *section) {
    if (!o->only[0]) return true;
    size_t n = strlen(section);
    for (const char *p = o->only; (p = strstr(p, section)) != NULL; p += n)
        if ((p == o->only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

/* ------------------------------------------------------------------ timing */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double s[64];
    if (n > 64) n = 64;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

typedef bool (*work_fn)(void *ctx); /* one iteration; false on failure */

typedef struct {
    work_fn fn;
    void *ctx;
    int iters;           /* per sample, from calibration */
    double t[64];        /* seconds per iteration, one per sample */
    int n;
} workload;

static bool bench_failed;

/* Warms up, then runs doubling batches until one lasts >= min_s / 4, and picks the
 * iteration count so a sample lasts >= min_s. */
static void calibrate(workload *w, double min_s) {
    w->n = 0;
    if (!w->fn(w->ctx)) bench_failed = true; /* first touch of the buffers, lazy init */
    int it = 1;
    double el;
    for (;;) {
        double t0 = now_s();
        for (int i = 0; i < it; i++)
            if (!w->fn(w->ctx)) bench_failed = true;
        el = now_s() - t0;
        if (el >= min_s / 4 || it >= 1 << 16 || bench_failed) break;
        it *= 2;
    }
    double one = el / it;
    int iters = one > 0 ? (int)ceil(min_s / one) : 1 << 16;
    w->iters = iters < 1 ? 1 : iters > 1 << 16 ? 1 << 16 : iters;
}

static void sample(workload *w) {
    double t0 = now_s();
    for (int i = 0; i < w->iters; i++)
        if (!w->fn(w->ctx)) bench_failed = true;
    if (w->n < 64) w->t[w->n++] = (now_s() - t0) / w->iters;
}

/* Round-robin samples of n workloads, starting one later each round. */
static void measure_set(workload *w, int n, const bench_opts *o) {
    for (int j = 0; j < n; j++) calibrate(&w[j], o->min_s);
    for (int r = 0; r < o->repeat; r++)
        for (int j = 0; j < n; j++) sample(&w[(j + r) % n]);
}

static void measure_one(workload *a, const bench_opts *o) {
    calibrate(a, o->min_s);
    for (int r = 0; r < o->repeat; r++) sample(a);
}

static double med(const workload *w) { return median(w->t, w->n); }

/* ------------------------------------------------------------------ JSON */

/* The CLI's shared JSON writers (cli_out.h): null for a non-finite number. */
static void json_num(double v, int prec) {
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%%.%df", prec);
    cli_json_num(stdout, fmt, v);
}

static void json_str(const char *s) { cli_json_str(stdout, s); }

/* ------------------------------------------------------------------ helpers */

static float *alloc_fill(int64_t n, uint32_t seed) {
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) return NULL;
    uint32_t s = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23); /* [-1, 1) */
    }
    return p;
}

static af_compile_opts compile_opts(const bench_opts *o) {
    return (af_compile_opts){ .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = o->threads };
}

typedef struct {
    af_model *m;
    af_buffer in[3];
    af_buffer out[1];
} run_ctx;

static bool run_model(void *p) {
    run_ctx *r = p;
    if (af_run(r->m, r->in, r->out) != AF_OK) {
        fprintf(stderr, "bench: af_run failed: %s\n", af_error_message());
        return false;
    }
    return true;
}

/* The 1-minute load average (Linux), or -1: a busy machine explains noisy numbers. */
static double load_average(void) {
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

/* The machine as the CPU backend sees it (af_cpu_info), read once. */
static const af_cpu_info *cpu(void) {
    static af_cpu_info ci;
    if (!ci.model) af_cpu_info_get(&ci);
    return &ci;
}

static int bench_threads(const bench_opts *o) { return o->threads > 0 ? o->threads : cpu()->cores; }

static int blas_threads_now(void) {
#ifdef AF_BENCH_OPENBLAS_WEAK
    if (openblas_get_num_threads) return openblas_get_num_threads();
#endif
    return -1;
}

/* ------------------------------------------------------------------ gemm */

typedef struct {
    int64_t n;
    int ta, tb;
    const float *a, *b;
    float *c;
    int threads;
    af_thread_pool *pool;
} sgemm_ctx;

/* The two direct GEMMs on the machine, called without the executor: our packed kernel
 * (the one the CPU's features chose) and the linked BLAS, both split over the same pool. */
static bool run_ours(void *p) {
    sgemm_ctx *s = p;
    return af_sgemm(AF_GEMM_KERNEL, s->pool, s->ta, s->tb, s->n, s->n, s->n, 1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c,
                    s->n) == AF_OK;
}

static bool run_blas(void *p) {
    sgemm_ctx *s = p;
    return af_sgemm(AF_GEMM_BLAS, s->pool, s->ta, s->tb, s->n, s->n, s->n, 1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c,
                    s->n) == AF_OK;
}

typedef struct {
    int64_t n;
    double graph_gflops, ours_gflops, blas_gflops, peak_gflops, ratio_paired, max_abs_diff;
    const char *peak_path;
    int iters_graph;
    bool ok;
} gemm_result;

/* One size: op 0 = af_matmul_w (x @ wt^T, wt baked), 1 = af_matmul (a @ b, both inputs).
 * The executor, our kernel and BLAS (when linked) are sampled round-robin; the peak is
 * the faster direct GEMM, so a slow path in the executor shows as a low ratio. */
static gemm_result bench_gemm(int64_t n, int op, const bench_opts *o) {
    gemm_result res = { .n = n, .blas_gflops = NAN };
    int64_t nn = n * n;
    float *a = alloc_fill(nn, 1), *b = alloc_fill(nn, 2);
    float *c1 = calloc((size_t)nn, sizeof *c1), *c2 = calloc((size_t)nn, sizeof *c2);
    af_graph *g = af_graph_new();
    af_model *m = NULL;
    if (!a || !b || !c1 || !c2 || !g) goto done;
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(n, n)), *y;
    run_ctx rc = { 0 };
    if (op == 0) {
        af_tensor *wt = af_const(g, "wt", AF_SHAPE(n, n), b);
        y = af_matmul_w(x, wt);
        af_compile_opts co = compile_opts(o);
        m = af_compile(g, 1, &x, 1, &y, &co);
        rc.in[0] = AF_BUF_F32(a, nn);
    } else {
        af_tensor *bt = af_input(g, "b", AF_F32, AF_SHAPE(n, n));
        y = af_matmul(x, bt, 0, 0);
        af_tensor *ins[2] = { x, bt };
        af_compile_opts co = compile_opts(o);
        m = af_compile(g, 2, ins, 1, &y, &co);
        rc.in[0] = AF_BUF_F32(a, nn);
        rc.in[1] = AF_BUF_F32(b, nn);
    }
    if (!m) {
        fprintf(stderr, "bench: gemm %lld: compile failed: %s\n", (long long)n, af_error_message());
        goto done;
    }
    rc.m = m;
    rc.out[0] = AF_BUF_F32(c1, nn);
    int threads = bench_threads(o);
    sgemm_ctx sc = { n, 0, op == 0, a, b, c2, threads, threads > 1 ? af_thread_pool_new(threads) : NULL };
    af_blas_set_threads(threads); /* what af_compile set; stated again for the direct side */
    workload w[3] = { { .fn = run_model, .ctx = &rc }, { .fn = run_ours, .ctx = &sc }, { .fn = run_blas, .ctx = &sc } };
    int nw = cpu()->blas_available ? 3 : 2;
    measure_set(w, nw, o);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    res.graph_gflops = flops / med(&w[0]) * 1e-9;
    res.ours_gflops = flops / med(&w[1]) * 1e-9;
    if (nw == 3) res.blas_gflops = flops / med(&w[2]) * 1e-9;
    bool blas_best = nw == 3 && res.blas_gflops > res.ours_gflops;
    res.peak_gflops = blas_best ? res.blas_gflops : res.ours_gflops;
    res.peak_path = blas_best ? cpu()->blas : cpu()->gemm_kernel;
    /* per round, the best direct time over the executor's: robust on a noisy machine */
    double pr[64];
    int np = w[0].n;
    for (int j = 1; j < nw; j++) np = w[j].n < np ? w[j].n : np;
    for (int i = 0; i < np; i++) {
        double best = w[1].t[i];
        if (nw == 3 && w[2].t[i] < best) best = w[2].t[i];
        pr[i] = best / w[0].t[i];
    }
    res.ratio_paired = np ? median(pr, np) : NAN;
    res.iters_graph = w[0].iters;
    run_ours(&sc); /* c2 from our kernel: the executor must agree with it */
    af_thread_pool_free(sc.pool);
    double d = 0;
    for (int64_t i = 0; i < nn; i++) { /* not fmax: GCC 12's arm64 vectoriser crashes on it at -O3 */
        double x = fabs((double)c1[i] - (double)c2[i]);
        d = x > d ? x : d;
    }
    res.max_abs_diff = d;
    res.ok = true;
done:
    af_model_free(m);
    af_graph_free(g);
    free(a);
    free(b);
    free(c1);
    free(c2);
    return res;
}

static void print_gemm_entry(const gemm_result *r, const char *op) {
    printf("{\"op\": \"%s\", \"n\": %lld, \"kernel_path\": ", op, (long long)r->n);
    json_str(cpu()->gemm_path);
    printf(", \"graph_gflops\": ");
    json_num(r->graph_gflops, 2);
    printf(", \"ours_gflops\": ");
    json_num(r->ours_gflops, 2);
    printf(", \"blas_gflops\": ");
    json_num(r->blas_gflops, 2);
    printf(", \"peak_gflops\": ");
    json_num(r->peak_gflops, 2);
    printf(", \"peak_path\": ");
    json_str(r->peak_path);
    printf(", \"ratio_vs_peak\": ");
    json_num(r->graph_gflops / r->peak_gflops, 4);
    printf(", \"ratio_paired\": ");
    json_num(r->ratio_paired, 4);
    printf(", \"iters_per_sample\": %d, \"max_abs_diff\": ", r->iters_graph);
    json_num(r->max_abs_diff, 9);
    printf("}");
}

/* ------------------------------------------------------------------ elementwise */

typedef struct { float *dst; const float *src; int64_t n; } copy_ctx;

static bool run_memcpy(void *p) {
    copy_ctx *c = p;
    memcpy(c->dst, c->src, (size_t)c->n * sizeof(float));
    return true;
}

static void copy_range(void *p, int64_t b, int64_t e) {
    copy_ctx *c = p;
    memcpy(c->dst + b, c->src + b, (size_t)(e - b) * sizeof(float));
}

typedef struct { copy_ctx c; af_thread_pool *pool; } pcopy_ctx;

static bool run_memcpy_threaded(void *p) {
    pcopy_ctx *c = p;
    af_thread_pool_for(c->pool, c->c.n, 1 << 16, copy_range, &c->c);
    return true;
}

typedef struct {
    const char *name;
    af_graph *g;
    af_model *m;
    run_ctx rc;
    int64_t bytes; /* moved per run: every operand read once, the result written once */
} ew_case;

/* kind 0: add [n] + [n]; 1: mul [n/cols, cols] * [cols]; 2: relu [n]. */
static bool ew_setup(ew_case *e, int kind, int64_t n, const float *xa, const float *xb, float *out,
                     const bench_opts *o) {
    static const char *const names[] = { "add", "mul_bcast_row", "relu" };
    const int64_t cols = 4096;
    *e = (ew_case){ .name = names[kind] };
    af_graph *g = e->g = af_graph_new();
    if (!g) return false;
    af_tensor *ins[2] = { 0 }, *y = NULL;
    int nin = 1;
    af_compile_opts co = compile_opts(o);
    if (kind == 0) {
        ins[0] = af_input(g, "a", AF_F32, AF_SHAPE(n));
        ins[1] = af_input(g, "b", AF_F32, AF_SHAPE(n));
        y = af_add(ins[0], ins[1]);
        nin = 2;
        e->rc.in[0] = AF_BUF_F32(xa, n);
        e->rc.in[1] = AF_BUF_F32(xb, n);
        e->bytes = 3 * n * 4;
    } else if (kind == 1) {
        ins[0] = af_input(g, "a", AF_F32, AF_SHAPE(n / cols, cols));
        ins[1] = af_input(g, "row", AF_F32, AF_SHAPE(cols));
        y = af_mul(ins[0], ins[1]);
        nin = 2;
        e->rc.in[0] = AF_BUF_F32(xa, n / cols * cols);
        e->rc.in[1] = AF_BUF_F32(xb, cols);
        e->bytes = (2 * (n / cols * cols) + cols) * 4;
    } else {
        ins[0] = af_input(g, "a", AF_F32, AF_SHAPE(n));
        y = af_relu(ins[0]);
        e->rc.in[0] = AF_BUF_F32(xa, n);
        e->bytes = 2 * n * 4;
    }
    e->m = e->rc.m = af_compile(g, nin, ins, 1, &y, &co);
    if (!e->m) {
        fprintf(stderr, "bench: elementwise %s: compile failed: %s\n", e->name, af_error_message());
        return false;
    }
    e->rc.out[0] = AF_BUF_F32(out, kind == 1 ? n / cols * cols : n);
    return true;
}

/* ------------------------------------------------------------------ softmax, layer_norm */

typedef struct { int64_t rows, cols; double rows_per_s, gbs, ms; bool ok; } row_result;

static row_result bench_rows(int layer_norm, int64_t rows, int64_t cols, const bench_opts *o) {
    row_result r = { .rows = rows, .cols = cols };
    int64_t n = rows * cols;
    float *x = alloc_fill(n, 3), *y = malloc((size_t)n * sizeof *y);
    float *gamma = alloc_fill(cols, 4), *beta = alloc_fill(cols, 5);
    af_graph *g = af_graph_new();
    af_model *m = NULL;
    if (!x || !y || !gamma || !beta || !g) goto done;
    af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(rows, cols)), *out;
    if (layer_norm)
        out = af_layer_norm(in, af_const(g, "gamma", AF_SHAPE(cols), gamma), af_const(g, "beta", AF_SHAPE(cols), beta),
                            1e-5f);
    else
        out = af_softmax(in, -1);
    af_compile_opts co = compile_opts(o);
    m = af_compile(g, 1, &in, 1, &out, &co);
    if (!m) {
        fprintf(stderr, "bench: %s: compile failed: %s\n", layer_norm ? "layer_norm" : "softmax", af_error_message());
        goto done;
    }
    run_ctx rc = { .m = m, .in = { AF_BUF_F32(x, n) }, .out = { AF_BUF_F32(y, n) } };
    workload w = { .fn = run_model, .ctx = &rc };
    measure_one(&w, o);
    double t = med(&w);
    r.ms = t * 1e3;
    r.rows_per_s = (double)rows / t;
    r.gbs = 2.0 * (double)n * 4 / t * 1e-9;
    r.ok = true;
done:
    af_model_free(m);
    af_graph_free(g);
    free(x);
    free(y);
    free(gamma);
    free(beta);
    return r;
}

static void print_rows(const char *name, const row_result *r, int nr) {
    printf("  \"%s\": [", name);
    for (int i = 0; i < nr; i++) {
        printf("%s\n    {\"shape\": [%lld, %lld], \"rows_per_s\": ", i ? "," : "", (long long)r[i].rows,
               (long long)r[i].cols);
        json_num(r[i].ok ? r[i].rows_per_s : NAN, 0);
        printf(", \"ms_per_run\": ");
        json_num(r[i].ok ? r[i].ms : NAN, 3);
        printf(", \"gbs\": ");
        json_num(r[i].ok ? r[i].gbs : NAN, 2);
        printf("}");
    }
    printf("\n  ]");
}

/* ------------------------------------------------------------------ compile */

/* A graph of `nodes` op nodes on [d, d] activations: matmul_w every 8th node plus a mix
 * of broadcast/elementwise binary ops, unary ops, scalar ops and residual reads of
 * older nodes (so lifetimes overlap and the memory planner has real work). */
static af_graph *build_mix(int nodes, int64_t d, const float *w, const float *bias, af_tensor **in, af_tensor **out) {
    af_graph *g = af_graph_new();
    if (!g) return NULL;
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(d, d));
    af_tensor *wt = af_const(g, "w", AF_SHAPE(d, d), w);
    af_tensor *b = af_const(g, "bias", AF_SHAPE(d), bias);
    af_tensor *hist[16] = { 0 };
    af_tensor *t = x;
    for (int i = 0; i < nodes && t; i++) {
        af_tensor *old = hist[(i + 1) % 16] ? hist[(i + 1) % 16] : x; /* 15 nodes back */
        switch (i % 8) {
        case 0: t = af_matmul_w(t, wt); break;
        case 1: t = af_add(t, b); break;
        case 2: t = af_relu(t); break;
        case 3: t = af_mul(t, old); break;
        case 4: t = af_muls(t, 0.5f); break;
        case 5: t = af_add(t, old); break;
        case 6: t = af_tanh(t); break;
        default: t = af_sub(t, x); break;
        }
        hist[i % 16] = t;
    }
    *in = x;
    *out = t;
    return g;
}

/* A training graph: an MLP of `layers` linear+relu layers of width d, an MSE loss and
 * af_backward for every weight and bias (all of them compiled inputs, the gradients
 * the outputs), the shape of what a trainer compiles. */
static af_graph *build_mlp(int layers, int64_t d, int64_t batch, af_tensor **in, int *nin, af_tensor **out, int *nout) {
    af_graph *g = af_graph_new();
    if (!g) return NULL;
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(batch, d)), *target = af_input(g, "y", AF_F32, AF_SHAPE(batch, d));
    af_tensor *h = x;
    int np = 0;
    in[np++] = x;
    in[np++] = target;
    for (int l = 0; l < layers && h; l++) {
        char nw[32], nb[32];
        snprintf(nw, sizeof nw, "w%d", l);
        snprintf(nb, sizeof nb, "b%d", l);
        af_tensor *w = af_parameter(g, nw, AF_SHAPE(d, d), NULL), *b = af_parameter(g, nb, AF_SHAPE(d), NULL);
        in[np++] = w;
        in[np++] = b;
        h = af_linear(h, w, b);
        if (l + 1 < layers) h = af_relu(h);
    }
    af_loss *loss = h ? af_mse(h, target) : NULL;
    if (!loss || af_backward(loss, np - 2, in + 2, out, NULL) != AF_OK) { af_graph_free(g); return NULL; }
    out[np - 2] = af_loss_value(loss);
    *nin = np;
    *nout = np - 1;
    return g;
}

typedef struct { int nodes; double build_ms, compile_ms, compile_min_ms, first_run_ms; int graph_size, model_nodes; bool ok; } compile_result;

/* graph 0: the elementwise/matmul mix with `nodes` op nodes; graph 1: the MLP
 * training graph with `nodes` layers. */
static compile_result bench_compile(int kind, int nodes, const bench_opts *o) {
    compile_result r = { .nodes = nodes };
    const int64_t d = 32;
    float *w = alloc_fill(d * d, 6), *bias = alloc_fill(d, 7);
    int reps = o->repeat < 5 ? 5 : o->repeat * 2 + 1;
    if (reps > 64) reps = 64;
    double tb[64], tc[64];
    af_compile_opts co = compile_opts(o);
    if (!w || !bias) goto done;
    enum { MAXIO = 2 + 2 * 512 };
    static af_tensor *ins[MAXIO], *outs[MAXIO];
    static float *bufs[MAXIO];
    static af_buffer bin[MAXIO], bout[MAXIO];
    if (kind == 1 && 2 * nodes + 2 > MAXIO) goto done;
    for (int k = 0; k < reps; k++) {
        int nin = 1, nout = 1;
        double t0 = now_s();
        af_graph *g = kind == 0 ? build_mix(nodes, d, w, bias, &ins[0], &outs[0]) : build_mlp(nodes, d, 16, ins, &nin, outs, &nout);
        double t1 = now_s();
        if (!g || !outs[0]) {
            fprintf(stderr, "bench: compile: building failed: %s\n", g ? af_graph_error(g) : af_error_message());
            af_graph_free(g);
            goto done;
        }
        af_model *m = af_compile(g, nin, ins, nout, outs, &co);
        double t2 = now_s();
        if (!m) {
            fprintf(stderr, "bench: compile: af_compile failed: %s\n", af_error_message());
            af_graph_free(g);
            goto done;
        }
        tb[k] = (t1 - t0) * 1e3;
        tc[k] = (t2 - t1) * 1e3;
        if (k == 0) {
            r.graph_size = af_graph_size(g);
            r.model_nodes = af_model_num_nodes(m);
            bool mem = true;
            for (int i = 0; i < nin; i++) {
                int64_t cnt = af_shape_count(af_tensor_shape(ins[i]));
                bufs[i] = mem ? alloc_fill(cnt, 20 + (uint32_t)i) : NULL;
                mem = mem && bufs[i];
                bin[i] = AF_BUF_F32(bufs[i], cnt);
            }
            for (int i = 0; i < nout; i++) {
                int64_t cnt = af_shape_count(af_tensor_shape(outs[i]));
                bufs[nin + i] = mem ? malloc((size_t)cnt * sizeof(float)) : NULL;
                mem = mem && bufs[nin + i];
                bout[i] = AF_BUF_F32(bufs[nin + i], cnt);
            }
            double t3 = now_s();
            if (!mem || af_run(m, bin, bout) != AF_OK) {
                fprintf(stderr, "bench: compile: af_run failed: %s\n", af_error_message());
                bench_failed = true;
            }
            r.first_run_ms = (now_s() - t3) * 1e3;
            for (int i = 0; i < nin + nout; i++) free(bufs[i]);
        }
        af_model_free(m);
        af_graph_free(g);
    }
    /* The first round pays for cold caches and page faults; keep it out of the median. */
    r.build_ms = median(tb + 1, reps - 1);
    r.compile_ms = median(tc + 1, reps - 1);
    r.compile_min_ms = tc[1];
    for (int k = 2; k < reps; k++) r.compile_min_ms = fmin(r.compile_min_ms, tc[k]);
    r.ok = true;
done:
    free(w);
    free(bias);
    return r;
}

/* ------------------------------------------------------------------ main */

#define MLP_LAYERS 91 /* about 1,000 nodes with the backward pass */

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int bench_ops(const bench_opts *o) {
    double t_start = now_s();
    int threads = bench_threads(o);
    af_blas_set_threads(threads);
    bool pass_gemm = true, pass_ew = true, pass_compile = true;
    bool ran_gemm = false, ran_ew = false, ran_compile = false;

    time_t wall = time(NULL);
    char stamp[40] = "";
    struct tm tmv;
    if (gmtime_r(&wall, &tmv)) strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tmv);

    printf("{\n  \"benchmark\": \"aneforge bench ops\",\n  \"version\": \"%s\",\n  \"timestamp\": \"%s\",\n",
           AF_VERSION, stamp);
    printf("  \"machine\": {\"cpu\": ");
    json_str(cpu()->model);
    printf(", \"cpu_features\": ");
    json_str(cpu()->features);
    printf(", \"gemm_path\": ");
    json_str(cpu()->gemm_path);
    printf(", \"gemm_kernel\": \"%s %dx%d\", \"openblas_core\": ", cpu()->gemm_kernel, cpu()->gemm_mr, cpu()->gemm_nr);
    const char *core = NULL;
#ifdef AF_BENCH_OPENBLAS_WEAK
    if (openblas_get_corename) core = openblas_get_corename();
#endif
    json_str(core);
    printf(", \"cores\": %d, \"threads\": %d, \"blas\": %s, \"blas_threads\": %d, \"openblas_config\": ",
           cpu()->cores, threads, cpu()->blas_available ? "true" : "false", blas_threads_now());
    const char *cfg = NULL;
#ifdef AF_BENCH_OPENBLAS_WEAK
    if (openblas_get_config) cfg = openblas_get_config();
#endif
    json_str(cfg);
    static const char *const envs[] = { "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                                        "OMP_NUM_THREADS" };
    printf(", \"env\": {");
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        printf("%s\"%s\": ", i ? ", " : "", envs[i]);
        json_str(getenv(envs[i]));
    }
    printf("}, \"load_average_1m\": ");
    json_num(load_average(), 2);
    printf("},\n");
    printf("  \"settings\": {\"quick\": %s, \"repeat\": %d, \"min_sample_ms\": %.1f, \"statistic\": \"median\"},\n",
           o->quick ? "true" : "false", o->repeat, o->min_s * 1e3);
    fflush(stdout);

    /* gemm */
    if (want(o, "gemm")) {
        ran_gemm = true;
        static const int64_t sizes[] = { 256, 512, 1024, 2048 };
        printf("  \"gemm\": [");
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            fprintf(stderr, "bench: gemm %lld ...\n", (long long)sizes[i]);
            gemm_result r = bench_gemm(sizes[i], 0, o);
            printf("%s\n    ", i ? "," : "");
            if (!r.ok) { bench_failed = true; printf("{\"op\": \"matmul_w\", \"n\": %lld, \"error\": true}", (long long)sizes[i]); continue; }
            print_gemm_entry(&r, "matmul_w");
            if (!(r.ratio_paired >= 0.9)) pass_gemm = false;
            fprintf(stderr, "bench: gemm %lld: executor %.1f GFLOP/s on %s, machine peak %.1f (%s)\n",
                    (long long)sizes[i], r.graph_gflops, cpu()->gemm_path, r.peak_gflops, r.peak_path);
        }
        fprintf(stderr, "bench: gemm (af_matmul) 1024 ...\n");
        gemm_result r = bench_gemm(1024, 1, o);
        printf(",\n    ");
        if (r.ok) print_gemm_entry(&r, "matmul");
        else { bench_failed = true; printf("{\"op\": \"matmul\", \"n\": 1024, \"error\": true}"); }
        if (r.ok && !(r.ratio_paired >= 0.9)) pass_gemm = false;
        printf("\n  ],\n");
        fflush(stdout);
    }

    /* elementwise */
    if (want(o, "elementwise")) {
        ran_ew = true;
        fprintf(stderr, "bench: elementwise ...\n");
        int64_t n = o->elements;
        float *a = alloc_fill(n, 11), *b = alloc_fill(n, 12), *c = malloc((size_t)n * sizeof *c);
        af_thread_pool *pool = threads > 1 ? af_thread_pool_new(threads) : NULL;
        if (!a || !b || !c) {
            fprintf(stderr, "bench: elementwise: out of memory for %lld floats\n", (long long)n);
            bench_failed = true;
            pass_ew = false;
        } else {
            memset(c, 0, (size_t)n * sizeof *c);
            /* memcpy on one thread and split over the pool, and the three ops, all
             * sampled round-robin so they see the same machine conditions. */
            copy_ctx cc = { c, a, n };
            pcopy_ctx pc = { { c, a, n }, pool };
            ew_case ec[3];
            bool ok[3];
            workload w[5] = { { .fn = run_memcpy, .ctx = &cc }, { .fn = run_memcpy_threaded, .ctx = &pc } };
            int nw = 2;
            for (int k = 0; k < 3; k++) {
                ok[k] = ew_setup(&ec[k], k, n, a, b, c, o);
                if (ok[k]) w[nw++] = (workload){ .fn = run_model, .ctx = &ec[k].rc };
            }
            measure_set(w, nw, o);
            double bytes = 2.0 * (double)n * 4;
            double g1 = bytes / med(&w[0]) * 1e-9, gp = bytes / med(&w[1]) * 1e-9;
            double base = g1 > gp ? g1 : gp;
            double gbs[3], ratio[3];
            for (int k = 0, j = 2; k < 3; k++) {
                gbs[k] = ok[k] ? (double)ec[k].bytes / med(&w[j++]) * 1e-9 : NAN;
                ratio[k] = gbs[k] / base;
                if (!ok[k]) bench_failed = true;
            }
            printf("  \"elementwise\": {\"elements\": %lld, \"memcpy_gbs\": ", (long long)n);
            json_num(g1, 2);
            printf(", \"memcpy_threaded_gbs\": ");
            json_num(gp, 2);
            printf(", \"baseline_gbs\": ");
            json_num(base, 2);
            printf(", \"ops\": [");
            for (int k = 0; k < 3; k++) {
                printf("%s\n    {\"op\": \"%s\", \"bytes\": %lld, \"gbs\": ", k ? "," : "", ec[k].name, (long long)ec[k].bytes);
                json_num(gbs[k], 2);
                printf(", \"ratio_vs_memcpy\": ");
                json_num(ratio[k], 4);
                printf("}");
                af_model_free(ec[k].m);
                af_graph_free(ec[k].g);
            }
            printf("\n  ]},\n");
            pass_ew = ok[0] && ratio[0] >= 0.5;
        }
        af_thread_pool_free(pool);
        free(a);
        free(b);
        free(c);
        fflush(stdout);
    }

    /* softmax, layer_norm */
    static const int64_t shapes[2][2] = { { 4096, 1024 }, { 32768, 128 } };
    for (int ln = 0; ln < 2; ln++) {
        const char *name = ln ? "layer_norm" : "softmax";
        if (!want(o, name)) continue;
        fprintf(stderr, "bench: %s ...\n", name);
        row_result r[2];
        for (int k = 0; k < 2; k++) {
            r[k] = bench_rows(ln, shapes[k][0], shapes[k][1], o);
            if (!r[k].ok) bench_failed = true;
        }
        print_rows(name, r, 2);
        printf(",\n");
        fflush(stdout);
    }

    /* compile */
    if (want(o, "compile")) {
        ran_compile = true;
        fprintf(stderr, "bench: compile ...\n");
        static const char *const gname[] = { "mix", "mix", "mlp_train" };
        compile_result r[3] = { bench_compile(0, 1000, o), bench_compile(0, 4000, o), bench_compile(1, MLP_LAYERS, o) };
        printf("  \"compile\": [");
        for (int k = 0; k < 3; k++) {
            printf("%s\n    {\"graph\": \"%s\", \"graph_size\": %d, \"model_nodes\": %d, \"build_ms\": ", k ? "," : "",
                   gname[k], r[k].graph_size, r[k].model_nodes);
            json_num(r[k].ok ? r[k].build_ms : NAN, 3);
            printf(", \"compile_ms\": ");
            json_num(r[k].ok ? r[k].compile_ms : NAN, 3);
            printf(", \"compile_min_ms\": ");
            json_num(r[k].ok ? r[k].compile_min_ms : NAN, 3);
            printf(", \"first_run_ms\": ");
            json_num(r[k].ok ? r[k].first_run_ms : NAN, 3);
            printf("}");
            if (!r[k].ok) bench_failed = true;
        }
        printf(",\n    {\"compile_scaling_4000_over_1000\": ");
        json_num(r[0].ok && r[1].ok ? r[1].compile_ms / r[0].compile_ms : NAN, 2);
        printf("}\n  ],\n");
        pass_compile = r[0].ok && r[0].compile_ms < 20.0;
    }

    printf("  \"targets\": {");
    printf("\"gemm_ge_90pct_of_best_256_2048\": %s, ", ran_gemm ? (pass_gemm ? "true" : "false") : "null");
    printf("\"elementwise_add_ge_50pct_memcpy\": %s, ", ran_ew ? (pass_ew ? "true" : "false") : "null");
    printf("\"compile_1000_nodes_lt_20ms\": %s},\n", ran_compile ? (pass_compile ? "true" : "false") : "null");
    printf("  \"load_average_1m_at_end\": ");
    json_num(load_average(), 2);
    printf(",\n  \"errors\": %s,\n  \"total_s\": ", bench_failed ? "true" : "false");
    json_num(now_s() - t_start, 2);
    printf("\n}\n");
    fflush(stdout);
    if (bench_failed) return 1;
    if (o->check && !(pass_gemm && pass_ew && pass_compile)) return 1;
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = { .repeat = 0, .threads = 0, .min_s = 0, .elements = 16 << 20 };
    const char *what = NULL;
    int min_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--quick")) o.quick = true;
        else if (!strcmp(a, "--check")) o.check = true;
        else if (!strcmp(a, "--repeat") && more) {
            if (parse_int(argv[++i], 1, 64, &o.repeat)) { fprintf(stderr, "bench: --repeat takes 1..64\n"); return 2; }
        } else if (!strcmp(a, "--threads") && more) {
            if (parse_int(argv[++i], 1, 256, &o.threads)) { fprintf(stderr, "bench: --threads takes 1..256\n"); return 2; }
        } else if (!strcmp(a, "--min-ms") && more) {
            if (parse_int(argv[++i], 1, 10000, &min_ms)) { fprintf(stderr, "bench: --min-ms takes 1..10000\n"); return 2; }
        } else if (!strcmp(a, "--elements") && more) {
            int v;
            if (parse_int(argv[++i], 4096, 1 << 28, &v)) { fprintf(stderr, "bench: --elements takes 4096..268435456\n"); return 2; }
            o.elements = v / 4096 * 4096; /* whole rows for the broadcast case */
        } else if (!strcmp(a, "--only") && more) {
            snprintf(o.only, sizeof o.only, "%s", argv[++i]);
        } else if (a[0] != '-' && !what) what = a;
        else {
            fprintf(stderr, "bench: unknown or incomplete option '%s'; see 'aneforge bench --help'\n", a);
            return 2;
        }
    }
    if (!what) { usage(stderr); return 2; }
    if (strcmp(what, "ops")) {
        fprintf(stderr, "bench: unknown benchmark '%s' (available: ops); see 'aneforge bench --help'\n", what);
        return 2;
    }
    for (const char *p = o.only; *p;) { /* every --only entry must name a section */
        static const char *const known[] = { "gemm", "elementwise", "softmax", "layer_norm", "compile" };
        size_t len = strcspn(p, ",");
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= len == strlen(known[k]) && !strncmp(p, known[k], len);
        if (!ok) {
            fprintf(stderr, "bench: --only: unknown section '%.*s' (gemm, elementwise, softmax, layer_norm, compile)\n", (int)len, p);
            return 2;
        }
        p += len;
        if (*p == ',') p++;
    }
    if (!o.repeat) o.repeat = o.quick ? 3 : 9;
    o.min_s = (min_ms > 0 ? min_ms : o.quick ? 15 : 40) * 1e-3;
    return bench_ops(&o);
}
