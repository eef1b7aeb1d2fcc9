/* Core ML export, the remaining parts of issue 27: a classifier (its classify op and
 * description; imported, it returns the probabilities: a softmax of the MLP's logits
 * from a naive double loop), fp32 compute precision (the trained fp32 weights exactly,
 * fp32 records in weight.bin, fp32 inputs; equal to the double loop to 1e-5, which
 * fp16 weights miss), and af_coreml_net: an imported package trained by af_trainer on
 * the CPU and on ane-sim, re-exported, the new package computing what the trainer
 * predicts. coremltools' view of the same packages: tests/coreml/check_coremltools.py. */
#define _XOPEN_SOURCE 700 /* POSIX: opendir, unlink */
#include "aneforge.h"
#include "aneforge_coreml.h"
#include "mil/milblob.h"
#include "support/check.h"
#include "support/tmpdir.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IN = 6, HID = 5, CLS = 3 };
static float w1[HID * IN], b1[HID], w2[CLS * HID], b2[CLS];
static const float *W[4] = { w1, b1, w2, b2 };

/* The MLP's logits in doubles (r: round weights and input to fp16 first). */
static void mlp_ref(const float *x, int B, bool r, double *y) {
#define R(v) (r ? (double)af_f16_to_f32(af_f32_to_f16(v)) : (double)(v))
    for (int b = 0; b < B; b++)
        for (int c = 0; c < CLS; c++) {
            double acc = R(b2[c]);
            for (int j = 0; j < HID; j++) {
                double a = R(b1[j]);
                for (int i = 0; i < IN; i++) a += R(w1[j * IN + i]) * R(x[b * IN + i]);
                acc += R(w2[c * HID + j]) * (a > 0 ? a : 0);
            }
            y[b * CLS + c] = acc;
        }
#undef R
}

static bool load_run(const char *pkg, const float *x, float *y, int64_t ny, af_dtype *in_dt) {
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;
    CHECK(af_coreml_load(pkg, &g, &nin, &in, &nout, &out) == AF_OK, "load %s: %s", pkg, af_error_message());
    if (!g) return false;
    bool ok = nin == 1 && nout == 1 && af_shape_count(af_tensor_shape(out[0])) == ny;
    CHECK(ok, "%s: one input, one output of %lld elements", pkg, (long long)ny);
    if (in_dt) *in_dt = af_tensor_dtype(in[0]);
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = ok ? af_compile(g, 1, in, 1, out, &o) : NULL;
    CHECK(!ok || m, "compile: %s", af_error_message());
    if (m) {
        af_buffer bi = AF_BUF_F32((float *)x, af_shape_count(af_tensor_shape(in[0]))), bo = AF_BUF_F32(y, ny);
        ok = af_run(m, &bi, &bo) == AF_OK;
        CHECK(ok, "run: %s", af_error_message());
        af_model_free(m);
    }
    af_graph_free(g);
    return ok && m;
}

static bool file_has(const char *path, const char *s) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t i = 0; i + strlen(s) <= n; i++)
        if (!memcmp(buf + i, s, strlen(s))) return true;
    return false;
}

static void test_classifier(void) {
    test_rng r = { 7 };
    float x[IN];
    test_fill_uniform(&r, x, IN, -1, 1);
    const char *labels[] = { "cat", "dog", "bird", "fish" };
    af_net net = af_net_mlp(AF_SHAPE(IN), HID, CLS, 1);
    af_coreml_opts o = { .nclasses = 3, .class_labels = labels };
    const char *pkg = path_in("cls.mlpackage");
    CHECK(af_coreml_export_net(&net, 1, W, &o, pkg) == AF_OK, "classifier export: %s", af_error_message());
    const char *model = path_in("cls.mlpackage/Data/com.apple.CoreML/model.mlmodel");
    CHECK(file_has(model, "classLabel_probs") && file_has(model, "classify") && file_has(model, "bird"),
          "the model holds the classify op, its labels and the probabilities' name");
    /* imported, the classifier returns its probabilities: softmax of the logits */
    float y[CLS];
    double ref[CLS], sum = 0;
    mlp_ref(x, 1, true, ref);
    for (int c = 0; c < CLS; c++) sum += exp(ref[c]);
    if (load_run(pkg, x, y, CLS, NULL))
        for (int c = 0; c < CLS; c++) CHECK_NEAR(y[c], exp(ref[c]) / sum, 1e-2, "classifier probability");
    /* wrong label counts, duplicates and batches are refused, naming the fix */
    o.nclasses = 4;
    CHECK(af_coreml_export_net(&net, 1, W, &o, path_in("bad1.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "has shape [1, 3]; 4 class labels need [1, 4]"), "4 labels: %s", af_error_message());
    o.nclasses = 3;
    CHECK(af_coreml_export_net(&net, 2, W, &o, path_in("bad2.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "(export batch 1)"), "batch 2: %s", af_error_message());
    const char *dup[] = { "a", "b", "a" };
    o.class_labels = dup;
    CHECK(af_coreml_export_net(&net, 1, W, &o, path_in("bad3.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "class label 'a' is given twice"), "duplicates: %s", af_error_message());
    struct stat sb;
    CHECK(stat(path_in("bad1.mlpackage"), &sb) && stat(path_in("bad3.mlpackage"), &sb), "no package left by a refused export");
    /* integer labels (as ct.ClassifierConfig([0, 1, 2]) gives) */
    const char *ints[] = { "0", "1", "2" };
    o.class_labels = ints;
    CHECK(af_coreml_export_net(&net, 1, W, &o, path_in("cls_int.mlpackage")) == AF_OK, "int labels: %s", af_error_message());
    af_net_free(&net);
}

static void test_fp32(void) {
    enum { B = 2 };
    test_rng r = { 9 };
    float x[B * IN], y[B * CLS];
    test_fill_uniform(&r, x, B * IN, -1, 1);
    af_net net = af_net_mlp(AF_SHAPE(IN), HID, CLS, 1);
    af_coreml_opts o = { .precision = 32 };
    const char *pkg = path_in("fp32.mlpackage");
    CHECK(af_coreml_export_net(&net, B, W, &o, pkg) == AF_OK, "fp32 export: %s", af_error_message());
    double ref[B * CLS];
    mlp_ref(x, B, false, ref);
    af_dtype dt = AF_F16;
    if (load_run(pkg, x, y, B * CLS, &dt))
        for (int k = 0; k < B * CLS; k++) CHECK_NEAR(y[k], ref[k], 1e-5 * (1 + fabs(ref[k])), "fp32 output equals fp32 weights");
    CHECK(dt == AF_F32, "the input feature is fp32");
    milblob *b = NULL;
    CHECK(milblob_read_file(path_in("fp32.mlpackage/Data/com.apple.CoreML/weights/weight.bin"), &b) == AF_OK, "weight.bin");
    int nrec = milblob_count(b);
    CHECK(nrec >= 2, "the weight matrices are in weight.bin (%d records)", nrec);
    for (int i = 0; i < nrec; i++) {
        milblob_record rec;
        CHECK(milblob_record_at(b, i, &rec) == AF_OK && rec.dtype == AF_MILBLOB_FP32, "record %d is fp32", i);
    }
    milblob_free(b);
    o.precision = 8;
    CHECK(af_coreml_export_net(&net, B, W, &o, path_in("fp8.mlpackage")) == AF_ERR_INVALID &&
          strstr(af_error_message(), "precision 8: choose 16 or 32"), "precision 8: %s", af_error_message());
    af_net_free(&net);
}

/* The exported MLP (fp32) as an af_net: trained by af_trainer, its loss falls; exported
 * again, the package computes what the trainer predicts. */
static void train_imported(af_target target, const char *name) {
    enum { B = 4, STEPS = 30 };
    const char *src = path_in("train_src.mlpackage");
    struct stat sb;
    if (stat(src, &sb)) {
        af_net mlp = af_net_mlp(AF_SHAPE(IN), HID, CLS, 1);
        af_coreml_opts o = { .precision = 32 };
        CHECK(af_coreml_export_net(&mlp, B, W, &o, src) == AF_OK, "export: %s", af_error_message());
        af_net_free(&mlp);
    }
    af_net net;
    CHECK(af_coreml_net(src, "nothing*", &net) == AF_ERR_INVALID && strstr(af_error_message(), "no weight constant is named like"),
          "no match: %s", af_error_message());
    CHECK(af_coreml_net(src, NULL, &net) == AF_OK, "af_coreml_net: %s", af_error_message());
    if (!net.ctx) return;
    CHECK(net.sample.rank == 1 && net.sample.dim[0] == IN && net.out_dim == CLS, "sample [%d], out_dim %d", IN, CLS);
    af_train_opts to = af_train_defaults();
    to.optimizer = AF_OPT_SGD;
    to.lr = 0.1f;
    to.batch = B;
    to.eval_batch = B;
    to.compile.target = target;
    to.compile.threads = 1;
    af_trainer *t = af_trainer_new(&net, &to);
    CHECK(t != NULL, "%s trainer: %s", name, af_error_message());
    if (!t) { af_net_free(&net); return; }
    CHECK(af_trainer_num_params(t) == 4, "4 params, not %d", af_trainer_num_params(t));
    test_rng r = { 11 };
    float x[B * IN], onehot[B * CLS] = { 0 };
    test_fill_uniform(&r, x, B * IN, -1, 1);
    for (int b = 0; b < B; b++) onehot[b * CLS + b % CLS] = 1;
    af_step_info info;
    double first = 0;
    for (int s = 0; s < STEPS; s++) {
        CHECK(af_trainer_step(t, x, onehot, &info) == AF_OK, "%s step %d: %s", name, s, af_error_message());
        if (!s) first = info.loss;
    }
    CHECK(info.loss < 0.7 * first, "%s: training the imported package lowers the loss: %g -> %g", name, first, info.loss);
    float pred[B * CLS], y[B * CLS], *w[4];
    CHECK(af_trainer_predict(t, B, x, pred) == AF_OK, "predict: %s", af_error_message());
    for (int i = 0; i < 4; i++) {
        w[i] = malloc(sizeof(float) * (size_t)af_shape_count(af_tensor_shape(af_trainer_param(t, i))));
        CHECK(af_trainer_read_param(t, i, w[i]) == AF_OK, "read param %d", i);
    }
    char out[64];
    snprintf(out, sizeof out, "tuned_%s.mlpackage", name);
    af_coreml_opts o = { .precision = 32 };
    CHECK(af_coreml_export_net(&net, B, (const float *const *)w, &o, path_in(out)) == AF_OK, "re-export: %s", af_error_message());
    double tol = target == AF_TARGET_CPU ? 1e-4 : 2e-2;
    if (load_run(path_in(out), x, y, B * CLS, NULL))
        for (int k = 0; k < B * CLS; k++) CHECK_NEAR(y[k], pred[k], tol * (1 + fabs(pred[k])), "the tuned package predicts as the trainer");
    for (int i = 0; i < 4; i++) free(w[i]);
    af_trainer_free(t);
    af_net_free(&net);
    /* the program is fixed for the package's batch */
    CHECK(af_coreml_net(src, "*", &net) == AF_OK, "again");
    to.batch = to.eval_batch = B + 1;
    t = af_trainer_new(&net, &to);
    CHECK(!t && strstr(af_error_message(), "set the trainer's batch and eval_batch to the package's batch"),
          "batch %d: %s", B + 1, af_error_message());
    af_trainer_free(t);
    af_net_free(&net);
}

int main(void) {
    const char *tmp = test_tmpdir_make("af_coreml2");
    if (!tmp) return 1;
    test_rng r = { 3 };
    for (int i = 0; i < 4; i++) test_fill_uniform(&r, (float *)W[i], (long)(i == 0 ? HID * IN : i == 1 ? HID : i == 2 ? CLS * HID : CLS), -1, 1);
    test_classifier();
    test_fp32();
    train_imported(AF_TARGET_CPU, "cpu");
    train_imported(AF_TARGET_ANE_SIM, "anesim");
    test_tmpdir_remove();
    return check_finish("coreml_export");
}
