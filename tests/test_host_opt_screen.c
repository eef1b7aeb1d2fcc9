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
 * planted: the limit 1e37 raised to 1e39 -> accepted settings overflow; the |lr_t| m / eps
 * term dropped -> a huge lr_t / eps overflows w'; v_max left out -> v' overflows. */
#include "support/check.h"
#include "train/host_opt.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

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
                       tr_moment_bound b, float *bad_g) {
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
        tr_moment_bound b = { bound_draw(), bound_draw() };
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
    tr_moment_bound zero = { 0, 0 }, usual = { 0.5f, 4.0f }, inf = { INFINITY, 0 }, nan = { 0, NAN };
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

int main(void) {
    test_proof_cases();
    test_proof_holds();
    return check_finish("host_opt_screen");
}
