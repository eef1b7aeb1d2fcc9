/* The llama plans' cost model (src/ane/cost_llama.c):
 *  - its calibration reproduces maderix's published static-pipeline Stories110M row on
 *    every chip it was fitted to, and the fitted rates are physical (engine faster than
 *    the host, below the 19 TFLOPS peak);
 *  - predictions from the fit land near published figures it never saw: seed 002's single
 *    dim-768 seq-512 layer (9.3 ms/step on M4) and the compile-once dynamic pipeline's
 *    Stories110M (91-115 ms/step on M4);
 *  - the baked plan's compiles are 70-80% of the wall time, as the reference reports;
 *  - its counts for the pipeline and resident plans agree with what the ane-sim trainer
 *    measures on the tiny model (dispatches exactly, FLOPs and bytes closely);
 *  - each plan removes what it should (pipeline: the compiles; resident: host work). */
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_llama.h"
#include "ane/cost_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int chip(const char *name) {
    for (int i = 0; i < ane_llama_chip_count(); i++)
        if (!strcmp(ane_llama_chip_at(i)->chip, name)) return i;
    return -1;
}

static void calibration(void) {
    af_llama_config s110;
    CHECK(af_llama_preset("stories110m", 32000, &s110) == AF_OK, "%s", af_error_message());
    for (int i = 0; i < ane_llama_chip_count(); i++) {
        const ane_llama_chip *ch = ane_llama_chip_at(i);
        ane_llama_cost b, p, r;
        CHECK(ane_llama_estimate(&s110, 256, 1, ANE_LLAMA_BAKED, false, i, 1000, &b) == AF_OK, "%s", af_error_message());
        ane_llama_estimate(&s110, 256, 1, ANE_LLAMA_PIPELINE, false, i, 1000, &p);
        ane_llama_estimate(&s110, 256, 1, ANE_LLAMA_RESIDENT, false, i, 1000, &r);
        if (ch->published) {
            CHECK(fabs(b.step_ms - ch->ms_step) < 1e-6 * ch->ms_step, "%s: baked %.3f ms vs published %.1f", ch->chip, b.step_ms, ch->ms_step);
            CHECK(fabs(b.engine_ms - ch->ane_ms) < 1e-6 * ch->ane_ms, "%s: engine %.3f ms vs published %.2f", ch->chip, b.engine_ms, ch->ane_ms);
            double share = b.compile_ms / b.total_ms;
            CHECK(share > 0.7 && share < 0.86, "%s: compiles are %.0f%% of the baked wall time (reported 70-80%%)", ch->chip, 100 * share);
        }
        double e, h;
        ane_llama_rates(i, &e, &h);
        CHECK(e > h && e < 19 && h > 0.1, "%s: engine %.2f and host %.2f TFLOPS", ch->chip, e, h);
        CHECK(b.n.programs == 72 && p.n.programs == 8 && r.n.programs == 1, "%s: 72 baked programs per 10 steps, 8 pipeline programs once, 1 resident", ch->chip);
        CHECK(p.total_ms < b.total_ms, "%s: the pipeline removes the recompiles (%.1f vs %.1f ms)", ch->chip, p.total_ms, b.total_ms);
        CHECK(r.n.host_flops < 1e-3 * b.n.host_flops && r.host_ms < 1, "%s: resident leaves no host work (%.3g FLOPs)", ch->chip, r.n.host_flops);
        CHECK(r.step_ms < p.step_ms, "%s: resident %.1f ms beats pipeline %.1f ms", ch->chip, r.step_ms, p.step_ms);
    }
}

static void predictions(void) {
    int m4 = chip("M4");
    CHECK(m4 >= 0, "M4 row");
    af_llama_config layer, s110;
    af_llama_preset("stories110m", 32000, &s110);
    layer = s110;
    layer.n_layers = 1;
    ane_llama_cost one, dyn;
    CHECK(ane_llama_estimate(&layer, 512, 1, ANE_LLAMA_BAKED, true, m4, 1, &one) == AF_OK, "%s", af_error_message());
    CHECK(fabs(one.step_ms - 9.3) < 0.3 * 9.3, "single dim-768 seq-512 layer on M4: %.2f ms vs published 9.3", one.step_ms);
    /* seed 002's 1.78 TFLOPS: its engine FLOPs over the published step time */
    CHECK(fabs(one.n.engine_flops / 9.3e9 - 1.78) < 0.1 * 1.78, "the layer's engine FLOPs give %.2f TFLOPS at 9.3 ms (published 1.78)",
          one.n.engine_flops / 9.3e9);
    CHECK(ane_llama_estimate(&s110, 256, 1, ANE_LLAMA_PIPELINE, false, m4, 1000, &dyn) == AF_OK, "%s", af_error_message());
    CHECK(dyn.total_ms > 91 * 0.85 && dyn.total_ms < 115 * 1.15, "compile-once Stories110M on M4: %.1f ms vs published 91-115", dyn.total_ms);
}

/* The ane-sim trainer's accounting of one step on the tiny model against the model's counts. */
static void counts_match_the_simulator(af_plan plan, ane_llama_plan model) {
    af_llama_config c = { 64, 172, 2, 4, 2, 64, 128, 1 };
    af_llama_weights *w = af_llama_weights_new(&c);
    float *d = w ? af_llama_weights_data(w) : NULL;
    test_rng r = { 3 };
    for (int64_t i = 0; d && i < af_llama_weight_count(&c); i++) d[i] = 0.1f * (float)(test_uniform(&r) - 0.5);
    enum { B = 4, S = 32 };
    af_net net = w ? af_net_llama(w, S) : (af_net){ 0 };
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.plan = plan;
    o.batch = B;
    o.compile.target = AF_TARGET_ANE_SIM;
    o.compile.family = AF_FAMILY_A16;
    o.compile.threads = 1;
    o.loss_scale = 128;
    af_trainer *t = w ? af_trainer_new(&net, &o) : NULL;
    af_net_free(&net);
    CHECK(t != NULL, "trainer: %s", af_error_message());
    const char *pn = af_plan_name(plan);
    if (t) {
        float x[B * S], *y = calloc((size_t)B * S * 64, sizeof(float));
        for (int i = 0; i < B * S; i++) { x[i] = (float)(i % 64); y[(int64_t)i * 64 + (i * 3) % 64] = 1; }
        af_step_info info;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step: %s", af_error_message());
        ane_llama_counts n;
        ane_llama_count(&c, S, B, model, false, AF_FAMILY_A16, &n);
        af_stats s = info.stats;
        CHECK(s.dispatches == (int64_t)n.dispatches, "%s: dispatches %lld measured, %.0f counted", pn, (long long)s.dispatches, n.dispatches);
        CHECK(fabs((double)s.engine_flops / n.engine_flops - 1) < 0.1, "%s: engine FLOPs %lld measured, %.0f counted", pn, (long long)s.engine_flops, n.engine_flops);
        CHECK(fabs((double)s.host_flops / n.host_flops - 1) < 0.1, "%s: host FLOPs %lld measured, %.0f counted", pn, (long long)s.host_flops, n.host_flops);
        double bytes = (double)(s.bytes_in + s.bytes_out);
        CHECK(fabs(bytes / n.bytes - 1) < 0.25, "%s: bytes %.0f measured, %.0f counted", pn, bytes, n.bytes);
        free(y);
    }
    af_trainer_free(t);
    af_llama_weights_free(w);
}

int main(void) {
    calibration();
    predictions();
    counts_match_the_simulator(AF_PLAN_PIPELINE, ANE_LLAMA_PIPELINE);
    counts_match_the_simulator(AF_PLAN_RESIDENT, ANE_LLAMA_RESIDENT);
    return check_finish("cost_llama");
}
