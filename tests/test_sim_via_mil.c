/* ane-sim through MIL: training programs emitted to MIL text + weights, parsed back and
 * run must leave bit-identical weights to the programs run directly, for every plan.
 * Every program of the MIL run must really have been compiled from parsed MIL (and none
 * of the direct run's), and training must have moved the weights, or identical results
 * would prove nothing. (test_mil_roundtrip covers every corpus op the same way.) */
#include "aneforge.h"
#include "sim/backend.h" /* sim_via_mil_count */
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

enum { D = 12, C = 3, B = 16 };

static void initial_w(float *w) {
    test_rng r = { 3 };
    test_fill_uniform(&r, w, C * D, -0.3, 0.3);
}

static int params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx; (void)max;
    float w[C * D];
    initial_w(w);
    p[0] = af_parameter(g, "w", AF_SHAPE(C, D), w);
    p[1] = af_parameter(g, "b", AF_SHAPE(C), NULL);
    return 2;
}
static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) { (void)ctx; return af_linear(x, w[0], w[1]); }

/* ane-sim af_compile calls so far: each is a compile or a program-cache hit. */
static long long sim_compiles(void) {
    af_ane_budget_info b;
    af_ane_budget(NULL, &b);
    return (long long)b.compiles + b.cache_hits;
}

/* Whole training runs: the same weights after 6 steps, through MIL or not. */
static void train_plan(af_plan plan) {
    float after[2][C * D];
    for (int k = 0; k < 2; k++) {
        long long mil0 = sim_via_mil_count(), sim0 = sim_compiles();
        af_net net = { .make_params = params, .forward = forward, .sample = AF_SHAPE(D), .out_dim = C };
        af_train_opts o = af_train_defaults();
        o.plan = plan;
        o.batch = B;
        o.unroll = 2;
        o.eval_batch = B;
        o.loss_scale = 64;
        o.compile = (af_compile_opts){ .target = AF_TARGET_ANE_SIM, .family = AF_FAMILY_A13, .via_mil = k ? 1 : -1, .threads = 1 };
        af_trainer *t = af_trainer_new(&net, &o);
        CHECK(t != NULL, "%s via_mil %d: %s", af_plan_name(plan), k, af_error_message());
        if (!t) return;
        int spc = af_trainer_steps_per_call(t);
        float *x = malloc(sizeof(float) * spc * B * D), *y = calloc((size_t)spc * B * C, sizeof(float));
        test_rng r = { 11 };
        for (int step = 0; step < 6 / spc; step++) {
            test_fill_uniform(&r, x, spc * B * D, -1, 1);
            for (int i = 0; i < spc * B; i++) y[i * C + i % C] = 1;
            CHECK(af_trainer_step(t, x, y, NULL) == AF_OK, "%s step: %s", af_plan_name(plan), af_error_message());
        }
        CHECK(af_trainer_read_param(t, 0, after[k]) == AF_OK, "%s: read_param: %s", af_plan_name(plan), af_error_message());
        free(x);
        free(y);
        af_trainer_free(t);
        long long via_mil = sim_via_mil_count() - mil0, programs = sim_compiles() - sim0;
        CHECK(programs > 0, "%s via_mil %d: no ane-sim program was compiled", af_plan_name(plan), k);
        CHECK(via_mil == (k ? programs : 0), "%s via_mil %d: %lld of %lld programs went through MIL, want %s",
              af_plan_name(plan), k, via_mil, programs, k ? "all" : "none");
    }
    float w0[C * D];
    initial_w(w0);
    CHECK(memcmp(after[0], w0, sizeof w0) != 0, "%s: training left the weights at their initial values", af_plan_name(plan));
    CHECK(memcmp(after[0], after[1], sizeof after[0]) == 0, "%s: weights differ after training through MIL", af_plan_name(plan));
}

int main(void) {
    af_ane_budget_set_limits(NULL, 100000, 0); /* many distinct programs in one process */
    for (int p = 0; p <= AF_PLAN_UNROLLED; p++) train_plan((af_plan)p);
    return check_finish("sim_via_mil");
}
