/* The CPU's fused softmax cross-entropy (softmax_xent and its gradient node, what the
 * CE loss value and the CE seed of af_backward and the trainer build on graphs targeted
 * at the CPU), against a naive double loop and against the chain of ordinary ops the same
 * loss builds on other graphs:
 *  - a CPU graph holds the native nodes and no softmax, an untargeted graph the chain;
 *  - loss and gradient of one-hot and soft targets, rows of 3001 classes (several of the
 *    kernel's sum blocks and a remainder), equal to the double reference and to the
 *    chain within fp32 rounding;
 *  - logits near 1e4 and near -1e4 (exp of them overflows or vanishes in fp32): finite
 *    and equal to the reference;
 *  - 1 and 2 threads give the same bits (rows are split, never a row's sums);
 *  - a trainer step of a custom-objective CE net on the CPU (the trainer's own seed):
 *    its loss and SGD update equal the double reference. */
#include "support/check.h"
#include "aneforge.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 7, V = 3001 };

/* loss and dL/dz of mean CE over rows, on a CPU-targeted graph (native) or an untargeted one. */
static void run_ce(bool native, int threads, const float *z, const float *y, float *loss, float *grad) {
    af_graph *g = af_graph_new();
    if (native) af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *p = af_parameter(g, "z", AF_SHAPE(N, V), z), *gr = NULL;
    af_loss *l = af_softmax_cross_entropy(p, af_const(g, "y", AF_SHAPE(N, V), y));
    af_tensor *v = af_loss_value(l);
    CHECK(af_backward(l, 1, &p, &gr, NULL) == AF_OK, "backward: %s", af_error_message());
    bool fused = v && v->src[0]->src[0]->op == IR_OP_SOFTMAX_XENT && gr && gr->op == IR_OP_SOFTMAX_XENT_GRAD;
    CHECK(fused == native, "native %d: the loss value and the seed are%s the softmax_xent nodes", native, native ? "" : " not");
    for (int i = 0; i < g->n; i++)
        if (native) CHECK(g->t[i]->op != IR_OP_SOFTMAX, "the CPU graph holds a softmax node");
    af_tensor *outs[2] = { v, gr };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
    af_model *m = af_compile(g, 1, &p, 2, outs, &o);
    af_buffer ib = AF_BUF_F32(z, N * V), ob[2] = { AF_BUF_F32(loss, 1), AF_BUF_F32(grad, N * V) };
    CHECK(m && af_run(m, &ib, ob) == AF_OK, "ce (native %d): %s", native, af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* The naive double loop: mean over rows of logsumexp(z) sum(y) - sum(y z), and the seed
 * (softmax(z) - y) / N. */
static double ref_ce(const float *z, const float *y, double *grad) {
    double total = 0;
    for (int i = 0; i < N; i++) {
        const float *zr = z + i * V, *yr = y + i * V;
        double m = -INFINITY, s = 0, ys = 0, yz = 0;
        for (int j = 0; j < V; j++) m = fmax(m, zr[j]);
        for (int j = 0; j < V; j++) s += exp(zr[j] - m), ys += yr[j], yz += (double)yr[j] * zr[j];
        total += (m + log(s)) * ys - yz;
        for (int j = 0; j < V; j++) grad[i * V + j] = (exp(zr[j] - m) / s - yr[j]) / N;
    }
    return total / N;
}

static void check_case(const char *what, const float *z, const float *y, bool chain_too) {
    static float g1[N * V], g2[N * V], gc[N * V];
    static double gr[N * V];
    float l1, l2, lc;
    double lr = ref_ce(z, y, gr);
    run_ce(true, 1, z, y, &l1, g1);
    run_ce(true, 2, z, y, &l2, g2);
    CHECK(l1 == l2 && !memcmp(g1, g2, sizeof g1), "%s: 1 and 2 threads differ", what);
    CHECK(isfinite(l1) && fabs(l1 - lr) <= 2e-6 * fabs(lr) + 1e-6, "%s: loss %.9g, reference %.9g", what, l1, lr);
    double worst = 0;
    for (int k = 0; k < N * V; k++) worst = fmax(worst, fabs(g1[k] - gr[k]));
    CHECK(worst <= 1e-7, "%s: gradient off the reference by %.3g", what, worst);
    if (!chain_too) return;
    run_ce(false, 1, z, y, &lc, gc);
    CHECK(fabs(l1 - lc) <= 2e-6 * fabs(lc), "%s: loss %.9g, the chain's %.9g", what, l1, lc);
    worst = 0;
    for (int k = 0; k < N * V; k++) worst = fmax(worst, fabs(g1[k] - gc[k]));
    CHECK(worst <= 1e-7, "%s: gradient off the chain's by %.3g", what, worst);
}

/* The net: logits = x + w, w a [1, C] parameter; its loss af_softmax_cross_entropy. */
enum { TB = 4, TC = 1300 };
static float w_init[TC];
static int t_params(void *ctx, af_graph *g, af_tensor **params, int max) {
    (void)ctx, (void)max;
    params[0] = af_parameter(g, "w", AF_SHAPE(1, TC), w_init);
    return 1;
}
static af_tensor *t_forward(void *ctx, af_tensor *x, af_tensor *const *w) { (void)ctx; return af_add(x, w[0]); }
static af_loss *t_loss(void *ctx, af_tensor *out, af_tensor *target) { (void)ctx; return af_softmax_cross_entropy(out, target); }

static void test_trainer_step(void) {
    static float x[TB * TC], y[TB * TC], w[TC];
    test_rng rng = { 5 };
    test_fill_uniform(&rng, x, TB * TC, -6, 6);
    test_fill_uniform(&rng, w_init, TC, -1, 1);
    for (int i = 0; i < TB; i++) y[i * TC + (i * 389 + 2) % TC] = 1.0f;
    af_net net = { .make_params = t_params, .forward = t_forward, .loss = t_loss, .sample = AF_SHAPE(TC), .out_dim = TC };
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM, o.optimizer = AF_OPT_SGD, o.lr = 0.5f, o.batch = TB, o.plan = AF_PLAN_HOST;
    o.compile.target = AF_TARGET_CPU;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "trainer: %s", af_error_message());
    if (!t) return;
    af_step_info info;
    CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step: %s", af_error_message());
    CHECK(af_trainer_read_param(t, 0, w) == AF_OK, "read w: %s", af_error_message());
    af_trainer_free(t);
    double loss = 0, dw[TC] = { 0 }, worst = 0;
    for (int i = 0; i < TB; i++) {
        double m = -INFINITY, s = 0, z[TC];
        for (int j = 0; j < TC; j++) z[j] = (double)x[i * TC + j] + w_init[j], m = fmax(m, z[j]);
        for (int j = 0; j < TC; j++) s += exp(z[j] - m);
        for (int j = 0; j < TC; j++) {
            loss += y[i * TC + j] ? (m + log(s) - z[j]) / TB : 0;
            dw[j] += (exp(z[j] - m) / s - y[i * TC + j]) / TB;
        }
    }
    CHECK(fabs(info.loss - loss) <= 2e-6 * loss, "trainer: loss %.9g, reference %.9g", info.loss, loss);
    for (int j = 0; j < TC; j++) worst = fmax(worst, fabs(w[j] - (w_init[j] - 0.5 * dw[j])));
    CHECK(worst <= 2e-7, "trainer: the SGD update is off the reference by %.3g", worst);
}

/* The shape rule names what is wrong. */
static void test_shapes(void) {
    af_graph *g = af_graph_new();
    af_tensor *z = af_input(g, "z", AF_F32, AF_SHAPE(3, 5)), *y = af_input(g, "y", AF_F32, AF_SHAPE(3, 4));
    CHECK(!ir_softmax_xent(z, y) && g->error && strstr(g->error, "logits and targets must have one shape"),
          "mismatched targets: %s", g->error ? g->error : "(no error)");
    af_graph_free(g);
    g = af_graph_new();
    z = af_input(g, "z", AF_F32, AF_SHAPE(3, 5));
    af_tensor *dy = af_input(g, "dy", AF_F32, AF_SHAPE(2, 1));
    CHECK(!ir_softmax_xent_grad(z, z, dy, false) && g->error && strstr(g->error, "dy must be [3, 1] or [1, 1]"),
          "bad dy: %s", g->error ? g->error : "(no error)");
    af_graph_free(g);
}

int main(void) {
    static float z[N * V], y[N * V];
    test_rng rng = { 13 };
    test_fill_uniform(&rng, z, N * V, -8, 8);
    for (int i = 0; i < N; i++) y[i * V + (i * 997 + 5) % V] = 1.0f;
    check_case("one-hot", z, y, true);
    for (int i = 0; i < N; i++) { /* soft targets summing to 1: label smoothing */
        for (int j = 0; j < V; j++) y[i * V + j] = 0.1f / V;
        y[i * V + (i * 31) % V] += 0.9f;
    }
    check_case("smoothed", z, y, true);
    memset(y, 0, sizeof y);
    for (int i = 0; i < N; i++) y[i * V + (i * 997 + 5) % V] = 1.0f;
    for (int k = 0; k < N * V; k++) z[k] += k < N * V / 2 ? 10000.0f : -10000.0f;
    check_case("logits near +-1e4", z, y, true);
    test_trainer_step();
    test_shapes();
    return check_finish("xent");
}
