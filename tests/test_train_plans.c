/* What plans and targets are, asked by name (the registries are the truth):
 *  - af_plan_parse and af_plan_name agree on every plan; an unknown name is refused with
 *    the list of plans; af_plan_steps_per_call and af_plan_host_optimizer say what
 *    af_trainer_steps_per_call and grad_clip's refusal do;
 *  - af_target_name, af_target_is_engine and af_compile_opts_fp16 against the table of
 *    targets (fp16 by default off the CPU, fp32 or fp16 when asked);
 *  - the llama plans find their model by what the net declares (af_net.llama_config):
 *    af_net_llama declares its config; the same net with the declaration removed is
 *    refused by the pipeline plan and trains on the resident plan as any net does (the
 *    generic step program), and the declared one takes the llama variant (which alone
 *    reads targets as token ids); their first losses agree. */
#include "aneforge.h"
#include "aneforge_llama.h"
#include "aneforge_data.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static void plan_names(void) {
    static const char *const names[] = { "host", "device", "resident", "unrolled", "pipeline" };
    for (int i = 0; i < 5; i++) {
        af_plan p = (af_plan)-1;
        CHECK(af_plan_parse(names[i], &p) == AF_OK && p == (af_plan)i, "parse %s: %d", names[i], (int)p);
        CHECK(!strcmp(af_plan_name((af_plan)i), names[i]), "name %d: %s", i, af_plan_name((af_plan)i));
    }
    CHECK(!strcmp(af_plan_name((af_plan)99), "?"), "name of no plan: %s", af_plan_name((af_plan)99));
    af_plan p = AF_PLAN_DEVICE;
    CHECK(af_plan_parse("fused", &p) == AF_ERR_INVALID && p == AF_PLAN_DEVICE, "unknown name refused, *out untouched");
    CHECK(!strcmp(af_error_message(), "unknown plan 'fused'; the plans are host, device, resident, unrolled or pipeline"),
          "message: %s", af_error_message());
    CHECK(af_plan_parse(NULL, &p) == AF_ERR_INVALID, "NULL name refused");

    af_train_opts o = af_train_defaults();
    o.unroll = 5;
    int want_k[5] = { 1, 1, 1, 5, 1 }, want_host[5] = { 1, 0, 0, 0, 1 };
    for (int i = 0; i < 5; i++) {
        o.plan = (af_plan)i;
        CHECK(af_plan_steps_per_call(&o) == want_k[i], "%s: steps per call %d", names[i], af_plan_steps_per_call(&o));
        CHECK(af_plan_host_optimizer((af_plan)i) == want_host[i], "%s: host optimizer", names[i]);
    }
    o.plan = (af_plan)99;
    CHECK(af_plan_steps_per_call(&o) == 0 && af_plan_steps_per_call(NULL) == 0 && !af_plan_host_optimizer((af_plan)99),
          "no plan: 0");
}

static void targets(void) {
    static const struct { af_target t; const char *name; int engine; } table[] = {
        { AF_TARGET_CPU, "cpu", 0 }, { AF_TARGET_ANE_SIM, "ane-sim", 1 }, { AF_TARGET_ANE, "ane", 1 },
    };
    for (int i = 0; i < 3; i++) {
        CHECK(!strcmp(af_target_name(table[i].t), table[i].name), "name %s", af_target_name(table[i].t));
        CHECK(af_target_is_engine(table[i].t) == table[i].engine, "%s: engine", table[i].name);
        af_compile_opts o = { .target = table[i].t };
        CHECK(af_compile_opts_fp16(&o) == table[i].engine, "%s: fp16 by default iff an engine", table[i].name);
        o.precision = AF_PRECISION_FP32;
        CHECK(af_compile_opts_fp16(&o) == 0, "%s: fp32 asked", table[i].name);
        o.precision = AF_PRECISION_FP16;
        CHECK(af_compile_opts_fp16(&o) == 1, "%s: fp16 asked", table[i].name);
    }
    CHECK(!strcmp(af_target_name((af_target)7), "?") && !af_target_is_engine((af_target)7), "no target");
    CHECK(af_compile_opts_fp16(NULL) == 0, "NULL opts: the CPU's default, fp32");
}

enum { D = 8, F = 16, L = 1, H = 2, V = 12, T = 4, B = 2 };

static af_llama_weights *weights(void) {
    af_llama_config c = { D, F, L, H, H, V, T, 1 };
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return NULL;
    test_rng r = { 5 };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        for (int64_t j = 0; j < af_shape_count(s); j++)
            d[off + j] = s.rank == 1 ? 1.0f : 0.5f * (float)(test_uniform(&r) - 0.5);
    }
    return w;
}

static af_trainer *llama_trainer(const af_net *net, af_plan plan) {
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.plan = plan;
    o.batch = B;
    o.eval_batch = B;
    o.compile.threads = 1;
    return af_trainer_new(net, &o);
}

static void declared_llama(void) {
    af_llama_weights *w = weights();
    CHECK(w != NULL, "weights: %s", af_error_message());
    if (!w) return;
    af_net net = af_net_llama(w, T);
    const af_llama_config *c = net.llama_config;
    CHECK(c && c->dim == D && c->vocab_size == V && c->n_layers == L, "af_net_llama declares its config");
    af_net mlp = af_net_mlp(AF_SHAPE(4), 8, 3, 1);
    CHECK(mlp.llama_config == NULL, "other nets declare none");
    af_net_free(&mlp);

    af_net plain = net; /* the same functions, nothing declared */
    plain.llama_config = NULL;
    af_trainer *t = llama_trainer(&plain, AF_PLAN_PIPELINE);
    CHECK(!t && strstr(af_error_message(), "the pipeline plan trains llama2.c models (af_net_llama) only"),
          "undeclared: pipeline refused: %s", af_error_message());
    af_trainer_free(t);

    float x[B * T], y[B * T * V] = { 0 }, out[B * T * V];
    for (int i = 0; i < B * T; i++) {
        x[i] = (float)(i % V);
        y[i * V + (i + 1) % V] = 1.0f;
    }
    /* The resident plan: the llama variant (declared) or the generic step program
     * (undeclared); both train, and their first step's loss is the same cross-entropy. */
    af_trainer *a = llama_trainer(&net, AF_PLAN_RESIDENT), *b = llama_trainer(&plain, AF_PLAN_RESIDENT);
    CHECK(a && b, "resident trainers: %s", af_error_message());
    if (a && b) {
        af_step_info ia, ib;
        CHECK(af_trainer_step(a, x, y, &ia) == AF_OK && af_trainer_step(b, x, y, &ib) == AF_OK, "steps: %s", af_error_message());
        CHECK_NEAR(ia.loss, ib.loss, 1e-4 * (1 + ib.loss), "first loss, llama variant vs generic step");
        CHECK(af_trainer_predict(a, B, x, out) == AF_OK && af_trainer_predict(b, B, x, out) == AF_OK, "predict: %s",
              af_error_message());
        /* Only the llama variant reads the targets as token ids: a row that is not
         * one-hot is its error, and any row is a target to the generic step. */
        memset(y, 0, sizeof(float) * V);
        CHECK(af_trainer_step(a, x, y, &ia) == AF_ERR_INVALID &&
                  !strcmp(af_error_message(), "trainer (resident plan): target row 0 is not one-hot"),
              "declared: the llama variant: %s", af_error_message());
        CHECK(af_trainer_step(b, x, y, &ib) == AF_OK, "undeclared: the generic step: %s", af_error_message());
    }
    af_trainer_free(a);
    af_trainer_free(b);
    af_net_free(&net);
    af_llama_weights_free(w);
}

int main(void) {
    plan_names();
    targets();
    declared_llama();
    return check_finish("train_plans");
}
