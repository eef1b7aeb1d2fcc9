/* Core ML packages (src/coreml): an MLP exported with trained weights and read back runs
 * equal to a naive double loop; a built-in program survives export -> import bit for
 * bit (against the MIL round trip); hand-built protobufs in proto3's sparse form (a
 * rank-0 type with its rank left out) import; and bad packages are refused with the
 * status and message that name the problem: an existing target, a garbage or escaping
 * manifest, truncated protobufs, a neural-network model, flexible shapes, control flow.
 * coremltools' own view of these packages is tests/coreml/check_coremltools.py. */
#define _XOPEN_SOURCE 700 /* POSIX: opendir, unlink */
#include "aneforge.h"
#include "aneforge_llama.h"
#include "aneforge_data.h"
#include "aneforge_coreml.h"
#include "coreml/coreml.h"
#include "mil/mil.h"
#include "support/check.h"
#include "support/tmpdir.h"
#include "support/milrun.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif


static void write_bytes(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n && !fclose(f), "write %s", path);
}

/* Runs a graph's out from in on the CPU in fp32 (the program's fp16 values are exact). */
static void run_graph(af_graph *g, int nin, af_tensor **in, const float *const *x, int nout, af_tensor **out, float **y) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return;
    af_buffer bi[4], bo[4];
    for (int i = 0; i < nin; i++) bi[i] = AF_BUF_F32((float *)x[i], af_shape_count(af_tensor_shape(in[i])));
    for (int i = 0; i < nout; i++) bo[i] = AF_BUF_F32(y[i], af_shape_count(af_tensor_shape(out[i])));
    CHECK(af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
}

static float h(float v) { return af_f16_to_f32(af_f32_to_f16(v)); }

static void test_mlp_export(void) {
    enum { IN = 6, HID = 5, CLS = 3, B = 2 };
    af_net net = af_net_mlp(AF_SHAPE(IN), HID, CLS, 1);
    test_rng r = { 42 };
    float w1[HID * IN], b1[HID], w2[CLS * HID], b2[CLS], x[B * IN];
    test_fill_uniform(&r, w1, HID * IN, -1, 1);
    test_fill_uniform(&r, b1, HID, -1, 1);
    test_fill_uniform(&r, w2, CLS * HID, -1, 1);
    test_fill_uniform(&r, b2, CLS, -1, 1);
    test_fill_uniform(&r, x, B * IN, -1, 1);
    const float *w[4] = { w1, b1, w2, b2 };
    af_coreml_opts o = { .author = "tests", .license = "MIT", .version = "1.0", .description = "a tiny MLP" };
    const char *pkg = path_in("mlp.mlpackage");
    CHECK(af_coreml_export_net(&net, B, w, &o, pkg) == AF_OK, "export: %s", af_error_message());
    af_net_free(&net);
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;
    CHECK(af_coreml_load(pkg, &g, &nin, &in, &nout, &out) == AF_OK, "load: %s", af_error_message());
    if (!g) return;
    CHECK(nin == 1 && nout == 1 && !strcmp(af_tensor_name(in[0]), "input"), "one input called input");
    af_shape s = af_tensor_shape(out[0]);
    CHECK(s.rank == 2 && s.dim[0] == B && s.dim[1] == CLS, "output [%d, %d]", B, CLS);
    float y[B * CLS], *ys[1] = { y };
    const float *xs[1] = { x };
    run_graph(g, 1, in, xs, 1, out, ys);
    af_graph_free(g);
    /* the reference: the same MLP in doubles on the fp16-rounded weights */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < CLS; c++) {
            double acc = h(b2[c]);
            for (int j = 0; j < HID; j++) {
                double a = h(b1[j]);
                for (int i = 0; i < IN; i++) a += (double)h(w1[j * IN + i]) * h(x[b * IN + i]);
                acc += (double)h(w2[c * HID + j]) * (a > 0 ? a : 0);
            }
            CHECK_NEAR(y[b * CLS + c], acc, 2e-2 * (1 + fabs(acc)), "mlp output");
        }
    /* the package's files, and no temporary left beside it */
    struct stat sb;
    CHECK(!stat(path_in("mlp.mlpackage/Manifest.json"), &sb), "Manifest.json");
    CHECK(!stat(path_in("mlp.mlpackage/Data/com.apple.CoreML/model.mlmodel"), &sb), "model.mlmodel");
    CHECK(!stat(path_in("mlp.mlpackage/Data/com.apple.CoreML/weights/weight.bin"), &sb), "weight.bin");
    /* a second export to the same path is refused, and says how to proceed */
    net = af_net_mlp(AF_SHAPE(IN), HID, CLS, 1);
    CHECK(af_coreml_export_net(&net, B, w, NULL, pkg) == AF_ERR_IO && strstr(af_error_message(), "already exists; remove it"),
          "existing target: %s", af_error_message());
    af_net_free(&net);
}

/* The exported MLP imported again, its weights made parameters, fine-tuned for a few SGD
 * steps on ane-sim against a fixed target, frozen and exported again: the loss falls,
 * and the re-exported package computes the tuned model. */
static void test_finetune(void) {
    enum { B = 2, CLS = 3, STEPS = 40 };
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;
    CHECK(af_coreml_load(path_in("mlp.mlpackage"), &g, &nin, &in, &nout, &out) == AF_OK, "load: %s", af_error_message());
    if (!g) return;
    af_tensor *p[8];
    CHECK(af_coreml_params(g, "nothing*", p, 8) == -1 && strstr(af_error_message(), "no weight constant is named like 'nothing*'"),
          "no match: %s", af_error_message());
    int np = af_coreml_params(g, "*", p, 8);
    CHECK(np == 4, "4 weight constants become parameters, not %d: %s", np, af_error_message());
    if (np != 4) { af_graph_free(g); return; }
    af_tensor *target = af_input(g, "target", AF_F16, AF_SHAPE(B, CLS));
    af_loss *loss = af_mse(out[0], target);
    af_tensor *grads[4], *ins[6] = { in[0], target, p[0], p[1], p[2], p[3] }, *outs[5];
    CHECK(af_backward(loss, 4, p, grads, NULL) == AF_OK, "backward: %s", af_error_message());
    outs[0] = af_loss_value(loss);
    for (int i = 0; i < 4; i++) outs[i + 1] = grads[i];
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .threads = 1 };
    af_model *m = af_compile(g, 6, ins, 5, outs, &o);
    CHECK(m != NULL, "compile on ane-sim: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    test_rng r = { 5 };
    float x[B * 6], t[B * CLS], *w[4], *gw[4], l = 0, first = 0;
    test_fill_uniform(&r, x, B * 6, -1, 1);
    test_fill_uniform(&r, t, B * CLS, -1, 1);
    int64_t cnt[4];
    af_buffer bi[6] = { AF_BUF_F32(x, B * 6), AF_BUF_F32(t, B * CLS) }, bo[5] = { AF_BUF_F32(&l, 1) };
    for (int i = 0; i < 4; i++) {
        cnt[i] = af_shape_count(af_tensor_shape(p[i]));
        w[i] = malloc(sizeof(float) * (size_t)cnt[i]);
        gw[i] = malloc(sizeof(float) * (size_t)cnt[i]);
        memcpy(w[i], p[i]->data, sizeof(float) * (size_t)cnt[i]); /* the imported weights */
        bi[i + 2] = AF_BUF_F32(w[i], cnt[i]);
        bo[i + 1] = AF_BUF_F32(gw[i], cnt[i]);
    }
    for (int s = 0; s < STEPS; s++) {
        CHECK(af_run(m, bi, bo) == AF_OK, "step %d: %s", s, af_error_message());
        if (!s) first = l;
        for (int i = 0; i < 4; i++)
            for (int64_t k = 0; k < cnt[i]; k++) w[i][k] -= 0.2f * gw[i][k];
    }
    CHECK(af_run(m, bi, bo) == AF_OK, "last: %s", af_error_message());
    CHECK(l < 0.5f * first, "fine-tuning lowers the loss: %g -> %g", first, l);
    af_model_free(m);
    CHECK(af_coreml_freeze(4, p, (const float *const *)w) == AF_OK, "freeze: %s", af_error_message());
    CHECK(af_coreml_freeze(1, &in[0], NULL) == AF_ERR_INVALID && strstr(af_error_message(), "is not a parameter"), "freeze an input");
    CHECK(af_coreml_export(g, 1, in, 1, out, NULL, path_in("tuned.mlpackage")) == AF_OK, "export again: %s", af_error_message());
    af_graph_free(g);
    CHECK(af_coreml_load(path_in("tuned.mlpackage"), &g, &nin, &in, &nout, &out) == AF_OK, "load tuned: %s", af_error_message());
    if (g) {
        float y[B * CLS], *ys[1] = { y };
        const float *xs[1] = { x };
        run_graph(g, 1, in, xs, 1, out, ys);
        double mse = 0;
        for (int k = 0; k < B * CLS; k++) mse += (double)(y[k] - t[k]) * (y[k] - t[k]) / (B * CLS);
        CHECK(fabs(mse - l) <= 0.02 * (l + 1e-3) + 1e-3, "the tuned package's loss %g is the trained one %g", mse, (double)l);
        af_graph_free(g);
    }
    for (int i = 0; i < 4; i++) free(w[i]), free(gw[i]);
}

/* A tiny llama (tests/fixtures/llama, model a) exported as the stateless forward over its
 * 16 tokens: the package's logits equal llama2.c's reference logits within fp16. */
static void test_llama_export(void) {
    af_llama_weights *w = af_llama_load(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_v0.bin", NULL);
    CHECK(w != NULL, "model a: %s", af_error_message());
    if (!w) return;
    af_net net = af_net_llama(w, 16);
    CHECK(af_coreml_export_net(&net, 1, NULL, NULL, path_in("llama.mlpackage")) == AF_OK, "export: %s", af_error_message());
    af_net_free(&net);
    af_llama_weights_free(w);
    int rank;
    int64_t dims[AF_MAX_RANK];
    float *tok = NULL, *ref = NULL;
    CHECK(af_npy_read(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_tokens.npy", &tok, &rank, dims) == AF_OK, "tokens");
    CHECK(af_npy_read(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_logits.npy", &ref, &rank, dims) == AF_OK && dims[0] * dims[1] == 16 * 37, "logits");
    af_graph *g;
    af_tensor **in, **out;
    int nin, nout;
    CHECK(af_coreml_load(path_in("llama.mlpackage"), &g, &nin, &in, &nout, &out) == AF_OK, "load: %s", af_error_message());
    if (g && tok && ref) {
        float y[16 * 37], *ys[1] = { y };
        const float *xs[1] = { tok };
        run_graph(g, 1, in, xs, 1, out, ys);
        double worst = 0, top = 0;
        for (int i = 0; i < 16 * 37; i++) {
            worst = fmax(worst, fabs(y[i] - ref[i]));
            top = fmax(top, fabs(ref[i]));
        }
        CHECK(worst <= 2e-2 * top, "llama logits: worst %g of %g", worst, top);
    }
    af_graph_free(g);
    free(tok);
    free(ref);
}

/* A package coremltools converted (tests/fixtures/coreml): imported, it computes
 * softmax(relu(x W0' + b0) W1' + b1) with the weights it holds (a double loop); its four
 * linear weights fine-tune on ane-sim and the re-exported package holds the tuned model. */
static double mlp2_ref(af_tensor *const *p, const float *x, const float *t, float *y) {
    const float *w0 = p[0]->data, *b0 = p[1]->data, *w1 = p[2]->data, *b1 = p[3]->data;
    double mse = 0;
    for (int b = 0; b < 2; b++) {
        double hid[8], z[5], mx = -1e30, sum = 0;
        for (int j = 0; j < 8; j++) {
            hid[j] = b0[j];
            for (int i = 0; i < 6; i++) hid[j] += (double)w0[j * 6 + i] * x[b * 6 + i];
            hid[j] = hid[j] > 0 ? hid[j] : 0;
        }
        for (int c = 0; c < 5; c++) {
            z[c] = b1[c];
            for (int j = 0; j < 8; j++) z[c] += (double)w1[c * 8 + j] * hid[j];
            mx = fmax(mx, z[c]);
        }
        for (int c = 0; c < 5; c++) sum += exp(z[c] - mx);
        for (int c = 0; c < 5; c++) {
            double v = exp(z[c] - mx) / sum;
            if (y) y[b * 5 + c] = (float)v;
            mse += (v - t[b * 5 + c]) * (v - t[b * 5 + c]) / 10;
        }
    }
    return mse;
}

static void test_finetune_converted(void) {
    af_graph *g;
    af_tensor **in, **out, *p[8];
    int nin, nout;
    CHECK(af_coreml_load(AF_SOURCE_DIR "/tests/fixtures/coreml/mlp2_fp16.mlpackage", &g, &nin, &in, &nout, &out) == AF_OK,
          "load: %s", af_error_message());
    if (!g) return;
    test_rng r = { 9 };
    float x[12], t[10] = { 1, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, y[10], *ys[1] = { y };
    test_fill_uniform(&r, x, 12, -1, 1);
    const float *xs[1] = { x };
    run_graph(g, 1, in, xs, 1, out, ys); /* as imported, before any weight is a parameter */
    int np = af_coreml_params(g, "linear_*", p, 8);
    CHECK(np == 4, "the 4 linear weights and biases, not %d: %s", np, af_error_message());
    if (np != 4) { af_graph_free(g); return; }
    af_tensor *q[4]; /* in the reference's order: weight 0, bias 0, weight 1, bias 1 */
    for (int i = 0; i < 4; i++) {
        const char *n = af_tensor_name(p[i]);
        q[(strstr(n, "linear_1") ? 2 : 0) + (strstr(n, "bias") ? 1 : 0)] = p[i];
    }
    float want[10];
    double first = mlp2_ref(q, x, t, want);
    for (int i = 0; i < 10; i++) CHECK_NEAR(y[i], want[i], 2e-2 * fabs(want[i]) + 2e-3, "imported mlp2 output");
    /* the engine takes fp16 inputs: the package's fp32 x is cast to fp16 at once, so declare it fp16 */
    CHECK(af_coreml_fp16_inputs(g, 1, in) == AF_OK, "fp16 inputs: %s", af_error_message());
    af_tensor *target = af_input(g, "target", AF_F16, AF_SHAPE(2, 5));
    af_loss *loss = af_mse(af_cast(out[0], AF_F16), target); /* the package ends in a cast to fp32 */
    af_tensor *grads[4], *outs[5], *ins[6] = { in[0], target, q[0], q[1], q[2], q[3] };
    CHECK(af_backward(loss, 4, q, grads, NULL) == AF_OK, "backward: %s", af_error_message());
    outs[0] = af_loss_value(loss);
    for (int i = 0; i < 4; i++) outs[i + 1] = grads[i];
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .threads = 1 };
    af_model *m = af_compile(g, 6, ins, 5, outs, &o);
    CHECK(m != NULL, "compile on ane-sim: %s", af_error_message());
    float l = 0, *w[4], *gw[4];
    int64_t cnt[4];
    af_buffer bi[6] = { AF_BUF_F32(x, 12), AF_BUF_F32(t, 10) }, bo[5] = { AF_BUF_F32(&l, 1) };
    for (int i = 0; i < 4; i++) {
        cnt[i] = af_shape_count(af_tensor_shape(q[i]));
        w[i] = malloc(sizeof(float) * (size_t)cnt[i]);
        gw[i] = malloc(sizeof(float) * (size_t)cnt[i]);
        memcpy(w[i], q[i]->data, sizeof(float) * (size_t)cnt[i]);
        bi[i + 2] = AF_BUF_F32(w[i], cnt[i]);
        bo[i + 1] = AF_BUF_F32(gw[i], cnt[i]);
    }
    for (int s = 0; m && s < 60; s++) {
        CHECK(af_run(m, bi, bo) == AF_OK, "step %d: %s", s, af_error_message());
        for (int i = 0; i < 4; i++)
            for (int64_t k = 0; k < cnt[i]; k++) w[i][k] -= 2.0f * gw[i][k];
    }
    af_model_free(m);
    CHECK(af_coreml_freeze(4, q, (const float *const *)w) == AF_OK, "freeze: %s", af_error_message());
    double tuned = mlp2_ref(q, x, t, NULL);
    CHECK(tuned < 0.5 * first, "fine-tuning the converted model lowers the loss: %g -> %g", first, tuned);
    CHECK(af_coreml_export(g, 1, in, 1, out, NULL, path_in("mlp2_tuned.mlpackage")) == AF_OK, "export: %s", af_error_message());
    af_graph_free(g);
    CHECK(af_coreml_load(path_in("mlp2_tuned.mlpackage"), &g, &nin, &in, &nout, &out) == AF_OK, "reload: %s", af_error_message());
    if (g) {
        run_graph(g, 1, in, xs, 1, out, ys);
        double mse = 0;
        for (int i = 0; i < 10; i++) mse += (double)(y[i] - t[i]) * (y[i] - t[i]) / 10;
        CHECK(fabs(mse - tuned) <= 0.05 * tuned + 1e-3, "the re-exported package's loss %g is the tuned %g", mse, tuned);
        af_graph_free(g);
    }
    for (int i = 0; i < 4; i++) free(w[i]), free(gw[i]);
}

static void test_sample_roundtrip(void) {
    const char *names[] = { "conv", "attention" };
    for (int k = 0; k < 2; k++) {
        mil_sample s;
        CHECK(mil_sample_build(names[k], &s) == AF_OK, "sample %s", names[k]);
        const char *pkg = path_in(k ? "attention.mlpackage" : "conv.mlpackage");
        CHECK(af_coreml_export(s.g, s.nin, s.in, s.nout, s.out, NULL, pkg) == AF_OK, "export %s: %s", names[k], af_error_message());
        mil_module a, b;
        CHECK(mil_roundtrip(s.g, s.nin, s.in, s.nout, s.out, &a) == AF_OK, "roundtrip");
        CHECK(coreml_load_module(pkg, NULL, &b) == AF_OK, "load %s: %s", names[k], af_error_message());
        if (!a.g || !b.g) return;
        CHECK(a.nin == b.nin && a.nout == b.nout && a.nin <= 4 && a.nout <= 4, "same interface");
        test_rng r = { 7 };
        float *x[4] = { 0 }, *ya[4] = { 0 }, *yb[4] = { 0 };
        for (int i = 0; i < a.nin; i++) {
            /* b's arguments come in MIL (alphabetical) order, as a's do after the round trip's reorder: match by name */
            int64_t n = af_shape_count(a.in[i]->shape);
            x[i] = malloc(sizeof(float) * (size_t)n);
            test_fill_uniform(&r, x[i], n, -1, 1);
            CHECK(!strcmp(a.in_names[i], b.in_names[i]) || a.nin == 1, "argument %d: %s vs %s", i, a.in_names[i], b.in_names[i]);
        }
        for (int i = 0; i < a.nout; i++) {
            int64_t n = af_shape_count(a.out[i]->shape);
            ya[i] = malloc(sizeof(float) * (size_t)n);
            yb[i] = malloc(sizeof(float) * (size_t)n);
        }
        test_mil_run(&a, (const float *const *)x, ya);
        test_mil_run(&b, (const float *const *)x, yb);
        for (int i = 0; i < a.nout; i++)
            CHECK(!memcmp(ya[i], yb[i], sizeof(float) * (size_t)af_shape_count(a.out[i]->shape)), "%s output %d equal bit for bit", names[k], i);
        for (int i = 0; i < 4; i++) free(x[i]), free(ya[i]), free(yb[i]);
        af_graph_free(a.g);
        af_graph_free(b.g);
        af_graph_free(s.g);
    }
}

/* ---------------------------------------------------------------- hand-built protobufs */

/* ValueType for a static tensor; rank_field false leaves rank out as proto3 does for 0. */
static void vtype(pb_buf *b, int field, int dt, int rank, const int64_t *dims, bool rank_field, bool unknown) {
    pb_buf tt = { 0 }, vt = { 0 };
    pb_uint(&tt, 1, (uint64_t)dt);
    if (rank_field) pb_uint(&tt, 2, (uint64_t)rank);
    for (int i = 0; i < rank; i++) {
        pb_buf c = { 0 }, d = { 0 };
        if (unknown) { pb_uint(&c, 1, 0); pb_msg(&d, 2, &c); }
        else { pb_uint(&c, 1, (uint64_t)dims[i]); pb_msg(&d, 1, &c); }
        pb_msg(&tt, 3, &d);
    }
    pb_msg(&vt, 1, &tt);
    pb_msg(b, field, &vt);
}

static void entry_value_str(pb_buf *op, const char *k, const char *v) {
    pb_buf e = { 0 }, val = { 0 }, iv = { 0 }, tv = { 0 }, rep = { 0 };
    pb_str(&e, 1, k);
    vtype(&val, 2, 2, 0, NULL, false, false);
    pb_str(&rep, 1, v);
    pb_msg(&tv, 4, &rep);
    pb_msg(&iv, 1, &tv);
    pb_msg(&val, 3, &iv);
    pb_msg(&e, 2, &val);
    pb_msg(op, 5, &e);
}

/* main(fp32 [2] x) { three = const 3.0 (rank left out); y = mul(x, three) } -> y.
 * flexible: x's dimension unknown; blocks: the mul carries a nested block. */
static void model(pb_buf *m, bool flexible, bool blocks, int type_field) {
    int64_t two = 2;
    pb_buf blk = { 0 }, c = { 0 }, mul = { 0 };
    pb_str(&c, 1, "const");
    pb_buf nv = { 0 };
    pb_str(&nv, 1, "three");
    vtype(&nv, 2, 11, 0, NULL, false, false);
    pb_msg(&c, 3, &nv);
    entry_value_str(&c, "name", "three");
    pb_buf e = { 0 }, val = { 0 }, iv = { 0 }, tv = { 0 }, rep = { 0 }, packed = { 0 };
    float three = 3.0f;
    pb_raw(&packed, &three, 4);
    pb_msg(&rep, 1, &packed);
    pb_msg(&tv, 1, &rep);
    pb_msg(&iv, 1, &tv);
    vtype(&val, 2, 11, 0, NULL, false, false);
    pb_msg(&val, 3, &iv);
    pb_str(&e, 1, "val");
    pb_msg(&e, 2, &val);
    pb_msg(&c, 5, &e);
    pb_msg(&blk, 3, &c);
    pb_str(&mul, 1, "mul");
    const char *in[2][2] = { { "x", "x" }, { "y", "three" } };
    for (int i = 0; i < 2; i++) {
        pb_buf ent = { 0 }, arg = { 0 }, bd = { 0 };
        pb_str(&ent, 1, in[i][0]);
        pb_str(&bd, 1, in[i][1]);
        pb_msg(&arg, 1, &bd);
        pb_msg(&ent, 2, &arg);
        pb_msg(&mul, 2, &ent);
    }
    pb_buf o = { 0 };
    pb_str(&o, 1, "y");
    vtype(&o, 2, 11, 1, &two, true, false);
    pb_msg(&mul, 3, &o);
    if (blocks) { pb_buf inner = { 0 }; pb_str(&inner, 2, "y"); pb_msg(&mul, 4, &inner); }
    entry_value_str(&mul, "name", "y");
    pb_msg(&blk, 3, &mul);
    pb_str(&blk, 2, "y");
    pb_buf fn = { 0 }, arg = { 0 };
    pb_str(&arg, 1, "x");
    vtype(&arg, 2, 11, 1, &two, true, flexible);
    pb_msg(&fn, 1, &arg);
    pb_str(&fn, 2, "CoreML6");
    pb_buf spec = { 0 };
    pb_str(&spec, 1, "CoreML6");
    pb_msg(&spec, 2, &blk);
    pb_msg(&fn, 3, &spec);
    pb_buf prog = { 0 }, fe = { 0 };
    pb_uint(&prog, 1, 1);
    pb_str(&fe, 1, "main");
    pb_msg(&fe, 2, &fn);
    pb_msg(&prog, 2, &fe);
    pb_uint(m, 1, 7);
    pb_msg(m, type_field, &prog);
}

static af_status decode_run(const pb_buf *m, float *y) {
    pb_buf text;
    af_status st = coreml_decode(m->p, m->n, "hand.mlmodel", &text);
    if (st) return st;
    mil_module mod;
    st = mil_parse((const char *)text.p, text.n, NULL, &mod);
    pb_free(&text);
    if (st) return st;
    float x[2] = { 1.5f, -2.0f };
    const float *xs[1] = { x };
    float *ys[1] = { y };
    test_mil_run(&mod, xs, ys);
    af_graph_free(mod.g);
    return AF_OK;
}

static void test_hand_built(void) {
    pb_buf m = { 0 };
    model(&m, false, false, 502);
    float y[2] = { 0, 0 };
    CHECK(decode_run(&m, y) == AF_OK, "proto3 defaults: %s", af_error_message());
    CHECK(y[0] == 4.5f && y[1] == -6.0f, "x * 3: %g %g", y[0], y[1]);
    /* every prefix is refused or read, never crashes; a cut inside a field is corruption */
    int refused = 0;
    for (size_t n = 0; n < m.n; n++) {
        pb_buf t;
        af_status st = coreml_decode(m.p, n, "cut.mlmodel", &t);
        if (st) {
            refused++;
            CHECK(st == AF_ERR_CORRUPT || st == AF_ERR_UNSUPPORTED, "prefix %zu: status %d", n, (int)st);
            CHECK(!strncmp(af_error_message(), "cut.mlmodel: ", 13), "prefix %zu names the file: %s", n, af_error_message());
        } else pb_free(&t);
    }
    CHECK(refused > (int)m.n / 2, "most prefixes refused (%d of %zu)", refused, m.n);
    pb_buf t;
    CHECK(coreml_decode(m.p, m.n - 1, "cut.mlmodel", &t) == AF_ERR_CORRUPT && strstr(af_error_message(), "malformed protobuf"),
          "cut model: %s", af_error_message());
    pb_free(&m);

    m = (pb_buf){ 0 };
    model(&m, false, false, 500);
    CHECK(coreml_decode(m.p, m.n, "nn.mlmodel", &t) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "convert_to=\"mlprogram\""),
          "neural network: %s", af_error_message());
    pb_free(&m);
    model(&m, true, false, 502);
    CHECK(coreml_decode(m.p, m.n, "flex.mlmodel", &t) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "flexible (unknown) dimension"),
          "flexible: %s", af_error_message());
    pb_free(&m);
    model(&m, false, true, 502);
    CHECK(coreml_decode(m.p, m.n, "cf.mlmodel", &t) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "nested blocks (control flow)"),
          "control flow: %s", af_error_message());
    pb_free(&m);
    const uint8_t group[] = { 0x0b, 0x0c };
    CHECK(coreml_decode(group, 2, "g.mlmodel", &t) == AF_ERR_CORRUPT && strstr(af_error_message(), "group or unknown wire type"),
          "group: %s", af_error_message());
    const uint8_t bigvar[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f };
    CHECK(coreml_decode(bigvar, sizeof bigvar, "v.mlmodel", &t) == AF_ERR_CORRUPT && strstr(af_error_message(), "over 10 bytes"),
          "varint: %s", af_error_message());
}

static void test_manifests(void) {
    char p[1024];
    const char *ok = "{\"fileFormatVersion\": \"1.0.0\", \"itemInfoEntries\": {\"A\": {\"path\": \"com.apple.CoreML/model.mlmodel\", "
                     "\"x\": [1, 2.5e3, true, null]}}, \"rootModelIdentifier\": \"A\"}";
    CHECK(coreml_manifest_root(ok, strlen(ok), "M", p, sizeof p) == AF_OK && !strcmp(p, "com.apple.CoreML/model.mlmodel"), "manifest: %s", af_error_message());
    const char *noroot = "{\"itemInfoEntries\": {}}";
    CHECK(coreml_manifest_root(noroot, strlen(noroot), "M", p, sizeof p) == AF_ERR_CORRUPT && strstr(af_error_message(), "no rootModelIdentifier"),
          "no root: %s", af_error_message());
    const char *dangling = "{\"itemInfoEntries\": {\"B\": {\"path\": \"x\"}}, \"rootModelIdentifier\": \"A\"}";
    CHECK(coreml_manifest_root(dangling, strlen(dangling), "M", p, sizeof p) == AF_ERR_CORRUPT && strstr(af_error_message(), "has no entry"),
          "dangling root: %s", af_error_message());
    for (size_t n = 0; n < strlen(ok); n++) /* every prefix of a manifest is refused */
        CHECK(coreml_manifest_root(ok, n, "M", p, sizeof p) == AF_ERR_CORRUPT, "prefix %zu", n);
    char deep[200];
    memset(deep, '[', sizeof deep);
    deep[0] = '{';
    CHECK(coreml_manifest_root(deep, sizeof deep, "M", p, sizeof p) == AF_ERR_CORRUPT, "deep nesting refused");

    /* a package whose manifest sends the model outside it */
    const char *pkg = path_in("evil.mlpackage");
    mkdir(pkg, 0777);
    const char *evil = "{\"itemInfoEntries\": {\"A\": {\"path\": \"../../etc/passwd\"}}, \"rootModelIdentifier\": \"A\"}";
    write_bytes(path_in("evil.mlpackage/Manifest.json"), evil, strlen(evil));
    af_graph *g = (af_graph *)1;
    CHECK(af_coreml_load(pkg, &g, NULL, NULL, NULL, NULL) == AF_ERR_CORRUPT && strstr(af_error_message(), "leaves the package") && !g,
          "escaping manifest: %s", af_error_message());
    write_bytes(path_in("evil.mlpackage/Manifest.json"), "not json", 8);
    CHECK(af_coreml_load(pkg, &g, NULL, NULL, NULL, NULL) == AF_ERR_CORRUPT && strstr(af_error_message(), "not a valid manifest"),
          "garbage manifest: %s", af_error_message());
    CHECK(af_coreml_load(path_in("none.mlpackage"), &g, NULL, NULL, NULL, NULL) == AF_ERR_IO && strstr(af_error_message(), "cannot open"),
          "missing: %s", af_error_message());
    remove(path_in("evil.mlpackage/Manifest.json"));
    rmdir(pkg);
    /* an export that cannot create its folder leaves nothing behind */
    mil_sample s;
    CHECK(mil_sample_build("conv", &s) == AF_OK, "sample");
    CHECK(af_coreml_export(s.g, s.nin, s.in, s.nout, s.out, NULL, path_in("no/such/dir/M.mlpackage")) == AF_ERR_IO &&
          strstr(af_error_message(), "cannot create a folder beside"), "no folder: %s", af_error_message());
    af_coreml_opts old = { .ios = 14 }; /* iOS 15 is the first with mlProgram (test_coreml_targets: each target) */
    CHECK(af_coreml_export(s.g, s.nin, s.in, s.nout, s.out, &old, path_in("old.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "deployment target iOS 14: choose 15 to 18"), "iOS 14: %s", af_error_message());
    af_graph_free(s.g);
}

int main(void) {
    const char *tmp = test_tmpdir_make("af_coreml");
    if (!tmp) return 1;
    test_mlp_export();
    test_finetune();
    test_llama_export();
    test_finetune_converted();
    test_sample_roundtrip();
    test_hand_built();
    test_manifests();
    /* nothing but the packages themselves: no .part- folder left */
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d))) CHECK(!strstr(e->d_name, ".part-"), "temporary %s left behind", e->d_name);
    if (d) closedir(d);
    test_tmpdir_remove();
    return check_finish("coreml");
}
