/* A llama deeper than the trainer's old 64-parameter table (12 layers: 9 x 12 + 2 = 110
 * params, as stories110m) trains 2 steps on every plan, on the CPU and on ane-sim (A16,
 * M4), checked against independent references:
 *  - the first step's loss is the fp32 KV-cache forward's (src/llama/forward.c,
 *    af_llama_gen) mean cross-entropy of the starting weights on the batch;
 *  - after 2 SGD steps on that batch the trained weights, exported and run through the
 *    same host forward, give a lower loss; and every plan's weights equal the host
 *    plan's (af_backward's gradients) to fp32 or fp16 tolerance;
 *  - a make_params that fails says why (the library's reason, not a generic one). */
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { L = 12, D = 16, F = 24, H = 2, V = 20, T = 8, B = 2 };

static af_llama_weights *weights(void) {
    af_llama_config c = { D, F, L, H, H, V, T, 1 };
    af_llama_weights *w = af_llama_weights_new(&c);
    CHECK(w != NULL, "weights: %s", af_error_message());
    if (!w) return NULL;
    test_rng r = { 12 };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        for (int64_t j = 0; j < af_shape_count(s); j++)
            d[off + j] = s.rank == 1 ? 1.0f + 0.2f * (float)(test_uniform(&r) - 0.5) : 0.5f * (float)(test_uniform(&r) - 0.5);
    }
    return w;
}

/* Mean next-token cross-entropy of x [B, T] -> y (ids) under w, by the KV-cache forward. */
static double host_loss(const af_llama_weights *w, const float *x, const int *y) {
    af_llama_gen *g = af_llama_gen_new(w, 1);
    double sum = 0;
    for (int b = 0; g && b < B; b++) {
        af_llama_gen_reset(g);
        for (int t = 0; t < T; t++) {
            if (af_llama_gen_feed(g, (int)x[b * T + t])) { af_llama_gen_free(g); return NAN; }
            const float *l = af_llama_gen_logits(g);
            double mx = l[0], se = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, l[v]);
            for (int v = 0; v < V; v++) se += exp(l[v] - mx);
            sum += mx + log(se) - l[y[b * T + t]];
        }
    }
    af_llama_gen_free(g);
    return g ? sum / (B * T) : NAN;
}

/* The trainer's current weights as a model. */
static af_llama_weights *trained(af_trainer *t, const af_llama_weights *w0) {
    af_llama_weights *w = af_llama_weights_new(af_llama_weights_config(w0));
    for (int i = 0; w && i < af_trainer_num_params(t); i++) {
        af_shape s = af_tensor_shape(af_trainer_param(t, i));
        float *v = malloc(sizeof(float) * (size_t)af_shape_count(s));
        CHECK(v && af_trainer_read_param(t, i, v) == AF_OK && af_llama_weights_set_param(w, i, v) == AF_OK, "param %d: %s", i,
              af_error_message());
        free(v);
    }
    return w;
}

/* Largest |a - b| over a parameter, relative to its largest |b|, over all parameters. */
static double param_diff(af_trainer *a, af_trainer *b) {
    double worst = 0;
    for (int i = 0; i < af_trainer_num_params(a); i++) {
        int64_t n = af_shape_count(af_tensor_shape(af_trainer_param(a, i)));
        float *pa = malloc(sizeof(float) * (size_t)n), *pb = malloc(sizeof(float) * (size_t)n);
        af_trainer_read_param(a, i, pa);
        af_trainer_read_param(b, i, pb);
        double num = 0, den = 1e-12;
        for (int64_t j = 0; j < n; j++) num = fmax(num, fabs((double)pa[j] - pb[j])), den = fmax(den, fabs((double)pb[j]));
        worst = fmax(worst, num / den);
        free(pa);
        free(pb);
    }
    return worst;
}

typedef struct {
    af_plan plan;
    af_target target;
    af_family_id fam;
} run_kind;

/* 2 SGD steps on the batch (x, y one-hot): one call of the unrolled plan at unroll 2. */
static af_trainer *train(const af_llama_weights *w, run_kind k, const float *x, const float *y, double *first_loss) {
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.optimizer = AF_OPT_SGD;
    o.plan = k.plan;
    o.unroll = 2;
    o.batch = o.eval_batch = B;
    o.lr = 0.5f;
    o.compile.target = k.target;
    o.compile.family = k.fam;
    o.compile.threads = 1;
    o.loss_scale = k.target == AF_TARGET_CPU ? 1.0f : 128.0f;
    af_net net = af_net_llama(w, T);
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    const char *where = k.target == AF_TARGET_CPU ? "cpu" : "ane-sim";
    CHECK(t != NULL, "%d-layer llama, %s plan on %s: %s", L, af_plan_name(k.plan), where, af_error_message());
    if (!t) return NULL;
    CHECK(af_trainer_num_params(t) == 9 * L + 2, "%d params, want %d", af_trainer_num_params(t), 9 * L + 2);
    int calls = 2 / af_trainer_steps_per_call(t);
    float *x2 = malloc(sizeof(float) * 2 * B * T), *y2 = malloc(sizeof(float) * 2 * B * T * V);
    for (int r = 0; r < 2; r++) { /* the same batch for each step of a call */
        memcpy(x2 + r * B * T, x, sizeof(float) * B * T);
        memcpy(y2 + r * B * T * V, y, sizeof(float) * B * T * V);
    }
    for (int c = 0; c < calls; c++) {
        af_step_info info;
        CHECK(af_trainer_step(t, x2, y2, &info) == AF_OK, "%s on %s, step: %s", af_plan_name(k.plan), where, af_error_message());
        CHECK(info.skipped_now == 0 && isfinite(info.loss), "%s on %s: step skipped or loss %g", af_plan_name(k.plan), where, info.loss);
        if (c == 0) *first_loss = calls == 2 ? info.loss : NAN; /* unrolled: the mean of both steps */
    }
    free(x2);
    free(y2);
    return t;
}

static void deep_llama_trains_on_every_plan(void) {
    af_llama_weights *w = weights();
    if (!w) return;
    float x[B * T], y[B * T * V] = { 0 };
    int ids[B * T];
    test_rng r = { 5 };
    for (int i = 0; i < B * T; i++) {
        x[i] = (float)(int)(test_uniform(&r) * V);
        ids[i] = ((int)x[i] * 7 + 3) % V;
        y[i * V + ids[i]] = 1.0f;
    }
    double start = host_loss(w, x, ids);
    const run_kind kinds[] = {
        { AF_PLAN_HOST, AF_TARGET_CPU, AF_FAMILY_DEFAULT },      { AF_PLAN_DEVICE, AF_TARGET_CPU, AF_FAMILY_DEFAULT },
        { AF_PLAN_RESIDENT, AF_TARGET_CPU, AF_FAMILY_DEFAULT },  { AF_PLAN_UNROLLED, AF_TARGET_CPU, AF_FAMILY_DEFAULT },
        { AF_PLAN_PIPELINE, AF_TARGET_CPU, AF_FAMILY_DEFAULT },  { AF_PLAN_PIPELINE, AF_TARGET_ANE_SIM, AF_FAMILY_A16 },
        { AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, AF_FAMILY_A16 },
    };
    af_trainer *host = NULL;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        double first = NAN;
        af_trainer *t = train(w, kinds[k], x, y, &first);
        if (!t) continue;
        bool engine = kinds[k].target != AF_TARGET_CPU;
        const char *plan = af_plan_name(kinds[k].plan), *where = engine ? "ane-sim:m4" : "cpu";
        if (!isnan(first))
            CHECK(fabs(first - start) < (engine ? 2e-2 : 1e-4), "%s on %s: first loss %.6f vs the host forward's %.6f", plan,
                  where, first, start);
        af_llama_weights *after = trained(t, w);
        double end = after ? host_loss(after, x, ids) : NAN;
        CHECK(end < start - 0.05, "%s on %s: 2 steps on one batch take its loss from %.4f to %.4f", plan, where, start, end);
        af_llama_weights_free(after);
        if (!host) {
            host = t; /* the host plan (af_backward's gradients): the others' reference */
            continue;
        }
        double d = param_diff(t, host);
        CHECK(d < (engine ? 1e-2 : 1e-4), "%s on %s: weights after 2 steps differ from the host plan's by %g", plan, where, d);
        af_trainer_free(t);
    }
    af_trainer_free(host);
    af_llama_weights_free(w);
}

/* make_params's own reason reaches the caller: here af_llama_params_new's, given too
 * little room. */
static int small_room(void *ctx, af_graph *g, af_tensor **params, int max) {
    (void)max;
    return af_llama_params_new(g, ctx, params, 3);
}
static af_tensor *no_forward(void *ctx, af_tensor *x, af_tensor *const *w) { (void)ctx, (void)w; return x; }

static void make_params_reason(void) {
    af_llama_weights *w = weights();
    if (!w) return;
    af_net net = { .ctx = w, .make_params = small_room, .forward = no_forward, .sample = AF_SHAPE(T), .out_dim = T };
    af_trainer *t = af_trainer_new(&net, NULL);
    CHECK(!t && strstr(af_error_message(), "make_params failed") && strstr(af_error_message(), "room for 3 params, the model needs 110"),
          "a failing make_params: '%s'", af_error_message());
    af_trainer_free(t);
    af_llama_weights_free(w);
}

int main(void) {
    deep_llama_trains_on_every_plan();
    make_params_reason();
    return check_finish("train_llama_deep");
}
