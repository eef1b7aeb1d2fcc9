/* The trainable llama model (af_llama, src/nn/llama.c; params and net, src/llama):
 *  1. its logits on the CPU in fp32 equal the host KV-cache forward (af_llama_gen, run.c's
 *     arithmetic, itself checked against PyTorch in test_llama.c) fed token by token, for
 *     the fixture models in both file formats, shared and separate classifiers;
 *  2. its gradients (af_backward) equal central finite differences of its own loss;
 *  3. af_trainer (host plan, CPU fp32) lowers its loss on a repeated token sequence;
 *  4. trained params -> af_llama_weights -> af_llama_save -> af_llama_load give the same
 *     logits. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama"
enum { MAXP = 64 };

static af_llama_weights *load_fixture(const char *model, int version) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model_%s_v%d.bin", FIXDIR, model, version);
    af_llama_weights *w = af_llama_load(path, NULL);
    CHECK(w != NULL, "load %s: %s", path, af_error_message());
    return w;
}

/* A deterministic token sequence per batch row. */
static void make_tokens(float *tok, int B, int T, int vocab, unsigned long long seed) {
    test_rng r = { seed };
    for (int i = 0; i < B * T; i++) tok[i] = (float)(int)(test_uniform(&r) * vocab);
}

/* The graph's logits [B, T, vocab] for tokens, on the CPU in fp32. told_cpu: the graph
 * is told its target (af_graph_set_target), so the embedding is the gather; otherwise
 * the portable one-hot matmul. */
static float *graph_logits(const af_llama_weights *w, const float *tok, int B, int T, int told_cpu) {
    const af_llama_config *c = af_llama_weights_config(w);
    af_graph *g = af_graph_new();
    if (told_cpu) af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *in[1 + MAXP];
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T));
    int n = af_llama_params_new(g, w, in + 1, MAXP);
    CHECK(n == af_llama_param_count(c), "params_new: %d (%s)", n, af_error_message());
    af_tensor *logits = af_llama(c, in[0], in + 1);
    CHECK(logits != NULL, "af_llama: %s", af_graph_error(g));
    float *out = NULL;
    af_model *m = logits ? af_compile(g, 1 + n, in, 1, &logits, NULL) : NULL;
    CHECK(!logits || m, "compile: %s", af_error_message());
    if (m) {
        int64_t count = (int64_t)B * T * c->vocab_size;
        out = malloc((size_t)count * sizeof *out);
        af_buffer bin[1 + MAXP], bout = AF_BUF_F32(out, count);
        bin[0] = AF_BUF_F32(tok, (int64_t)B * T);
        for (int i = 0; i < n; i++) bin[1 + i] = AF_BUF_F32(af_tensor_value(in[1 + i]), af_shape_count(af_tensor_shape(in[1 + i])));
        CHECK(af_run(m, bin, &bout) == AF_OK, "run: %s", af_error_message());
    }
    af_model_free(m);
    af_graph_free(g);
    return out;
}

/* Largest |graph - host| over every row and position, relative to the largest |logit|. */
static double diff_to_host(const af_llama_weights *w, const float *tok, const float *logits, int B, int T) {
    const af_llama_config *c = af_llama_weights_config(w);
    af_llama_gen *gen = af_llama_gen_new(w, 1);
    double maxdiff = 0, maxabs = 0;
    for (int b = 0; gen && b < B; b++) {
        af_llama_gen_reset(gen);
        for (int t = 0; t < T; t++) {
            CHECK(af_llama_gen_feed(gen, (int)tok[b * T + t]) == AF_OK, "feed: %s", af_error_message());
            const float *ref = af_llama_gen_logits(gen);
            const float *got = logits + ((int64_t)b * T + t) * c->vocab_size;
            for (int v = 0; v < c->vocab_size; v++) {
                maxdiff = fmax(maxdiff, fabs((double)got[v] - ref[v]));
                maxabs = fmax(maxabs, fabs((double)ref[v]));
            }
        }
    }
    af_llama_gen_free(gen);
    return maxabs > 0 ? maxdiff / maxabs : INFINITY;
}

static void test_logits_match_host(void) {
    const char *models[] = { "a", "b" };
    for (int mi = 0; mi < 2; mi++)
        for (int version = 0; version <= 1; version++) {
            af_llama_weights *w = load_fixture(models[mi], version);
            if (!w) continue;
            const af_llama_config *c = af_llama_weights_config(w);
            int B = 2, T = c->seq_len;
            float *tok = malloc(sizeof(float) * (size_t)(B * T));
            make_tokens(tok, B, T, c->vocab_size, 11u + (unsigned)mi);
            for (int told = 0; told <= 1; told++) {
                float *logits = graph_logits(w, tok, B, T, told);
                if (logits) {
                    double rel = diff_to_host(w, tok, logits, B, T);
                    CHECK(rel <= 1e-5, "model %s v%d (%s embedding): graph vs host logits differ by %.3g of the largest",
                          models[mi], version, told ? "gather" : "one-hot", rel);
                }
                free(logits);
            }
            free(tok);
            af_llama_weights_free(w);
        }
}

/* ---------------------------------------------------------------- gradients */

/* loss = mean next-token CE of the graph; grads by af_backward vs central differences. */
static void test_gradients(const char *model, int told_cpu) {
    af_llama_weights *w = load_fixture(model, 1);
    if (!w) return;
    const af_llama_config *c = af_llama_weights_config(w);
    int B = 2, T = 6, V = c->vocab_size;
    float tok[12], *onehot = calloc((size_t)(B * T * V), sizeof(float));
    make_tokens(tok, B, T, V, 5);
    test_rng r = { 9 };
    for (int i = 0; i < B * T; i++) onehot[i * V + (int)(test_uniform(&r) * V)] = 1.0f;

    af_graph *g = af_graph_new();
    if (told_cpu) af_graph_set_target(g, AF_TARGET_CPU); /* the gather's scatter-add gradient, else the one-hot matmul's */
    af_tensor *in[2 + MAXP], *out[1 + MAXP];
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T));
    in[1] = af_input(g, "target", AF_F32, AF_SHAPE(B * T, V));
    int n = af_llama_params_new(g, w, in + 2, MAXP);
    af_tensor *logits = af_llama(c, in[0], in + 2);
    af_loss *loss = af_softmax_cross_entropy(af_reshape(logits, AF_SHAPE(B * T, V)), in[1]);
    out[0] = af_loss_value(loss);
    CHECK(af_backward(loss, n, in + 2, out + 1, NULL) == AF_OK, "backward: %s", af_error_message());
    af_model *m = af_compile(g, 2 + n, in, 1 + n, out, NULL);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); af_llama_weights_free(w); free(onehot); return; }

    af_buffer bin[2 + MAXP], bout[1 + MAXP];
    float **vals = calloc((size_t)n, sizeof *vals), **grads = calloc((size_t)n, sizeof *grads), lossv = 0;
    bin[0] = AF_BUF_F32(tok, B * T);
    bin[1] = AF_BUF_F32(onehot, B * T * V);
    bout[0] = AF_BUF_F32(&lossv, 1);
    for (int i = 0; i < n; i++) {
        int64_t cnt = af_shape_count(af_tensor_shape(in[2 + i]));
        vals[i] = malloc((size_t)cnt * sizeof(float));
        memcpy(vals[i], af_tensor_value(in[2 + i]), (size_t)cnt * sizeof(float));
        grads[i] = malloc((size_t)cnt * sizeof(float));
        bin[2 + i] = AF_BUF_F32(vals[i], cnt);
        bout[1 + i] = AF_BUF_F32(grads[i], cnt);
    }
    CHECK(af_run(m, bin, bout) == AF_OK, "run: %s", af_error_message());
    af_buffer lonly[1 + MAXP];
    lonly[0] = bout[0];
    for (int i = 0; i < n; i++) lonly[1 + i] = (af_buffer){ NULL, AF_F32, bout[1 + i].count };

    /* A few entries of every param; each checked against (L(x+h) - L(x-h)) / 2h. */
    int checked = 0;
    for (int i = 0; i < n; i++) {
        int64_t cnt = bin[2 + i].count;
        for (int k = 0; k < 3; k++) {
            int64_t j = (int64_t)(test_uniform(&r) * cnt);
            float keep = vals[i][j];
            const float h = 1e-2f;
            float lp = 0, lm = 0;
            vals[i][j] = keep + h;
            af_run(m, bin, lonly);
            lp = lossv;
            vals[i][j] = keep - h;
            af_run(m, bin, lonly);
            lm = lossv;
            vals[i][j] = keep;
            double fd = ((double)lp - lm) / ((double)(keep + h) - (double)(keep - h));
            double an = grads[i][j];
            CHECK(fabs(an - fd) <= 2e-3 + 2e-2 * fabs(fd), "model %s param %d (%s) [%lld]: backward %.6g vs differences %.6g",
                  model, i, af_tensor_name(in[2 + i]), (long long)j, an, fd);
            checked++;
        }
    }
    CHECK(checked == 3 * n, "checked %d", checked);
    for (int i = 0; i < n; i++) { free(vals[i]); free(grads[i]); }
    free(vals);
    free(grads);
    free(onehot);
    af_model_free(m);
    af_graph_free(g);
    af_llama_weights_free(w);
}

/* ---------------------------------------------------------------- training and export */

static void test_train_and_export(void) {
    af_llama_config c;
    CHECK(af_llama_preset("tiny", 16, &c) == AF_OK, "%s", af_error_message());
    c.seq_len = 16;
    c.n_layers = 1;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return;
    /* Small random weights as model.py initialises them (N(0, 0.02)), norms at 1. */
    test_rng r = { 3 };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        const char *name;
        CHECK(af_llama_param_at(&c, i, &off, &s, &name) == AF_OK, "%s", af_error_message());
        for (int64_t j = 0; j < af_shape_count(s); j++)
            d[off + j] = s.rank == 1 ? 1.0f : (float)(0.02 * test_normal(&r));
    }
    const int B = 4, T = 8, V = c.vocab_size;
    af_net net = af_net_llama(w, T);
    CHECK(net.ctx != NULL, "af_net_llama: %s", af_error_message());
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.plan = AF_PLAN_HOST;
    o.batch = B;
    o.eval_batch = B;
    o.lr = 1e-2f;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "trainer: %s", af_error_message());
    if (!t) { af_llama_weights_free(w); return; }

    /* The repeated sequence 0 1 2 3 4 5 0 1 ...: row b starts at b; targets are the next tokens. */
    float x[4 * 8], *y = calloc((size_t)(B * T * V), sizeof(float));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            x[b * T + i] = (float)((b + i) % 6);
            y[((int64_t)b * T + i) * V + (b + i + 1) % 6] = 1.0f;
        }
    af_step_info info;
    double first = 0, last = 0;
    for (int s = 0; s < 40; s++) {
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step %d: %s", s, af_error_message());
        if (s == 0) first = info.loss;
        last = info.loss;
    }
    CHECK(fabs(first - log((double)V)) < 0.1, "first loss %.4f is near ln(vocab) %.4f for small weights", first, log((double)V));
    CHECK(last < 0.2 * first, "40 steps: loss %.4f -> %.4f", first, last);

    /* Trained params -> weights -> both file versions -> the same logits. */
    af_llama_weights *trained = af_llama_weights_new(&c);
    int n = af_trainer_num_params(t);
    CHECK(n == af_llama_param_count(&c), "trainer has %d params", n);
    for (int i = 0; trained && i < n; i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        float *v = malloc((size_t)af_shape_count(s) * sizeof(float));
        CHECK(af_trainer_read_param(t, i, v) == AF_OK && af_llama_weights_set_param(trained, i, v) == AF_OK, "param %d: %s",
              i, af_error_message());
        free(v);
    }
    float *pred = malloc(sizeof(float) * (size_t)(B * T * V));
    CHECK(af_trainer_predict(t, B, x, pred) == AF_OK, "predict: %s", af_error_message());
    CHECK(diff_to_host(trained, x, pred, B, T) <= 1e-5, "trained weights in the host forward give the trainer's logits");
    char dir[] = "/tmp/af_llama_modelXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    for (int version = 0; version <= 1; version++) {
        char path[256];
        snprintf(path, sizeof path, "%s/m%d.bin", dir, version);
        CHECK(af_llama_save(trained, path, version) == AF_OK, "save: %s", af_error_message());
        af_llama_weights *back = af_llama_load(path, NULL);
        CHECK(back != NULL, "load: %s", af_error_message());
        float *logits = back ? graph_logits(back, x, B, T, version) : NULL;
        double maxd = 0;
        for (int i = 0; logits && i < B * T * V; i++) maxd = fmax(maxd, fabs((double)logits[i] - pred[i]));
        CHECK(logits && maxd <= 1e-5, "v%d round trip: logits differ by %.3g", version, maxd);
        free(logits);
        af_llama_weights_free(back);
        unlink(path);
    }
    rmdir(dir);
    /* af_llama_weights_from_params reads a graph's masters back exactly. */
    af_graph *g = af_graph_new();
    af_tensor *p[MAXP];
    int np = af_llama_params_new(g, trained, p, MAXP);
    af_llama_weights *copy = af_llama_weights_new(&c);
    CHECK(copy && af_llama_weights_from_params(copy, p, np) == AF_OK, "from_params: %s", af_error_message());
    CHECK(copy && !memcmp(af_llama_weights_data(copy), af_llama_weights_data(trained),
                          (size_t)af_llama_weight_count(&c) * sizeof(float)), "from_params copies every weight");
    CHECK(af_llama_params_new(g, trained, p, 3) == -1, "too little room is refused");
    af_llama_weights_free(copy);
    af_graph_free(g);
    free(pred);
    free(y);
    af_llama_weights_free(trained);
    af_trainer_free(t);
    af_llama_weights_free(w);
}

/* On ane-sim (fp16, the engine's rules) the model compiles (the one-hot embedding: the
 * engine has no scatter) and the same steps lower the loss too. */
static void test_train_ane_sim(void) {
    af_llama_config c;
    CHECK(af_llama_preset("tiny", 16, &c) == AF_OK, "%s", af_error_message());
    c.seq_len = 8;
    c.n_layers = 1;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return;
    test_rng r = { 4 };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        for (int64_t j = 0; j < af_shape_count(s); j++) d[off + j] = s.rank == 1 ? 1.0f : (float)(0.02 * test_normal(&r));
    }
    const int B = 4, T = 8, V = 16;
    af_net net = af_net_llama(w, T);
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.batch = o.eval_batch = B;
    o.lr = 1e-2f;
    o.compile.target = AF_TARGET_ANE_SIM;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "ane-sim trainer: %s", af_error_message());
    float x[4 * 8], y[4 * 8 * 16] = { 0 };
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            x[b * T + i] = (float)((b + i) % 6);
            y[(b * T + i) * V + (b + i + 1) % 6] = 1.0f;
        }
    af_step_info info;
    double first = 0;
    for (int s = 0; t && s < 30; s++) {
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "ane-sim step %d: %s", s, af_error_message());
        if (s == 0) first = info.loss;
    }
    CHECK(t && info.skipped == 0 && info.loss < 0.2 * first, "ane-sim: loss %.4f -> %.4f", first, t ? info.loss : 0.0);
    af_trainer_free(t);
    af_llama_weights_free(w);
}

/* Bad input is refused with a message that names the problem, never a crash. */
static void test_errors(void) {
    af_llama_weights *w = load_fixture("b", 1);
    if (!w) return;
    const af_llama_config *c = af_llama_weights_config(w);
    CHECK(af_llama_param_count(c) == 9 * 3 + 3, "model b (3 layers, separate classifier) has 30 params");
    CHECK(af_llama_param_at(c, 30, NULL, NULL, NULL) == AF_ERR_INVALID && strstr(af_error_message(), "30"), "param 30: %s",
          af_error_message());
    af_shape s;
    const char *name;
    CHECK(af_llama_param_at(c, 2 + 3, NULL, &s, &name) == AF_OK && !strcmp(name, "wq") && s.rank == 2 &&
          s.dim[0] == c->dim && s.dim[1] == c->dim, "param 5 is layer 1's wq");
    af_graph *g = af_graph_new();
    af_tensor *p[MAXP], *tok = af_input(g, "tokens", AF_F32, AF_SHAPE(1, 4));
    int n = af_llama_params_new(g, w, p, MAXP);
    af_tensor *keep = p[3];
    p[3] = p[4]; /* wq where rms_att is expected */
    CHECK(af_llama(c, tok, p) == NULL && strstr(af_graph_error(g), "shape"), "a misplaced param: %s", af_graph_error(g));
    p[3] = keep;
    af_graph *g2 = af_graph_new();
    CHECK(af_llama(c, af_input(g2, "t", AF_F32, AF_SHAPE(4)), p) == NULL && strstr(af_graph_error(g2), "[batch, seq]"),
          "rank-1 tokens: %s", af_graph_error(g2));
    CHECK(af_llama(c, NULL, p) == NULL, "NULL tokens");
    af_net net = af_net_llama(w, c->seq_len + 1);
    CHECK(net.ctx == NULL && strstr(af_error_message(), "seq"), "seq beyond seq_len: %s", af_error_message());
    CHECK(n == 30 && af_llama_weights_from_params(w, p, n - 1) == AF_ERR_INVALID, "a param short");
    af_graph_free(g2);
    af_graph_free(g);
    af_llama_weights_free(w);
}

int main(void) {
    test_errors();
    test_logits_match_host();
    for (int told = 0; told <= 1; told++) {
        test_gradients("a", told);
        test_gradients("b", told);
    }
    test_train_ane_sim();
    test_train_and_export();
    return check_finish("llama_model");
}
