/* Training: every plan trains a small problem (Gaussian clusters, a two-layer MLP) to a
 * low loss in fp32 and fp16; a non-finite step is skipped leaving all state bit-identical;
 * resuming from a checkpoint is bit-identical to an uninterrupted fp32 run. */
#include "aneforge.h"
#include "support/check.h"
#include "support/clusters.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { D = CL_D, H = CL_H, C = CL_C, B = CL_B };


static af_trainer *make(af_plan plan, af_precision prec, float scale) {
    static clusters_ctx ctx = { 42 };
    af_net net = { .ctx = &ctx, .make_params = clusters_mlp_params, .forward = clusters_mlp_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = B;
    o.unroll = 4;
    o.lr = 0.01f;
    o.loss_scale = scale;
    o.eval_batch = 50;
    o.compile.precision = prec;
    o.compile.threads = 1;
    if (prec == AF_PRECISION_FP16) o.weight_decay = 1e-4f; /* exercises the decay inputs too */
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "trainer (%s) failed: %s", af_plan_name(plan), af_error_message());
    return t;
}

static void train_to_low_loss(af_plan plan, af_precision prec) {
    af_trainer *t = make(plan, prec, prec == AF_PRECISION_FP16 ? 64.0f : 1.0f);
    if (!t) return;
    int k = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C);
    af_step_info info;
    double first = 0, last = 0;
    for (int i = 0; i < 160 / k; i++) {
        clusters_batch(i, k, x, y);
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "%s step: %s", af_plan_name(plan), af_error_message());
        if (i == 0) first = info.loss;
        last = info.loss;
    }
    CHECK(info.step == 160 / k * k && info.skipped == 0, "%s: %lld steps, %lld skipped", af_plan_name(plan), (long long)info.step, (long long)info.skipped);
    CHECK(first > 1.0 && last < 0.15, "%s %s: loss %.4f -> %.4f", af_plan_name(plan), prec == AF_PRECISION_FP16 ? "fp16" : "fp32", first, last);
    CHECK(info.accuracy > 0.9, "%s: batch accuracy %.3f", af_plan_name(plan), info.accuracy);
    /* The separate evaluation program agrees on held-out data. */
    static float xe[4 * B * D], ye[4 * B * C], out[100 * C];
    clusters_batch(999, 4, xe, ye); /* held out: a stream index training never uses */
    CHECK(af_trainer_predict(t, 100, xe, out) == AF_OK, "predict: %s", af_error_message());
    int correct = 0;
    for (int b = 0; b < 100; b++) {
        int am = 0;
        for (int c = 1; c < C; c++) am = out[b * C + c] > out[b * C + am] ? c : am;
        correct += ye[b * C + am] == 1.0f;
    }
    CHECK(correct >= 90, "%s: eval accuracy %d/100", af_plan_name(plan), correct);
    free(x);
    free(y);
    af_trainer_free(t);
}

static void read_all(af_trainer *t, float *dst) {
    for (int i = 0, off = 0; i < af_trainer_num_params(t); i++) {
        CHECK(af_trainer_read_param(t, i, dst + off) == AF_OK, "read param %d: %s", i, af_error_message());
        off += (int)af_shape_count(af_tensor_shape(af_trainer_param(t, i)));
    }
}

/* A step that must succeed. */
static void step_ok(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    CHECK(af_trainer_step(t, x, y, info) == AF_OK, "step: %s", af_error_message());
}
#define NPARAM (H * D + H + C * H + C)

static void skip_nonfinite(af_plan plan) {
    af_trainer *t = make(plan, AF_PRECISION_FP32, 1.0f);
    if (!t) return;
    int k = af_trainer_steps_per_call(t);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C);
    af_step_info info;
    for (int i = 0; i < 3; i++) { clusters_batch(i, k, x, y); step_ok(t, x, y, &info); }
    float before[NPARAM], after[NPARAM];
    char path[64], path2[64];
    snprintf(path, sizeof path, "/tmp/af_test_skip_%d_a.ckpt", (int)getpid());
    snprintf(path2, sizeof path2, "/tmp/af_test_skip_%d_b.ckpt", (int)getpid());
    read_all(t, before);
    CHECK(af_trainer_save(t, path) == AF_OK, "save: %s", af_error_message());
    int64_t steps = info.step;
    clusters_batch(7, k, x, y);
    for (int s = 0; s < k; s++) x[s * B * D + 3] = 1.0f / 0.0f; /* every step of the block overflows */
    CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "inf step");
    read_all(t, after);
    CHECK(info.skipped == k && info.skipped_now == k && info.step == steps, "%s: skipped %lld (%d now), step %lld", af_plan_name(plan),
          (long long)info.skipped, info.skipped_now, (long long)info.step);
    CHECK(memcmp(before, after, sizeof before) == 0, "%s: params changed on a skipped step", af_plan_name(plan));
    /* Moments too: the two checkpoints hold identical optimizer state. */
    CHECK(af_trainer_save(t, path2) == AF_OK, "save: %s", af_error_message());
    af_trainer *u = make(plan, AF_PRECISION_FP32, 1.0f), *w = make(plan, AF_PRECISION_FP32, 1.0f);
    if (u && w) {
        CHECK(af_trainer_load(u, path) == AF_OK && af_trainer_load(w, path2) == AF_OK, "load: %s", af_error_message());
        clusters_batch(8, k, x, y);
        step_ok(u, x, y, NULL);
        step_ok(w, x, y, NULL);
        read_all(u, before);
        read_all(w, after);
        CHECK(memcmp(before, after, sizeof before) == 0, "%s: optimizer state changed on a skipped step", af_plan_name(plan));
    }
    af_trainer_free(u);
    af_trainer_free(w);
    remove(path);
    remove(path2);
    free(x);
    free(y);
    af_trainer_free(t);
}

static void resume_bit_identical(af_plan plan) {
    af_trainer *a = make(plan, AF_PRECISION_FP32, 1.0f), *b = make(plan, AF_PRECISION_FP32, 1.0f);
    if (!a || !b) { af_trainer_free(a); af_trainer_free(b); return; }
    int k = af_trainer_steps_per_call(a);
    float *x = malloc(sizeof(float) * k * B * D), *y = malloc(sizeof(float) * k * B * C);
    char path[64];
    snprintf(path, sizeof path, "/tmp/af_test_resume_%d.ckpt", (int)getpid());
    for (int i = 0; i < 12; i++) {
        clusters_batch(i, k, x, y);
        step_ok(a, x, y, NULL);
        if (i == 5) CHECK(af_trainer_save(a, path) == AF_OK, "save: %s", af_error_message());
    }
    CHECK(af_trainer_load(b, path) == AF_OK, "load: %s", af_error_message());
    for (int i = 6; i < 12; i++) {
        clusters_batch(i, k, x, y);
        step_ok(b, x, y, NULL);
    }
    float pa[NPARAM], pb[NPARAM];
    read_all(a, pa);
    read_all(b, pb);
    CHECK(memcmp(pa, pb, sizeof pa) == 0, "%s: resumed run differs from the uninterrupted one", af_plan_name(plan));
    remove(path);
    free(x);
    free(y);
    af_trainer_free(a);
    af_trainer_free(b);
}

/* The dynamic loss scale halves on an overflowing step and doubles after
 * scale_growth_interval clean ones, on the host and inside resident programs alike. */
static void dynamic_scale(af_plan plan) {
    static clusters_ctx ctx = { 42 };
    af_net net = { .ctx = &ctx, .make_params = clusters_mlp_params, .forward = clusters_mlp_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = B;
    o.loss_scale = 1024;
    o.dynamic_loss_scale = 1;
    o.scale_growth_interval = 3;
    o.compile.threads = 1;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "dynamic scale trainer: %s", af_error_message());
    if (!t) return;
    float x[B * D], y[B * C];
    af_step_info info;
    clusters_batch(0, 1, x, y);
    x[5] = 1.0f / 0.0f;
    step_ok(t, x, y, &info);
    CHECK(info.skipped_now == 1 && info.loss_scale == 1024.0f, "%s: the overflowing step ran at 1024 and was skipped", af_plan_name(plan));
    float scales[4];
    for (int i = 0; i < 4; i++) {
        clusters_batch(i + 1, 1, x, y);
        step_ok(t, x, y, &info);
        scales[i] = info.loss_scale;
    }
    /* 512 for three clean steps, then doubled back to 1024. */
    CHECK(scales[0] == 512.0f && scales[1] == 512.0f && scales[2] == 512.0f && scales[3] == 1024.0f,
          "%s: scales %g %g %g %g", af_plan_name(plan), scales[0], scales[1], scales[2], scales[3]);
    af_trainer_free(t);
}

/* The built-in CNN on CIFAR-10's sample shape: builds, steps on every plan, predicts. */
static void cnn_cifar_shape(af_plan plan) {
    af_net net = af_net_cnn(AF_SHAPE(3, 32, 32), 10, 5);
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = 4;
    o.unroll = 2;
    o.eval_batch = 4;
    o.compile.threads = 1;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "cnn 3x32x32 (%s): %s", af_plan_name(plan), af_error_message());
    if (t) {
        int k = af_trainer_steps_per_call(t);
        float *x = calloc((size_t)k * 4 * 3 * 32 * 32, sizeof(float)), *y = calloc((size_t)k * 4 * 10, sizeof(float)), out[40];
        test_rng r = { 9 };
        test_fill_uniform(&r, x, (long)k * 4 * 3 * 32 * 32, 0, 1);
        for (int i = 0; i < k * 4; i++) y[i * 10 + i % 10] = 1;
        af_step_info info;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK && info.loss > 1.5 && info.loss < 4.0, "cnn 3x32x32 step: loss %g %s", info.loss, af_error_message());
        CHECK(af_trainer_predict(t, 4, x, out) == AF_OK, "cnn 3x32x32 predict: %s", af_error_message());
        free(x);
        free(y);
        af_trainer_free(t);
    }
    af_net_free(&net);
    af_net bad = af_net_cnn(AF_SHAPE(3, 30, 30), 10, 5);
    CHECK(bad.forward == NULL && strstr(af_error_message(), "divisible by 4"), "cnn on 30x30: %s", af_error_message());
}

static void bad_options(void) {
    af_net net = { 0 };
    CHECK(af_trainer_new(&net, NULL) == NULL && strstr(af_error_message(), "make_params"), "empty net: %s", af_error_message());
    static clusters_ctx ctx = { 1 };
    af_net ok = { .ctx = &ctx, .make_params = clusters_mlp_params, .forward = clusters_mlp_forward, .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.lr = -1;
    CHECK(af_trainer_new(&ok, &o) == NULL && strstr(af_error_message(), "learning rate"), "negative lr: %s", af_error_message());
    o = af_train_defaults();
    ok.out_dim = 3; /* the forward gives 4 columns */
    CHECK(af_trainer_new(&ok, &o) == NULL && strstr(af_error_message(), "out_dim"), "wrong out_dim: %s", af_error_message());
}

int main(void) {
    const af_plan plans[4] = { AF_PLAN_HOST, AF_PLAN_DEVICE, AF_PLAN_RESIDENT, AF_PLAN_UNROLLED };
    for (int p = 0; p < 4; p++) {
        train_to_low_loss(plans[p], AF_PRECISION_FP32);
        train_to_low_loss(plans[p], AF_PRECISION_FP16);
        skip_nonfinite(plans[p]);
        resume_bit_identical(plans[p]);
    }
    for (int p = 0; p < 4; p++) cnn_cifar_shape(plans[p]);
    dynamic_scale(AF_PLAN_HOST);
    dynamic_scale(AF_PLAN_RESIDENT);
    bad_options();
    return check_finish("train");
}
