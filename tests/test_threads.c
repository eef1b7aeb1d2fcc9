/* What include/aneforge.h promises about threads, exercised from several threads at once
 * (run it under ThreadSanitizer with `make test-tsan`):
 *   - models compiled from one graph, on every CPU and ane-sim configuration, by
 *     several threads at once, each giving the single-threaded result bit for bit;
 *   - one model run by several threads at once (runs are serialized), every result right;
 *   - one simulated engine shared by threads compiling the same program: one compile,
 *     the rest cache hits;
 *   - the log function called from several threads. */
#include "aneforge.h"
#include "support/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

enum { B = 16, D = 24, H = 20, C = 6, THREADS = 4, RUNS = 8 };

static af_graph *g;
static af_tensor *in[3], *out;
static float x[B * D], w1[H * D], w2[C * H], want[4][B * C];

static const af_compile_opts configs[4] = {
    { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 },
    { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 2 },
    { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A13, .threads = 1 },
    { .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A16, .threads = 1, .via_mil = 1 },
};

static void build(void) {
    test_rng r = { 11 };
    for (int i = 0; i < B * D; i++) x[i] = (float)(2 * test_uniform(&r) - 1);
    for (int i = 0; i < H * D; i++) w1[i] = (float)(test_uniform(&r) - 0.5) * 0.4f;
    for (int i = 0; i < C * H; i++) w2[i] = (float)(test_uniform(&r) - 0.5) * 0.4f;
    g = af_graph_new();
    in[0] = af_input(g, "x", AF_F16, AF_SHAPE(B, D));
    in[1] = af_input(g, "w1", AF_F16, AF_SHAPE(H, D));
    in[2] = af_input(g, "w2", AF_F16, AF_SHAPE(C, H));
    out = af_softmax(af_matmul(af_relu(af_matmul(in[0], in[1], 0, 1)), in[2], 0, 1), -1);
}

static af_status run_once(af_model *m, float *y) {
    af_buffer bi[3] = { AF_BUF_F32(x, B * D), AF_BUF_F32(w1, H * D), AF_BUF_F32(w2, C * H) }, bo = AF_BUF_F32(y, B * C);
    return af_run(m, bi, &bo);
}

static atomic_int failures;

/* Thread k compiles configuration k % 4 from the shared graph and runs it RUNS times. */
static void *compile_and_run(void *arg) {
    int k = (int)(intptr_t)arg, c = k % 4;
    af_model *m = af_compile(g, 3, in, 1, &out, &configs[c]);
    float y[B * C];
    if (!m) { atomic_fetch_add(&failures, 1); return NULL; }
    for (int r = 0; r < RUNS; r++)
        if (run_once(m, y) != AF_OK || memcmp(y, want[c], sizeof y)) atomic_fetch_add(&failures, 1);
    af_model_free(m);
    return NULL;
}

static af_model *shared;

static void *run_shared(void *arg) {
    (void)arg;
    float y[B * C];
    for (int r = 0; r < RUNS; r++)
        if (run_once(shared, y) != AF_OK || memcmp(y, want[0], sizeof y)) atomic_fetch_add(&failures, 1);
    return NULL;
}

static af_sim_engine *engine;
static atomic_int compiled_here;

static void *compile_on_engine(void *arg) {
    (void)arg;
    af_compile_opts o = configs[2];
    o.sim_engine = engine;
    af_model *m = af_compile(g, 3, in, 1, &out, &o);
    af_stats s;
    af_model_stats(m, &s);
    if (!m) atomic_fetch_add(&failures, 1);
    atomic_fetch_add(&compiled_here, (int)s.compiles);
    af_model_free(m);
    return NULL;
}

static atomic_int logged;
static void count_log(af_log_level level, const char *message, void *user) {
    (void)level, (void)message, (void)user;
    atomic_fetch_add(&logged, 1);
}

/* Near-equal subtractions, one graph per thread: each compile flags its own node. */
static void *log_from_thread(void *arg) {
    (void)arg;
    af_graph *lg = af_graph_new();
    af_tensor *a = af_input(lg, "a", AF_F16, AF_SHAPE(64)), *b = af_input(lg, "b", AF_F16, AF_SHAPE(64));
    af_tensor *d = af_sub(a, b), *ab[2] = { a, b };
    af_compile_opts o = configs[2];
    af_model *m = af_compile(lg, 2, ab, 1, &d, &o);
    float va[64], vb[64], vd[64];
    for (int i = 0; i < 64; i++) va[i] = 1000.0f + (float)i, vb[i] = va[i] + 0.5f;
    af_buffer bi[2] = { AF_BUF_F32(va, 64), AF_BUF_F32(vb, 64) }, bo = AF_BUF_F32(vd, 64);
    if (!m || af_run(m, bi, &bo) != AF_OK) atomic_fetch_add(&failures, 1);
    af_model_free(m);
    af_graph_free(lg);
    return NULL;
}

static void spawn(void *(*fn)(void *), int n) {
    pthread_t t[THREADS * 2];
    for (int k = 0; k < n; k++) pthread_create(&t[k], NULL, fn, (void *)(intptr_t)k);
    for (int k = 0; k < n; k++) pthread_join(t[k], NULL);
}

int main(void) {
    build();
    for (int c = 0; c < 4; c++) { /* the single-threaded answers */
        af_model *m = af_compile(g, 3, in, 1, &out, &configs[c]);
        CHECK(m && run_once(m, want[c]) == AF_OK, "config %d: %s", c, af_error_message());
        af_model_free(m);
    }
    double sum = 0;
    for (int j = 0; j < C; j++) sum += want[0][j];
    CHECK(sum > 0.999 && sum < 1.001, "a softmax row sums to 1: %g", sum);

    spawn(compile_and_run, 2 * THREADS);
    CHECK(atomic_load(&failures) == 0, "models compiled from one graph by %d threads: %d wrong runs", 2 * THREADS,
          atomic_load(&failures));

    atomic_store(&failures, 0);
    shared = af_compile(g, 3, in, 1, &out, &configs[0]);
    CHECK(shared != NULL, "compile: %s", af_error_message());
    if (shared) spawn(run_shared, THREADS);
    af_stats s;
    af_model_stats(shared, &s);
    CHECK(atomic_load(&failures) == 0, "one model run by %d threads: %d wrong runs", THREADS, atomic_load(&failures));
    CHECK(s.host_flops > 0, "the shared model counted its runs");
    af_model_free(shared);

    atomic_store(&failures, 0);
    engine = af_sim_engine_new();
    spawn(compile_on_engine, THREADS);
    af_ane_budget_info bi;
    af_ane_budget(engine, &bi);
    CHECK(atomic_load(&failures) == 0 && bi.compiles == 1 && bi.cache_hits == THREADS - 1 && atomic_load(&compiled_here) == 1,
          "one engine, %d threads, one program: %d compiles, %d hits", THREADS, bi.compiles, bi.cache_hits);
    af_sim_engine_free(engine);

    af_set_log(count_log, NULL);
    spawn(log_from_thread, THREADS);
    af_set_log(NULL, NULL);
    CHECK(atomic_load(&logged) == THREADS, "each thread's flagged subtraction was logged once: %d", atomic_load(&logged));

    af_graph_free(g);
    return check_finish("threads");
}
