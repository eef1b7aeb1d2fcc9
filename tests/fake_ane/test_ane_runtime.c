/* The darwin Neural Engine runtime (src/ane/darwin) run on Linux against the fake
 * AppleNeuralEngine framework (tests/fake_ane). Built twice: as test_ane_runtime with
 * the library's runtime (Apple symbols looked up in the framework with dlsym) and as
 * test_ane_runtime_linked with the runtime's Apple branch compiled in (symbols linked,
 * here to the fake). One case per process, named on the command line, because the
 * compile budget and the loaded framework are per process:
 *   trampoline  the fake objc_msgSend passes 11 interleaved integer / floating-point
 *               arguments (registers and stack) exactly; a message to nil returns 0
 *   missing     a missing framework, a library without the API, compiling before
 *               loading: clear errors, no crash
 *   programs    MIL emitted from small graphs (two ports of different sizes in
 *               alphabetical order, baked weights in weight.bin, two outputs, the
 *               built-in mlp-step, conv and attention samples) compiled and evaluated:
 *               bit-identical to the CPU executor in fp16, and the small ones close to
 *               a naive double reference
 *   cache       the same program twice compiles once; handles are independent;
 *               releasing everything frees every fake object and the staged files;
 *               asked for again, it reloads from the daemon without compiling
 *   alias       resident state: an output aliased onto its input accumulates across
 *               evaluations with no host copy; a size mismatch is refused
 *   budget      the fake daemon's budget and the runtime's own budget: clear errors,
 *               no crash, cache hits still served
 *   load_retry  one failed load is retried; two give the framework's error text
 *   traps       the fake enforces each documented trap when driven directly
 *   device      the engine family follows the subtype the fake reports
 *   netplist    a net.plist program through the runtime against double
 * and one case per mismatch of issue 31 (each seen failing on the runtime before it):
 *   weights     baked weights compile and compute whichever key of an entry the
 *               descriptor meets first
 *   model_path  files staged under -localModelPath, wherever it is; gone after release
 *   compile_failure  no folder left after a failed compile; the compiler's message
 *               (under NSUnderlyingError) reaches the caller
 *   no_inputs   refused before compiling (the request validation would refuse it)
 *   layouts     surface sizes; padded rows and shuffled ports (and no attributes) give
 *               ane-sim's bits
 *   alias       (above) also with state copied instead of aliased
 * and issue 30's macOS differences:
 *   entry       under each FAKE_ANE_MACOS profile (14, 15, 26) programs compile and run
 *               through the entry point that works there, kept once found, and logged */
#define _DEFAULT_SOURCE 1
#include "ane/darwin/ane_runtime.h"
#include "ane/darwin/ane_ports.h"
#include "ane/darwin/apple_api.h"
#include "mil/mil.h"
#include "fake_ane_control.h"
#include "ir/fp16.h"
#include "ir/ir.h"
#include "support/check.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AF_FAKE_ANE
#error "AF_FAKE_ANE must name the fake framework library"
#endif

/* The fake's control functions, looked up in the library the runtime loaded. */
static struct {
    void (*set_compile_budget)(long);
    long (*compiles)(void);
    void (*fail_loads)(int);
    void (*set_subtype)(const char *);
    long (*evaluations)(void);
    long (*live_objects)(void);
    const char *(*last_error)(void);
    int (*set)(const char *, long);
    void (*set_model_root)(const char *);
} fake;

static void open_fake(void) {
    const char *tmp = getenv("TMPDIR");
    if (tmp) mkdir(tmp, 0700);
    af_status st = ane_rt_open(AF_FAKE_ANE);
    CHECK(st == AF_OK, "ane_rt_open(%s): %s", AF_FAKE_ANE, af_error_message());
    void *h = dlopen(AF_FAKE_ANE, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, "the fake is not loaded");
    if (!h) exit(check_finish("ane_runtime"));
    *(void **)&fake.set_compile_budget = dlsym(h, "fake_ane_set_compile_budget");
    *(void **)&fake.compiles = dlsym(h, "fake_ane_compiles");
    *(void **)&fake.fail_loads = dlsym(h, "fake_ane_fail_loads");
    *(void **)&fake.set_subtype = dlsym(h, "fake_ane_set_subtype");
    *(void **)&fake.evaluations = dlsym(h, "fake_ane_evaluations");
    *(void **)&fake.live_objects = dlsym(h, "fake_ane_live_objects");
    *(void **)&fake.last_error = dlsym(h, "fake_ane_last_error");
    *(void **)&fake.set = dlsym(h, "fake_ane_set");
    *(void **)&fake.set_model_root = dlsym(h, "fake_ane_set_model_root");
    CHECK(fake.last_error && fake.live_objects && fake.set_subtype && fake.set && fake.set_model_root,
          "the fake exports no control functions");
    /* the private aneforge inside the fake must not be visible */
    CHECK(dlsym(h, "af_compile") == NULL && dlsym(h, "mil_parse") == NULL, "the fake exports aneforge's symbols");
    dlclose(h);
}

static int contains(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

/* ---------------------------------------------------------------- programs from graphs */

typedef struct {
    af_graph *g;
    int nin, nout;
    af_tensor *in[16], *out[16];
} graph_prog;

typedef struct {
    char *mil;
    size_t len;
    uint8_t *w;
    size_t wn;
    int order[16]; /* MIL argument k is graph input order[k] */
    ane_rt_ports ports;
} emitted;

static int emit(const graph_prog *gp, emitted *e) {
    memset(e, 0, sizeof *e);
    milblob_writer *blob = NULL;
    if (mil_emit_mem(gp->g, gp->nin, gp->in, gp->nout, gp->out, &e->mil, &e->len, &blob, e->order)) {
        CHECK(0, "emit: %s", af_error_message());
        return 0;
    }
    size_t n = 0;
    const uint8_t *b = milblob_bytes(blob, &n);
    if (milblob_writer_count(blob) > 0 && (e->w = malloc(n))) {
        memcpy(e->w, b, n);
        e->wn = n;
    }
    milblob_writer_free(blob);
    e->ports.nin = gp->nin;
    e->ports.nout = gp->nout;
    for (int k = 0; k < gp->nin; k++) e->ports.in_count[k] = af_shape_count(af_tensor_shape(gp->in[e->order[k]]));
    for (int k = 0; k < gp->nout; k++) e->ports.out_count[k] = af_shape_count(af_tensor_shape(gp->out[k]));
    return 1;
}

static void emitted_free(emitted *e) {
    free(e->mil);
    free(e->w);
}

static uint16_t *random_f16(test_rng *r, int64_t n, double lo, double hi) {
    float *f = malloc(sizeof(float) * (size_t)n);
    uint16_t *h = malloc(2 * (size_t)n);
    test_fill_uniform(r, f, n, lo, hi);
    ir_f32_to_f16_array(f, h, n);
    free(f);
    return h;
}

/* Runs gp through the runtime (in[] in graph order) into got[]; returns 0 on failure. */
static int run_ane(const graph_prog *gp, const emitted *e, uint16_t **in, uint16_t **got) {
    ane_rt_program *p = NULL;
    if (ane_rt_compile(e->mil, e->len, e->w, e->wn, &e->ports, &p)) {
        CHECK(0, "ane_rt_compile: %s", af_error_message());
        return 0;
    }
    const uint16_t *mil_in[16];
    for (int k = 0; k < gp->nin; k++) mil_in[k] = in[e->order[k]];
    af_status st = ane_rt_eval(p, mil_in, got);
    CHECK(st == AF_OK, "ane_rt_eval: %s", af_error_message());
    ane_rt_release(p);
    return st == AF_OK;
}

/* ane-sim through MIL on the same graph, for the family the fake reports (h16: A16):
 * the fake executes what it compiles as ane-sim models that engine. */
static int run_cpu(const graph_prog *gp, uint16_t **in, uint16_t **want) {
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A16, .threads = 1, .via_mil = 1 };
    /* The emitted program's arguments are fp16 whatever the graph declared; ane-sim
     * wants that said in the graph (its fp16-only I/O rule). */
    for (int i = 0; i < gp->nin; i++)
        if (!(gp->in[i]->flags & IR_TF_PARAM)) gp->in[i]->dtype = AF_F16;
    af_model *m = af_compile(gp->g, gp->nin, gp->in, gp->nout, gp->out, &o);
    CHECK(m != NULL, "af_compile: %s", af_error_message());
    if (!m) return 0;
    af_buffer bi[16], bo[16];
    for (int i = 0; i < gp->nin; i++) bi[i] = (af_buffer){ in[i], AF_F16, af_shape_count(af_tensor_shape(gp->in[i])) };
    for (int i = 0; i < gp->nout; i++) bo[i] = (af_buffer){ want[i], AF_F16, af_shape_count(af_tensor_shape(gp->out[i])) };
    af_status st = af_run(m, bi, bo);
    CHECK(st == AF_OK, "af_run: %s", af_error_message());
    af_model_free(m);
    return st == AF_OK;
}

static double f16(uint16_t h) {
    float f;
    ir_f16_to_f32_array(&h, &f, 1);
    return f;
}

/* Compiles and runs gp on the fake and on ane-sim; checks they agree bit for bit and,
 * when ref is given, that output 0 is within tol (relative to its scale) of ref. */
static void check_program(const char *name, const graph_prog *gp, test_rng *r,
                          void (*ref)(const graph_prog *, uint16_t **, double *), double tol) {
    emitted e;
    if (!emit(gp, &e)) return;
    uint16_t *in[16], *got[16], *want[16];
    for (int i = 0; i < gp->nin; i++) in[i] = random_f16(r, af_shape_count(af_tensor_shape(gp->in[i])), -1, 1);
    for (int i = 0; i < gp->nout; i++) {
        int64_t n = af_shape_count(af_tensor_shape(gp->out[i]));
        got[i] = calloc((size_t)n, 2);
        want[i] = calloc((size_t)n, 2);
    }
    long evals = fake.evaluations();
    if (run_ane(gp, &e, in, got) && run_cpu(gp, in, want)) {
        CHECK(fake.evaluations() == evals + 1, "%s: the fake did not evaluate", name);
        for (int i = 0; i < gp->nout; i++) {
            int64_t n = af_shape_count(af_tensor_shape(gp->out[i])), diff = 0;
            for (int64_t j = 0; j < n; j++) diff += got[i][j] != want[i][j];
            CHECK(diff == 0, "%s: output %d differs from ane-sim in %lld of %lld values", name, i, (long long)diff, (long long)n);
        }
        if (ref) {
            int64_t n = af_shape_count(af_tensor_shape(gp->out[0]));
            double *r0 = malloc(sizeof(double) * (size_t)n), scale = 1e-3, worst = 0;
            ref(gp, in, r0);
            for (int64_t j = 0; j < n; j++) scale = fmax(scale, fabs(r0[j]));
            for (int64_t j = 0; j < n; j++) worst = fmax(worst, fabs(f16(got[0][j]) - r0[j]));
            CHECK(worst <= tol * scale, "%s: off the double reference by %g (scale %g)", name, worst, scale);
            printf("%s: max |ane - double| %.3g at scale %.3g\n", name, worst, scale);
            free(r0);
        }
    }
    for (int i = 0; i < gp->nin; i++) free(in[i]);
    for (int i = 0; i < gp->nout; i++) {
        free(got[i]);
        free(want[i]);
    }
    emitted_free(&e);
}

/* b_big [4, 16] + a_small [16]: MIL order (a_small, b_big) differs from graph order. */
static void ref_bcast(const graph_prog *gp, uint16_t **in, double *out) {
    (void)gp;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++) out[i * 16 + j] = f16(in[0][i * 16 + j]) + f16(in[1][j]);
}

static float lin_w[16 * 32], lin_b[16];
/* relu(x [4, 32] @ W^T [32, 16] + b) with W and b baked (W goes to weight.bin). */
static void ref_linear(const graph_prog *gp, uint16_t **in, double *out) {
    (void)gp;
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 16; o++) {
            double s = lin_b[o];
            for (int k = 0; k < 32; k++) s += f16(in[0][i * 32 + k]) * (double)lin_w[o * 32 + k];
            out[i * 16 + o] = s > 0 ? s : 0;
        }
}

static void case_programs(void) {
    open_fake();
    test_rng r = { 7 };
    long live = fake.live_objects();

    graph_prog a = { .g = af_graph_new(), .nin = 2, .nout = 2 };
    a.in[0] = af_input(a.g, "b_big", AF_F16, AF_SHAPE(4, 16));
    a.in[1] = af_input(a.g, "a_small", AF_F16, AF_SHAPE(16));
    a.out[0] = af_add(a.in[0], a.in[1]);
    a.out[1] = af_mul(a.in[0], a.in[0]);
    check_program("broadcast add, two outputs", &a, &r, ref_bcast, 1e-3);
    af_graph_free(a.g);

    test_fill_uniform(&r, lin_w, 16 * 32, -0.5, 0.5);
    test_fill_uniform(&r, lin_b, 16, -0.5, 0.5);
    ir_round_f16_array(lin_w, 16 * 32); /* the program holds fp16 weights: the reference uses the same */
    ir_round_f16_array(lin_b, 16);
    graph_prog l = { .g = af_graph_new(), .nin = 1, .nout = 1 };
    l.in[0] = af_input(l.g, "x", AF_F16, AF_SHAPE(4, 32));
    af_tensor *w = af_const(l.g, "w", AF_SHAPE(16, 32), lin_w), *b = af_const(l.g, "b", AF_SHAPE(16), lin_b);
    l.out[0] = af_relu(af_add(af_matmul(l.in[0], w, 0, 1), b));
    check_program("linear with baked weights", &l, &r, ref_linear, 4e-3);
    af_graph_free(l.g);

    for (int i = 0; mil_sample_names[i]; i++) { /* mlp-step, conv, attention */
        mil_sample s;
        CHECK(mil_sample_build(mil_sample_names[i], &s) == AF_OK, "%s", af_error_message());
        graph_prog sp = { .g = s.g, .nin = s.nin, .nout = s.nout };
        memcpy(sp.in, s.in, sizeof s.in);
        memcpy(sp.out, s.out, sizeof s.out);
        check_program(mil_sample_names[i], &sp, &r, NULL, 0);
        af_graph_free(s.g);
    }

    CHECK(fake.live_objects() == live, "fake objects leaked: %ld alive, %ld before", fake.live_objects(), live);
}

/* ---------------------------------------------------------------- cache */

static int dir_entries(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static graph_prog small_prog(float k) {
    graph_prog p = { .g = af_graph_new(), .nin = 1, .nout = 1 };
    p.in[0] = af_input(p.g, "x", AF_F16, AF_SHAPE(1, 8, 1, 16));
    p.out[0] = af_muls(af_relu(p.in[0]), k);
    return p;
}

static void case_cache(void) {
    open_fake();
    long live = fake.live_objects();
    graph_prog gp = small_prog(3);
    emitted e;
    if (!emit(&gp, &e)) return;
    int64_t before = ane_rt_compile_count();
    long fake_before = fake.compiles();
    ane_rt_program *p1 = NULL, *p2 = NULL;
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p1) == AF_OK, "%s", af_error_message());
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p2) == AF_OK, "%s", af_error_message());
    CHECK(ane_rt_compile_count() == before + 1 && fake.compiles() == fake_before + 1,
          "two compiles of one program: the runtime counted %lld, the fake %ld (want 1)",
          (long long)(ane_rt_compile_count() - before), fake.compiles() - fake_before);
    CHECK(p1 && p2 && p1 != p2, "a cache hit must still give its own handle");
    CHECK(dir_entries(getenv("TMPDIR")) == 1, "one staged model directory expected, found %d", dir_entries(getenv("TMPDIR")));
    if (p1 && p2) {
        uint16_t x1[128], x2[128], y1[128], y2[128];
        for (int i = 0; i < 128; i++) {
            x1[i] = 0x3c00; /* 1 */
            x2[i] = 0x4000; /* 2 */
        }
        const uint16_t *i1[1] = { x1 }, *i2[1] = { x2 };
        uint16_t *o1[1] = { y1 }, *o2[1] = { y2 };
        CHECK(ane_rt_eval(p1, i1, o1) == AF_OK && ane_rt_eval(p2, i2, o2) == AF_OK, "%s", af_error_message());
        CHECK(f16(y1[5]) == 3 && f16(y2[5]) == 6, "handles share surfaces: got %g and %g, want 3 and 6", f16(y1[5]), f16(y2[5]));
    }
    ane_rt_release(p1);
    CHECK(dir_entries(getenv("TMPDIR")) == 1, "the model was unloaded while a handle still used it");
    ane_rt_release(p2);
    CHECK(dir_entries(getenv("TMPDIR")) == 0, "the staged files were not removed after the last release");
    CHECK(fake.live_objects() == live, "fake objects leaked: %ld alive, %ld before", fake.live_objects(), live);
    /* asked for again after the last release: the daemon still has it compiled
     * (-compiledModelExists), so it is loaded again without compiling, and runs */
    int64_t reloads = ane_rt_reload_count();
    fake_before = fake.compiles();
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p1) == AF_OK && ane_rt_compile_count() == before + 1 &&
              fake.compiles() == fake_before && ane_rt_reload_count() == reloads + 1,
          "a released program must reload without compiling: %lld compiles, %ld in the fake, %lld reloads",
          (long long)(ane_rt_compile_count() - before), fake.compiles() - fake_before,
          (long long)(ane_rt_reload_count() - reloads));
    if (p1) {
        uint16_t x[128], y[128];
        for (int i = 0; i < 128; i++) x[i] = 0x3c00; /* 1 */
        const uint16_t *in[1] = { x };
        uint16_t *out[1] = { y };
        CHECK(ane_rt_eval(p1, in, out) == AF_OK && f16(y[7]) == 3, "the reloaded program must run: %s", af_error_message());
    }
    ane_rt_release(p1);
    emitted_free(&e);
    af_graph_free(gp.g);
}

/* ---------------------------------------------------------------- resident alias */

/* Three resident steps of state += delta; want_aliased: whether the output must share
 * the input's surface; fails_with: the evaluate error expected instead (NULL: none). */
static void alias_run(int want_aliased, const char *fails_with) {
    graph_prog gp = { .g = af_graph_new(), .nin = 2, .nout = 2 };
    gp.in[0] = af_input(gp.g, "state", AF_F16, AF_SHAPE(1, 4, 1, 16));
    gp.in[1] = af_input(gp.g, "delta", AF_F16, AF_SHAPE(1, 4, 1, 16));
    gp.out[0] = af_add(gp.in[0], gp.in[1]);      /* the new state */
    gp.out[1] = af_reduce_sum(gp.in[0], 4, (int[]){ 0, 1, 2, 3 }, 0); /* the old state's sum */
    emitted e;
    if (!emit(&gp, &e)) return;
    int state_port = e.order[0] == 0 ? 0 : 1, delta_port = 1 - state_port; /* MIL order: delta, state */
    ane_rt_program *p = NULL;
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p) == AF_OK, "%s", af_error_message());
    if (p) {
        CHECK(ane_rt_alias(p, 1, state_port) != AF_OK && contains(af_error_message(), "differ in size"),
              "aliasing a 1-value output onto a 64-value input must be refused: %s", af_error_message());
        CHECK(ane_rt_alias(p, 0, state_port) == AF_OK, "%s", af_error_message());
        CHECK(ane_rt_output_aliased(p, 0) == want_aliased, "output 0 aliased: %d, want %d", ane_rt_output_aliased(p, 0),
              want_aliased);
        uint16_t s0[64], d[64], back[64], sum;
        for (int i = 0; i < 64; i++) {
            s0[i] = 0x3c00 + (uint16_t)(i % 4 << 8); /* 1, 2, 4, 8 ... small exact values */
            d[i] = 0x3800;                            /* 0.5 */
        }
        CHECK(ane_rt_input_io(p, state_port, s0, 0) == AF_OK, "%s", af_error_message());
        const uint16_t *in[2];
        in[state_port] = NULL; /* resident: the surface holds it */
        in[delta_port] = d;
        uint16_t *out[2] = { NULL, &sum };
        double want_sum = 0;
        for (int i = 0; i < 64; i++) want_sum += f16(s0[i]);
        if (fails_with) {
            CHECK(ane_rt_eval(p, in, out) != AF_OK && contains(af_error_message(), fails_with),
                  "evaluate must fail with '%s': %s", fails_with, af_error_message());
            printf("alias refused: %s\n", af_error_message());
            ane_rt_release(p);
            emitted_free(&e);
            af_graph_free(gp.g);
            return;
        }
        for (int step = 0; step < 3; step++) {
            CHECK(ane_rt_eval(p, in, out) == AF_OK, "%s", af_error_message());
            CHECK(f16(sum) == want_sum + 32 * step, "step %d: the program read state summing to %g, want %g", step, f16(sum),
                  want_sum + 32 * step);
        }
        CHECK(ane_rt_input_io(p, state_port, back, 1) == AF_OK, "%s", af_error_message());
        int wrong = 0;
        for (int i = 0; i < 64; i++) wrong += f16(back[i]) != f16(s0[i]) + 1.5;
        CHECK(wrong == 0, "after 3 resident steps %d state values are not start + 3 * 0.5", wrong);
        ane_rt_release(p);
    }
    emitted_free(&e);
    af_graph_free(gp.g);
}

/* Mismatch 6: resident state aliased (the default) or, with aliasing off (what the chip
 * probe chooses when the engine refuses one surface in both lists), copied between
 * separate surfaces: the same numbers either way. */
static void case_alias(void) {
    open_fake();
    alias_run(1, NULL);
    fake.set("alias_surfaces", 0); /* a framework that refuses the aliased request */
    alias_run(1, "also input");
    ane_rt_set_state_alias(0);
    CHECK(ane_rt_state_alias() == 0, "state aliasing must switch off");
    alias_run(0, NULL);
    ane_rt_set_state_alias(1);
    fake.set("alias_surfaces", 1);
}

/* ---------------------------------------------------------------- budget and load retry */

static void case_budget(void) {
    open_fake();
    fake.set_compile_budget(fake.compiles() + 3);
    ane_rt_set_compile_budget(ane_rt_compile_count() + 4); /* the daemon refuses first, near the runtime's budget */
    emitted e[6];
    graph_prog gp[6];
    ane_rt_program *p[6] = { 0 };
    for (int i = 0; i < 6; i++) {
        gp[i] = small_prog((float)(i + 2));
        emit(&gp[i], &e[i]);
    }
    for (int i = 0; i < 3; i++) CHECK(ane_rt_compile(e[i].mil, e[i].len, e[i].w, e[i].wn, &e[i].ports, &p[i]) == AF_OK, "%s", af_error_message());
    /* the fake daemon's budget is spent: its error text comes through, nothing crashes */
    CHECK(ane_rt_compile(e[3].mil, e[3].len, e[3].w, e[3].wn, &e[3].ports, &p[3]) == AF_ERR_UNSUPPORTED && !p[3],
          "a compile past the daemon's budget must fail");
    CHECK(contains(af_error_message(), "compile failed") && contains(af_error_message(), "restart the process"),
          "the framework's error text is missing: %s", af_error_message());
    CHECK(contains(af_error_message(), "Likely cause: the compile budget: this was compile 4 in this process") &&
              contains(af_error_message(), "the A16 family file's compile_budget is 119") &&
              contains(af_error_message(), "doctor --probe"),
          "a refusal near the budget must name it as the likely cause: %s", af_error_message());
    printf("daemon budget: %s\n", af_error_message());
    /* the runtime's own budget refuses before asking the daemon */
    fake.set_compile_budget(1000);
    ane_rt_set_compile_budget(ane_rt_compile_count() + 1);
    CHECK(ane_rt_compile(e[4].mil, e[4].len, e[4].w, e[4].wn, &e[4].ports, &p[4]) == AF_OK, "%s", af_error_message());
    long fake_before = fake.compiles();
    CHECK(ane_rt_compile(e[5].mil, e[5].len, e[5].w, e[5].wn, &e[5].ports, &p[5]) == AF_ERR_UNSUPPORTED && !p[5],
          "a compile past the runtime's budget must be refused");
    CHECK(contains(af_error_message(), "budget") && fake.compiles() == fake_before,
          "the runtime must refuse without compiling: %s", af_error_message());
    printf("runtime budget: %s\n", af_error_message());
    /* a cache hit costs nothing and still works */
    ane_rt_program *hit = NULL;
    CHECK(ane_rt_compile(e[0].mil, e[0].len, e[0].w, e[0].wn, &e[0].ports, &hit) == AF_OK && hit,
          "a cached program must still be served once the budget is spent: %s", af_error_message());
    ane_rt_release(hit);
    CHECK(ane_rt_compile_budget() == ane_rt_compile_count(), "budget %lld, count %lld", (long long)ane_rt_compile_budget(),
          (long long)ane_rt_compile_count());
    ane_rt_set_compile_budget(1000);
    CHECK(ane_rt_compile_budget() == 1000, "the budget can be raised for a daemon without the limit (the fake)");
    for (int i = 0; i < 6; i++) {
        ane_rt_release(p[i]);
        emitted_free(&e[i]);
        af_graph_free(gp[i].g);
    }
}

static void case_load_retry(void) {
    open_fake();
    graph_prog a = small_prog(2), b = small_prog(5);
    emitted ea, eb;
    emit(&a, &ea);
    emit(&b, &eb);
    ane_rt_program *p = NULL;
    fake.fail_loads(1);
    CHECK(ane_rt_compile(ea.mil, ea.len, ea.w, ea.wn, &ea.ports, &p) == AF_OK, "one failed load must be retried: %s", af_error_message());
    ane_rt_release(p);
    p = NULL;
    fake.fail_loads(2);
    CHECK(ane_rt_compile(eb.mil, eb.len, eb.w, eb.wn, &eb.ports, &p) == AF_ERR_UNSUPPORTED && !p, "two failed loads must fail");
    CHECK(contains(af_error_message(), "load failed") && contains(af_error_message(), "no free program slot"),
          "the framework's load error is missing: %s", af_error_message());
    printf("load: %s\n", af_error_message());
    CHECK(dir_entries(getenv("TMPDIR")) == 0, "a failed compile left its staged files");
    /* a program the daemon reports compiled but will not load is compiled after all */
    int64_t before = ane_rt_compile_count();
    fake.fail_loads(2);
    CHECK(ane_rt_compile(ea.mil, ea.len, ea.w, ea.wn, &ea.ports, &p) == AF_OK && p && ane_rt_compile_count() == before + 1,
          "a kept program that fails to load must be compiled again: %s", af_error_message());
    ane_rt_release(p);
    emitted_free(&ea);
    emitted_free(&eb);
    af_graph_free(a.g);
    af_graph_free(b.g);
}

/* ---------------------------------------------------------------- missing framework */

static void case_missing(void) {
    ane_rt_program *p = NULL;
    ane_rt_ports ports = { 1, 1, { 4 }, { 4 } };
    CHECK(ane_rt_compile("x", 1, NULL, 0, &ports, &p) == AF_ERR_UNSUPPORTED && contains(af_error_message(), "ane_rt_open"),
          "compiling with no framework must say to load one: %s", af_error_message());
    CHECK(ane_rt_open("/nonexistent/AppleNeuralEngine.framework/AppleNeuralEngine") == AF_ERR_UNSUPPORTED &&
              contains(af_error_message(), "/nonexistent/AppleNeuralEngine.framework"),
          "a missing framework must be named: %s", af_error_message());
    printf("missing: %s\n", af_error_message());
    CHECK(ane_rt_open("libm.so.6") == AF_ERR_UNSUPPORTED && contains(af_error_message(), "has no symbol"),
          "a library without the API must be refused by name: %s", af_error_message());
    printf("not a framework: %s\n", af_error_message());
    CHECK(ane_rt_framework() == NULL, "nothing is loaded after failures");
    open_fake(); /* a later good path still works */
    CHECK(ane_rt_open(NULL) == AF_OK && ane_rt_open(AF_FAKE_ANE) == AF_OK, "reopening the loaded framework is a no-op");
    CHECK(ane_rt_open("/other/AppleNeuralEngine") == AF_ERR_INVALID && contains(af_error_message(), "already loaded"),
          "a second framework must be refused: %s", af_error_message());
}

/* ---------------------------------------------------------------- trampoline */

static void case_trampoline(void) {
    open_fake();
    Class probe = ane_apple.objc_getClass("FakeTrampolineProbe");
    CHECK(probe != NULL, "the fake has no FakeTrampolineProbe");
    if (!probe) return;
    SEL s = ane_apple.sel_registerName("mix:b:c:d:e:f:g:h:i:j:k:");
    double got = ANE_MSG(double (*)(Class, SEL, long, double, long, float, long, double, long, long, double, long, float))(
        probe, s, 1, 0.5, -3, 0.25f, 100000, -2.75, 7, -11, 1e3, 13, 0.125f);
    double want = 1 + 2 * 0.5 + 3 * -3 + 4 * 0.25 + 5 * 100000 + 6 * -2.75 + 7 * 7 + 8 * -11 + 9 * 1e3 + 10 * 13 + 11 * 0.125;
    CHECK(got == want, "objc_msgSend passed the arguments wrong: %.17g, want %.17g", got, want);
    CHECK(ANE_MSG(double (*)(id, SEL))(NULL, s) == 0.0 && ANE_MSG(id (*)(id, SEL))(NULL, s) == NULL,
          "a message to nil must return zero");
    CHECK(ane_apple.sel_registerName("mix:b:c:d:e:f:g:h:i:j:k:") == s, "selectors must be interned");
}

/* ---------------------------------------------------------------- traps, driving the fake */

static id cls_send(const char *cls, const char *sel, id a, id b, id c) {
    return ANE_MSG(id (*)(Class, SEL, id, id, id))(ane_apple.objc_getClass(cls), ane_apple.sel_registerName(sel), a, b, c);
}
static BOOL qos_send(id obj, const char *sel, id options, id *err) {
    return ANE_MSG(BOOL (*)(id, SEL, unsigned, id, id *))(obj, ane_apple.sel_registerName(sel), 21, options, err);
}
static BOOL eval_send(id model, id request, id *err) {
    return ANE_MSG(BOOL (*)(id, SEL, unsigned, id, id, id *))(model, ane_apple.sel_registerName("evaluateWithQoS:options:request:error:"),
                                                             21, NULL, request, err);
}
static const char *text(id err) {
    static char buf[512];
    buf[0] = 0;
    id d = err ? ANE_MSG(id (*)(id, SEL))(err, ane_apple.sel_registerName("localizedDescription")) : NULL;
    if (d) ane_apple.CFStringGetCString((CFStringRef)d, buf, sizeof buf, kCFStringEncodingUTF8);
    return buf;
}

static void stage(id model, const char *mil, size_t n) {
    char dir[1024], path[1500];
    id h = ANE_MSG(id (*)(id, SEL))(model, ane_apple.sel_registerName("localModelPath"));
    ane_apple.CFStringGetCString((CFStringRef)h, dir, sizeof dir, kCFStringEncodingUTF8);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/model.mil", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(mil, 1, n, f);
        fclose(f);
    }
}

static id surface_obj(size_t bytes) {
    int64_t b = (int64_t)bytes, one = 1;
    CFNumberRef nb = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &b), n1 = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &one);
    const void *k[] = { *ane_apple.kIOSurfaceWidth, *ane_apple.kIOSurfaceHeight, *ane_apple.kIOSurfaceBytesPerElement };
    const void *v[] = { nb, n1, n1 };
    CFDictionaryRef props = ane_apple.CFDictionaryCreate(NULL, k, v, 3, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                         ane_apple.kCFTypeDictionaryValueCallBacks);
    IOSurfaceRef s = ane_apple.IOSurfaceCreate(props);
    id o = ANE_MSG(id (*)(Class, SEL, IOSurfaceRef))(ane_apple.objc_getClass("_ANEIOSurfaceObject"),
                                                     ane_apple.sel_registerName("objectWithIOSurface:"), s);
    ane_apple.CFRelease(s);
    ane_apple.CFRelease(props);
    ane_apple.CFRelease(nb);
    ane_apple.CFRelease(n1);
    return o; /* autoreleased, retains the surface */
}

/* A request binding ins[k] at index k (input_index0 for the first) and outs[k] at k. */
static id request_at(int nin, id *ins, int nout, id *outs, int64_t input_index0, int64_t proc) {
    const void *ii[4], *oi[4];
    int64_t v[4] = { input_index0, 1, 2, 3 }, w[4] = { 0, 1, 2, 3 };
    for (int i = 0; i < 4; i++) {
        ii[i] = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &v[i]);
        oi[i] = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &w[i]);
    }
    CFNumberRef pn = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &proc);
    CFArrayRef a = ane_apple.CFArrayCreate(NULL, (const void **)ins, nin, ane_apple.kCFTypeArrayCallBacks);
    CFArrayRef ai = ane_apple.CFArrayCreate(NULL, ii, nin, ane_apple.kCFTypeArrayCallBacks);
    CFArrayRef b = ane_apple.CFArrayCreate(NULL, (const void **)outs, nout, ane_apple.kCFTypeArrayCallBacks);
    CFArrayRef bi = ane_apple.CFArrayCreate(NULL, oi, nout, ane_apple.kCFTypeArrayCallBacks);
    id r = ANE_MSG(id (*)(Class, SEL, id, id, id, id, id, id, id))(
        ane_apple.objc_getClass("_ANERequest"),
        ane_apple.sel_registerName("requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:procedureIndex:"),
        (id)a, (id)ai, (id)b, (id)bi, NULL, NULL, (id)pn);
    CFTypeRef all[] = { a, ai, b, bi, pn, ii[0], ii[1], ii[2], ii[3], oi[0], oi[1], oi[2], oi[3] };
    for (int i = 0; i < 13; i++) ane_apple.CFRelease(all[i]);
    return r;
}
static id request(int nin, id *ins, int nout, id *outs) { return request_at(nin, ins, nout, outs, 0, 0); }

/* A weights dictionary {key: {k0: v0[, k1: v1]}} (entries in this insertion order). */
static CFDictionaryRef weights_of(const char *key, int n, const char *k0, CFTypeRef v0, const char *k1, CFTypeRef v1) {
    CFStringRef ks[2] = { ane_apple.CFStringCreateWithCString(NULL, k0, kCFStringEncodingUTF8),
                          k1 ? ane_apple.CFStringCreateWithCString(NULL, k1, kCFStringEncodingUTF8) : NULL };
    const void *ek[2] = { ks[0], ks[1] }, *ev[2] = { v0, v1 };
    CFDictionaryRef entry = ane_apple.CFDictionaryCreate(NULL, ek, ev, n, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                         ane_apple.kCFTypeDictionaryValueCallBacks);
    CFStringRef k = ane_apple.CFStringCreateWithCString(NULL, key, kCFStringEncodingUTF8);
    const void *wk[1] = { k }, *wv[1] = { entry };
    CFDictionaryRef w = ane_apple.CFDictionaryCreate(NULL, wk, wv, 1, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                     ane_apple.kCFTypeDictionaryValueCallBacks);
    ane_apple.CFRelease(k);
    ane_apple.CFRelease(entry);
    for (int i = 0; i < 2; i++)
        if (ks[i]) ane_apple.CFRelease(ks[i]);
    return w;
}

static void case_traps(void) {
    open_fake();
    long live = fake.live_objects();
    /* the direct-drive checks below bind declaration order, packed: the fake's layouts are
     * exercised through the runtime elsewhere */
    fake.set("padded_rows", 0);
    fake.set("shuffled_ports", 0);
    /* a: [1, 4, 1, 8] (64 bytes), b: [1, 4, 1, 16] (128 bytes) -> y = a + b[..., :8]: sizes differ */
    graph_prog gp = { .g = af_graph_new(), .nin = 2, .nout = 1 };
    gp.in[0] = af_input(gp.g, "a", AF_F16, AF_SHAPE(1, 4, 1, 8));
    gp.in[1] = af_input(gp.g, "b", AF_F16, AF_SHAPE(1, 4, 1, 16));
    gp.out[0] = af_add(gp.in[0], af_slice(gp.in[1], (int64_t[]){ 0, 0, 0, 0 }, (int64_t[]){ 1, 4, 1, 8 }));
    emitted e;
    if (!emit(&gp, &e)) return;
    void *pool = ane_apple.objc_autoreleasePoolPush();
    CFDictionaryRef empty = ane_apple.CFDictionaryCreate(NULL, NULL, NULL, 0, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                         ane_apple.kCFTypeDictionaryValueCallBacks);
    CFDataRef mil = ane_apple.CFDataCreate(NULL, (const UInt8 *)e.mil, (CFIndex)e.len);
    CFStringRef mil_str = ane_apple.CFStringCreateWithCString(NULL, e.mil, kCFStringEncodingUTF8);
    id err = NULL;

    /* MIL as NSString: the real framework crashes; the fake refuses */
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil_str, (id)empty, NULL) == NULL &&
              contains(fake.last_error(), "NSString"),
          "MIL as a string must be refused: %s", fake.last_error());
    /* nil weights: a nil descriptor */
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, NULL, NULL) == NULL &&
              contains(fake.last_error(), "nil weights give a nil descriptor"),
          "nil weights must give a nil descriptor: %s", fake.last_error());
    /* an entry whose first value is not NSData ({offset, data} in that order), an empty entry */
    int64_t zero = 0;
    CFNumberRef z = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &zero);
    CFDataRef blob = ane_apple.CFDataCreate(NULL, (const UInt8 *)"abcd", 4);
    CFDictionaryRef w_num_first = weights_of("@model_path/weights/weight.bin", 2, "offset", z, "data", blob);
    CFDictionaryRef w_empty = weights_of("@model_path/weights/weight.bin", 0, "x", z, NULL, NULL);
    CFDictionaryRef w_apple = weights_of("@model_path/weights/weight.bin", 1, "weights/weight.bin", blob, NULL, NULL);
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, (id)w_num_first, NULL) == NULL &&
              contains(fake.last_error(), "first value (under \"offset\") is not NSData"),
          "an entry whose first value is a number must be refused: %s", fake.last_error());
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, (id)w_empty, NULL) == NULL &&
              contains(fake.last_error(), "empty entry"),
          "an empty weights entry must be refused: %s", fake.last_error());
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, (id)w_apple, NULL) != NULL,
          "Apple's single-entry form must be accepted: %s", fake.last_error());
    /* the older reports, switched on: nil weights pass the descriptor and fail the compile silently */
    fake.set("weights_strict", 0);
    id desc = cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, NULL, NULL);
    id model = ANE_MSG(id (*)(Class, SEL, id))(ane_apple.objc_getClass("_ANEInMemoryModel"),
                                               ane_apple.sel_registerName("inMemoryModelWithDescriptor:"), desc);
    CHECK(desc && model, "weights_strict 0: a descriptor with nil weights is accepted (the failure comes later)");
    stage(model, e.mil, e.len);
    CHECK(!qos_send(model, "compileWithQoS:options:error:", (id)empty, &err) && err == NULL && contains(fake.last_error(), "nil"),
          "nil weights must fail the compile silently: %s", fake.last_error());
    fake.set("weights_strict", 1);

    /* files not staged */
    CFStringRef k = ane_apple.CFStringCreateWithCString(NULL, "unused", kCFStringEncodingUTF8);
    const void *kv[1] = { k };
    CFDictionaryRef opts = ane_apple.CFDictionaryCreate(NULL, kv, kv, 1, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                        ane_apple.kCFTypeDictionaryValueCallBacks);
    desc = cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, (id)empty, (id)opts);
    model = ANE_MSG(id (*)(Class, SEL, id))(ane_apple.objc_getClass("_ANEInMemoryModel"),
                                            ane_apple.sel_registerName("inMemoryModelWithDescriptor:"), desc);
    CHECK(!qos_send(model, "compileWithQoS:options:error:", (id)empty, &err) && contains(text(err), "cannot read"),
          "compiling without the staged model.mil must fail: %s", text(err));

    /* a good model: evaluate before load, wrong surfaces, locked surface, after unload */
    desc = cls_send("_ANEInMemoryModelDescriptor", "modelWithMILText:weights:optionsPlist:", (id)mil, (id)empty, NULL);
    model = ANE_MSG(id (*)(Class, SEL, id))(ane_apple.objc_getClass("_ANEInMemoryModel"),
                                            ane_apple.sel_registerName("inMemoryModelWithDescriptor:"), desc);
    stage(model, e.mil, e.len);
    char dir[1024], path[1200];
    ane_apple.CFStringGetCString((CFStringRef)ANE_MSG(id (*)(id, SEL))(model, ane_apple.sel_registerName("localModelPath")), dir,
                                 sizeof dir, kCFStringEncodingUTF8);
    CHECK(qos_send(model, "compileWithQoS:options:error:", (id)empty, &err), "compile: %s", text(err));
    snprintf(path, sizeof path, "%s/net.plist", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == (off_t)e.len, "the framework saves the MIL text as net.plist in %s", dir);
    id a = surface_obj(64), b = surface_obj(128), y = surface_obj(64), big = surface_obj(2048);
    id good_in[2] = { a, b }, swapped[2] = { b, a }, outs[1] = { y };
    id req = request(2, good_in, 1, outs);
    CHECK(req != NULL, "request: %s", fake.last_error());
    CHECK(!eval_send(model, req, &err) && contains(text(err), "not loaded"), "evaluating an unloaded model must fail: %s", text(err));
    CHECK(qos_send(model, "loadWithQoS:options:error:", (id)empty, &err), "load: %s", text(err));
    CHECK(eval_send(model, req, &err), "evaluate: %s", text(err));
    CHECK(eval_send(model, request(2, good_in, 1, (id[]){ big }), &err), "a larger surface must be accepted: %s", text(err));
    CHECK(!eval_send(model, request(2, swapped, 1, outs), &err) && contains(text(err), "wrong order"),
          "surfaces in the wrong order must fail: %s", text(err));
    CHECK(!eval_send(model, request(1, good_in, 1, outs), &err) && contains(text(err), "binds 1 input"),
          "a missing input surface must fail: %s", text(err));
    CHECK(!eval_send(model, request(2, good_in, 1, (id[]){ surface_obj(32) }), &err) && contains(text(err), "holds 32 bytes"),
          "a short output surface must fail: %s", text(err));
    /* -[_ANERequest validate] at evaluate time */
    CHECK(!eval_send(model, request(0, good_in, 1, outs), &err) && contains(text(err), "validate") && contains(text(err), "needs inputs"),
          "a request without inputs must fail validation: %s", text(err));
    CHECK(!eval_send(model, request_at(2, good_in, 1, outs, 255, 0), &err) && contains(text(err), "index 255"),
          "an index of 255 must fail validation: %s", text(err));
    CHECK(!eval_send(model, request_at(2, good_in, 1, outs, 0, 129), &err) && contains(text(err), "procedure index 129"),
          "a procedure index above 128 must fail validation: %s", text(err));
    IOSurfaceRef as = ANE_MSG(IOSurfaceRef (*)(id, SEL))(a, ane_apple.sel_registerName("ioSurface"));
    ane_apple.IOSurfaceLock(as, 0, NULL);
    CHECK(!eval_send(model, req, &err) && contains(text(err), "locked"), "a surface the CPU holds must fail: %s", text(err));
    ane_apple.IOSurfaceUnlock(as, 0, NULL);
    CHECK(ANE_MSG(BOOL (*)(id, SEL, unsigned, id *))(model, ane_apple.sel_registerName("unloadWithQoS:error:"), 21, &err), "unload");
    CHECK(stat(dir, &st) != 0, "unload must delete the model's folder %s", dir);
    CHECK(!eval_send(model, req, &err) && contains(text(err), "not loaded"), "evaluating after unload must fail: %s", text(err));
    printf("trap: %s\n", text(err));

    CFTypeRef rel[] = { k, opts, empty, mil, mil_str, z, blob, w_num_first, w_empty, w_apple };
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) ane_apple.CFRelease(rel[i]);
    ane_apple.objc_autoreleasePoolPop(pool);
    CHECK(fake.live_objects() == live, "fake objects leaked: %ld alive, %ld before", fake.live_objects(), live);
    emitted_free(&e);
    af_graph_free(gp.g);
}

/* ---------------------------------------------------------------- the framework's own files and errors */

/* Everything under path, counted (files and folders). */
static int tree_entries(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char child[1200];
        n += 1 + (snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child ? tree_entries(child) : 0);
    }
    if (d) closedir(d);
    return n;
}

/* Mismatch 1: a program with baked weights compiles and computes with them whichever
 * key of a weights entry the descriptor meets first (a two-key {offset, data} entry
 * gives it a CFNumber in one of the two orders). */
static void weights_run(void) {
    test_rng r = { 5 };
    test_fill_uniform(&r, lin_w, 16 * 32, -0.5, 0.5);
    test_fill_uniform(&r, lin_b, 16, -0.5, 0.5);
    ir_round_f16_array(lin_w, 16 * 32);
    ir_round_f16_array(lin_b, 16);
    graph_prog l = { .g = af_graph_new(), .nin = 1, .nout = 1 };
    l.in[0] = af_input(l.g, "x", AF_F16, AF_SHAPE(4, 32));
    af_tensor *w = af_const(l.g, "w", AF_SHAPE(16, 32), lin_w), *b = af_const(l.g, "b", AF_SHAPE(16), lin_b);
    l.out[0] = af_relu(af_add(af_matmul(l.in[0], w, 0, 1), b));
    emitted e;
    if (!emit(&l, &e)) return;
    CHECK(e.w != NULL, "the linear program must carry a weight file");
    ane_rt_program *p = NULL;
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p) == AF_OK, "baked weights: %s", af_error_message());
    if (p) {
        uint16_t *x = random_f16(&r, 128, -1, 1), y[64];
        double ref[64];
        const uint16_t *in[1] = { x };
        uint16_t *out[1] = { y };
        uint16_t *xs[1] = { x };
        CHECK(ane_rt_eval(p, in, out) == AF_OK, "%s", af_error_message());
        ref_linear(&l, xs, ref);
        double worst = 0;
        for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(f16(y[i]) - ref[i]));
        CHECK(worst < 4e-2, "the weights the descriptor got are not the program's: off by %g", worst);
        free(x);
    }
    ane_rt_release(p);
    emitted_free(&e);
    af_graph_free(l.g);
}

static void case_weights(void) {
    open_fake();
    for (long order = 1; order <= 2; order++) {
        fake.set("dict_order", order);
        weights_run();
    }
}

/* Mismatch 2: the files go where -localModelPath says (here not under
 * NSTemporaryDirectory()), and the folder, with the framework's own files in it, is
 * gone after the last release. */
static void case_model_path(void) {
    open_fake();
    char root[1024];
    snprintf(root, sizeof root, "%s/models", getenv("TMPDIR"));
    mkdir(root, 0700);
    fake.set_model_root(root);
    graph_prog gp = small_prog(3);
    emitted e;
    if (!emit(&gp, &e)) return;
    ane_rt_program *p = NULL;
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p) == AF_OK, "model folder elsewhere: %s", af_error_message());
    CHECK(tree_entries(root) >= 2, "the model's folder under -localModelPath holds model.mil and net.plist: %d entries",
          tree_entries(root));
    if (p) {
        uint16_t x[128], y[128];
        for (int i = 0; i < 128; i++) x[i] = 0x3c00; /* 1 */
        const uint16_t *in[1] = { x };
        uint16_t *out[1] = { y };
        CHECK(ane_rt_eval(p, in, out) == AF_OK && f16(y[7]) == 3, "%s", af_error_message());
    }
    ane_rt_release(p);
    CHECK(tree_entries(root) == 0, "the model's folder must be gone after the last release (%d entries left)", tree_entries(root));
    fake.set_model_root(NULL);
    emitted_free(&e);
    af_graph_free(gp.g);
}

/* Mismatches 2 and 5: a program the compiler refuses leaves no folder behind (the
 * framework saved net.plist into it before compiling), and the compiler's own message
 * (under NSUnderlyingError) reaches the caller. */
static void case_compile_failure(void) {
    open_fake();
    static const char bad[] = "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3500.14.1\"}})]\n{\n"
                              "    func main<ios18>(tensor<fp16, [1, 4, 1, 16]> x) {\n"
                              "        tensor<fp16, [1, 4, 1, 16]> y = no_such_op(x = x);\n"
                              "    } -> (y);\n}\n";
    ane_rt_ports ports = { .nin = 1, .nout = 1, .in_count = { 64 }, .out_count = { 64 } };
    uint8_t blob[64] = { 0 }; /* a weight file too, for the framework to save */
    for (long order = 1; order <= 2; order++) {
        fake.set("dict_order", order);
        ane_rt_program *p = NULL;
        CHECK(ane_rt_compile(bad, sizeof bad - 1, blob, sizeof blob, &ports, &p) != AF_OK && !p, "an unknown op must not compile");
        if (order == 1) {
            CHECK(contains(af_error_message(), "no_such_op"), "the compiler's error (under NSUnderlyingError) must come through: %s",
                  af_error_message());
            printf("compile error: %s\n", af_error_message());
        }
        CHECK(tree_entries(getenv("TMPDIR")) == 0, "order %ld: a failed compile left %d entries (the framework's own files among "
              "them) in %s", order, tree_entries(getenv("TMPDIR")), getenv("TMPDIR"));
    }
}

/* Mismatch 5: a program without inputs is refused before compiling (the framework's
 * request validation would refuse every evaluation). */
static void case_no_inputs(void) {
    open_fake();
    graph_prog c = { .g = af_graph_new(), .nin = 0, .nout = 1 };
    float one[64];
    for (int i = 0; i < 64; i++) one[i] = 1;
    c.out[0] = af_muls(af_const(c.g, "k", AF_SHAPE(1, 4, 1, 16), one), 2);
    emitted ec;
    if (emit(&c, &ec)) {
        long compiles = fake.compiles();
        ane_rt_program *p = NULL;
        CHECK(ane_rt_compile(ec.mil, ec.len, ec.w, ec.wn, &ec.ports, &p) == AF_ERR_INVALID && !p &&
                  contains(af_error_message(), "at least one input") && fake.compiles() == compiles,
              "a program without inputs must be refused before compiling: %s", af_error_message());
        ane_rt_release(p);
        emitted_free(&ec);
    }
    af_graph_free(c.g);
}

/* ---------------------------------------------------------------- layouts */

/* Mismatches 3 and 4: surfaces sized and filled from -modelAttributes, bound by symbol.
 * The broadcast program (inputs of two sizes, two outputs) and the built-in samples
 * equal ane-sim bit for bit whether the model publishes padded rows, a shuffled port
 * order, both, or no attributes at all (then declaration order, flat). */
static void case_layouts(void) {
    open_fake();
    /* the surface rule: at least 2048 bytes, sizes in 128-byte steps */
    ane_rt_layout lay;
    ane_rt_layout_flat(&lay, 0, 96);
    CHECK(lay.bytes == 2048 && lay.flat, "96 values take the 2048-byte minimum, got %zu", lay.bytes);
    ane_rt_layout_flat(&lay, 0, 1100);
    CHECK(lay.bytes == 2304, "2200 bytes round up to 2304 (a multiple of 128), got %zu", lay.bytes);
    static const struct { long attributes, padded, shuffled; } modes[] = { { 1, 1, 1 }, { 1, 1, 0 }, { 1, 0, 1 }, { 0, 0, 0 } };
    test_rng r = { 9 };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        fake.set("attributes", modes[m].attributes);
        fake.set("padded_rows", modes[m].padded);
        fake.set("shuffled_ports", modes[m].shuffled);
        printf("attributes %ld, padded rows %ld, shuffled ports %ld\n", modes[m].attributes, modes[m].padded, modes[m].shuffled);
        graph_prog a = { .g = af_graph_new(), .nin = 2, .nout = 2 };
        a.in[0] = af_input(a.g, "b_big", AF_F16, AF_SHAPE(4, 16));
        a.in[1] = af_input(a.g, "a_small", AF_F16, AF_SHAPE(16));
        a.out[0] = af_add(a.in[0], a.in[1]);
        a.out[1] = af_mul(a.in[0], a.in[0]);
        check_program("broadcast add, two outputs", &a, &r, ref_bcast, 1e-3);
        af_graph_free(a.g);
        for (int i = 0; mil_sample_names[i]; i++) {
            mil_sample s;
            CHECK(mil_sample_build(mil_sample_names[i], &s) == AF_OK, "%s", af_error_message());
            graph_prog sp = { .g = s.g, .nin = s.nin, .nout = s.nout };
            memcpy(sp.in, s.in, sizeof s.in);
            memcpy(sp.out, s.out, sizeof s.out);
            check_program(mil_sample_names[i], &sp, &r, NULL, 0);
            af_graph_free(s.g);
        }
    }
}

/* ---------------------------------------------------------------- net.plist programs */

/* The hand-written golden SDPA program (tests/golden/netplist/sdpa_unit.plist: q [C=2,
 * W=8], k and v [C=6, W=8], the mask [C=2, W=6], a constant scale) through the runtime's
 * net.plist path: compiled once (a second compile is a cache hit), evaluated, and
 * compared with softmax(q k^T * scale + mask) v in double. The fake refuses a net.plist
 * descriptor whose weights are not keyed by file name. */
static void case_netplist(void) {
    open_fake();
    size_t len = 0;
    char *xml = test_read_file(AF_SOURCE_DIR "/tests/golden/netplist/sdpa_unit.plist", &len);
    CHECK(xml != NULL, "the golden program is missing");
    if (!xml) return;
    float scale = 0.35355339f;
    uint16_t h;
    ir_f32_to_f16_array(&scale, &h, 1);
    uint8_t w1[2] = {(uint8_t)(h & 0xff), (uint8_t)(h >> 8)};
    ir_f16_to_f32_array(&h, &scale, 1);
    ane_rt_ports ports = {.nin = 4, .nout = 1, .in_count = {16, 48, 48, 12}, .out_count = {16}};
    ane_rt_program *p = NULL, *p2 = NULL;
    CHECK(ane_rt_compile_netplist(xml, len, NULL, 0, w1, 2, &ports, &p) == AF_OK, "compile: %s", af_error_message());
    int64_t before = ane_rt_compile_count(); /* (the first compile costs 2 where the first entry point fails: macOS 26) */
    CHECK(ane_rt_compile_netplist(xml, len, NULL, 0, w1, 2, &ports, &p2) == AF_OK && ane_rt_compile_count() == before,
          "the same program again is a cache hit");
    test_rng r = {11};
    float q[16], k[48], v[48], m[12], y[16];
    test_fill_uniform(&r, q, 16, -1, 1);
    test_fill_uniform(&r, k, 48, -1, 1);
    test_fill_uniform(&r, v, 48, -1, 1);
    test_fill_uniform(&r, m, 12, -2, 0);
    uint16_t q16[16], k16[48], v16[48], m16[12], y16[16];
    ir_f32_to_f16_array(q, q16, 16), ir_f32_to_f16_array(k, k16, 48), ir_f32_to_f16_array(v, v16, 48), ir_f32_to_f16_array(m, m16, 12);
    ir_f16_to_f32_array(q16, q, 16), ir_f16_to_f32_array(k16, k, 48), ir_f16_to_f32_array(v16, v, 48), ir_f16_to_f32_array(m16, m, 12);
    const uint16_t *ins[4] = {q16, k16, v16, m16};
    uint16_t *outs[1] = {y16};
    CHECK(p && ane_rt_eval(p, ins, outs) == AF_OK, "eval: %s", af_error_message());
    ir_f16_to_f32_array(y16, y, 16);
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        double s[6], z = 0, mx = -1e30;
        for (int j = 0; j < 6; j++) {
            s[j] = m[i * 6 + j];
            for (int d = 0; d < 8; d++) s[j] += (double)q[i * 8 + d] * k[j * 8 + d] * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j < 6; j++) z += (s[j] = exp(s[j] - mx));
        for (int e = 0; e < 8; e++) {
            double want = 0;
            for (int j = 0; j < 6; j++) want += s[j] / z * v[j * 8 + e];
            worst = fmax(worst, fabs(want - y[i * 8 + e]));
        }
    }
    CHECK(worst < 2e-3, "the SDPA program against double: worst error %g", worst);
    ane_rt_release(p);
    ane_rt_release(p2);

    /* a net.plist descriptor with MIL-style weight keys is refused */
    void *pool = ane_apple.objc_autoreleasePoolPush();
    CFDataRef text = ane_apple.CFDataCreate(NULL, (const UInt8 *)xml, (CFIndex)len);
    CFStringRef key = ane_apple.CFStringCreateWithCString(NULL, "@model_path/weights/weight.bin", kCFStringEncodingUTF8);
    CFStringRef k_off = ane_apple.CFStringCreateWithCString(NULL, "offset", kCFStringEncodingUTF8);
    CFStringRef k_data = ane_apple.CFStringCreateWithCString(NULL, "data", kCFStringEncodingUTF8);
    int64_t zero = 0;
    CFNumberRef z = ane_apple.CFNumberCreate(NULL, kCFNumberSInt64Type, &zero);
    CFDataRef blob = ane_apple.CFDataCreate(NULL, w1, 2);
    const void *ek[2] = {k_off, k_data}, *ev[2] = {z, blob};
    CFDictionaryRef entry = ane_apple.CFDictionaryCreate(NULL, ek, ev, 2, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                         ane_apple.kCFTypeDictionaryValueCallBacks);
    const void *wk[1] = {key}, *wv[1] = {entry};
    CFDictionaryRef weights = ane_apple.CFDictionaryCreate(NULL, wk, wv, 1, ane_apple.kCFTypeDictionaryKeyCallBacks,
                                                           ane_apple.kCFTypeDictionaryValueCallBacks);
    CHECK(cls_send("_ANEInMemoryModelDescriptor", "modelWithNetworkDescription:weights:optionsPlist:", (id)text, (id)weights,
                   NULL) == NULL && contains(fake.last_error(), "weights.0"),
          "net.plist weights keyed like MIL's must be refused: %s", fake.last_error());
    const void *rel[] = {text, key, k_off, k_data, z, blob, entry, weights};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) ane_apple.CFRelease(rel[i]);
    ane_apple.objc_autoreleasePoolPop(pool);
    free(xml);
}

/* ---------------------------------------------------------------- device */

static void case_device(void) {
    ane_rt_device d;
    CHECK(ane_rt_device_info(&d) == AF_OK && d.subtype[0] == 0, "without a framework there is no subtype");
    open_fake();
    static const struct { const char *sub; af_family_id fam; } cases[] = {
        { "h13", AF_FAMILY_A13 }, { "h14", AF_FAMILY_A14 }, { "h15", AF_FAMILY_A15 },
        { "h16", AF_FAMILY_A16 }, { "h17s", AF_FAMILY_A16 }, { "x1", AF_FAMILY_DEFAULT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake.set_subtype(cases[i].sub);
        CHECK(ane_rt_device_info(&d) == AF_OK && !strcmp(d.subtype, cases[i].sub) && d.family == cases[i].fam,
              "subtype %s: got '%s', family %d, want %d", cases[i].sub, d.subtype, (int)d.family, (int)cases[i].fam);
    }
}

/* ---------------------------------------------------------------- compile entry points */

static char logged[4096];
static void keep_log(af_log_level level, const char *msg, void *user) {
    (void)level; (void)user;
    size_t k = strlen(logged);
    snprintf(logged + k, sizeof logged - k, "%s\n", msg);
}

/* One small program compiled and run (relu(x) * k on ones = k); the fake's compiles it cost. */
static long compile_and_run(float k, const char *what) {
    graph_prog gp = small_prog(k);
    emitted e;
    long before = fake.compiles();
    ane_rt_program *p = NULL;
    if (!emit(&gp, &e)) return -1;
    CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p) == AF_OK && p, "%s: %s", what, af_error_message());
    if (p) {
        uint16_t x[128], y[128];
        for (int i = 0; i < 128; i++) x[i] = 0x3c00; /* 1 */
        const uint16_t *in[1] = { x };
        uint16_t *out[1] = { y };
        CHECK(ane_rt_eval(p, in, out) == AF_OK && f16(y[9]) == k, "%s: got %g, want %g (%s)", what, f16(y[9]), k, af_error_message());
    }
    ane_rt_release(p);
    emitted_free(&e);
    af_graph_free(gp.g);
    return fake.compiles() - before;
}

/* The fake as each macOS profile ($FAKE_ANE_MACOS, read by the fake): 14 has no in-memory
 * compile selector (the client entry point from the start), 15 both (in-memory), 26 an
 * in-memory compile that fails (one failure, then the client entry point, kept). Every
 * profile compiles and runs, and the log and ane_rt_compile_entry say which was used. */
static void case_entry(void) {
    const char *env = getenv("FAKE_ANE_MACOS");
    long os = env ? atol(env) : 15;
    static const char inmem[] = "-[_ANEInMemoryModel compileWithQoS:options:error:]",
                      client[] = "-[_ANEClient compileModel:options:qos:error:]";
    af_set_log(keep_log, NULL);
    open_fake();
    CHECK(!strcmp(ane_rt_compile_entry(), os <= 14 ? client : inmem), "macOS %ld: before compiling, the entry point is %s",
          os, ane_rt_compile_entry());
    if (os >= 26) { /* both refuse while the client's compile is broken too: both named, nothing kept */
        fake.set("client_compile", 0);
        graph_prog gp = small_prog(9);
        emitted e;
        ane_rt_program *p = NULL;
        if (emit(&gp, &e)) {
            CHECK(ane_rt_compile(e.mil, e.len, e.w, e.wn, &e.ports, &p) != AF_OK && !p, "both entry points fail: no program");
            CHECK(contains(af_error_message(), "compileModelAtURL: failed") && contains(af_error_message(), client) &&
                      contains(af_error_message(), "client_compile=0"),
                  "the error must give both entry points' failures: %s", af_error_message());
            emitted_free(&e);
        }
        af_graph_free(gp.g);
        fake.set("client_compile", 1);
        CHECK(!strcmp(ane_rt_compile_entry(), inmem), "a failure of both must not change the choice: %s", ane_rt_compile_entry());
        logged[0] = 0;
    }
    long first = compile_and_run(3, "the first program");
    CHECK(first == (os >= 26 ? 2 : 1), "macOS %ld: the first program cost %ld compiles in the fake", os, first);
    long second = compile_and_run(5, "the second program");
    CHECK(second == 1, "macOS %ld: the entry point that worked is kept: the second program cost %ld compiles", os, second);
    const char *want = os <= 15 && os > 14 ? inmem : client;
    CHECK(!strcmp(ane_rt_compile_entry(), want), "macOS %ld: compiled through %s, want %s", os, ane_rt_compile_entry(), want);
    if (os <= 14)
        CHECK(contains(logged, "has no -[_ANEInMemoryModel compileWithQoS:options:error:]; compiling through -[_ANEClient"),
              "the log must say the in-memory entry point is missing and which is used: %s", logged);
    else if (os >= 26)
        CHECK(contains(logged, "-[_ANEInMemoryModel compileWithQoS:options:error:] failed (") && contains(logged, "compileModelAtURL") &&
                  contains(logged, "compiled through -[_ANEClient compileModel:options:qos:error:] instead"),
              "the log must say the in-memory compile failed and the client one is used: %s", logged);
    else
        CHECK(logged[0] == 0, "the preferred entry point needs no log line: %s", logged);
    printf("macOS %ld: %s\n%s", os, ane_rt_compile_entry(), logged);
    af_set_log(NULL, NULL);
}

int main(int argc, char **argv) {
    static const struct { const char *name; void (*run)(void); } cases[] = {
        { "trampoline", case_trampoline }, { "missing", case_missing }, { "programs", case_programs },
        { "cache", case_cache },           { "alias", case_alias },     { "budget", case_budget },
        { "load_retry", case_load_retry }, { "traps", case_traps },     { "device", case_device },
        { "netplist", case_netplist },     { "weights", case_weights },
        { "model_path", case_model_path }, { "compile_failure", case_compile_failure }, { "no_inputs", case_no_inputs },
        { "layouts", case_layouts },       { "entry", case_entry },
    };
    int ran = 0;
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(argv[1], cases[i].name)) {
            cases[i].run();
            ran++;
        }
    CHECK(ran > 0, "usage: test_ane_runtime CASE (one case per process); unknown case %s", argc > 1 ? argv[1] : "(none)");
    return check_finish("ane_runtime");
}
