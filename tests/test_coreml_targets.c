/* Core ML deployment targets iOS 15 to 18 (issue 27): the MLP, the CNN and the tiny
 * llama exported for every target in fp16 and fp32 carry the target's specification
 * version (iOS N: N - 9) and opset name (CoreML<N - 10>, coremltools' numbering), the
 * input and output dtypes the target allows (iOS 15 has no fp16 features: fp32 with
 * casts inside), and, read back and run by aneforge's MIL reader, equal our own forward
 * (the trainer's fp32 predict; llama2.c's logits for the llama). fp16 packages of the
 * MLP and the CNN compute the same bits on every target; embeddings (gather, scatter)
 * lose the inputs older opsets lack and still equal a naive lookup; what a target
 * cannot express is refused naming the op, the target and the fix. coremltools' view of
 * the same packages: tests/coreml/check_coremltools.py. */
#define _XOPEN_SOURCE 700 /* POSIX: opendir, unlink */
#include "aneforge.h"
#include "aneforge_coreml.h"
#include "aneforge_llama.h"
#include "aneforge_data.h"
#include "coreml/coreml.h"
#include "ir/ir.h"
#include "support/check.h"
#include "support/tmpdir.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif


/* The whole of a small file, NUL-terminated (n: its size). */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static unsigned char buf[1 << 22];
    *n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[*n] = 0;
    return buf;
}

static bool has_bytes(const unsigned char *b, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(b + i, s, k)) return true;
    return false;
}

/* Model.specificationVersion (field 1, the first varint) and the opset name. */
static void check_header(const char *pkg, int ios, const char *label) {
    char p[300], opset[32];
    snprintf(p, sizeof p, "%s/Data/com.apple.CoreML/model.mlmodel", pkg);
    size_t n = 0;
    const unsigned char *b = slurp(p, &n);
    CHECK(b && n > 2 && b[0] == 0x08 && b[1] == ios - 9, "%s: specification version %d", label, ios - 9);
    snprintf(opset, sizeof opset, "CoreML%d", ios - 10);
    CHECK(b && has_bytes(b, n, opset), "%s: opset %s", label, opset);
    for (int other = 15; b && other <= 18; other++) {
        snprintf(opset, sizeof opset, "CoreML%d", other - 10);
        if (other != ios) CHECK(!has_bytes(b, n, opset), "%s: no opset %s", label, opset);
    }
}

/* Loads pkg, checks its input's dtype (and its output's: out_too), runs it on the CPU in
 * fp32 into y (ny elements). */
static bool load_run(const char *pkg, af_dtype io, bool out_too, const float *x, float *y, int64_t ny, const char *label) {
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;
    CHECK(af_coreml_load(pkg, &g, &nin, &in, &nout, &out) == AF_OK, "%s: load: %s", label, af_error_message());
    if (!g) return false;
    bool ok = nin == 1 && nout == 1 && af_shape_count(af_tensor_shape(out[0])) == ny;
    CHECK(ok, "%s: one input, one output of %lld elements", label, (long long)ny);
    CHECK(!ok || (af_tensor_dtype(in[0]) == io && (!out_too || af_tensor_dtype(out[0]) == io)), "%s: input%s %s", label,
          out_too ? " and output are" : " is", io == AF_F16 ? "fp16" : "fp32");
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = ok ? af_compile(g, 1, in, 1, out, &o) : NULL;
    CHECK(!ok || m, "%s: compile: %s", label, af_error_message());
    if (m) {
        af_buffer bi = AF_BUF_F32((float *)x, af_shape_count(af_tensor_shape(in[0]))), bo = AF_BUF_F32(y, ny);
        ok = af_run(m, &bi, &bo) == AF_OK;
        CHECK(ok, "%s: run: %s", label, af_error_message());
        af_model_free(m);
    }
    af_graph_free(g);
    return ok && m;
}

static double rel_err(const float *y, const float *ref, int64_t n) {
    double worst = 0, top = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)y[i] - ref[i]));
        top = fmax(top, fabs((double)ref[i]));
    }
    return worst / top;
}

/* Every target x precision of one net against ref; fp16 packages equal each other
 * bit for bit where same_bits (no scalar narrowed before iOS 17). */
static void all_targets(const char *name, const af_net *net, int batch, const float *x, const float *ref, int64_t ny,
                        bool same_bits) {
    float *y = malloc(sizeof *y * (size_t)ny), *y18 = malloc(sizeof *y18 * (size_t)ny);
    if (!y || !y18) { free(y), free(y18); CHECK(false, "out of memory"); return; }
    for (int prec = 32; prec >= 16; prec -= 16)
        for (int ios = 18; ios >= 15; ios--) {
            char label[96], file[96];
            snprintf(label, sizeof label, "%s iOS %d fp%d", name, ios, prec);
            snprintf(file, sizeof file, "%s_%d_%d.mlpackage", name, ios, prec);
            af_coreml_opts o = { .ios = ios, .precision = prec };
            const char *pkg = path_in(file);
            CHECK(af_coreml_export_net(net, batch, NULL, &o, pkg) == AF_OK, "%s: export: %s", label, af_error_message());
            check_header(pkg, ios, label);
            af_dtype io = prec == 16 && ios >= 16 ? AF_F16 : AF_F32;
            if (!load_run(pkg, io, true, x, y, ny, label)) continue;
            double err = rel_err(y, ref, ny), tol = prec == 32 ? 1e-4 : 2e-2;
            CHECK(err <= tol, "%s: equals our forward (relative %.3g, want <= %g)", label, err, tol);
            if (prec == 16 && ios == 18) memcpy(y18, y, sizeof *y * (size_t)ny);
            if (prec == 16 && ios < 18 && same_bits)
                CHECK(!memcmp(y, y18, sizeof *y * (size_t)ny), "%s: the same bits as the iOS 18 package", label);
        }
    free(y);
    free(y18);
}

/* Our forward: the trainer's fp32 predict on the CPU from the net's initial weights. */
static void predict(af_net *net, int batch, const float *x, float *ref) {
    af_train_opts to = af_train_defaults();
    to.batch = to.eval_batch = batch;
    to.compile.target = AF_TARGET_CPU;
    to.compile.precision = AF_PRECISION_FP32;
    to.compile.threads = 1;
    af_trainer *t = af_trainer_new(net, &to);
    CHECK(t && af_trainer_predict(t, batch, x, ref) == AF_OK, "predict: %s", af_error_message());
    af_trainer_free(t);
}

static void test_mlp_cnn(void) {
    enum { B = 2, CLS = 10 };
    float x[B * 3 * 12 * 12], ref[B * CLS];
    test_rng r = { 5 };
    test_fill_uniform(&r, x, B * 3 * 12 * 12, -1, 1);
    af_net mlp = af_net_mlp(AF_SHAPE(1, 12, 12), 16, CLS, 3);
    af_net_set_input_norm(&mlp, 0.1f, 0.3f);
    predict(&mlp, B, x, ref);
    all_targets("mlp", &mlp, B, x, ref, B * CLS, true);
    af_net_free(&mlp);
    af_net cnn = af_net_cnn(AF_SHAPE(3, 12, 12), CLS, 4);
    predict(&cnn, B, x, ref);
    all_targets("cnn", &cnn, B, x, ref, B * CLS, true);
    af_net_free(&cnn);
}

static void test_llama(void) {
    af_llama_weights *w = af_llama_load(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_v0.bin", NULL);
    CHECK(w != NULL, "model a: %s", af_error_message());
    float *tok = NULL, *ref = NULL;
    int rank;
    int64_t dims[AF_MAX_RANK];
    CHECK(af_npy_read(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_tokens.npy", &tok, &rank, dims) == AF_OK, "tokens");
    CHECK(af_npy_read(AF_SOURCE_DIR "/tests/fixtures/llama/model_a_logits.npy", &ref, &rank, dims) == AF_OK &&
          dims[0] * dims[1] == 16 * 37, "logits");
    if (w && tok && ref) {
        af_net net = af_net_llama(w, 16);
        /* rms_norm's epsilon is fp16 before iOS 17: close, not the same bits */
        all_targets("llama", &net, 1, tok, ref, 16 * 37, false);
        af_net_free(&net);
    }
    af_llama_weights_free(w);
    free(tok);
    free(ref);
}

/* An embedding (gather with iOS 17's validate_indices and iOS 16's batch_dims) on every
 * target: a naive lookup. */
static void test_embedding(void) {
    enum { V = 7, D = 3, N = 4 };
    float table[V * D], ids[N] = { 3, 0, 6, 3 }, y[N * D], ref[N * D];
    test_rng r = { 8 };
    test_fill_uniform(&r, table, V * D, -1, 1);
    for (int i = 0; i < N; i++)
        for (int d = 0; d < D; d++) ref[i * D + d] = af_f16_to_f32(af_f32_to_f16(table[(int)ids[i] * D + d]));
    for (int ios = 15; ios <= 18; ios++) {
        af_graph *g = af_graph_new();
        af_tensor *t = af_const(g, "table", AF_SHAPE(V, D), table), *x = af_input(g, "ids", AF_F16, AF_SHAPE(N));
        af_tensor *e = af_embedding(t, x);
        af_coreml_opts o = { .ios = ios };
        char file[64], label[64];
        snprintf(file, sizeof file, "emb_%d.mlpackage", ios);
        snprintf(label, sizeof label, "embedding iOS %d", ios);
        CHECK(e && af_coreml_export(g, 1, &x, 1, &e, &o, path_in(file)) == AF_OK, "%s: %s", label, af_error_message());
        af_graph_free(g);
        size_t n = 0;
        char mp[300];
        snprintf(mp, sizeof mp, "%s/Data/com.apple.CoreML/model.mlmodel", path_in(file));
        const unsigned char *b = slurp(mp, &n);
        CHECK(b && has_bytes(b, n, "gather") && has_bytes(b, n, "validate_indices") == (ios >= 17) &&
              has_bytes(b, n, "batch_dims") == (ios >= 16), "%s: gather's inputs are those of the target's opset", label);
        if (load_run(path_in(file), ios >= 16 ? AF_F16 : AF_F32, false, ids, y, N * D, label))
            CHECK(!memcmp(y, ref, sizeof y), "%s: the looked-up rows", label);
    }
}

static af_status parse_target(const char *text, int ios, mil_arena *a, mil_program *prog) {
    mil_diag d = { .source = "test" };
    if (!mil_parse_program(text, strlen(text), a, &d, prog)) return ir_fail(d.st, "%s", d.msg);
    return coreml_target(&prog->funcs[0], a, ios);
}

static void test_refusals(void) {
    /* a target out of range names the range */
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(2, 4)), *y = af_relu(x);
    for (int ios = 14; ios <= 19; ios += 5) {
        af_coreml_opts o = { .ios = ios };
        CHECK(af_coreml_export(g, 1, &x, 1, &y, &o, path_in("bad.mlpackage")) == AF_ERR_UNSUPPORTED &&
              strstr(af_error_message(), "choose 15 to 18 (iOS 15..18 / macOS 12..15, specification versions 6 to 9)"),
              "iOS %d: %s", ios, af_error_message());
    }
    /* an epsilon with no fp16 value cannot be the fp16 scalar iOS 15 and 16 want */
    float one[4] = { 1, 1, 1, 1 };
    af_tensor *ln = af_rms_norm(x, af_const(g, "gamma", AF_SHAPE(4), one), 1e-9f);
    af_coreml_opts o16 = { .ios = 16 }, o32 = { .ios = 16, .precision = 32 }, o17 = { .ios = 17 };
    CHECK(af_coreml_export(g, 1, &x, 1, &ln, &o16, path_in("eps.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "deployment target iOS 16: op rsqrt") &&
          strstr(af_error_message(), "its epsilon 1e-09 rounds to 0 in fp16, and iOS 16's rsqrt takes it in x's dtype fp16; "
                 "choose --ios 17 or later, or precision fp32"), "tiny epsilon: %s", af_error_message());
    CHECK(af_coreml_export(g, 1, &x, 1, &ln, &o32, path_in("eps32.mlpackage")) == AF_OK, "fp32: %s", af_error_message());
    CHECK(af_coreml_export(g, 1, &x, 1, &ln, &o17, path_in("eps17.mlpackage")) == AF_OK, "iOS 17: %s", af_error_message());
    CHECK(access(path_in("bad.mlpackage"), F_OK) && access(path_in("eps.mlpackage"), F_OK), "no package left by a refusal");
    af_graph_free(g);
    /* ops and inputs a later opset added (as another lowering could write them) */
    mil_arena a = { 0 };
    mil_program p;
    const char *sdpa = "program(1.3)\n{\n func main<ios18>(tensor<fp16, [1, 2, 4]> q) {\n"
                       "  tensor<fp16, [1, 2, 4]> y = scaled_dot_product_attention(query = q, key = q, value = q)"
                       "[name = string(\"y\")];\n } -> (y);\n}\n";
    CHECK(parse_target(sdpa, 17, &a, &p) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "deployment target iOS 17: op scaled_dot_product_attention (y) is in Core ML's opset "
                 "from iOS 18 on, not in iOS 17's; choose --ios 18 or later"), "sdpa: %s", af_error_message());
    mil_arena_free(&a);
    memset(&a, 0, sizeof a);
    CHECK(parse_target(sdpa, 18, &a, &p) == AF_OK, "sdpa on iOS 18: %s", af_error_message());
    mil_arena_free(&a);
    memset(&a, 0, sizeof a);
    const char *gather = "program(1.3)\n{\n func main<ios18>(tensor<fp16, [5, 3]> t, tensor<int32, [2]> i) {\n"
                         "  bool v = const()[name = string(\"v\"), val = bool(true)];\n"
                         "  tensor<fp16, [2, 3]> y = gather(x = t, indices = i, validate_indices = v)[name = string(\"y\")];\n"
                         " } -> (y);\n}\n";
    CHECK(parse_target(gather, 16, &a, &p) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "op gather (y) sets validate_indices, which iOS 16's gather lacks; choose --ios 17 or later"),
          "validate_indices true: %s", af_error_message());
    mil_arena_free(&a);
}

int main(void) {
    const char *tmp = test_tmpdir_make("af_coreml_tg");
    if (!tmp) return 1;
    test_mlp_cnn();
    test_llama();
    test_embedding();
    test_refusals();
    test_tmpdir_remove();
    return check_finish("coreml_targets");
}
