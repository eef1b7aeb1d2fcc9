/* The engine family comes from the device, once, and everything uses it: on the `ane`
 * target with no family named, the fake framework (an M1: A13, H and W at most 16384)
 * decides it, so
 *  - the pipeline and resident plans block a 17000-token classifier for A13 (two blocks)
 *    and train, where sizing for A16 (the no-hardware default) made the backend refuse;
 *  - af_trainer_family and the CLI's --json and log header say A13;
 *  - a family the device is not is refused, naming both;
 *  - an engine limit's message arrives whole, its prefix once (the host plan of a
 *    12-layer llama: 113 inputs, the runtime binds at most 64), and a wall names the
 *    ane target ("ane A13 (M1)", not "sim A13").
 * Skipped (exit 77) where the build has no fake framework. */
#define _XOPEN_SOURCE 700 /* mkdtemp, setenv, realpath */
#include "support/check.h"
#include "support/cli_run.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_ANE "fake_ane/AppleNeuralEngine.so" /* from ctest's build directory */
enum { T = 8, B = 1, VBIG = 17000 };

static af_llama_weights *weights(int layers, int vocab) {
    af_llama_config c = { 16, 24, layers, 2, 2, vocab, T, 1 };
    af_llama_weights *w = af_llama_weights_new(&c);
    CHECK(w != NULL, "weights: %s", af_error_message());
    if (!w) return NULL;
    test_rng r = { 3 };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        for (int64_t j = 0; j < af_shape_count(s); j++) d[off + j] = s.rank == 1 ? 1.0f : 0.2f * (float)(test_uniform(&r) - 0.5);
    }
    return w;
}

static af_trainer *trainer(const af_llama_weights *w, af_plan plan, af_target target, af_family_id fam) {
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.plan = plan;
    o.batch = o.eval_batch = B;
    o.loss_scale = 128.0f;
    o.compile.target = target;
    o.compile.family = fam;
    o.compile.threads = 1;
    o.compile.ane_framework = FAKE_ANE;
    af_net net = af_net_llama(w, T);
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    return t;
}

static void plans_size_for_the_device(void) {
    af_llama_weights *w = weights(1, VBIG);
    if (!w) return;
    float x[B * T];
    float *y = calloc((size_t)B * T * VBIG, sizeof *y);
    for (int i = 0; i < B * T; i++) {
        x[i] = (float)(16990 - 1000 * i);
        y[(int64_t)i * VBIG + 16999 - 7 * i] = 1.0f;
    }
    const af_plan plans[2] = { AF_PLAN_PIPELINE, AF_PLAN_RESIDENT };
    for (int k = 0; k < 2; k++) {
        af_trainer *t = trainer(w, plans[k], AF_TARGET_ANE, AF_FAMILY_DEFAULT);
        CHECK(t != NULL, "%s plan, --target ane (an A13 device), vocab %d: %s", af_plan_name(plans[k]), VBIG, af_error_message());
        if (!t) continue;
        CHECK(af_trainer_family(t) == AF_FAMILY_A13, "the trainer's family is %s, the device's A13", af_family_name_of(af_trainer_family(t)));
        af_step_info info;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK && isfinite(info.loss), "%s step: %s", af_plan_name(plans[k]), af_error_message());
        /* the pipeline: 6 kernels per layer, 2 per classifier block; 17000 rows are 2 blocks on A13 */
        if (plans[k] == AF_PLAN_PIPELINE)
            CHECK(info.stats.dispatches == 6 + 2 * 2, "pipeline dispatches per step %lld, want 10 (two classifier blocks)",
                  (long long)info.stats.dispatches);
        af_trainer_free(t);
    }
    free(y);
    af_llama_weights_free(w);
}

static void family_resolution(void) {
    af_compile_opts o = { .target = AF_TARGET_ANE, .ane_framework = FAKE_ANE };
    af_family_id f = AF_FAMILY_DEFAULT;
    CHECK(af_compile_family(&o, &f) == AF_OK && f == AF_FAMILY_A13, "ane: %s (%s)", af_family_name_of(f), af_error_message());
    o.family = AF_FAMILY_A16;
    CHECK(af_compile_family(&o, &f) != AF_OK && strstr(af_error_message(), "Neural Engine is A13") && strstr(af_error_message(), "not A16"),
          "ane:A16 on an A13 device: '%s'", af_error_message());
    af_llama_weights *w = weights(1, 32);
    af_trainer *t = w ? trainer(w, AF_PLAN_PIPELINE, AF_TARGET_ANE, AF_FAMILY_A16) : NULL;
    CHECK(!t && strstr(af_error_message(), "af_trainer_new: this machine's Neural Engine is A13"), "trainer for ane:A16: '%s'",
          af_error_message());
    af_trainer_free(t);
    t = w ? trainer(w, AF_PLAN_PIPELINE, AF_TARGET_ANE_SIM, AF_FAMILY_A14) : NULL;
    CHECK(t && af_trainer_family(t) == AF_FAMILY_A14, "ane-sim keeps the family asked for");
    af_trainer_free(t);
    t = w ? trainer(w, AF_PLAN_PIPELINE, AF_TARGET_CPU, AF_FAMILY_DEFAULT) : NULL;
    CHECK(t && af_trainer_family(t) == AF_FAMILY_DEFAULT, "the cpu target has no family");
    af_trainer_free(t);
    af_llama_weights_free(w);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

static void limit_message_whole(void) {
    af_llama_weights *w = weights(12, 32);
    af_trainer *t = w ? trainer(w, AF_PLAN_HOST, AF_TARGET_ANE, AF_FAMILY_DEFAULT) : NULL;
    const char *m = af_error_message();
    CHECK(!t && count(m, "trainer: forward program: ") == 1 && count(m, "af_compile: ") == 1 &&
              strstr(m, "the program has 113 inputs and 1 outputs; the runtime binds at most 64 of each: split it into several "
                        "programs") && strstr(m, "pipeline or resident plan"),
          "a 12-layer llama's host plan on ane: '%s'", m);
    af_trainer_free(t);
    af_llama_weights_free(w);
}

/* A wall on the ane target is named for it: "ane A13 (M1): the axis-extent limit ...". */
static void wall_names_the_target(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(VBIG, 16)), *y = af_relu(x);
    af_compile_opts o = { .target = AF_TARGET_ANE, .ane_framework = FAKE_ANE };
    af_model *m = af_compile(g, 1, &x, 1, &y, &o);
    const char *e = af_error_message();
    CHECK(!m && strstr(e, "af_compile: ane A13 (M1): the axis-extent limit at input 'x'") && strstr(e, "= 17000 exceeds 16384 on A13"),
          "a 17000-row input on an A13 device: '%s'", e);
    af_model_free(m);
    af_graph_free(g);
}

static void cli_labels_the_device_family(void) {
    char dir[] = "/tmp/af_llama_famXXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    char data[256], logp[256], args[1024], out[4096];
    snprintf(data, sizeof data, "%s/v.bin", dir);
    snprintf(logp, sizeof logp, "%s/run.jsonl", dir);
    int32_t tok[200];
    for (int i = 0; i < 200; i++) tok[i] = (int32_t)(i == 0 ? VBIG - 1 : (i * 97) % VBIG);
    CHECK(af_tokens_write(data, tok, 200) == AF_OK, "tokens: %s", af_error_message());
    snprintf(args, sizeof args, "train llama --config tiny --data %s --steps 1 --batch 1 --seq %d --target ane --plan pipeline "
             "--json --log %s", data, T, logp);
    int rc = cli_run(args, 1, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "\"target\":\"ane:A13\"") && strstr(out, "\"vocab\":17000"), "train llama --target ane: exit %d, '%s'",
          rc, out);
    size_t n = 0;
    char *log = test_read_file(logp, &n);
    CHECK(log && strstr(log, "\"family\":\"A13\""), "the log header: %.300s", log ? log : "(no log)");
    free(log);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    if (system(args)) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    if (access(FAKE_ANE, R_OK)) {
        printf("train_llama_family: skipped: no %s in this build\n", FAKE_ANE);
        return 77;
    }
    /* The fake reports an M1 (h13) unless told otherwise; the CLI finds it through the environment. */
    setenv("FAKE_ANE_SUBTYPE", "h13", 1);
    char abs[1024];
    if (!realpath(FAKE_ANE, abs)) snprintf(abs, sizeof abs, "%s", FAKE_ANE);
    setenv("ANEFORGE_ANE_FRAMEWORK", abs, 1);
    plans_size_for_the_device();
    family_resolution();
    limit_message_whole();
    wall_names_the_target();
    cli_labels_the_device_family();
    return check_finish("train_llama_family");
}
