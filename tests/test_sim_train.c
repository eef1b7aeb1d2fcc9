/* Training on the simulated engine learns. A small learnable problem (Gaussian clusters,
 * a two-layer MLP) trains on ane-sim for every family (M1 .. M5: A13 .. A16) and every
 * plan until its loss is low; a CNN trains one epoch on the shipped MNIST subset
 * (tests/data/mnist-subset: 3,000 training digits, 1,000 test digits) on ane-sim M1 and
 * must classify at least 85% of the test digits; and the A13 conv loss-scale guard
 * speaks when a dynamic loss scale grows past its ceiling during training, not only
 * when the trainer is created. */
#include "aneforge.h"
#include "aneforge_data.h"
#include "sim/guards.h"
#include "support/check.h"
#include "support/clusters.h"

#include <stdlib.h>
#include <string.h>

static const af_family_id families[4] = { AF_FAMILY_A13, AF_FAMILY_A14, AF_FAMILY_A15, AF_FAMILY_A16 };
static const af_plan plans[4] = { AF_PLAN_HOST, AF_PLAN_DEVICE, AF_PLAN_RESIDENT, AF_PLAN_UNROLLED };

/* ------------------------------------------------------------------ clusters */

enum { D = CL_D, H = CL_H, C = CL_C, B = CL_B };

/* 160 steps of Adam (lr 0.01, loss scale 128 as the CLI uses in fp16): the loss starts above 1
 * (ln 4 = 1.39 at chance) and must end below 0.15, with no step skipped. */
static void clusters_learn(af_family_id fam, af_plan plan) {
    af_net net = { .make_params = clusters_mlp_params, .forward = clusters_mlp_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = B;
    o.unroll = 4;
    o.lr = 0.01f;
    o.loss_scale = 128;
    o.eval_batch = 50;
    o.compile.target = AF_TARGET_ANE_SIM;
    o.compile.family = fam;
    o.compile.threads = 1;
    const char *name = af_family_name_of(fam), *pn = af_plan_name(plan);
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "%s %s: trainer: %s", name, pn, af_error_message());
    if (!t) return;
    int k = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C);
    af_step_info info = { 0 };
    double first = 0, last = 0;
    for (int i = 0; x && y && i < 160 / k; i++) {
        clusters_batch(i, k, x, y);
        af_status st = af_trainer_step(t, x, y, &info);
        CHECK(st == AF_OK, "%s %s step: %s", name, pn, af_error_message());
        if (st) break;
        if (i == 0) first = info.loss;
        last = info.loss;
    }
    CHECK(info.step == 160 && info.skipped == 0, "%s %s: %lld steps, %lld skipped", name, pn, (long long)info.step, (long long)info.skipped);
    CHECK(first > 1.0 && last < 0.15, "%s %s: loss %.4f -> %.4f (must fall below 0.15)", name, pn, first, last);
    free(x);
    free(y);
    af_trainer_free(t);
}

/* ------------------------------------------------------------------ MNIST subset */

static af_dataset *subset(const char *images, const char *labels) {
    char ip[1024], lp[1024];
    snprintf(ip, sizeof ip, "%s/tests/data/mnist-subset/%s", AF_SOURCE_DIR, images);
    snprintf(lp, sizeof lp, "%s/tests/data/mnist-subset/%s", AF_SOURCE_DIR, labels);
    af_dataset *d = af_dataset_load_idx(ip, lp);
    CHECK(d != NULL, "the MNIST subset: %s", af_error_message());
    return d;
}

/* Fraction of d's samples whose largest output is the label. */
static double accuracy(af_trainer *t, const af_dataset *d) {
    int64_t n = af_dataset_count(d), *idx = malloc(sizeof *idx * (size_t)n);
    float *x = malloc(sizeof(float) * 784 * (size_t)n), *out = malloc(sizeof(float) * 10 * (size_t)n);
    int64_t right = 0;
    if (idx && x && out) {
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        CHECK(af_dataset_batch(d, (int)n, idx, x, NULL) == AF_OK, "batch: %s", af_error_message());
        CHECK(af_trainer_predict(t, n, x, out) == AF_OK, "predict: %s", af_error_message());
        const uint8_t *lab = af_dataset_labels(d);
        for (int64_t i = 0; i < n; i++) {
            int am = 0;
            for (int c = 1; c < 10; c++) am = out[i * 10 + c] > out[i * 10 + am] ? c : am;
            right += am == lab[i];
        }
    }
    free(idx);
    free(x);
    free(out);
    return n ? (double)right / (double)n : 0;
}

/* One epoch of the built-in CNN (batch 50, Adam lr 0.003, loss scale 128) on ane-sim M1
 * with the resident plan: 60 steps. At chance a classifier scores 10%; the test
 * requires 85% of the 1,000 test digits. */
static void mnist_epoch(void) {
    af_dataset *tr = subset("train-images-idx3-ubyte", "train-labels-idx1-ubyte");
    af_dataset *te = subset("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");
    if (!tr || !te) { af_dataset_free(tr); af_dataset_free(te); return; }
    CHECK(af_dataset_count(tr) == 3000 && af_dataset_count(te) == 1000, "subset sizes %lld, %lld", (long long)af_dataset_count(tr),
          (long long)af_dataset_count(te));
    af_net net = af_net_cnn(AF_SHAPE(1, 28, 28), 10, 1);
    af_net_set_input_norm(&net, 0.1307f, 0.3081f);
    af_train_opts o = af_train_defaults();
    o.plan = AF_PLAN_RESIDENT;
    o.batch = 50;
    o.lr = 0.003f;
    o.loss_scale = 128;
    o.eval_batch = 500;
    o.compile.target = AF_TARGET_ANE_SIM;
    o.compile.family = AF_FAMILY_A13;
    o.compile.threads = 2;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "MNIST trainer: %s", af_error_message());
    enum { NB = 50 };
    float x[NB * 784], y[NB * 10];
    int64_t idx[NB];
    af_step_info info = { 0 };
    test_rng r = { 5 };
    int64_t n = af_dataset_count(tr), *perm = malloc(sizeof *perm * (size_t)n);
    for (int64_t i = 0; perm && i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; perm && i > 0; i--) { /* a seeded shuffle */
        int64_t j = (int64_t)(test_uniform(&r) * (double)(i + 1)), s = perm[i];
        perm[i] = perm[j];
        perm[j] = s;
    }
    for (int64_t b = 0; t && perm && b + NB <= n; b += NB) {
        memcpy(idx, perm + b, sizeof idx);
        CHECK(af_dataset_batch(tr, NB, idx, x, y) == AF_OK, "batch: %s", af_error_message());
        af_status st = af_trainer_step(t, x, y, &info);
        CHECK(st == AF_OK, "MNIST step: %s", af_error_message());
        if (st) break;
    }
    if (t) {
        double acc = accuracy(t, te);
        fprintf(stderr, "MNIST subset, CNN on ane-sim M1, one epoch: test accuracy %.1f%% (%lld steps, %lld skipped)\n", 100 * acc,
                (long long)info.step, (long long)info.skipped);
        CHECK(info.step == 60 && info.skipped == 0, "MNIST: %lld steps, %lld skipped", (long long)info.step, (long long)info.skipped);
        CHECK(acc >= 0.85, "MNIST subset, one epoch on ane-sim M1: test accuracy %.3f, want >= 0.85", acc);
    }
    free(perm);
    af_trainer_free(t);
    af_net_free(&net);
    af_dataset_free(tr);
    af_dataset_free(te);
}

/* ------------------------------------------------------------------ guard */

/* A 3x3 conv (kW > 1) on 8x8 inputs, global mean, then the class scores. */
static int conv_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx;
    test_rng r = { 3 };
    float w[C * 9];
    for (int i = 0; i < C * 9; i++) w[i] = (float)(test_normal(&r) * 0.3);
    if (max < 1) return -1;
    p[0] = af_conv_param(g, "conv.weight", C, 1, 3, 3, w);
    return 1;
}

static af_tensor *conv_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    return af_reduce_mean(af_conv2d(x, w[0], 1, 1), 2, (int[]){ 2, 3 }, 0);
}

/* Created at loss scale 128 (within the ceiling: silent), the dynamic scale doubles
 * every 2 clean steps: past 256 the guard must have warned. */
static void guard_on_growth(void) {
    af_net net = { .make_params = conv_params, .forward = conv_forward, .sample = AF_SHAPE(1, 8, 8), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.batch = 4;
    o.lr = 0.001f;
    o.loss_scale = 128;
    o.dynamic_loss_scale = 1;
    o.scale_growth_interval = 2;
    o.eval_batch = 4;
    o.compile.target = AF_TARGET_ANE_SIM;
    o.compile.family = AF_FAMILY_A13;
    o.compile.threads = 1;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "guard trainer: %s", af_error_message());
    if (!t) return;
    CHECK(ane_guard_warnings() == 0, "loss scale 128 is within the ceiling: no warning at creation");
    float x[4 * 64], y[4 * C];
    test_rng r = { 9 };
    af_step_info info = { 0 };
    for (int i = 0; i < 6; i++) {
        test_fill_uniform(&r, x, 4 * 64, 0, 1);
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < C; c++) y[b * C + c] = c == (b + i) % C;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "guard step: %s", af_error_message());
    }
    CHECK(info.loss_scale > AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX && info.skipped == 0, "the dynamic scale should have grown past the ceiling, is %g (%lld skipped)",
          (double)info.loss_scale, (long long)info.skipped);
    CHECK(ane_guard_warnings() == 1, "the scale grew past %g on A13 with a 3x3 conv: the guard must warn",
          (double)AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX);
    af_trainer_free(t);
}

int main(void) {
    af_ane_budget_set_limits(NULL, 100000, 0); /* learning, not the compile budget */
    guard_on_growth();                   /* first: the guard prints once per process */
    for (int f = 0; f < 4; f++)
        for (int p = 0; p < 4; p++) clusters_learn(families[f], plans[p]);
    mnist_epoch();
    return check_finish("sim_train");
}
