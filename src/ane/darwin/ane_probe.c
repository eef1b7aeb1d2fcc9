/* The chip probe (include/aneforge_probe.h): each step builds small programs, compiles
 * them through the runtime (ane_runtime.h) and bisects the largest extent the engine's
 * compiler accepts, or runs one and compares it with the value the CPU computes. Safe by
 * construction: nothing it compiles is larger than a few hundred KiB, and the one
 * pattern the notes say can hang the compiler (large-batch programs on M1, seed 000) is
 * never tried; its field is written as unknown. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "aneforge_probe.h"
#include "ane/darwin/ane_probe_ops.h"
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
    { "compile_budget", "compile_budget", "distinct one-op programs compiled until the daemon refuses (one process)", step_budget },
    { "dispatch", NULL, "the dispatch latency floor: one small program evaluated repeatedly (median)", step_dispatch },
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
    if (!st) st = ff_set_str(&p->doc, "surface_align_source", "not probed yet: the runtime always uses 128-byte steps (ane_ports.c)");
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

/* The largest v in [lo, hi] whose program compiles (lo must), by bisection. */
static af_status bisect(build_fn build, int64_t lo, int64_t hi, int64_t *best, int *compiles, char *refusal, size_t rn) {
    char why[600];
    refusal[0] = 0;
    *compiles = 1;
    if (try_program(build, lo, NULL, NULL, NULL, why, sizeof why))
        return ir_fail(AF_ERR_UNSUPPORTED, "even the smallest probe program (%lld) was refused: %s", (long long)lo, why);
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        ++*compiles;
        if (!try_program(build, mid, NULL, NULL, NULL, why, sizeof why)) lo = mid;
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
    af_status st = bisect(build, lo, hi, &best, &compiles, refusal, sizeof refusal);
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
