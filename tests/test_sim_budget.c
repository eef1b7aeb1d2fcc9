/* ane-sim budgets and guards: the process-wide compile counter, program-cache hits for
 * identical content, LRU eviction at 128 loaded programs with reload, a long run staying
 * inside the ~119-compile budget, per-run accounting and the cost model, the A13 conv
 * loss-scale warning, the near-equal subtraction precision check, and the compile-time
 * term of the cost model with the A13 large-batch warning. */
#include "aneforge.h"
#include "sim/guards.h"
#include "ane/cost.h"
#include "model/model.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static af_model *sim(af_graph *g, af_tensor *x, af_tensor *y, af_family_id fam) {
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    return af_compile(g, 1, &x, 1, &y, &o);
}

/* A tiny program x + c, in its own graph; programs with different c differ in content. */
typedef struct { af_graph *g; af_tensor *x, *y; } prog;

static prog make_prog(float c, const char *name) {
    prog p = { .g = af_graph_new() };
    p.x = af_input(p.g, name, AF_F16, AF_SHAPE(2, 8));
    p.y = af_adds(af_relu(p.x), c);
    return p;
}

static af_ane_budget_info budget(void) {
    af_ane_budget_info b;
    af_ane_budget(NULL, &b);
    return b;
}

static void test_cache_hits(void) {
    af_ane_budget_reset(NULL);
    af_ane_budget_set_limits(NULL, 0, 0);
    af_ane_budget_info b = budget();
    CHECK(b.compiles == 0 && b.compile_limit == 119 && b.load_limit == 128 && b.loaded == 0, "fresh budget: %d/%d, %d/%d",
          b.compiles, b.compile_limit, b.loaded, b.load_limit);
    prog p1 = make_prog(1.0f, "x"), p2 = make_prog(1.0f, "other_name"), p3 = make_prog(2.0f, "x");
    af_model *m1 = sim(p1.g, p1.x, p1.y, AF_FAMILY_A13);
    af_model *m2 = sim(p2.g, p2.x, p2.y, AF_FAMILY_A13); /* same content, another graph and names */
    af_model *m3 = sim(p3.g, p3.x, p3.y, AF_FAMILY_A13); /* another constant */
    af_model *m4 = sim(p1.g, p1.x, p1.y, AF_FAMILY_A16); /* another family */
    CHECK(m1 && m2 && m3 && m4, "compiles failed: %s", af_error_message());
    b = budget();
    CHECK(b.compiles == 3 && b.cache_hits == 1 && b.cached == 3 && b.loaded == 3, "compiles %d hits %d cached %d loaded %d",
          b.compiles, b.cache_hits, b.cached, b.loaded);
    af_stats s1, s2;
    af_model_stats(m1, &s1);
    af_model_stats(m2, &s2);
    CHECK(s1.compiles == 1 && s2.compiles == 0, "per-model compiles: miss %lld, hit %lld", (long long)s1.compiles, (long long)s2.compiles);
    /* A constant that differs only below fp16 precision bakes to the same program. */
    prog p5 = make_prog(1.0f + 1e-5f, "x");
    af_model *m5 = sim(p5.g, p5.x, p5.y, AF_FAMILY_A13);
    CHECK(budget().compiles == 3, "a constant equal in fp16 should hit the cache");
    /* A freed model's program stays cached. */
    af_model_free(m1);
    m1 = sim(p1.g, p1.x, p1.y, AF_FAMILY_A13);
    CHECK(budget().compiles == 3, "recompiling after free should hit the cache");
    /* CPU compiles never count. */
    af_model *c = af_compile(p3.g, 1, &p3.x, 1, &p3.y, NULL);
    CHECK(c && budget().compiles == 3, "cpu compiles count against the engine budget");
    af_model_free(c);
    /* A restart forgets the cache; a live model re-registers on its next run without a compile. */
    af_ane_budget_reset(NULL);
    float x[16] = { 0 }, y[16];
    af_buffer ib = AF_BUF_F32(x, 16), ob = AF_BUF_F32(y, 16);
    CHECK(af_run(m3, &ib, &ob) == AF_OK && y[0] == 2.0f, "a model compiled before the reset must still run");
    b = budget();
    CHECK(b.compiles == 0 && b.cached == 1 && b.loaded == 1, "after reset and one run: compiles %d cached %d loaded %d", b.compiles,
          b.cached, b.loaded);
    af_model_free(m1); af_model_free(m2); af_model_free(m3); af_model_free(m4); af_model_free(m5);
    af_graph_free(p1.g); af_graph_free(p2.g); af_graph_free(p3.g); af_graph_free(p5.g);
}

static void test_lru_eviction(void) {
    enum { N = 130 };
    af_ane_budget_reset(NULL);
    af_ane_budget_set_limits(NULL, 1000, 0); /* past 119 compiles: this checks the load limit alone */
    prog p[N];
    af_model *m[N];
    for (int i = 0; i < N; i++) {
        p[i] = make_prog((float)i, "x");
        m[i] = sim(p[i].g, p[i].x, p[i].y, AF_FAMILY_A16);
        CHECK(m[i] != NULL, "compile %d failed: %s", i, af_error_message());
    }
    af_ane_budget_info b = budget();
    CHECK(b.compiles == N && b.loaded == 128 && b.evictions == 2 && b.loads == N, "after %d programs: loaded %d evictions %d loads %d",
          N, b.loaded, b.evictions, b.loads);
    /* Program 0 was evicted: running it reloads it (evicting the least recently used, program 2). */
    float x[16], y[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    af_buffer ib = AF_BUF_F32(x, 16), ob = AF_BUF_F32(y, 16);
    CHECK(m[0] && af_run(m[0], &ib, &ob) == AF_OK && y[3] == 3.0f, "the evicted program ran wrong: %g (%s)", y[3], af_error_message());
    b = budget();
    CHECK(b.loaded == 128 && b.evictions == 3 && b.loads == N + 1 && b.compiles == N, "reload: loaded %d evictions %d loads %d compiles %d",
          b.loaded, b.evictions, b.loads, b.compiles);
    /* A loaded program runs without a reload. */
    CHECK(af_run(m[N - 1], &ib, &ob) == AF_OK && budget().loads == N + 1 && y[3] == 3.0f + (float)(N - 1), "a loaded program reloaded");
    for (int i = 0; i < N; i++) { af_model_free(m[i]); af_graph_free(p[i].g); }
    af_ane_budget_set_limits(NULL, 0, 0);
}

static void test_compile_budget(void) {
    af_ane_budget_reset(NULL);
    af_ane_budget_set_limits(NULL, 0, 0);
    enum { N = 119 };
    prog p[N + 1];
    bool ok = true;
    for (int i = 0; i <= N; i++) p[i] = make_prog((float)i, "x");
    for (int i = 0; i < N; i++) {
        af_model *m = sim(p[i].g, p[i].x, p[i].y, AF_FAMILY_A13);
        ok &= m != NULL;
        af_model_free(m);
    }
    CHECK(ok && budget().compiles == N, "119 distinct programs should compile: %s", af_error_message());
    af_model *m = sim(p[N].g, p[N].x, p[N].y, AF_FAMILY_A13);
    CHECK(!m && strstr(af_error_message(), "compile budget") && strstr(af_error_message(), "Remedy"),
          "the 120th distinct compile must fail naming the budget: %s", af_error_message());
    af_model_free(m);
    m = sim(p[7].g, p[7].x, p[7].y, AF_FAMILY_A13);
    CHECK(m != NULL, "a cached program still compiles after the budget is spent: %s", af_error_message());
    af_model_free(m);
    af_ane_budget_reset(NULL); /* a process restart */
    m = sim(p[N].g, p[N].x, p[N].y, AF_FAMILY_A13);
    CHECK(m && budget().compiles == 1, "after a reset the budget is fresh: %s", af_error_message());
    af_model_free(m);
    for (int i = 0; i <= N; i++) af_graph_free(p[i].g);
}

/* 5,000 runs of one model and 500 recompiles of the same program: one compile. */
static void test_long_run_and_accounting(void) {
    af_ane_budget_reset(NULL);
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 16));
    float wv[16 * 8];
    for (int i = 0; i < 16 * 8; i++) wv[i] = 0.01f * (float)(i % 7);
    af_tensor *y = af_matmul_w(x, af_const(g, "wt", AF_SHAPE(8, 16), wv)); /* [4, 8]: 2*4*8*16 flops */
    af_model *m = sim(g, x, y, AF_FAMILY_A13);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    float xv[64], yv[32];
    for (int i = 0; i < 64; i++) xv[i] = 0.1f * (float)(i % 5);
    af_buffer ib = AF_BUF_F32(xv, 64), ob = AF_BUF_F32(yv, 32);
    af_model_stats_reset(m);
    bool ok = true;
    for (int r = 0; r < 5000; r++) ok &= af_run(m, &ib, &ob) == AF_OK;
    CHECK(ok, "5000 runs failed: %s", af_error_message());
    for (int r = 0; r < 500; r++) {
        af_model *again = sim(g, x, y, AF_FAMILY_A13);
        ok &= again && af_run(again, &ib, &ob) == AF_OK;
        af_model_free(again);
    }
    af_ane_budget_info b = budget();
    CHECK(ok && b.compiles == 1 && b.compiles <= b.compile_limit && b.cache_hits == 500 && b.loaded == 1,
          "long run: compiles %d hits %d loaded %d", b.compiles, b.cache_hits, b.loaded);
    af_stats s;
    af_model_stats(m, &s);
    CHECK(s.dispatches == 5000 && s.bytes_in == 5000LL * 64 * 2 && s.bytes_out == 5000LL * 32 * 2 &&
              s.engine_flops == 5000LL * 2 * 4 * 8 * 16 && s.host_flops == 0,
          "stats: %lld dispatches, %lld in, %lld out, %lld flops", (long long)s.dispatches, (long long)s.bytes_in,
          (long long)s.bytes_out, (long long)s.engine_flops);
    af_model_free(m);
    /* The CPU target does the same work on the host. */
    af_model *c = af_compile(g, 1, &x, 1, &y, NULL);
    CHECK(c && af_run(c, &ib, &ob) == AF_OK, "cpu run: %s", af_error_message());
    af_model_stats(c, &s);
    CHECK(s.dispatches == 0 && s.host_flops == 2 * 4 * 8 * 16, "cpu stats: %lld dispatches, %lld host flops", (long long)s.dispatches,
          (long long)s.host_flops);
    af_model_free(c);
    af_graph_free(g);

    /* The cost model: M1 3.25 TFLOP/s, 9 GB/s, 220 us; M5 8.9 TFLOP/s, 57 GB/s, 110 us. */
    af_stats w = { .dispatches = 2, .engine_flops = 6500000, .bytes_in = 6000, .bytes_out = 3000 };
    CHECK_NEAR(af_ane_estimate_us(AF_FAMILY_A13, &w), 2 * 220.0 + 2.0 + 1.0, 1e-9, "A13 estimate");
    CHECK_NEAR(af_ane_estimate_us(AF_FAMILY_A16, &w), 2 * 110.0 + 6.5 / 8.9 + 9.0 / 57.0, 1e-9, "A16 estimate");
    double a14 = af_ane_estimate_us(AF_FAMILY_A14, &w), a15 = af_ane_estimate_us(AF_FAMILY_A15, &w);
    CHECK(a14 < af_ane_estimate_us(AF_FAMILY_A13, &w) && a15 < a14 && af_ane_estimate_us(AF_FAMILY_A16, &w) < a15,
          "interpolated families should sit between M1 and M5");
    CHECK(af_ane_estimate_us(AF_FAMILY_A13, NULL) == 0.0, "NULL stats");
}

/* ------------------------------------------------------------------ guards */

static void test_conv_guard(void) {
    af_graph *g = af_graph_new();
    af_tensor *k3 = af_conv_param(g, "k3", 4, 2, 3, 3, NULL), *k1 = af_conv_param(g, "k1", 4, 2, 1, 1, NULL);
    af_tensor *lin = af_parameter(g, "lin", AF_SHAPE(4, 4), NULL);
    af_tensor *both[2] = { lin, k3 }, *pointwise[2] = { lin, k1 };
    CHECK(ane_guard_warnings() == 0, "no warning yet");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A16, 2, both, 65536) == 0, "A16 has a clean route: no warning");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A13, 2, both, 128) == 0, "loss_scale 128 is within the A13 ceiling");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A13, 2, pointwise, 1024) == 0, "a 1x1 conv has no width-offset slice");
    CHECK(ane_guard_warnings() == 0, "nothing printed so far");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A13, 2, both, 1024) == 1, "A13, 3x3 conv, loss_scale 1024 must warn");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A13, 2, both, 512) == 1, "the warning still applies");
    CHECK(ane_guard_warnings() == 1, "the warning is printed once per process, not %d times", ane_guard_warnings());
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A14, 2, both, 1024) == 1, "A14 shares the crop-DMA saturation");
    CHECK(ane_guard_conv_loss_scale(AF_FAMILY_A13, 0, NULL, 1024) == 0, "no params");
    af_graph_free(g);
}

/* ------------------------------------------------------------------ compile time */

/* The forward of the seed's MNIST CNN layout over a batch of N 28x28 images: conv 3x3
 * (1 -> 16, pad 1), relu, avg_pool 2, conv 3x3 (16 -> 32, pad 1). Its largest tensor
 * is conv2's patch concat [N, 16, 9, 14*14] (conv1's output is [N, 16, 784]). */
static af_model *conv_program(af_graph *g, int64_t n, af_family_id fam, int64_t *largest) {
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(n, 1, 28, 28));
    af_tensor *w1 = af_conv_param(g, "w1", 16, 1, 3, 3, NULL), *w2 = af_conv_param(g, "w2", 32, 16, 3, 3, NULL);
    int two[2] = { 2, 2 }, zero[2] = { 0, 0 };
    af_tensor *h = af_avg_pool(af_relu(af_conv2d(x, w1, 1, 1)), two, two, zero);
    af_tensor *y = af_conv2d(h, w2, 1, 1), *in[3] = { x, w1, w2 };
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    af_model *m = af_compile(g, 3, in, 1, &y, &o);
    CHECK(m != NULL, "compile N = %lld: %s", (long long)n, af_error_message());
    *largest = n * 16 * 9 * 196;
    return m;
}

/* Seed 000: compile time grows with the batch; on A13 a full batch near 1000 over
 * 28x28 takes minutes or hangs, M5 compiles it fine, mini-batches (N <= 128) are fine. */
static void test_compile_time(void) {
    const af_family_id fams[4] = { AF_FAMILY_A13, AF_FAMILY_A14, AF_FAMILY_A15, AF_FAMILY_A16 };
    double est[4][2];
    const int64_t batches[2] = { 128, 1000 };
    for (int b = 0; b < 2; b++)
        for (int f = 0; f < 4; f++) {
            af_graph *g = af_graph_new();
            int64_t want;
            int64_t flags = ane_compile_time_flags();
            af_model *m = conv_program(g, batches[b], fams[f], &want);
            if (m) {
                int64_t got = ane_program_largest_tensor(&m->plan, NULL);
                CHECK(got == want, "largest tensor at N = %lld: %lld, want %lld", (long long)batches[b], (long long)got, (long long)want);
                est[f][b] = ane_compile_estimate_us(fams[f], &m->plan);
                double mel = (double)want / 1e6, k = ane_calibration_of(fams[f])->compile_k_us;
                CHECK_NEAR(est[f][b], 38000.0 + k * mel * mel, 1e-6 * est[f][b], "compile estimate: 38 ms + k * (Melements)^2");
                bool warn = fams[f] == AF_FAMILY_A13 && batches[b] == 1000;
                CHECK(ane_compile_time_flags() == flags + warn, "%s, N = %lld: the compile-time guard should %s", af_family_name_of(fams[f]),
                      (long long)batches[b], warn ? "warn" : "stay silent");
                /* Recompiling the same program hits the cache: no compile, no new warning. */
                af_model *again = conv_program(g, batches[b], fams[f], &want);
                CHECK(ane_compile_time_flags() == flags + warn, "a cache hit is not a compile");
                af_model_free(again);
            }
            af_model_free(m);
            af_graph_free(g);
        }
    CHECK(est[0][1] >= 60e6, "A13, N = 1000: %.1f s should be minutes", est[0][1] / 1e6);
    CHECK(est[3][1] < 5e6, "A16, N = 1000: %.1f s should be fine", est[3][1] / 1e6);
    CHECK(est[0][0] < 5e6, "A13, N = 128: %.1f s should be fine", est[0][0] / 1e6);
    for (int f = 0; f < 4; f++) CHECK(est[f][1] > est[f][0] * 20, "%s: compile time grows with the batch", af_family_name_of(fams[f]));
    CHECK(est[0][1] > est[1][1] && est[1][1] > est[2][1] && est[2][1] > est[3][1], "later families compile faster");
}

static void test_precision_check(void) {
    af_graph *g = af_graph_new();
    af_tensor *a = af_input(g, "a", AF_F16, AF_SHAPE(64)), *b = af_input(g, "b", AF_F16, AF_SHAPE(64));
    af_tensor *user = af_sub(a, b), *self = af_sub(a, a);
    g->vouching++; /* as the library's training kernels build theirs */
    af_tensor *vouched = af_sub(a, b);
    g->vouching--;
    af_tensor *in[2] = { a, b }, *out[3] = { user, self, vouched };
    float av[64], bv[64], far[64], y[3][64];
    for (int i = 0; i < 64; i++) {
        av[i] = 1.0f + (float)i / 64.0f;
        bv[i] = av[i] + 1.0f / 512.0f; /* a couple of fp16 ulps apart */
        far[i] = -av[i];
    }
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A16, .threads = 1 };
    af_model *m = af_compile(g, 2, in, 3, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    af_buffer ob[3] = { AF_BUF_F32(y[0], 64), AF_BUF_F32(y[1], 64), AF_BUF_F32(y[2], 64) };
    int64_t before = af_ane_precision_flags();
    af_buffer ib_far[2] = { AF_BUF_F32(av, 64), AF_BUF_F32(far, 64) };
    CHECK(af_run(m, ib_far, ob) == AF_OK && af_ane_precision_flags() == before, "well-separated values were flagged");
    af_buffer ib[2] = { AF_BUF_F32(av, 64), AF_BUF_F32(bv, 64) };
    CHECK(af_run(m, ib, ob) == AF_OK, "run: %s", af_error_message());
    CHECK(af_ane_precision_flags() == before + 1, "the user's near-equal sub should be flagged once (and neither t - t nor the vouched sub): %lld",
          (long long)(af_ane_precision_flags() - before));
    CHECK(af_run(m, ib, ob) == AF_OK && af_ane_precision_flags() == before + 1, "a node is reported once");
    af_model_free(m);
    /* The CPU target does not run the check. */
    af_model *c = af_compile(g, 2, in, 3, out, NULL);
    CHECK(c && af_run(c, ib, ob) == AF_OK && af_ane_precision_flags() == before + 1, "the cpu target ran the precision check");
    af_model_free(c);
    af_graph_free(g);
}

/* Flags one fresh near-equal subtraction raises on ane-sim with the check switched to sw. */
static int64_t flags_with(int sw) {
    af_graph *g = af_graph_new();
    af_tensor *a = af_input(g, "a", AF_F16, AF_SHAPE(16)), *b = af_input(g, "b", AF_F16, AF_SHAPE(16));
    af_tensor *in[2] = { a, b }, *out[1] = { af_sub(a, b) };
    float av[16], bv[16], y[16];
    for (int i = 0; i < 16; i++) av[i] = 1.0f + (float)i / 16.0f, bv[i] = av[i] + 1.0f / 512.0f;
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A16, .threads = 1, .precision_check = sw };
    af_model *m = af_compile(g, 2, in, 1, out, &o);
    int64_t before = af_ane_precision_flags();
    af_buffer ib[2] = { AF_BUF_F32(av, 16), AF_BUF_F32(bv, 16) }, ob[1] = { AF_BUF_F32(y, 16) };
    CHECK(m && af_run(m, ib, ob) == AF_OK, "switch %d: %s", sw, af_error_message());
    af_model_free(m);
    af_graph_free(g);
    return af_ane_precision_flags() - before;
}

/* precision_check is a positive switch whose zero is the default: AF_DEFAULT and AF_ON
 * check, AF_OFF does not. */
static void test_precision_switch(void) {
    CHECK(flags_with(AF_DEFAULT) == 1, "a zeroed precision_check must keep the check on");
    CHECK(flags_with(AF_ON) == 1, "AF_ON must check");
    CHECK(flags_with(AF_OFF) == 0, "AF_OFF must turn the check off");
}

/* Engines are separate budgets: a compile on one is a miss on another, spending one's
 * budget leaves the other's, and a model keeps its engine alive past af_sim_engine_free. */
static void test_engines(void) {
    af_sim_engine *a = af_sim_engine_new(), *b = af_sim_engine_new();
    CHECK(a && b, "af_sim_engine_new: %s", af_error_message());
    if (!a || !b) { af_sim_engine_free(a); af_sim_engine_free(b); return; }
    af_ane_budget_set_limits(a, 1, 0);
    af_ane_budget_info before, ia, ib, after;
    af_ane_budget(NULL, &before);
    prog p = make_prog(3.0f, "x"), q = make_prog(4.0f, "x");
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A13, .threads = 1, .sim_engine = a };
    af_model *m1 = af_compile(p.g, 1, &p.x, 1, &p.y, &o);
    af_model *m2 = af_compile(q.g, 1, &q.x, 1, &q.y, &o); /* a second program: over a's budget of 1 */
    CHECK(m1 && !m2 && strstr(af_error_message(), "compile budget"), "engine a allows one compile: %s", af_error_message());
    o.sim_engine = b;
    af_model *m3 = af_compile(p.g, 1, &p.x, 1, &p.y, &o), *m4 = af_compile(q.g, 1, &q.x, 1, &q.y, &o);
    CHECK(m3 && m4, "engine b has its own budget: %s", af_error_message());
    af_ane_budget(a, &ia);
    af_ane_budget(b, &ib);
    af_ane_budget(NULL, &after);
    CHECK(ia.compiles == 1 && ib.compiles == 2 && ib.cache_hits == 0, "a: %d compiles, b: %d compiles %d hits", ia.compiles,
          ib.compiles, ib.cache_hits);
    CHECK(after.compiles == before.compiles && after.cached == before.cached, "the default engine is untouched");
    af_sim_engine_free(a); /* m1 still holds it */
    float x[16] = { -1, 2 }, y[16];
    af_buffer bi = AF_BUF_F32(x, 16), bo = AF_BUF_F32(y, 16);
    CHECK(m1 && af_run(m1, &bi, &bo) == AF_OK && y[0] == 3.0f && y[1] == 5.0f, "a model outlives its freed engine: %s",
          af_error_message());
    af_model_free(m1); /* the last hold on a: freed here (ASan checks) */
    af_model_free(m3);
    af_model_free(m4);
    af_sim_engine_free(b);
    af_graph_free(p.g);
    af_graph_free(q.g);
}

int main(void) {
    test_engines();
    test_cache_hits();
    test_lru_eviction();
    test_compile_budget();
    test_long_run_and_accounting();
    test_conv_guard();
    test_precision_check();
    test_precision_switch();
    test_compile_time(); /* last: its compiles would count against the budget tests */
    return check_finish("sim_budget");
}
