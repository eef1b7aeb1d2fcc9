/* Lifetimes (issue 9 part 5): objects freed or changed in an order the caller may
 * reasonably use must not be read afterwards. Each case checks the results against a
 * naive double reference, so under plain `make test` it still checks the values, and
 * under `make test-asan` a read of freed memory aborts the test.
 *   a. the graph freed before its model, then af_run (CPU fp32 and ane-sim);
 *   b. the net freed (af_net_free) right after af_trainer_new, then af_trainer_predict
 *      (which builds its evaluation program on first use) on every plan;
 *   c. a constant's value changed after compiling: fp32 and fp16 models both keep the
 *      value they were compiled with. */
#include "aneforge.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

enum { N = 4, K = 5, M = 3 };

static double dot_row(const float *a, const float *b, int k) {
    double s = 0;
    for (int i = 0; i < k; i++) s += (double)a[i] * b[i];
    return s;
}

/* ---------------------------------------------------------------- a. graph before model */

/* y = relu(x @ w^T + c) with w and c baked constants. */
static void graph_freed_first(af_target target) {
    const char *what = target == AF_TARGET_CPU ? "cpu" : "ane-sim";
    test_rng r = { 21 };
    float x[N * K], w[M * K], c[M], y[N * M];
    test_fill_uniform(&r, x, N * K, -1, 1);
    test_fill_uniform(&r, w, M * K, -1, 1);
    test_fill_uniform(&r, c, M, -0.5, 0.5);
    af_graph *g = af_graph_new();
    af_tensor *xi = af_input(g, "x", target == AF_TARGET_CPU ? AF_F32 : AF_F16, AF_SHAPE(N, K));
    af_tensor *wt = af_const(g, "w", AF_SHAPE(M, K), w);
    af_tensor *out = af_relu(af_add(af_matmul(xi, wt, 0, 1), af_const(g, "c", AF_SHAPE(M), c)));
    af_compile_opts o = { .target = target, .family = AF_FAMILY_A16, .threads = 1, .via_mil = -1 };
    af_model *m = af_compile(g, 1, &xi, 1, &out, &o);
    CHECK(m != NULL, "%s: compile: %s", what, af_error_message());
    af_graph_free(g); /* the caller is done with the graph; the model must not need it */
    if (!m) return;
    for (int run = 0; run < 2; run++) {
        af_buffer bi = AF_BUF_F32(x, N * K), bo = AF_BUF_F32(y, N * M);
        CHECK(af_run(m, &bi, &bo) == AF_OK, "%s: run after af_graph_free: %s", what, af_error_message());
        double tol = target == AF_TARGET_CPU ? 1e-5 : 1e-2; /* ane-sim computes in fp16 */
        for (int i = 0; i < N; i++)
            for (int j = 0; j < M; j++) {
                double want = dot_row(x + i * K, w + j * K, K) + c[j];
                CHECK_NEAR(y[i * M + j], want > 0 ? want : 0, tol, what);
            }
    }
    af_model_free(m);
}

/* ---------------------------------------------------------------- b. net before trainer */

enum { S = 6, H = 5, CLS = 3, B = 8, EB = 4, NPRED = 6 };

/* The built-in MLP: relu(x W1^T + b1) W2^T + b2, from the trainer's current weights. */
static void mlp_reference(af_trainer *t, const float *x, double *want) {
    float w1[H * S], b1[H], w2[CLS * H], b2[CLS];
    float *p[4] = { w1, b1, w2, b2 };
    for (int i = 0; i < 4; i++) CHECK(af_trainer_read_param(t, i, p[i]) == AF_OK, "read_param %d: %s", i, af_error_message());
    for (int n = 0; n < NPRED; n++) {
        double h[H];
        for (int j = 0; j < H; j++) {
            double z = dot_row(x + n * S, w1 + j * S, S) + b1[j];
            h[j] = z > 0 ? z : 0;
        }
        for (int k = 0; k < CLS; k++) {
            double z = b2[k];
            for (int j = 0; j < H; j++) z += h[j] * w2[k * H + j];
            want[n * CLS + k] = z;
        }
    }
}

static void net_freed_first(af_plan plan, af_target target) {
    const char *what = af_plan_name(plan);
    af_net net = af_net_mlp(AF_SHAPE(S), H, CLS, 5);
    CHECK(net.ctx != NULL, "af_net_mlp: %s", af_error_message());
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = B;
    o.eval_batch = EB; /* NPRED = 6 takes one full and one padded evaluation batch */
    o.unroll = 2;
    o.lr = 0.01f;
    o.schedule = AF_LR_CONSTANT;
    o.compile = (af_compile_opts){ .target = target, .family = AF_FAMILY_A16, .threads = 1, .via_mil = -1 };
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net); /* the trainer must keep what it needs from the net */
    CHECK(t != NULL, "%s: af_trainer_new: %s", what, af_error_message());
    if (!t) return;
    test_rng r = { 8 };
    int spc = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * (size_t)spc * B * S), *y = calloc((size_t)spc * B * CLS, sizeof(float));
    test_fill_uniform(&r, x, (long)spc * B * S, -1, 1);
    for (int i = 0; i < spc * B; i++) y[i * CLS + i % CLS] = 1;
    CHECK(af_trainer_step(t, x, y, NULL) == AF_OK, "%s: step after af_net_free: %s", what, af_error_message());
    float pred[NPRED * CLS];
    double want[NPRED * CLS];
    CHECK(af_trainer_predict(t, NPRED, x, pred) == AF_OK, "%s: predict after af_net_free: %s", what, af_error_message());
    mlp_reference(t, x, want);
    double tol = target == AF_TARGET_CPU ? 1e-5 : 2e-2;
    for (int i = 0; i < NPRED * CLS; i++) CHECK_NEAR(pred[i], want[i], tol, what);
    free(x);
    free(y);
    af_trainer_free(t);
}

/* ---------------------------------------------------------------- c. constants after compile */

/* y = x * c; c is changed after compiling. Both precisions must keep the compiled c. */
static void const_changed_after_compile(void) {
    float x[M] = { 1.0f, -2.0f, 0.5f }, c0[M] = { 0.1f, 3.0f, -1.7f }, y[M];
    af_graph *g = af_graph_new();
    af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(M));
    af_tensor *c = af_const(g, "c", AF_SHAPE(M), c0);
    af_tensor *out = af_mul(xi, c);
    af_precision prec[2] = { AF_PRECISION_FP32, AF_PRECISION_FP16 };
    af_model *m[2];
    for (int p = 0; p < 2; p++) {
        af_compile_opts o = { .precision = prec[p], .threads = 1 };
        m[p] = af_compile(g, 1, &xi, 1, &out, &o);
        CHECK(m[p] != NULL, "compile: %s", af_error_message());
    }
    float *cv = af_tensor_value(c);
    CHECK(cv != NULL, "af_tensor_value(const) is NULL");
    if (cv) for (int i = 0; i < M; i++) cv[i] = 100.0f;
    for (int p = 0; p < 2; p++) {
        if (!m[p]) continue;
        af_buffer bi = AF_BUF_F32(x, M), bo = AF_BUF_F32(y, M);
        CHECK(af_run(m[p], &bi, &bo) == AF_OK, "run: %s", af_error_message());
        for (int i = 0; i < M; i++) {
            double want = p ? (double)af_round_f16(af_round_f16(x[i]) * af_round_f16(c0[i])) : (double)x[i] * c0[i];
            CHECK_NEAR(y[i], want, p ? 0 : 1e-6, p ? "fp16 model keeps the compiled constant" : "fp32 model keeps the compiled constant");
        }
        af_model_free(m[p]);
    }
    /* A model compiled after the change sees the new value. */
    af_model *late = af_compile(g, 1, &xi, 1, &out, NULL);
    CHECK(late != NULL, "compile after the change: %s", af_error_message());
    if (late) {
        af_buffer bi = AF_BUF_F32(x, M), bo = AF_BUF_F32(y, M);
        CHECK(af_run(late, &bi, &bo) == AF_OK, "run: %s", af_error_message());
        for (int i = 0; i < M; i++) CHECK_NEAR(y[i], x[i] * 100.0, 1e-4, "a later compile takes the new value");
        af_model_free(late);
    }
    af_graph_free(g);
}

/* No argument runs every case; "graph", "net" or "const" runs one (to reproduce it). */
int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    af_ane_budget_set_limits(NULL, 100000, 0);
    if (!only || !strcmp(only, "graph")) {
        graph_freed_first(AF_TARGET_CPU);
        graph_freed_first(AF_TARGET_ANE_SIM);
    }
    if (!only || !strcmp(only, "net")) {
        for (int p = 0; p <= AF_PLAN_UNROLLED; p++) net_freed_first((af_plan)p, AF_TARGET_CPU);
        net_freed_first(AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM);
    }
    if (!only || !strcmp(only, "const")) const_changed_after_compile();
    return check_finish("lifetime");
}
