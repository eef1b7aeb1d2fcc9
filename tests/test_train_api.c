/* Trainer pieces from seed 000 (issue 9, parts 6 and 7):
 *   - af_adam_step: two chained steps built in one graph (as an unrolled update would
 *     be) against a naive double-precision Adam, in fp32, in CPU fp16 and on ane-sim,
 *     with gradients up to 1000 (where fp16 v = g^2 would overflow); shapes kept, conv
 *     facts carried, bad arguments refused;
 *   - a custom loss (AF_OBJ_CUSTOM): a weighted L1 built from ops, one SGD step on every
 *     plan against the hand-derived update, at loss scales 1 and 128, its value as the
 *     step's loss; and a weighted MSE trained by Adam to its optimum;
 *   - the unrolled plan's shuttled state (seed 000's resident=False) trains bit-identically
 *     to the resident one (fp32, fp16, ane-sim; with a skipped block), feeding the state
 *     in and reading it back (bytes), and checkpoints move between the two;
 *   - where loss and accuracy come from: host and device plans report fp32 figures
 *     computed from the logits (a regression whose squared error overflows fp16 still
 *     reports the right, finite loss), resident plans the in-graph ones. */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "support/check.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ af_adam_step */

enum { AR = 3, AC = 5, AN = AR * AC };

static void naive_adam(double *w, double *m, double *v, const double *g, int n, double lr, double b1, double b2, double eps,
                       double decay, int t) {
    double lr_t = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    for (int i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] = decay * w[i] - lr_t * m[i] / (sqrt(v[i]) + eps);
    }
}

static void adam_step_vs_double(const char *what, af_target target, af_precision prec, double gscale, double tol) {
    af_graph *g = af_graph_new();
    af_dtype dt = target == AF_TARGET_CPU ? AF_F32 : AF_F16;
    const af_adam_opts o = { 0.9f, 0.99f, 1e-6f };
    /* Two params: a [3,5] matrix and a [5] vector (its shape must survive the [1]-shaped lr). */
    af_shape shp[2] = { AF_SHAPE(AR, AC), AF_SHAPE(AC) };
    af_tensor *w[2], *m[2], *r[2], *g1[2], *g2[2], *in[12], *out[6];
    int ni = 0;
    for (int p = 0; p < 2; p++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", p);  in[ni++] = w[p] = af_input(g, name, dt, shp[p]);
        snprintf(name, sizeof name, "m%d", p);  in[ni++] = m[p] = af_input(g, name, dt, shp[p]);
        snprintf(name, sizeof name, "r%d", p);  in[ni++] = r[p] = af_input(g, name, dt, shp[p]);
        snprintf(name, sizeof name, "ga%d", p); in[ni++] = g1[p] = af_input(g, name, dt, shp[p]);
        snprintf(name, sizeof name, "gb%d", p); in[ni++] = g2[p] = af_input(g, name, dt, shp[p]);
    }
    af_tensor *lr1 = in[ni++] = af_input(g, "lr1", dt, AF_SHAPE(1));
    af_tensor *lr2 = in[ni++] = af_input(g, "lr2", dt, AF_SHAPE(1, 1));
    af_tensor *decay = af_const_fill(g, AF_SHAPE(1), 0.99f);
    af_tensor *w1[2], *m1[2], *r1[2], *w2[2], *m2[2], *r2[2];
    CHECK(af_adam_step(2, w, g1, m, r, lr1, decay, &o, w1, m1, r1) == AF_OK, "%s: step 1: %s", what, af_error_message());
    CHECK(af_adam_step(2, w1, g2, m1, r1, lr2, decay, &o, w2, m2, r2) == AF_OK, "%s: step 2: %s", what, af_error_message());
    for (int p = 0; p < 2; p++) {
        CHECK(w2[p] && af_shape_count(af_tensor_shape(w2[p])) == af_shape_count(shp[p]) && af_tensor_shape(w2[p]).rank == shp[p].rank,
              "%s: param %d changed shape", what, p);
        out[3 * p] = w2[p];
        out[3 * p + 1] = m2[p];
        out[3 * p + 2] = r2[p];
    }
    af_compile_opts co = { .target = target, .precision = prec, .threads = 1, .family = AF_FAMILY_A13 };
    af_model *mod = af_compile(g, ni, in, 6, out, &co);
    CHECK(mod != NULL, "%s: compile: %s", what, af_error_message());
    test_rng rng = { 31 };
    static float data[2][5][AN];
    double dw[2][AN], dm[2][AN] = { { 0 } }, dv[2][AN] = { { 0 } }, dg1[2][AN], dg2[2][AN];
    int cnt[2] = { AN, AC };
    af_buffer bin[12], bout[6];
    static float res[6][AN];
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < cnt[p]; i++) {
            data[p][0][i] = af_round_f16((float)(test_normal(&rng)));
            data[p][1][i] = data[p][2][i] = 0; /* m, r start at zero */
            data[p][3][i] = af_round_f16((float)(gscale * test_normal(&rng)));
            data[p][4][i] = af_round_f16((float)(gscale * test_normal(&rng)));
            dw[p][i] = data[p][0][i];
            dg1[p][i] = data[p][3][i];
            dg2[p][i] = data[p][4][i];
        }
        for (int k = 0; k < 5; k++) bin[5 * p + k] = AF_BUF_F32(data[p][k], cnt[p]);
        for (int k = 0; k < 3; k++) bout[3 * p + k] = AF_BUF_F32(res[3 * p + k], cnt[p]);
    }
    float lr1v = af_adam_lr_t(0.01f, 0.9f, 0.99f, 1), lr2v = af_adam_lr_t(0.01f, 0.9f, 0.99f, 2);
    CHECK(fabs(lr1v - 0.01 * sqrt(0.01) / 0.1) < 1e-7, "af_adam_lr_t(1) = %g", (double)lr1v);
    bin[10] = AF_BUF_F32(&lr1v, 1);
    bin[11] = AF_BUF_F32(&lr2v, 1);
    if (mod) CHECK(af_run(mod, bin, bout) == AF_OK, "%s: run: %s", what, af_error_message());
    double worst = 0;
    for (int p = 0; p < 2; p++) {
        naive_adam(dw[p], dm[p], dv[p], dg1[p], cnt[p], 0.01, 0.9, 0.99, 1e-6, 0.99, 1);
        naive_adam(dw[p], dm[p], dv[p], dg2[p], cnt[p], 0.01, 0.9, 0.99, 1e-6, 0.99, 2);
        for (int i = 0; i < cnt[p]; i++) {
            /* relative to the quantity's own scale: w ~ 1, m and sqrt(v) ~ gscale */
            worst = fmax(worst, fabs(res[3 * p][i] - dw[p][i]));
            worst = fmax(worst, fabs(res[3 * p + 1][i] - dm[p][i]) / gscale);
            worst = fmax(worst, fabs(res[3 * p + 2][i] - sqrt(dv[p][i])) / gscale);
            if (!isfinite(res[3 * p + 1][i]) || !isfinite(res[3 * p + 2][i])) worst = INFINITY;
        }
    }
    CHECK(worst < tol, "%s: af_adam_step differs from double Adam by %g (tol %g)", what, worst, tol);
    af_model_free(mod);
    af_graph_free(g);
}

static void adam_step_api(void) {
    adam_step_vs_double("cpu fp32", AF_TARGET_CPU, AF_PRECISION_FP32, 1.0, 1e-5);
    adam_step_vs_double("cpu fp32, |g| ~ 1000", AF_TARGET_CPU, AF_PRECISION_FP32, 1000.0, 1e-5);
    /* fp16: a few ulps of values ~1 (2^-10 each) */
    adam_step_vs_double("cpu fp16", AF_TARGET_CPU, AF_PRECISION_FP16, 1.0, 4e-3);
    adam_step_vs_double("cpu fp16, |g| ~ 1000", AF_TARGET_CPU, AF_PRECISION_FP16, 1000.0, 4e-3);
    adam_step_vs_double("ane-sim A13, |g| ~ 1000", AF_TARGET_ANE_SIM, AF_PRECISION_DEFAULT, 1000.0, 4e-3);

    /* A conv weight stays a conv weight; bad arguments are refused with a reason. */
    af_graph *g = af_graph_new();
    af_tensor *cw = af_conv_param(g, "cw", 4, 2, 3, 3, NULL);
    af_shape cs = af_tensor_shape(cw);
    af_tensor *gm = af_input(g, "g", AF_F32, cs), *mm = af_input(g, "m", AF_F32, cs), *rr = af_input(g, "r", AF_F32, cs);
    af_tensor *lr = af_input(g, "lr", AF_F32, AF_SHAPE(1, 1)), *wn, *mn, *rn;
    af_adam_opts o = { 0.9f, 0.999f, 1e-8f };
    CHECK(af_adam_step(1, &cw, &gm, &mm, &rr, lr, NULL, &o, &wn, &mn, &rn) == AF_OK, "conv step: %s", af_error_message());
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(1, 2, 6, 6));
    CHECK(af_conv2d(x, wn, 1, 1) != NULL && af_graph_error(g) == NULL, "the updated conv weight is not a conv weight: %s",
          af_graph_error(g) ? af_graph_error(g) : af_error_message());
    af_tensor *bad = af_input(g, "bad", AF_F32, AF_SHAPE(2, 2));
    CHECK(af_adam_step(1, &cw, &bad, &mm, &rr, lr, NULL, &o, &wn, &mn, &rn) == AF_ERR_SHAPE && wn == NULL &&
              strstr(af_error_message(), "grad"), "mismatched grad: %s", af_error_message());
    o.beta2 = 1.0f;
    CHECK(af_adam_step(1, &cw, &gm, &mm, &rr, lr, NULL, &o, &wn, &mn, &rn) == AF_ERR_INVALID && strstr(af_error_message(), "beta"),
          "beta2 = 1: %s", af_error_message());
    af_graph_free(g);
}

/* ------------------------------------------------------------------ nets for the trainer */

enum { D = 4, C = 2, B = 8 };

static int lin_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx;
    static const float w0[C * D] = { 0.3f, -0.2f, 0.1f, 0.4f, -0.1f, 0.2f, 0.5f, -0.3f }, b0[C] = { 0.05f, -0.05f };
    if (max < 2) return -1;
    p[0] = af_parameter(g, "w", AF_SHAPE(C, D), w0);
    p[1] = af_parameter(g, "b", AF_SHAPE(C), b0);
    return 2;
}

static af_tensor *lin_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    return af_linear(x, w[0], w[1]);
}

static const float col_weight[C] = { 1.0f, 3.0f };

/* Weighted L1: mean over rows of sum_j c_j |z - y|. */
static af_loss *weighted_l1(void *ctx, af_tensor *z, af_tensor *y) {
    (void)ctx;
    af_tensor *c = af_const(af_tensor_graph(z), "colw", AF_SHAPE(1, C), col_weight);
    int both[2] = { 0, 1 };
    af_tensor *sum = af_reduce_sum(af_mul(af_abs(af_sub(z, y)), c), 2, both, 0);
    return af_loss_scalar(af_muls(sum, 1.0f / (float)af_tensor_shape(z).dim[0]));
}

/* Weighted MSE: mean over rows of sum_j c_j (z - y)^2. */
static af_loss *weighted_mse(void *ctx, af_tensor *z, af_tensor *y) {
    (void)ctx;
    af_tensor *c = af_const(af_tensor_graph(z), "colw", AF_SHAPE(1, C), col_weight);
    int both[2] = { 0, 1 };
    af_tensor *sum = af_reduce_sum(af_mul(af_square(af_sub(z, y)), c), 2, both, 1);
    return af_loss_scalar(af_muls(sum, 1.0f / (float)af_tensor_shape(z).dim[0]));
}

static void lin_batch(int seed, int n, float *x, float *y) {
    test_rng r = { (unsigned long long)seed };
    for (int b = 0; b < n; b++) {
        for (int d = 0; d < D; d++) x[b * D + d] = (float)(2 * test_uniform(&r) - 1);
        y[b * C] = (float)(x[b * D] - 0.5 * x[b * D + 2] + 0.3);
        y[b * C + 1] = (float)(0.25 * x[b * D + 1] + x[b * D + 3] - 0.2);
    }
}

static af_train_opts lin_opts(af_plan plan, af_objective obj) {
    af_train_opts o = af_train_defaults();
    o.objective = obj;
    o.plan = plan;
    o.batch = B;
    o.unroll = 2;
    o.eval_batch = B;
    o.compile.threads = 1;
    return o;
}

static int read_lin(af_trainer *t, float *p) {
    return af_trainer_read_param(t, 0, p) == AF_OK && af_trainer_read_param(t, 1, p + C * D) == AF_OK;
}

/* ------------------------------------------------------------------ custom losses */

static void custom_l1_sgd(af_plan plan, float ls) {
    af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C, .loss = weighted_l1 };
    af_train_opts o = lin_opts(plan, AF_OBJ_CUSTOM);
    o.optimizer = AF_OPT_SGD;
    o.lr = 0.1f;
    o.loss_scale = ls;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "custom L1 (%s): %s", af_plan_name(plan), af_error_message());
    if (!t) return;
    int k = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C), p0[C * D + C], p1[C * D + C];
    lin_batch(3, k * B, x, y);
    CHECK(read_lin(t, p0), "read");
    af_step_info info;
    CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "custom L1 step (%s): %s", af_plan_name(plan), af_error_message());
    CHECK(read_lin(t, p1), "read");
    /* Hand-derived: dL/dz = c_j sign(z - y) / B; dW = dz^T x, db = sum dz; SGD k times. */
    double w[C * D + C], loss0 = 0;
    for (int i = 0; i < C * D + C; i++) w[i] = p0[i];
    for (int s = 0; s < k; s++) {
        double gw[C * D + C] = { 0 }, loss = 0;
        for (int b = 0; b < B; b++) {
            const float *xb = x + (s * B + b) * D, *yb = y + (s * B + b) * C;
            for (int j = 0; j < C; j++) {
                double z = w[C * D + j];
                for (int d = 0; d < D; d++) z += w[j * D + d] * xb[d];
                double e = z - yb[j], dz = col_weight[j] * (e > 0 ? 1 : e < 0 ? -1 : 0) / B;
                loss += col_weight[j] * fabs(e) / B;
                for (int d = 0; d < D; d++) gw[j * D + d] += dz * xb[d];
                gw[C * D + j] += dz;
            }
        }
        if (s == 0) loss0 = loss;
        for (int i = 0; i < C * D + C; i++) w[i] -= 0.1 * gw[i];
    }
    double err = 0;
    for (int i = 0; i < C * D + C; i++) err = fmax(err, fabs(p1[i] - w[i]));
    CHECK(err < 1e-5, "custom L1 (%s, scale %g): the SGD step differs from the hand-derived one by %g", af_plan_name(plan), (double)ls, err);
    if (k == 1) CHECK(fabs(info.loss - loss0) < 1e-5, "custom L1 (%s): loss %g, by hand %g", af_plan_name(plan), info.loss, loss0);
    CHECK(info.metric_source == AF_METRIC_GRAPH_FP32, "custom L1 (%s): metric source %s", af_plan_name(plan),
          af_metric_source_name(info.metric_source));
    free(x);
    free(y);
    af_trainer_free(t);
}

/* Adam on a weighted MSE reaches the generating weights (the targets are exactly linear). */
static void custom_mse_adam(af_plan plan, af_precision prec) {
    af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C, .loss = weighted_mse };
    af_train_opts o = lin_opts(plan, AF_OBJ_CUSTOM);
    o.lr = 0.05f;
    o.compile.precision = prec;
    o.loss_scale = prec == AF_PRECISION_FP16 ? 128.0f : 1.0f;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "custom MSE (%s): %s", af_plan_name(plan), af_error_message());
    if (!t) return;
    int k = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C), p[C * D + C];
    af_step_info info = { 0 };
    for (int i = 0; i < 300 / k; i++) {
        lin_batch(100 + i, k * B, x, y);
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "custom MSE step: %s", af_error_message());
    }
    const double want[C * D + C] = { 1, 0, -0.5, 0, 0, 0.25, 0, 1, 0.3, -0.2 };
    double err = 0;
    CHECK(read_lin(t, p), "read");
    for (int i = 0; i < C * D + C; i++) err = fmax(err, fabs(p[i] - want[i]));
    CHECK(err < 0.03 && info.skipped == 0, "custom MSE (%s, %s): weights off by %g, skipped %lld", af_plan_name(plan),
          prec == AF_PRECISION_FP16 ? "fp16" : "fp32", err, (long long)info.skipped);
    free(x);
    free(y);
    af_trainer_free(t);
}

static void custom_losses(void) {
    for (int p = 0; p < 4; p++) {
        custom_l1_sgd((af_plan)p, 1.0f);
        custom_l1_sgd((af_plan)p, 128.0f);
        custom_mse_adam((af_plan)p, AF_PRECISION_FP32);
        custom_mse_adam((af_plan)p, AF_PRECISION_FP16);
    }
    af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = lin_opts(AF_PLAN_HOST, AF_OBJ_CUSTOM);
    CHECK(af_trainer_new(&net, &o) == NULL && strstr(af_error_message(), "loss function"), "custom without a loss: %s", af_error_message());
}

/* ------------------------------------------------------------------ shuttled unrolled state */

static af_trainer *unrolled(af_plan plan, af_target target, af_precision prec, int shuttle) {
    af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = lin_opts(plan, AF_OBJ_MSE);
    o.unroll = 4;
    o.lr = 0.02f;
    o.weight_decay = 0.01f;
    o.shuttle_state = shuttle;
    o.loss_scale = prec == AF_PRECISION_FP32 ? 1.0f : 128.0f;
    o.compile.target = target;
    o.compile.family = AF_FAMILY_A16;
    o.compile.precision = prec;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "unrolled (shuttle %d): %s", shuttle, af_error_message());
    return t;
}

static void shuttle_matches_resident(const char *what, af_plan plan, af_target target, af_precision prec) {
    af_trainer *res = unrolled(plan, target, prec, 0), *sh = unrolled(plan, target, prec, 1);
    if (!res || !sh) { af_trainer_free(res); af_trainer_free(sh); return; }
    float x[4 * B * D], y[4 * B * C], pr[C * D + C], ps[C * D + C];
    int k = af_trainer_steps_per_call(res);
    af_step_info ir, is;
    for (int i = 0; i < 6; i++) {
        lin_batch(200 + i, 4 * B, x, y);
        if (i == 2) x[(k - 1) * B * D + 1] = 1.0f / 0.0f; /* the block's last step overflows */
        CHECK(af_trainer_step(res, x, y, &ir) == AF_OK && af_trainer_step(sh, x, y, &is) == AF_OK, "%s: step: %s", what, af_error_message());
        CHECK(ir.step == is.step && ir.skipped == is.skipped && ir.loss == is.loss, "%s: call %d: steps %lld/%lld skipped %lld/%lld loss %g/%g",
              what, i, (long long)ir.step, (long long)is.step, (long long)ir.skipped, (long long)is.skipped, ir.loss, is.loss);
        /* the state goes in and comes back every block: more bytes than the batches
         * alone (engine targets count the bytes) */
        if (target != AF_TARGET_CPU)
            CHECK(is.stats.bytes_in > ir.stats.bytes_in && is.stats.bytes_out > ir.stats.bytes_out, "%s: shuttled bytes %lld/%lld vs resident %lld/%lld",
              what, (long long)is.stats.bytes_in, (long long)is.stats.bytes_out, (long long)ir.stats.bytes_in, (long long)ir.stats.bytes_out);
    }
    CHECK(ir.skipped >= 1, "%s: the overflowing step was not skipped", what);
    CHECK(read_lin(res, pr) && read_lin(sh, ps) && memcmp(pr, ps, sizeof pr) == 0, "%s: shuttled state differs from resident", what);
    /* A checkpoint of one continues bit-identically in the other. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/af_test_shuttle_%d.ckpt", (int)getpid());
    af_trainer *res2 = unrolled(plan, target, prec, 0);
    CHECK(res2 && af_trainer_save(sh, path) == AF_OK && af_trainer_load(res2, path) == AF_OK, "%s: save/load: %s", what, af_error_message());
    lin_batch(300, 4 * B, x, y);
    CHECK(res2 && af_trainer_step(res2, x, y, NULL) == AF_OK && af_trainer_step(sh, x, y, NULL) == AF_OK, "%s: step after load", what);
    CHECK(res2 && read_lin(res2, pr) && read_lin(sh, ps) && memcmp(pr, ps, sizeof pr) == 0, "%s: resumed resident differs from shuttled", what);
    remove(path);
    af_trainer_free(res2);
    af_trainer_free(res);
    af_trainer_free(sh);
}

/* ------------------------------------------------------------------ metric sources */

/* A regression whose errors (~300) square past fp16's range: the in-graph fp16 mean
 * would be inf; the host figure is the right, finite loss. */
static void metric_sources(void) {
    const struct { const char *name; af_target target; af_precision prec; } be[3] = {
        { "cpu fp32", AF_TARGET_CPU, AF_PRECISION_FP32 }, { "cpu fp16", AF_TARGET_CPU, AF_PRECISION_FP16 },
        { "ane-sim A13", AF_TARGET_ANE_SIM, AF_PRECISION_DEFAULT } };
    for (int bi = 0; bi < 3; bi++)
        for (int p = 0; p < 4; p++) {
            af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C };
            af_train_opts o = lin_opts((af_plan)p, AF_OBJ_MSE);
            o.compile.target = be[bi].target;
            o.compile.family = AF_FAMILY_A13;
            o.compile.precision = be[bi].prec;
            af_trainer *t = af_trainer_new(&net, &o);
            CHECK(t != NULL, "%s %s: %s", be[bi].name, af_plan_name((af_plan)p), af_error_message());
            if (!t) continue;
            int k = af_trainer_steps_per_call(t);
            float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C), w[C * D + C];
            lin_batch(7, k * B, x, y);
            for (int i = 0; i < k * B * C; i++) y[i] = y[i] * 100.0f + 300.0f;
            CHECK(read_lin(t, w), "read");
            double loss = 0; /* the first step's, in double */
            for (int b = 0; b < B; b++)
                for (int j = 0; j < C; j++) {
                    double z = w[C * D + j];
                    for (int d = 0; d < D; d++) z += (double)w[j * D + d] * x[b * D + d];
                    loss += (z - y[b * C + j]) * (z - y[b * C + j]) / (B * C);
                }
            af_step_info info;
            CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "%s step: %s", be[bi].name, af_error_message());
            bool host = p <= AF_PLAN_DEVICE, fp16 = be[bi].prec != AF_PRECISION_FP32;
            af_metric_source want = host ? AF_METRIC_HOST_FP32 : fp16 ? AF_METRIC_GRAPH_FP16 : AF_METRIC_GRAPH_FP32;
            CHECK(info.metric_source == want, "%s %s: metric source %s", be[bi].name, af_plan_name((af_plan)p),
                  af_metric_source_name(info.metric_source));
            /* fp16 inputs and logits: ~1e-3 relative; fp32: exact to rounding */
            if (host) CHECK(fabs(info.loss - loss) < (fp16 ? 3e-3 : 1e-5) * loss, "%s %s: loss %.9g, double %.9g", be[bi].name,
                            af_plan_name((af_plan)p), info.loss, loss);
            free(x);
            free(y);
            af_trainer_free(t);
        }
}

/* Cross-entropy on the host: loss and accuracy from the logits, against double. */
static void host_ce_metrics(void) {
    af_net net = { .make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = lin_opts(AF_PLAN_DEVICE, AF_OBJ_CE);
    o.compile.precision = AF_PRECISION_FP16;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "ce: %s", af_error_message());
    if (!t) return;
    float x[B * D], y[B * C], w[C * D + C];
    lin_batch(9, B, x, y);
    for (int b = 0; b < B; b++) { /* one-hot: the class whose generated value is larger */
        int c = y[b * C + 1] > y[b * C];
        y[b * C] = (float)(c == 0);
        y[b * C + 1] = (float)(c == 1);
    }
    CHECK(read_lin(t, w), "read");
    double loss = 0;
    int hits = 0;
    for (int b = 0; b < B; b++) {
        double z[C], mx = -INFINITY, se = 0;
        for (int j = 0; j < C; j++) {
            z[j] = w[C * D + j];
            for (int d = 0; d < D; d++) z[j] += (double)w[j * D + d] * x[b * D + d];
            mx = fmax(mx, z[j]);
        }
        for (int j = 0; j < C; j++) se += exp(z[j] - mx);
        int c = y[b * C + 1] == 1.0f;
        loss += (log(se) + mx - z[c]) / B;
        hits += z[c] == mx;
    }
    af_step_info info;
    CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "ce step: %s", af_error_message());
    CHECK(info.metric_source == AF_METRIC_HOST_FP32 && fabs(info.loss - loss) < 2e-3 && fabs(info.accuracy - hits / (double)B) < 1e-12,
          "ce on the host: loss %g vs %g, accuracy %g vs %g, source %s", info.loss, loss, info.accuracy, hits / (double)B,
          af_metric_source_name(info.metric_source));
    af_trainer_free(t);
}

int main(void) {
    af_ane_budget_set_limits(NULL, 100000, 0);
    adam_step_api();
    custom_losses();
    shuttle_matches_resident("unrolled, cpu fp32", AF_PLAN_UNROLLED, AF_TARGET_CPU, AF_PRECISION_FP32);
    shuttle_matches_resident("unrolled, cpu fp16", AF_PLAN_UNROLLED, AF_TARGET_CPU, AF_PRECISION_FP16);
    shuttle_matches_resident("unrolled, ane-sim A16", AF_PLAN_UNROLLED, AF_TARGET_ANE_SIM, AF_PRECISION_DEFAULT);
    shuttle_matches_resident("resident, ane-sim A16", AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, AF_PRECISION_DEFAULT);
    metric_sources();
    host_ce_metrics();
    return check_finish("train_api");
}
