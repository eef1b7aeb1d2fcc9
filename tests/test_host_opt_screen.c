/* The host optimizer's screen (host_opt.c): a step skips the pass that checks Adam's new
 * state for inf and nan when tr_adam_surely_finite proves it finite from bounds on the
 * gradient, the weights and the moments. A wrong proof stores inf or nan into a model,
 * so the proof is checked against the update itself: random settings and bounds, drawn
 * so that the proof's quantities land around its limit, and for each one the proof
 * accepts, every extreme element within the bounds (signs, zero and half of each bound)
 * is updated in float exactly as host_opt.c's ADAM_ELEM does and must stay finite. The
 * proof must also accept ordinary training values (or the screen would never help) and
 * refuse what it cannot bound (eps 0, betas outside [0, 1], inf or nan bounds).
 *
 * After a store the screen reads only g: the weights are bounded by the largest |w| that
 * store wrote. The trainer tests below check that bound against the weights, that
 * anything else writing the weights (a load) makes the next screen read them again, and
 * that a weight the caller wrote past the bound cannot make the update store inf.
 *
 * planted: the limit 1e37 raised to 1e39 -> accepted settings overflow; the |lr_t| m / eps
 * term dropped -> a huge lr_t / eps overflows w'; v_max left out -> v' overflows; the
 * store's |w| maximum skipped -> w_max 0, below the weights; the store's keep-w for a
 * non-finite w' removed -> the caller's FLT_MAX weight becomes inf. */
#include "support/check.h"
#include "train/core.h"
#include "train/host_opt.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* host_opt.c's ADAM_ELEM, element by element (this file is compiled without FMA
 * contraction, as the library is: -std=c11). */
static bool update_finite(float b1, float b2, float lr_t, float eps, float decay, float unscale, float g, float w,
                          float m, float v) {
    float gj = g * unscale;
    float mj = b1 * m + (1.0f - b1) * gj;
    float vj = b2 * v + (1.0f - b2) * gj * gj;
    float wj = w * decay - lr_t * mj / (sqrtf(vj) + eps);
    return isfinite(mj) && isfinite(vj) && isfinite(wj);
}

static uint64_t rng = 12345;
static double uniform(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}
/* 10^e for e uniform in [lo, hi], kept to a float. */
static float log_uniform(double lo, double hi) {
    double x = pow(10.0, lo + (hi - lo) * uniform());
    return x > FLT_MAX ? FLT_MAX : (float)x;
}

/* A bound: mostly spread over the floats, sometimes within 5% of FLT_MAX. */
static float bound_draw(void) {
    return uniform() < 0.15 ? (float)(FLT_MAX * (1 - 0.05 * uniform())) : log_uniform(-10, 38.53);
}

/* Every extreme element of the box the bounds describe: signs, zero and half of each. */
static bool box_finite(float b1, float b2, float lr_t, float eps, float decay, float gmax, float wmax,
                       tr_state_bound b, float *bad_g) {
    const float gs[5] = { gmax, -gmax, gmax / 2, -gmax / 2, 0.0f }, ws[3] = { wmax, -wmax, 0.0f };
    const float ms[3] = { b.m_max, -b.m_max, 0.0f }, vs[3] = { b.v_max, b.v_max / 2, 0.0f };
    for (int a = 0; a < 5; a++)
        for (int c = 0; c < 3; c++)
            for (int d = 0; d < 3; d++)
                for (int e = 0; e < 3; e++)
                    if (!update_finite(b1, b2, lr_t, eps, decay, 1.0f, gs[a], ws[c], ms[d], vs[e])) {
                        *bad_g = gs[a];
                        return false;
                    }
    return true;
}

static void test_proof_holds(void) {
    int accepted = 0, refused = 0, wrong = 0;
    for (int s = 0; s < 300000; s++) {
        /* Betas near 0 and near 1, eps from subnormal to 1, and bounds whose terms
         * (gmax^2 (1 - b2), lr_t m / eps, ...) straddle 1e37 and FLT_MAX. */
        float b1 = uniform() < 0.5 ? (float)uniform() : 1.0f - log_uniform(-8, 0);
        float b2 = uniform() < 0.5 ? (float)uniform() : 1.0f - log_uniform(-8, 0);
        float eps = log_uniform(-45, 0), lr_t = log_uniform(-12, 38) * (uniform() < 0.5 ? -1.0f : 1.0f);
        float decay = (float)(4 * uniform() - 2);
        float gmax = bound_draw(), wmax = bound_draw();
        tr_state_bound b = { bound_draw(), bound_draw(), INFINITY };
        if (uniform() < 0.2) b.m_max = 0.0f, b.v_max = 0.0f; /* a fresh trainer's */
        if (!tr_adam_surely_finite(b1, b2, lr_t, eps, decay, gmax, wmax, b)) {
            refused++;
            continue;
        }
        accepted++;
        float g;
        if (!box_finite(b1, b2, lr_t, eps, decay, gmax, wmax, b, &g) && wrong++ < 5)
            CHECK(0, "proved finite but not: b1 %g b2 %g lr_t %g eps %g decay %g gmax %g wmax %g m %g v %g (g %g)", b1, b2,
                  lr_t, eps, decay, gmax, wmax, b.m_max, b.v_max, g);
    }
    /* Both answers must be common, or the draws do not test the boundary. */
    CHECK(accepted > 20000 && refused > 20000, "accepted %d, refused %d of the draws", accepted, refused);
    CHECK(wrong == 0, "%d accepted settings gave inf or nan", wrong);
}

/* Training values: the screen must prove them, on the first step (zero moments) and
 * later ones; and settings it cannot bound are refused. */
static void test_proof_cases(void) {
    tr_state_bound zero = { 0, 0, INFINITY }, usual = { 0.5f, 4.0f, INFINITY }, inf = { INFINITY, 0, INFINITY },
                   nan = { 0, NAN, INFINITY };
    CHECK(tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 0.9999f, 10.0, 3.0, zero), "the first step of a model");
    CHECK(tr_adam_surely_finite(0.9f, 0.999f, 3e-4f, 1e-8f, 1.0f, 1e6, 100.0, usual), "a later step, large gradients");
    CHECK(tr_adam_surely_finite(0.0f, 0.0f, 1e-3f, 1e-8f, 1.0f, 1.0, 1.0, usual), "betas 0");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 0.0f, 1.0f, 1.0, 1.0, usual), "eps 0: m / sqrt(v) is unbounded");
    CHECK(!tr_adam_surely_finite(1.5f, 0.999f, 1e-3f, 1e-8f, 1.0f, 1.0, 1.0, usual), "beta1 1.5");
    CHECK(!tr_adam_surely_finite(0.9f, -0.1f, 1e-3f, 1e-8f, 1.0f, 1.0, 1.0, usual), "beta2 -0.1");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, INFINITY, 1.0, usual), "an infinite gradient");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, NAN, 1.0, usual), "a nan gradient");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, 1.0, INFINITY, usual), "an infinite weight");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, 1.0, 1.0, inf), "moments written elsewhere");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, 1.0, 1.0, nan), "a nan moment bound");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, NAN, 1.0, 1.0, usual), "a nan decay");
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, NAN, 1e-8f, 1.0f, 1.0, 1.0, usual), "a nan lr");
    /* 1e22 squared overflows float v (test_train_fp16's host gate): refused, so the check runs. */
    CHECK(!tr_adam_surely_finite(0.9f, 0.999f, 1e-3f, 1e-8f, 1.0f, 1e22, 1.0, zero), "a gradient of 1e22");
}

/* A 4-3-2 MLP trained by Adam on the CPU (host optimizer); weight_decay < 0 makes
 * decay = 1 - lr wd above 1, so a weight at FLT_MAX overflows by decay alone. */
static af_trainer *mlp_trainer(float weight_decay) {
    af_net net = af_net_mlp(AF_SHAPE(4), 3, 2, 7);
    af_train_opts o = af_train_defaults();
    o.compile.target = AF_TARGET_CPU;
    o.batch = o.eval_batch = 2;
    o.weight_decay = weight_decay;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "trainer: %s", af_error_message());
    return t;
}

static float largest_abs(const float *w, int64_t n) {
    float m = 0.0f;
    for (int64_t j = 0; j < n; j++) m = fabsf(w[j]) > m ? fabsf(w[j]) : m;
    return m;
}

/* Each store leaves w_max = the largest |w| it wrote, exactly; a fresh trainer and a
 * load leave it unknown (the net's or the file's weights were not written by a store).
 * Each step's run leaves the weights' gradient bounds (products' epilogues) exactly. */
static void test_weight_bound_kept(void) {
    af_trainer *t = mlp_trainer(0.1f);
    if (!t) return;
    const float x[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1}, y[4] = {1, 0, 0, 1};
    for (int i = 0; i < t->np; i++) CHECK(isinf(t->bound[i].w_max), "param %d: bounded before any update", i);
    for (int s = 0; s < 3; s++) {
        af_step_info info = { 0 };
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK && info.skipped_now == 0, "step %d: %s", s, af_error_message());
        for (int i = 0; i < t->np; i++) {
            float m = largest_abs(t->master[i], t->count[i]);
            CHECK(t->bound[i].w_max == m, "step %d, param %d: w_max %g, largest |w| %g", s, i, (double)t->bound[i].w_max,
                  (double)m);
            /* the weights' gradients come from products, which bound them (exec.c); the
             * biases' from sums, which leave the screen to read them */
            float gm = largest_abs(t->grad[i], t->count[i]);
            if (i % 2 == 0)
                CHECK(t->gbound[i] == gm, "step %d, param %d: gradient bound %g, largest |g| %g", s, i,
                      (double)t->gbound[i], (double)gm);
            else CHECK(isinf(t->gbound[i]), "step %d, param %d (a bias): gradient bound %g", s, i, (double)t->gbound[i]);
        }
    }
    tr_forget_state_bounds(t); /* what a load and the ranks' state exchange call */
    for (int i = 0; i < t->np; i++) CHECK(isinf(t->bound[i].w_max), "param %d: bounded after a forget", i);
    af_trainer_free(t);
}

/* The caller writes FLT_MAX into param 0's weights on input feature 1 (af_trainer_param's
 * value) after a step, so the screen's bound (that step's largest |w|) is stale. The
 * batch has feature 1 at 0, so the loss and gradients stay finite and the screen
 * proves the step from the stale bound; decay 1.001 takes those weights past FLT_MAX.
 * The step must store no inf: those weights keep FLT_MAX, the rest are updated. */
static void test_caller_weight_past_bound(void) {
    af_trainer *t = mlp_trainer(-1.0f);
    if (!t) return;
    const float x[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1}, y[4] = {1, 0, 0, 1};
    const float x0[8] = {1, 0, 0.5f, 3, -1, 0, 2, 1}; /* feature 1 is 0 in both samples */
    CHECK(af_trainer_step(t, x, y, NULL) == AF_OK, "first step: %s", af_error_message());
    af_tensor *p0 = af_trainer_param(t, 0);
    af_shape s0 = af_tensor_shape(p0);
    float *w = af_tensor_value(p0);
    CHECK(s0.rank == 2 && s0.dim[1] == 4 && w, "param 0 is fc1.weight [hidden, 4]");
    if (s0.rank != 2 || s0.dim[1] != 4 || !w) goto done;
    int64_t n = t->count[0];
    float *before = malloc((size_t)n * sizeof *before);
    if (!before) goto done;
    for (int64_t r = 0; r < s0.dim[0]; r++) w[r * 4 + 1] = FLT_MAX;
    memcpy(before, w, (size_t)n * sizeof *w);
    af_step_info info = { 0 };
    CHECK(af_trainer_step(t, x0, y, &info) == AF_OK, "second step: %s", af_error_message());
    CHECK(info.skipped_now == 0 && isfinite(info.loss), "the step was taken on a finite loss (skipped %d, loss %g)",
          info.skipped_now, (double)info.loss);
    int changed = 0;
    for (int64_t j = 0; j < n; j++) {
        CHECK(isfinite(w[j]), "w[%lld] is %g", (long long)j, (double)w[j]);
        if (j % 4 == 1) CHECK(w[j] == FLT_MAX, "w[%lld] %g, not kept at FLT_MAX", (long long)j, (double)w[j]);
        else changed += w[j] != before[j];
    }
    CHECK(changed > 0, "no other weight of param 0 was updated");
    for (int i = 0; i < t->np; i++)
        for (int64_t j = 0; j < t->count[i]; j++)
            if (!isfinite(t->m[i][j]) || !isfinite(t->v[i][j])) {
                CHECK(0, "param %d's moments at %lld are not finite", i, (long long)j);
                break;
            }
    free(before);
done:
    af_trainer_free(t);
}

int main(void) {
    test_proof_cases();
    test_proof_holds();
    test_weight_bound_kept();
    test_caller_weight_past_bound();
    return check_finish("host_opt_screen");
}
