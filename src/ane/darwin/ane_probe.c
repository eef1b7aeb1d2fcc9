/* The chip probe (include/aneforge_probe.h): each step builds small programs, compiles
 * them through the runtime (ane_runtime.h) and bisects the largest extent the engine's
 * compiler accepts, or runs one and compares it with the value the CPU computes. Safe by
 * construction: nothing it compiles holds more than 4 MiB of weights, and the one
 * pattern the notes say can hang the compiler (large-batch programs on M1, seed 000) is
 * never tried; its field is written as unknown. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "aneforge_probe.h"
#include "ane/darwin/ane_probe_ops.h"
#include "ane/darwin/ane_ports.h"
#include "ane/darwin/ane_runtime.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "engine/family.h"
#include "engine/family_file.h"
#include "ir/fp16.h"
#include "ir/ir.h"
#include "mil/mil.h"
#include "mil/milblob.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct af_probe {
    char *path;
    ff_doc doc;
    char result[64][160];
};

typedef af_status (*step_fn)(af_probe *p, int quick, char *res, size_t n);

/* A program family indexed by an extent v: builds its graph into g, sets in/out. */
typedef af_tensor *(*build_fn)(af_graph *g, int64_t v, af_tensor **in);

static af_status step_device(af_probe *p, int quick, char *res, size_t n);
static af_status step_axis(af_probe *p, int quick, char *res, size_t n);
static af_status step_spatial(af_probe *p, int quick, char *res, size_t n);
static af_status step_rank(af_probe *p, int quick, char *res, size_t n);
static af_status step_kernel(af_probe *p, int quick, char *res, size_t n);
static af_status step_wide_row(af_probe *p, int quick, char *res, size_t n);
static af_status step_crop(af_probe *p, int quick, char *res, size_t n);
static af_status step_inputs(af_probe *p, int quick, char *res, size_t n);
static af_status step_weights(af_probe *p, int quick, char *res, size_t n);
static af_status step_overflow(af_probe *p, int quick, char *res, size_t n);
static af_status step_align(af_probe *p, int quick, char *res, size_t n);
static af_status step_gemm(af_probe *p, int quick, char *res, size_t n);
static af_status step_budget(af_probe *p, int quick, char *res, size_t n);
static af_status step_dispatch(af_probe *p, int quick, char *res, size_t n);
static af_status step_ops(af_probe *p, int quick, char *res, size_t n);

static const struct { const char *name, *field, *what; step_fn fn; } steps[] = {
    { "device", NULL, "the chip, its engine subtype and the built-in family it is closest to", step_device },
    { "max_axis", "max_axis", "largest channel extent: x[1, C, 1, 1] + x, bisected over C", step_axis },
    { "max_spatial", "max_spatial", "largest W: x[1, 1, 1, W] + x, bisected over W", step_spatial },
    { "max_rank", "max_rank", "largest rank: x + x on [1, ..., 1], rank 1..6", step_rank },
    { "max_kernel_w", "max_kernel_w", "widest conv kernel: a [1, 1, 1, K] constant weight on [1, 1, 1, 512]", step_kernel },
    { "wide_row_max", "wide_row_max", "widest row a reshape feeds to a concat: x[w, 1] -> [1, w], concat on axis 0", step_wide_row },
    { "crop_dma_saturates", "crop_dma_saturates", "a last-axis slice (begin 1) of 5000s, run and compared with the CPU", step_crop },
    { "max_inputs", "max_inputs", "most inputs one program binds: x1 + ... + xn on [1, 1, 1, 32] compiled and run, n bisected up to the runtime's 64", step_inputs },
    { "max_weight_bytes", "max_weight_bytes", "program size: x[1, C, 1, 32] * a constant of that shape (64 bytes a channel), bisected up to 4 MiB", step_weights },
    { "matmul_overflow", "matmul_overflow", "matmul output overflow: [1, 2] @ ones[2, 1] fed (v - r, r), run for v bisected up to 65504", step_overflow },
    { "surface_align", "surface_align", "IOSurface row alignment: x + x run on surfaces sized in odd multiples of 2, 4, ..., 4096 bytes", step_align },
    { "compile_budget", "compile_budget", "distinct one-op programs compiled until the daemon refuses (one process)", step_budget },
    { "dispatch", NULL, "the dispatch latency floor: one small program evaluated repeatedly (median)", step_dispatch },
    { "gemm", NULL, "fp16 GEMM throughput: [M, K] x [K, N], both operands fed, evaluated repeatedly (median; not a limit)", step_gemm },
    { "ops", NULL, "every op of the op table and every bridge, one small program each, run and compared with the CPU; the unverified net.plist spellings", step_ops },
};
#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

int af_probe_step_count(void) { return NSTEPS; }
const char *af_probe_step_name(int i) { return i >= 0 && i < NSTEPS ? steps[i].name : NULL; }
const char *af_probe_step_what(int i) { return i >= 0 && i < NSTEPS ? steps[i].what : NULL; }

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

static af_status save(af_probe *p) { return ff_write(p->path, &p->doc); }

/* The members every probe file starts with, so that it loads as a family at any point. */
static af_status defaults(af_probe *p) {
    if (ff_get(&p->doc, "format")) return AF_OK;
    af_status st = ff_set_str(&p->doc, "format", "aneforge-family 1");
    if (!st) st = ff_set_str(&p->doc, "name", "PROBE");
    if (!st) st = ff_set_str(&p->doc, "chips", "not probed yet");
    if (!st) st = ff_set_str(&p->doc, "base", "A16");
    if (!st) st = ff_set_str(&p->doc, "note", "written by aneforge doctor --probe; null = not measured (the base family's value stands in)");
    for (int f = 0; f < ane_family_nfields && !st; f++) st = ff_set_null(&p->doc, ane_family_fields[f].key);
    if (!st) st = ff_set_str(&p->doc, "compile_hangs_on_large_batch_source",
                             "not probed: large-batch compiles can hang the compiler on M1 (seed 000), so the probe never tries one");
    return st;
}

af_status af_probe_open(const char *path, af_probe **out) {
    if (!path || !out) return ir_fail(AF_ERR_INVALID, "af_probe_open: path and out are required");
    *out = NULL;
    af_probe *p = calloc(1, sizeof *p);
    if (!p || !(p->path = dupstr(path))) { free(p); return ir_fail(AF_ERR_NOMEM, "af_probe_open: out of memory"); }
    FILE *f = fopen(path, "rb");
    af_status st = AF_OK;
    if (f) {
        fclose(f);
        if ((st = ff_read(path, &p->doc))) {
            char why[700];
            snprintf(why, sizeof why, "%s", af_error_message());
            af_probe_free(p);
            return ir_fail(st, "%s; to start over, remove it or name another file with -o", why);
        }
    }
    if ((st = defaults(p))) { af_probe_free(p); return st; }
    for (int i = 0; i < NSTEPS; i++) {
        char key[64];
        snprintf(key, sizeof key, "step.%s", steps[i].name);
        const ff_member *m = ff_get(&p->doc, key);
        if (m && m->type == FF_STR) snprintf(p->result[i], sizeof p->result[i], "%s", m->str);
    }
    *out = p;
    return AF_OK;
}

void af_probe_free(af_probe *p) {
    if (!p) return;
    ff_free(&p->doc);
    free(p->path);
    free(p);
}

int af_probe_step_done(const af_probe *p, int i) { return p && i >= 0 && i < NSTEPS && p->result[i][0]; }
const char *af_probe_step_result(const af_probe *p, int i) { return p && i >= 0 && i < NSTEPS ? p->result[i] : ""; }

static af_status record(af_probe *p, int i, const char *res) {
    char key[64];
    snprintf(key, sizeof key, "step.%s", steps[i].name);
    snprintf(p->result[i], sizeof p->result[i], "%s", res);
    af_status st = ff_set_str(&p->doc, key, p->result[i]);
    return st ? st : save(p);
}

af_status af_probe_mark_failed(af_probe *p, int i, const char *why) {
    if (!p || i < 0 || i >= NSTEPS) return ir_fail(AF_ERR_INVALID, "af_probe_mark_failed: no step %d", i);
    char res[160];
    snprintf(res, sizeof res, "failed: %s", why ? why : "?");
    if (steps[i].field) {
        char key[80];
        snprintf(key, sizeof key, "%s_source", steps[i].field);
        af_status st = ff_set_null(&p->doc, steps[i].field);
        if (!st) st = ff_set_str(&p->doc, key, res);
        if (st) return st;
    }
    return record(p, i, res);
}

af_status af_probe_run_step(af_probe *p, int i, const char *framework, int quick) {
    if (!p || i < 0 || i >= NSTEPS) return ir_fail(AF_ERR_INVALID, "af_probe_run_step: no step %d", i);
    af_status st = ane_rt_open(framework);
    if (st) return st;
    char res[160] = "";
    st = steps[i].fn(p, quick, res, sizeof res);
    if (st) {
        char why[150];
        snprintf(why, sizeof why, "%s", af_error_message());
        af_status st2 = af_probe_mark_failed(p, i, why);
        return st2 ? st2 : ir_fail(st, "%s", why);
    }
    return record(p, i, res);
}

/* ------------------------------------------------------------------ compiling */

/* Compiles the program out = build(v) and, when run, evaluates it on in_vals (NULL:
 * zeros) into *y (malloc'd, out elements). why gets the refusal. */
static af_status try_program(build_fn build, int64_t v, const float *in_val, float **y, int64_t *ny, char *why, size_t whyn) {
    af_graph *g = af_graph_new();
    af_tensor *in = NULL;
    af_tensor *out = g ? build(g, v, &in) : NULL;
    char *mil = NULL;
    size_t len = 0;
    milblob_writer *blob = NULL;
    int order[1];
    af_status st = out && in ? mil_emit_mem(g, 1, &in, 1, &out, &mil, &len, &blob, order) : AF_ERR_NOMEM;
    if (st) {
        snprintf(why, whyn, "emitting the probe program failed: %s", af_error_message());
        milblob_writer_free(blob);
        af_graph_free(g);
        return st;
    }
    int64_t nin = af_shape_count(in->shape), nout = af_shape_count(out->shape);
    ane_rt_ports ports = { .nin = 1, .nout = 1, .in_count = { nin }, .out_count = { nout } };
    size_t wlen = 0;
    const uint8_t *w = blob ? milblob_bytes(blob, &wlen) : NULL;
    ane_rt_program *prog = NULL;
    st = ane_rt_compile(mil, len, w, wlen, &ports, &prog);
    free(mil);
    milblob_writer_free(blob);
    af_graph_free(g);
    if (st) {
        snprintf(why, whyn, "%s", af_error_message());
        return st;
    }
    if (y) {
        uint16_t *hin = calloc((size_t)nin, sizeof *hin), *hout = calloc((size_t)nout, sizeof *hout);
        float *fy = malloc((size_t)nout * sizeof *fy);
        if (!hin || !hout || !fy) st = ir_fail(AF_ERR_NOMEM, "probe: out of memory");
        if (!st && in_val) ir_f32_to_f16_array(in_val, hin, (size_t)nin);
        const uint16_t *ins[1] = { hin };
        uint16_t *outs[1] = { hout };
        if (!st) st = ane_rt_eval(prog, ins, outs);
        if (!st) ir_f16_to_f32_array(hout, fy, (size_t)nout);
        else snprintf(why, whyn, "%s", af_error_message());
        free(hin);
        free(hout);
        if (st) free(fy);
        else { *y = fy; *ny = nout; }
    }
    ane_rt_release(prog);
    return st;
}

/* One trial of a bisection: 0 when v is accepted, else why gets the refusal. */
typedef af_status (*trial_fn)(void *ctx, int64_t v, char *why, size_t whyn);

typedef struct { build_fn build; } builder;

static af_status trial_compile(void *ctx, int64_t v, char *why, size_t whyn) {
    return try_program(((builder *)ctx)->build, v, NULL, NULL, NULL, why, whyn);
}

/* The largest v in [lo, hi] the trial accepts (lo must), by bisection. */
static af_status bisect_by(trial_fn trial, void *ctx, int64_t lo, int64_t hi, int64_t *best, int *compiles, char *refusal,
                           size_t rn) {
    char why[600];
    refusal[0] = 0;
    *compiles = 1;
    if (trial(ctx, lo, why, sizeof why))
        return ir_fail(AF_ERR_UNSUPPORTED, "even the smallest probe program (%lld) was refused: %s", (long long)lo, why);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        ++*compiles;
        if (!trial(ctx, mid, why, sizeof why)) lo = mid;
        else {
            hi = mid - 1;
            /* the compiler's own words, after the framework's wrapping */
            const char *w = why, *f;
            while ((f = strstr(w, "FAILED: "))) w = f + 8;
            snprintf(refusal, rn, "refused at %lld: %.240s", (long long)mid, w);
        }
    }
    *best = lo;
    return AF_OK;
}

static af_status bisect_field(af_probe *p, const char *field, build_fn build, int64_t lo, int64_t hi, char *res, size_t n) {
    int64_t best = 0;
    int compiles = 0;
    char refusal[400];
    builder b = { build };
    af_status st = bisect_by(trial_compile, &b, lo, hi, &best, &compiles, refusal, sizeof refusal);
    if (st) return st;
    char src[500], key[80];
    snprintf(src, sizeof src, "doctor --probe: bisection over %d compiles; %s", compiles,
             refusal[0] ? refusal : "every size up to the probe's ceiling compiled (the limit is at least this)");
    snprintf(key, sizeof key, "%s_source", field);
    if ((st = ff_set_int(&p->doc, field, best)) || (st = ff_set_str(&p->doc, key, src))) return st;
    snprintf(res, n, "%lld (%d compiles)%s", (long long)best, compiles, refusal[0] ? "" : ", the probe's ceiling");
    return AF_OK;
}

static af_tensor *b_axis(af_graph *g, int64_t v, af_tensor **in) {
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, v, 1, 1));
    return af_add(*in, *in);
}
static af_tensor *b_spatial(af_graph *g, int64_t v, af_tensor **in) {
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, v));
    return af_add(*in, *in);
}
static af_tensor *b_rank(af_graph *g, int64_t v, af_tensor **in) {
    af_shape s = { .rank = (int)v };
    for (int i = 0; i < s.rank; i++) s.dim[i] = i == s.rank - 1 ? 2 : 1;
    *in = af_input(g, "x", AF_F16, s);
    return af_add(*in, *in);
}
static af_tensor *b_kernel(af_graph *g, int64_t v, af_tensor **in) {
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 512));
    return af_conv(*in, af_const_fill(g, AF_SHAPE(1, 1, 1, v), 0.25f), NULL, NULL, NULL, 1);
}
static af_tensor *b_wide(af_graph *g, int64_t v, af_tensor **in) {
    *in = af_input(g, "x", AF_F16, AF_SHAPE(v, 1));
    af_tensor *r = af_reshape(*in, AF_SHAPE(1, v));
    af_tensor *two[2] = { r, r };
    return af_concat(2, two, 0);
}

static af_status step_axis(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    return bisect_field(p, "max_axis", b_axis, 1, 1 << 17, res, n);
}
static af_status step_spatial(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    return bisect_field(p, "max_spatial", b_spatial, 1, 1 << 17, res, n);
}
static af_status step_rank(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    return bisect_field(p, "max_rank", b_rank, 1, AF_MAX_RANK, res, n);
}
static af_status step_kernel(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    return bisect_field(p, "max_kernel_w", b_kernel, 1, 255, res, n);
}
static af_status step_wide_row(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    return bisect_field(p, "wide_row_max", b_wide, 1, 1 << 17, res, n);
}

static af_tensor *b_crop(af_graph *g, int64_t v, af_tensor **in) {
    (void)v;
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 8));
    return af_slice(*in, (const int64_t[]){ 0, 0, 0, 1 }, (const int64_t[]){ 1, 1, 1, 4 });
}

static af_status step_crop(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    float x[8], *y = NULL;
    int64_t ny = 0;
    char why[600];
    for (int i = 0; i < 8; i++) x[i] = 5000.0f + 4.0f * (float)i; /* exact in fp16, past the 4094 the crop DMA keeps */
    af_status st = try_program(b_crop, 0, x, &y, &ny, why, sizeof why);
    if (st) return ir_fail(st, "the crop program did not run: %s", why);
    int sat = 0, exact = 0;
    for (int64_t i = 0; i < ny; i++) {
        if (isinf(y[i]) || fabsf(y[i]) <= 4094.0f) sat++;
        else if (y[i] == x[i + 1]) exact++;
    }
    free(y);
    if (sat != ny && exact != ny)
        return ir_fail(AF_ERR_NUMERIC, "the crop program returned wrong numbers (%d saturated, %d exact of %lld): report this file", sat,
                       exact, (long long)ny);
    int64_t v = sat == ny;
    if ((st = ff_set_int(&p->doc, "crop_dma_saturates", v)) ||
        (st = ff_set_str(&p->doc, "crop_dma_saturates_source",
                         v ? "doctor --probe: a last-axis slice of 5000..5028 came back saturated"
                           : "doctor --probe: a last-axis slice of 5000..5028 came back exact")))
        return st;
    snprintf(res, n, "%s", v ? "1 (saturates)" : "0 (exact)");
    return AF_OK;
}

static int64_t budget_k;
static af_tensor *b_budget(af_graph *g, int64_t v, af_tensor **in) {
    (void)v;
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, 4, 1, 8));
    return af_adds(*in, (float)budget_k * 0.125f); /* a distinct constant: a distinct program */
}

static af_status step_budget(af_probe *p, int quick, char *res, size_t n) {
    int64_t cap = quick ? 400 : 2000, before = ane_rt_compile_count();
    char why[600] = "";
    ane_rt_set_compile_budget(cap + before + 1); /* the runtime's own guard would stop first */
    for (budget_k = 1; budget_k <= cap; budget_k++)
        if (try_program(b_budget, 0, NULL, NULL, NULL, why, sizeof why)) break;
    int64_t ok = budget_k - 1; /* the compiles that succeeded (the runtime also counts the refused one) */
    ane_rt_set_compile_budget(ANE_RT_COMPILE_BUDGET);
    char src[500];
    snprintf(src, sizeof src, "doctor --probe: %lld compiles in one process, then %.200s", (long long)ok,
             budget_k > cap ? "no refusal (the probe's ceiling)" : why);
    af_status st = ff_set_int(&p->doc, "compile_budget", ok + before);
    if (!st) st = ff_set_str(&p->doc, "compile_budget_source", src);
    snprintf(res, n, "%lld compiles%s", (long long)(ok + before), budget_k > cap ? " (no refusal up to the ceiling)" : "");
    return st;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static af_status step_dispatch(af_probe *p, int quick, char *res, size_t n) {
    af_graph *g = af_graph_new();
    af_tensor *in = NULL, *out = g ? b_spatial(g, 64, &in) : NULL;
    char *mil = NULL;
    size_t len = 0;
    milblob_writer *blob = NULL;
    int order[1];
    af_status st = out ? mil_emit_mem(g, 1, &in, 1, &out, &mil, &len, &blob, order) : AF_ERR_NOMEM;
    milblob_writer_free(blob);
    af_graph_free(g);
    if (st) return st;
    ane_rt_ports ports = { .nin = 1, .nout = 1, .in_count = { 64 }, .out_count = { 64 } };
    ane_rt_program *prog = NULL;
    st = ane_rt_compile(mil, len, NULL, 0, &ports, &prog);
    free(mil);
    if (st) return st;
    /* which compile entry point this macOS took (ane_runtime.c's run-time choice) */
    const char *entry = ane_rt_compile_entry();
    if ((st = ff_set_str(&p->doc, "compile_entry", entry ? entry : "no compile entry point recorded"))) { ane_rt_release(prog); return st; }
    enum { MAXN = 1000 };
    int reps = quick ? 50 : MAXN;
    double *t = malloc(sizeof *t * MAXN);
    uint16_t x[64] = { 0 }, y[64];
    const uint16_t *ins[1] = { x };
    uint16_t *outs[1] = { y };
    for (int i = 0; i < reps && t && !st; i++) {
        double t0 = now_us();
        st = ane_rt_eval(prog, ins, outs);
        t[i] = now_us() - t0;
    }
    ane_rt_release(prog);
    if (!t) return ir_fail(AF_ERR_NOMEM, "probe: out of memory");
    if (st) { free(t); return st; }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    char v[64];
    snprintf(v, sizeof v, "median %.1f us, min %.1f us over %d evaluations", t[reps / 2], t[0], reps);
    st = ff_set_int(&p->doc, "measured.dispatch_ns", (int64_t)llround(t[reps / 2] * 1e3));
    if (!st) st = ff_set_str(&p->doc, "measured.dispatch_ns_source", v);
    free(t);
    snprintf(res, n, "%s", v);
    return st;
}

/* ------------------------------------------------------------------ inputs, size, overflow, alignment, GEMM */

/* A program with up to ANE_RT_MAX_PORTS inputs: build fills in[] and *nin. */
typedef af_tensor *(*build_multi_fn)(af_graph *g, int64_t v, af_tensor **in, int *nin);

/* Compiles build(v) into *prog with its ports (inputs in MIL order); why gets the refusal. */
static af_status compile_multi(build_multi_fn build, int64_t v, ane_rt_program **prog, ane_rt_ports *ports, char *why,
                               size_t whyn) {
    *prog = NULL;
    af_graph *g = af_graph_new();
    af_tensor *in[ANE_RT_MAX_PORTS] = { 0 };
    int nin = 0, order[ANE_RT_MAX_PORTS];
    af_tensor *out = g ? build(g, v, in, &nin) : NULL;
    char *mil = NULL;
    size_t len = 0;
    milblob_writer *blob = NULL;
    af_status st = out ? mil_emit_mem(g, nin, in, 1, &out, &mil, &len, &blob, order) : AF_ERR_NOMEM;
    if (st) {
        snprintf(why, whyn, "emitting the probe program failed: %s", af_error_message());
    } else {
        memset(ports, 0, sizeof *ports);
        ports->nin = nin;
        ports->nout = 1;
        ports->out_count[0] = af_shape_count(out->shape);
        for (int k = 0; k < nin; k++) ports->in_count[k] = af_shape_count(in[order[k]]->shape);
        size_t wlen = 0;
        const uint8_t *w = blob ? milblob_bytes(blob, &wlen) : NULL;
        if ((st = ane_rt_compile(mil, len, w, wlen, ports, prog))) snprintf(why, whyn, "%s", af_error_message());
    }
    free(mil);
    milblob_writer_free(blob);
    af_graph_free(g);
    return st;
}

/* The compiler's own words, after the framework's wrapping. */
static const char *compiler_words(const char *why) {
    const char *w = why, *f;
    while ((f = strstr(w, "FAILED: "))) w = f + 8;
    return w;
}

/* x1 + x2 + ... + xn (x1 + x1 for n = 1). */
static af_tensor *b_inputs(af_graph *g, int64_t v, af_tensor **in, int *nin) {
    af_tensor *sum = NULL;
    for (int k = 0; k < v; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        in[k] = af_input(g, name, AF_F16, AF_SHAPE(1, 1, 1, 32));
        sum = sum ? af_add(sum, in[k]) : in[k];
    }
    *nin = (int)v;
    return v == 1 ? af_add(in[0], in[0]) : sum;
}

/* Compiled and evaluated: multi-input requests have been reported to fail at evaluate
 * (0x1d, maderix-ane.md) rather than at compile. */
static af_status trial_inputs(void *ctx, int64_t v, char *why, size_t whyn) {
    (void)ctx;
    ane_rt_program *prog = NULL;
    ane_rt_ports ports;
    af_status st = compile_multi(b_inputs, v, &prog, &ports, why, whyn);
    static uint16_t zeros[ANE_RT_MAX_PORTS][32], y[32];
    const uint16_t *ins[ANE_RT_MAX_PORTS];
    for (int k = 0; k < ANE_RT_MAX_PORTS; k++) ins[k] = zeros[k];
    uint16_t *outs[1] = { y };
    if (!st && (st = ane_rt_eval(prog, ins, outs))) snprintf(why, whyn, "%s", af_error_message());
    ane_rt_release(prog);
    return st;
}

static af_status step_inputs(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    int64_t best = 0;
    int compiles = 0;
    char refusal[400], src[600];
    af_status st = bisect_by(trial_inputs, NULL, 1, ANE_RT_MAX_PORTS, &best, &compiles, refusal, sizeof refusal);
    if (st) return st;
    snprintf(src, sizeof src, "doctor --probe: bisection over %d compiles; %s", compiles,
             refusal[0] ? refusal : "every count up to the runtime's binding limit (64) compiled: the engine may take more");
    if ((st = ff_set_int(&p->doc, "max_inputs", best)) || (st = ff_set_str(&p->doc, "max_inputs_source", src))) return st;
    snprintf(res, n, "%lld (%d compiles)%s", (long long)best, compiles, refusal[0] ? "" : ", the runtime's binding limit");
    return AF_OK;
}

/* x[1, C, 1, 32] * k[1, C, 1, 32]: 64 bytes of weights a channel, none uniform (a real
 * compiler could store a uniform constant as one value). */
static af_tensor *b_weights(af_graph *g, int64_t v, af_tensor **in) {
    float *data = malloc((size_t)v * 32 * sizeof *data);
    if (!data) return NULL;
    for (int64_t i = 0; i < v * 32; i++) data[i] = 0.5f + (float)(i % 61) / 64.0f;
    *in = af_input(g, "x", AF_F16, AF_SHAPE(1, v, 1, 32));
    af_tensor *k = af_const(g, "k", AF_SHAPE(1, v, 1, 32), data);
    free(data);
    return af_mul(*in, k);
}

#define PROBE_MAX_WEIGHT_BYTES ((int64_t)4 << 20) /* the most the probe ever compiles */

static af_status step_weights(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    /* C is bounded by the channel limit too (measured before), so that is not what refuses */
    int64_t hi = PROBE_MAX_WEIGHT_BYTES / 64;
    const ff_member *ax = ff_get(&p->doc, "max_axis");
    if (ax && ax->type == FF_INT && ax->i >= 1 && ax->i < hi) hi = ax->i;
    int64_t best = 0;
    int compiles = 0;
    char refusal[400], src[600];
    builder b = { b_weights };
    af_status st = bisect_by(trial_compile, &b, 1, hi, &best, &compiles, refusal, sizeof refusal);
    if (st) return st;
    if (refusal[0]) {
        snprintf(src, sizeof src, "doctor --probe: bisection over %d compiles of one constant (64 bytes a channel); %s", compiles,
                 refusal);
        if ((st = ff_set_int(&p->doc, "max_weight_bytes", best * 64)) ||
            (st = ff_set_str(&p->doc, "max_weight_bytes_source", src)))
            return st;
        snprintf(res, n, "%lld bytes (%d compiles)", (long long)(best * 64), compiles);
        return AF_OK;
    }
    /* no refusal: a lower bound only, so the field stays unknown (the base family's value) */
    snprintf(src, sizeof src, "doctor --probe: at least %lld bytes (a constant of that size compiled; the probe compiles no "
             "more%s)", (long long)(best * 64), hi < PROBE_MAX_WEIGHT_BYTES / 64 ? ", bounded by max_axis" : "");
    if ((st = ff_set_null(&p->doc, "max_weight_bytes")) || (st = ff_set_str(&p->doc, "max_weight_bytes_source", src))) return st;
    snprintf(res, n, "at least %lld bytes (%d compiles; left unknown)", (long long)(best * 64), compiles);
    return AF_OK;
}

/* [1, 2] @ ones[2, 1]: the output is the sum of the two fed values, formed in the
 * engine's accumulator, so any integer v reaches it exactly as (v - r) + r. */
static af_tensor *b_overflow(af_graph *g, int64_t v, af_tensor **in, int *nin) {
    (void)v;
    in[0] = af_input(g, "x", AF_F16, AF_SHAPE(1, 2));
    *nin = 1;
    return af_matmul(in[0], af_const_fill(g, AF_SHAPE(2, 1), 1.0f), 0, 0);
}

typedef struct { ane_rt_program *prog; float got; } overflow_ctx;

static af_status trial_overflow(void *ctx, int64_t v, char *why, size_t whyn) {
    overflow_ctx *c = ctx;
    float x[2] = { (float)v, 0 }; /* x[0]: the largest fp16 <= v; x[1]: the rest (below 32, exact) */
    uint16_t h[2], y = 0;
    ir_f32_to_f16_array(x, h, 1);
    ir_f16_to_f32_array(h, x, 1);
    if (x[0] > (float)v) h[0]--, ir_f16_to_f32_array(h, x, 1); /* positive: one pattern down is one value down */
    x[1] = (float)v - x[0];
    ir_f32_to_f16_array(x, h, 2);
    const uint16_t *ins[1] = { h };
    uint16_t *outs[1] = { &y };
    af_status st = ane_rt_eval(c->prog, ins, outs);
    if (st) { snprintf(why, whyn, "%s", af_error_message()); return st; }
    ir_f16_to_f32_array(&y, &c->got, 1);
    if (isfinite(c->got)) return AF_OK;
    snprintf(why, whyn, "(%g + %g) came back %g", (double)x[0], (double)x[1], (double)c->got);
    return AF_ERR_NUMERIC;
}

static af_status step_overflow(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    overflow_ctx c = { 0 };
    ane_rt_ports ports;
    char why[600], refusal[400], src[600];
    af_status st = compile_multi(b_overflow, 0, &c.prog, &ports, why, sizeof why);
    if (st) return ir_fail(st, "the matmul program did not compile: %s", why);
    int64_t best = 0;
    int evals = 0;
    st = bisect_by(trial_overflow, &c, 1, 65504, &best, &evals, refusal, sizeof refusal);
    if (!st && trial_overflow(&c, 1, why, sizeof why) == AF_OK && c.got != 1.0f)
        st = ir_fail(AF_ERR_NUMERIC, "the matmul program returned wrong numbers ((1 + 0) came back %g): report this file", (double)c.got);
    ane_rt_release(c.prog);
    if (st) return st;
    snprintf(src, sizeof src, "doctor --probe: %d evaluations of one program; %s", evals,
             refusal[0] ? refusal : "finite up to 65504, fp16's largest value: no overflow before fp16's own");
    if ((st = ff_set_int(&p->doc, "matmul_overflow", best)) || (st = ff_set_str(&p->doc, "matmul_overflow_source", src))) return st;
    snprintf(res, n, "%lld (%d evaluations)", (long long)best, evals);
    return AF_OK;
}

/* The alignment A (a power of two) a surface's rows need: surfaces sized in an odd
 * number of s-byte steps are multiples of A exactly when A divides s, so the smallest s
 * that runs is A. */
static af_status step_align(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    char why[600], last[400] = "", src[700];
    int64_t found = 0;
    af_status st = AF_OK;
    for (int64_t s = 2; s <= 4096 && !found; s *= 2) {
        float *y = NULL;
        int64_t ny = 0;
        ane_rt_set_surface_step((size_t)s, true);
        st = try_program(b_spatial, 32, NULL, &y, &ny, why, sizeof why);
        free(y);
        if (!st) found = s;
        else snprintf(last, sizeof last, "refused at %lld: %.300s", (long long)s, compiler_words(why));
    }
    ane_rt_set_surface_step(0, false);
    if (!found) return ir_fail(AF_ERR_UNSUPPORTED, "no surface size ran, up to 4096-byte steps: %s", last);
    int64_t align = found == 2 ? 0 : found; /* 2: any whole number of fp16 values */
    snprintf(src, sizeof src, "doctor --probe: surfaces in odd multiples of %lld bytes ran%s%s", (long long)found,
             last[0] ? "; " : " (every size: no alignment needed)", last);
    if ((st = ff_set_int(&p->doc, "surface_align", align)) || (st = ff_set_str(&p->doc, "surface_align_source", src))) return st;
    snprintf(res, n, "%lld%s", (long long)align, align ? " bytes" : " (none needed)");
    return AF_OK;
}

static int64_t gemm_m, gemm_k, gemm_n;
static af_tensor *b_gemm(af_graph *g, int64_t v, af_tensor **in, int *nin) {
    (void)v;
    in[0] = af_input(g, "a", AF_F16, AF_SHAPE(gemm_m, gemm_k));
    in[1] = af_input(g, "b", AF_F16, AF_SHAPE(gemm_k, gemm_n));
    *nin = 2;
    return af_matmul(in[0], in[1], 0, 0);
}

static af_status step_gemm(af_probe *p, int quick, char *res, size_t n) {
    gemm_m = quick ? 256 : 1024;
    gemm_k = gemm_n = quick ? 512 : 1024;
    int reps = quick ? 5 : 20;
    ane_rt_program *prog = NULL;
    ane_rt_ports ports;
    char why[600];
    af_status st = compile_multi(b_gemm, 0, &prog, &ports, why, sizeof why);
    if (st) return ir_fail(st, "the GEMM program did not compile: %s", why);
    uint16_t *buf[2] = { NULL, NULL }, *y = malloc((size_t)ports.out_count[0] * sizeof *y);
    double t[20];
    for (int k = 0; k < 2; k++) {
        buf[k] = malloc((size_t)ports.in_count[k] * sizeof *buf[k]);
        for (int64_t i = 0; buf[k] && i < ports.in_count[k]; i++) buf[k][i] = 0x2000 + (uint16_t)(i % 509); /* about 0.008 */
    }
    if (!buf[0] || !buf[1] || !y) st = ir_fail(AF_ERR_NOMEM, "probe: out of memory");
    const uint16_t *ins[2] = { buf[0], buf[1] };
    uint16_t *outs[1] = { y };
    for (int i = -1; i < reps && !st; i++) { /* one untimed warm-up */
        double t0 = now_us();
        st = ane_rt_eval(prog, ins, outs);
        if (i >= 0) t[i] = now_us() - t0;
    }
    ane_rt_release(prog);
    free(buf[0]);
    free(buf[1]);
    free(y);
    if (st) return st;
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double flop = 2.0 * (double)gemm_m * (double)gemm_k * (double)gemm_n, med = t[reps / 2];
    int64_t gflops = med > 0 ? (int64_t)llround(flop / med / 1e3) : 0;
    char v[300];
    snprintf(v, sizeof v, "doctor --probe: [%lld, %lld] x [%lld, %lld] fp16, both operands fed; median %.1f us of %d "
             "evaluations (dispatch included): %lld GFLOP/s", (long long)gemm_m, (long long)gemm_k, (long long)gemm_k,
             (long long)gemm_n, med, reps, (long long)gflops);
    if ((st = ff_set_int(&p->doc, "measured.fp16_gemm_gflops", gflops)) || (st = ff_set_str(&p->doc, "measured.fp16_gemm_gflops_source", v)))
        return st;
    snprintf(res, n, "%lld GFLOP/s ([%lld, %lld] x [%lld, %lld], median of %d)", (long long)gflops, (long long)gemm_m,
             (long long)gemm_k, (long long)gemm_k, (long long)gemm_n, reps);
    return AF_OK;
}

static af_status step_device(af_probe *p, int quick, char *res, size_t n) {
    (void)quick;
    ane_rt_device d;
    ane_rt_device_info(&d);
    const ane_family_info *fi = ane_family_info_of(d.family == AF_FAMILY_DEFAULT ? AF_FAMILY_A16 : d.family);
    char name[16];
    snprintf(name, sizeof name, "P-%.12s", d.subtype[0] ? d.subtype : "unknown");
    af_status st = ff_set_str(&p->doc, "name", name);
    if (!st) st = ff_set_str(&p->doc, "chips", d.chip[0] ? d.chip : "not reported (not macOS)");
    if (!st && d.model[0]) st = ff_set_str(&p->doc, "model", d.model);
    if (!st) st = ff_set_str(&p->doc, "macos", d.macos[0] ? d.macos : "not macOS (the fake framework)");
    if (!st) st = ff_set_str(&p->doc, "subtype", d.subtype[0] ? d.subtype : "unknown");
    if (!st && fi) st = ff_set_str(&p->doc, "base", fi->name);
    if (!st) st = ff_set_str(&p->doc, "framework", ane_rt_framework() ? ane_rt_framework() : "?");
    snprintf(res, n, "%s, engine %s, closest built-in family %s", d.chip[0] ? d.chip : "chip not reported",
             d.subtype[0] ? d.subtype : "subtype not reported", fi ? fi->name : "?");
    return st;
}

/* ------------------------------------------------------------------ compare */

int af_family_compare(const char *path, const char *family, char *out, size_t n) {
    if (!path || !out || !n) { ir_fail(AF_ERR_INVALID, "af_family_compare: path and out are required"); return -1; }
    out[0] = 0;
    af_family_id file_id, sim_id;
    if (ane_family_load(path, &file_id)) return -1;
    const ane_family_info *ff = ane_family_info_of(file_id);
    if (family) {
        if (ane_family_parse(family, &sim_id)) return -1;
    } else if (ane_family_parse(ff->base[0] ? ff->base : "a16", &sim_id)) {
        return -1;
    }
    const ane_family_info *sf = ane_family_info_of(sim_id);
    size_t k = (size_t)snprintf(out, n, "%-30s %12s %12s\n", "field", sf->name, ff->name);
    int diff = 0;
    for (int f = 0; f < ane_family_nfields; f++) {
        int64_t a = ane_family_get(sf, f), b = ane_family_get(ff, f);
        bool unknown = ff->unknown & 1u << f;
        bool d = !unknown && a != b;
        char val[24];
        if (unknown) snprintf(val, sizeof val, "unknown");
        else snprintf(val, sizeof val, "%lld", (long long)b);
        diff += d;
        if (k < n)
            k += (size_t)snprintf(out + k, n - k, "%-30s %12lld %12s%s\n", ane_family_fields[f].key, (long long)a, val,
                                  d ? "  DIFFERS" : "");
    }
    return diff;
}

/* ------------------------------------------------------------------ ops */

/* Every row of the op table and every unverified net.plist spelling (ane_probe_ops.c). */
static af_status step_ops(af_probe *p, int quick, char *res, size_t n) { return probe_ops_step(&p->doc, p->path, quick, res, n); }
