/* Gradient accumulation and clipping (af_train_opts.grad_accum, grad_clip), against
 * identities that do not use them:
 *  - a step over grad_accum = 2 batches of 32 equals a step over the one batch of 64 they
 *    make (the mean loss over 64 is the mean of the two means), for Adam and SGD;
 *  - with SGD and no decay, a clipped step moves the weights by lr * g * clip / |g|, where
 *    g is recovered from an unclipped step from the same weights and |g| is its global
 *    L2 norm summed here in double; the step reports |g| as grad_norm; a clip above |g|
 *    changes nothing;
 *  - the plans that update inside their programs refuse both, and bad values are refused. */
#include "aneforge.h"
#include "support/check.h"
#include "support/clusters.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D = CL_D, H = CL_H, C = CL_C, B = CL_B, NP = 4 };

static af_trainer *make(af_optimizer opt, int batch, int accum, float clip, af_plan plan) {
    static clusters_ctx ctx = { 7 };
    af_net net = { .ctx = &ctx, .make_params = clusters_mlp_params, .forward = clusters_mlp_forward,
                   .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.optimizer = opt;
    o.plan = plan;
    o.batch = batch;
    o.grad_accum = accum;
    o.grad_clip = clip;
    o.lr = opt == AF_OPT_SGD ? 0.5f : 0.01f;
    o.eval_batch = 16;
    o.compile.precision = AF_PRECISION_FP32;
    o.compile.threads = 1;
    return af_trainer_new(&net, &o);
}

/* All params of t, concatenated; returns the count. */
static int read_all(af_trainer *t, float *dst) {
    int n = 0;
    for (int i = 0; i < af_trainer_num_params(t); i++) {
        if (af_trainer_read_param(t, i, dst + n)) return -1;
        n += (int)af_shape_count(af_tensor_shape(af_trainer_param(t, i)));
    }
    return n;
}

enum { MAXW = 4096 };

static void accumulation_equals_big_batch(af_optimizer opt) {
    af_trainer *a = make(opt, B, 2, 0, AF_PLAN_HOST), *b = make(opt, 2 * B, 1, 0, AF_PLAN_HOST);
    CHECK(a && b, "trainers: %s", af_error_message());
    if (!a || !b) goto done;
    CHECK(af_trainer_batches_per_call(a) == 2 && af_trainer_steps_per_call(a) == 1, "batches per call %d",
          af_trainer_batches_per_call(a));
    float x[4 * B * D], y[4 * B * C], wa[MAXW], wb[MAXW];
    double worst = 0;
    for (int s = 0; s < 3; s++) { /* three steps, each on the next 64 samples */
        clusters_batch(s, 2, x, y);
        af_step_info ia, ib;
        CHECK(af_trainer_step(a, x, y, &ia) == AF_OK && af_trainer_step(b, x, y, &ib) == AF_OK, "steps: %s",
              af_error_message());
        CHECK_NEAR(ia.loss, ib.loss, 1e-5 * fabs(ib.loss), "loss of the two 32-batches vs the 64-batch");
        CHECK(ia.step == s + 1, "one optimizer step per call (step %lld)", (long long)ia.step);
    }
    int n = read_all(a, wa);
    CHECK(n > 0 && n == read_all(b, wb), "params");
    for (int j = 0; j < n; j++) worst = fmax(worst, fabs((double)wa[j] - wb[j]) / (fabs(wb[j]) + 1e-3));
    CHECK(worst < 2e-5, "%s: accumulated weights differ from the big batch's by %g (relative)",
          opt == AF_OPT_ADAM ? "adam" : "sgd", worst);
done:
    af_trainer_free(a);
    af_trainer_free(b);
}

static void clipping_scales_the_step(void) {
    float x[B * D], y[B * C], w0[MAXW], w1[MAXW], wc[MAXW];
    clusters_batch(0, 1, x, y);
    af_trainer *plain = make(AF_OPT_SGD, B, 1, 0, AF_PLAN_HOST);
    CHECK(plain != NULL, "trainer: %s", af_error_message());
    if (!plain) return;
    int n = read_all(plain, w0);
    af_step_info info;
    CHECK(af_trainer_step(plain, x, y, &info) == AF_OK, "step");
    read_all(plain, w1);
    af_trainer_free(plain);
    const double lr = 0.5;
    double ss = 0;
    for (int j = 0; j < n; j++) ss += ((double)w0[j] - w1[j]) / lr * (((double)w0[j] - w1[j]) / lr);
    double norm = sqrt(ss);
    CHECK(norm > 1e-3, "the unclipped step's gradient norm %g", norm);
    for (int k = 0; k < 2; k++) {
        double clip = k == 0 ? 0.25 * norm : 4.0 * norm; /* clips, then leaves alone */
        af_trainer *t = make(AF_OPT_SGD, B, 1, (float)clip, AF_PLAN_HOST);
        CHECK(t != NULL, "trainer: %s", af_error_message());
        if (!t) return;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "clipped step");
        CHECK_NEAR(info.grad_norm, norm, 1e-4 * norm, "grad_norm reports the norm before clipping");
        read_all(t, wc);
        double f = clip < norm ? clip / norm : 1.0, worst = 0;
        for (int j = 0; j < n; j++) {
            double want = w0[j] - f * ((double)w0[j] - w1[j]);
            worst = fmax(worst, fabs(wc[j] - want));
        }
        CHECK(worst < 1e-6, "clip %g x norm: weights off the scaled step by %g", clip / norm, worst);
        af_trainer_free(t);
    }
}

static void refusals(void) {
    af_trainer *t = make(AF_OPT_ADAM, B, 1, 1.0f, AF_PLAN_RESIDENT);
    CHECK(!t && strstr(af_error_message(), "host or pipeline"),
          "grad_clip on the resident plan: %s", af_error_message());
    af_trainer_free(t);
    t = make(AF_OPT_ADAM, B, 2, 0, AF_PLAN_UNROLLED);
    CHECK(!t && strstr(af_error_message(), "host or pipeline"), "grad_accum on the unrolled plan: %s",
          af_error_message());
    af_trainer_free(t);
    t = make(AF_OPT_ADAM, B, 1, -1.0f, AF_PLAN_HOST);
    CHECK(!t && strstr(af_error_message(), "grad_clip"), "negative grad_clip: %s", af_error_message());
    af_trainer_free(t);
    t = make(AF_OPT_ADAM, B, 100000, 0, AF_PLAN_HOST);
    CHECK(!t && strstr(af_error_message(), "grad_accum"), "grad_accum 100000: %s", af_error_message());
    af_trainer_free(t);
    t = make(AF_OPT_ADAM, B, 0, 0, AF_PLAN_HOST); /* 0 means one batch */
    CHECK(t && af_trainer_batches_per_call(t) == 1, "grad_accum 0: %s", af_error_message());
    af_trainer_free(t);
}

int main(void) {
    accumulation_equals_big_batch(AF_OPT_ADAM);
    accumulation_equals_big_batch(AF_OPT_SGD);
    clipping_scales_the_step();
    refusals();
    return check_finish("train_clip_accum");
}
