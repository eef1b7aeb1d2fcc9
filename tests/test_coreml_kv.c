/* The llama's Core ML KV-cache package (issue 27): af_coreml_export_llama_kv writes a
 * decode program whose caches are Core ML states; read back through af_coreml_open, its
 * states are bound as resident state (af_model_bind_state, what MLState does between
 * predictions) and tokens are fed one at a time. The logits at every position must equal
 * those of the stateless forward over the whole sequence (af_coreml_export_net of
 * af_net_llama, the same fp16 weights): 1e-4 of the largest logit in fp32, 2e-2 in fp16.
 * Also the refusals (iOS 17, fp32, a cache longer than the model's), the MIL reader's
 * state rules and a package whose description does not list its state.
 * coremltools' view of the package: tests/coreml/check_coremltools.py. */
#define _XOPEN_SOURCE 700 /* POSIX: opendir, unlink */
#include "aneforge.h"
#include "aneforge_coreml.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "support/check.h"
#include "support/tmpdir.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama"

/* The stateless package's logits [T, V] for tokens (fp32 on the CPU). */
static bool stateless(const char *pkg, const float *tokens, int T, int V, float *logits) {
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;
    CHECK(af_coreml_load(pkg, &g, &nin, &in, &nout, &out) == AF_OK, "load %s: %s", pkg, af_error_message());
    if (!g) return false;
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = nin == 1 && nout == 1 ? af_compile(g, 1, in, 1, out, &o) : NULL;
    CHECK(m, "compile the stateless package: %s", af_error_message());
    bool ok = false;
    if (m) {
        af_buffer bi = AF_BUF_F32(tokens, T), bo = AF_BUF_F32(logits, (int64_t)T * V);
        ok = af_run(m, &bi, &bo) == AF_OK;
        CHECK(ok, "run: %s", af_error_message());
        af_model_free(m);
    }
    af_graph_free(g);
    return ok;
}

static int find(const af_mil_program *p, bool result, const char *name) {
    int n = result ? af_mil_num_results(p) : af_mil_num_args(p);
    for (int i = 0; i < n; i++) {
        const char *nm;
        if (result) af_mil_result(p, i, &nm, NULL);
        else af_mil_arg(p, i, &nm, NULL);
        if (!strcmp(nm, name)) return i;
    }
    return -1;
}

/* The KV package fed tokens one at a time, its states resident in the model. */
static bool decode(const char *pkg, af_target target, af_precision prec, const float *tokens, int T, int V, float *logits) {
    af_mil_program *p = NULL;
    CHECK(af_coreml_open(pkg, NULL, &p) == AF_OK, "open %s: %s", pkg, af_error_message());
    if (!p) return false;
    int ids = find(p, false, "input_ids"), pos = find(p, false, "position"), kc = find(p, false, "key_cache"),
        vc = find(p, false, "value_cache"), lo = find(p, true, "logits"), kr = find(p, true, "key_cache"), vr = find(p, true, "value_cache");
    bool ok = af_mil_num_args(p) == 4 && af_mil_num_results(p) == 3 && ids >= 0 && pos >= 0 && kc >= 0 && vc >= 0 && lo == 0 && kr > 0 && vr > 0;
    CHECK(ok, "the KV program's arguments are input_ids, position and the two states; its results the logits, then the states");
    if (!ok) { af_mil_close(p); return false; }
    af_tensor *in[4], *out[3];
    for (int i = 0; i < 4; i++) in[i] = af_mil_arg(p, i, NULL, NULL);
    for (int i = 0; i < 3; i++) out[i] = af_mil_result(p, i, NULL, NULL);
    int64_t nc = af_shape_count(af_tensor_shape(in[kc]));
    float *zeros = calloc((size_t)nc, sizeof *zeros);
    af_compile_opts o = { .target = target, .precision = prec, .threads = 1 };
    af_model *m = zeros ? af_compile(af_mil_graph(p), 4, in, 3, out, &o) : NULL;
    CHECK(m, "compile the KV package: %s", af_error_message());
    ok = m && af_model_bind_state(m, kc, kr, zeros) == AF_OK && af_model_bind_state(m, vc, vr, zeros) == AF_OK;
    CHECK(!m || ok, "bind the states: %s", af_error_message());
    for (int t = 0; ok && t < T; t++) {
        float fpos = (float)t;
        af_buffer bi[4], bo[3];
        bi[ids] = AF_BUF_F32(&tokens[t], 1);
        bi[pos] = AF_BUF_F32(&fpos, 1);
        bi[kc] = AF_BUF_F32(zeros, nc); /* ignored: resident */
        bi[vc] = AF_BUF_F32(zeros, nc);
        bo[lo] = AF_BUF_F32(logits + (size_t)t * V, V);
        bo[kr] = AF_BUF_F32(NULL, nc);
        bo[vr] = AF_BUF_F32(NULL, nc);
        ok = af_run(m, bi, bo) == AF_OK;
        CHECK(ok, "run position %d: %s", t, af_error_message());
    }
    af_model_free(m);
    free(zeros);
    af_mil_close(p);
    return ok;
}

/* Exports model `file` both ways for T positions and compares the logits. */
static void decode_equals_forward(const char *file, int T) {
    char path[512];
    snprintf(path, sizeof path, FIXDIR "/%s", file);
    af_llama_weights *w = af_llama_load(path, NULL);
    CHECK(w, "load %s: %s", path, af_error_message());
    if (!w) return;
    const af_llama_config *c = af_llama_weights_config(w);
    int V = c->vocab_size;
    char kv[300], full[300];
    snprintf(kv, sizeof kv, "%s", path_in(file));
    strcat(kv, ".kv.mlpackage");
    snprintf(full, sizeof full, "%s", path_in(file));
    strcat(full, ".mlpackage");
    CHECK(af_coreml_export_llama_kv(w, T, NULL, kv) == AF_OK, "export %s with its KV cache: %s", file, af_error_message());
    af_net net = af_net_llama(w, T);
    CHECK(af_coreml_export_net(&net, 1, NULL, NULL, full) == AF_OK, "export %s stateless: %s", file, af_error_message());
    af_net_free(&net);
    /* the fixture's tokens and PyTorch's logits for them [seq_len, V] (fp32 weights) */
    char name[300];
    float *tokens = NULL, *torch = NULL, *ref = malloc(sizeof(float) * (size_t)T * V), *got = malloc(sizeof(float) * (size_t)T * V);
    int rank;
    int64_t dims[AF_MAX_RANK];
    snprintf(name, sizeof name, FIXDIR "/%.7s_tokens.npy", file);
    CHECK(af_npy_read(name, &tokens, &rank, dims) == AF_OK && dims[0] >= T, "read %s: %s", name, af_error_message());
    snprintf(name, sizeof name, FIXDIR "/%.7s_logits.npy", file);
    CHECK(af_npy_read(name, &torch, &rank, dims) == AF_OK && rank == 2 && dims[1] == V, "read %s: %s", name, af_error_message());
    if (tokens && torch && ref && got && stateless(full, tokens, T, V, ref)) {
        double big = 0;
        for (int i = 0; i < T * V; i++) big = fmax(big, fabs(ref[i]));
        static const struct { af_target t; af_precision p; double tol; const char *name; } precs[] = {
            { AF_TARGET_CPU, AF_PRECISION_FP32, 1e-4, "cpu fp32" }, { AF_TARGET_ANE_SIM, AF_PRECISION_FP16, 2e-2, "ane-sim fp16" } };
        for (int k = 0; k < 2; k++) {
            memset(got, 0, sizeof(float) * (size_t)T * V);
            if (!decode(kv, precs[k].t, precs[k].p, tokens, T, V, got)) continue;
            double worst = 0;
            int at = 0;
            for (int i = 0; i < T * V; i++)
                if (fabs(got[i] - ref[i]) > worst) worst = fabs(got[i] - ref[i]), at = i / V;
            CHECK(worst <= precs[k].tol * big, "%s %s: decoding token by token differs from the whole-sequence forward by %g "
                  "(largest logit %g) at position %d", file, precs[k].name, worst, big, at);
            printf("%s T=%d %s: max |decode - forward| = %.3g (largest logit %.3g)\n", file, T, precs[k].name, worst, big);
            /* an independent reference: PyTorch's forward over the fp32 weights (the
             * package holds fp16 weights and computes in fp16) */
            worst = 0;
            for (int i = 0; i < T * V; i++) worst = fmax(worst, fabs(got[i] - torch[i]));
            CHECK(worst <= 2e-2 * big, "%s %s: decoding differs from PyTorch's logits by %g (largest %g)", file, precs[k].name, worst, big);
            printf("%s T=%d %s: max |decode - PyTorch| = %.3g\n", file, T, precs[k].name, worst);
        }
    }
    free(tokens), free(torch), free(ref), free(got);
    af_llama_weights_free(w);
}

static void refusals(void) {
    af_llama_weights *w = af_llama_load(FIXDIR "/model_a_v0.bin", NULL);
    CHECK(w, "load model a: %s", af_error_message());
    if (!w) return;
    af_coreml_opts o17 = { .ios = 17 }, o32 = { .precision = 32 };
    CHECK(af_coreml_export_llama_kv(w, 0, &o17, path_in("ios17.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "need iOS 18 / macOS 15 (specification version 9)"), "iOS 17 refused naming iOS 18: %s", af_error_message());
    CHECK(af_coreml_export_llama_kv(w, 0, &o32, path_in("fp32.mlpackage")) == AF_ERR_UNSUPPORTED &&
          strstr(af_error_message(), "Core ML states are fp16"), "fp32 refused: %s", af_error_message());
    CHECK(af_coreml_export_llama_kv(w, 17, NULL, path_in("long.mlpackage")) == AF_ERR_INVALID &&
          strstr(af_error_message(), "max_seq 17 must be 1..16"), "a cache longer than seq_len refused: %s", af_error_message());
    FILE *f = fopen(path_in("ios17.mlpackage"), "r");
    CHECK(!f, "a refused export leaves nothing behind");
    if (f) fclose(f);
    af_llama_weights_free(w);
}

/* The MIL reader's state rules, on MIL text. */
static void mil_rules(void) {
    static const struct { const char *body, *want; } cases[] = {
        { "tensor<fp16, [2]> r = read_state(input = x)[name = string(\"r\")];", "must name a state<tensor<...>> function argument" },
        { "tensor<fp16, [3]> v = const()[name = string(\"v\"), val = tensor<fp16, [3]>([1, 2, 3])];\n"
          "tensor<fp16, [3]> u = coreml_update_state(state = s, value = v)[name = string(\"u\")];",
          "is not the state 's''s type" },
        { "tensor<fp16, [2]> r = add(x = s, y = x)[name = string(\"r\")];", "'s' is not a tensor" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [2]> x, state<tensor<fp16, [2]>> s) {\n%s\n"
                 "        tensor<fp16, [2]> y = read_state(input = s)[name = string(\"y\")];\n    } -> (y);\n}\n", cases[i].body);
        char *p = path_in("rule.mil");
        FILE *f = fopen(p, "w");
        if (!f) continue;
        fputs(text, f);
        fclose(f);
        af_mil_program *prog = NULL;
        af_status st = af_mil_open(p, NULL, NULL, &prog);
        CHECK(st != AF_OK && strstr(af_error_message(), cases[i].want), "case %zu: want '%s', got: %s", i, cases[i].want, af_error_message());
        af_mil_close(prog);
    }
    /* and a well-formed one: the update is the state's result, read after it */
    const char *ok = "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [2]> x, state<tensor<fp16, [2]>> s) {\n"
                     "        tensor<fp16, [2]> r = read_state(input = s)[name = string(\"r\")];\n"
                     "        tensor<fp16, [2]> n = add(x = r, y = x)[name = string(\"n\")];\n"
                     "        tensor<fp16, [2]> u = coreml_update_state(state = s, value = n)[name = string(\"u\")];\n"
                     "        tensor<fp16, [2]> y = read_state(input = s)[name = string(\"y\")];\n"
                     "        tensor<fp16, [2]> z = mul(x = y, y = r)[name = string(\"z\")];\n    } -> (z);\n}\n";
    char *p = path_in("ok.mil");
    FILE *f = fopen(p, "w");
    if (f) fputs(ok, f), fclose(f);
    af_mil_program *prog = NULL;
    CHECK(af_mil_open(p, NULL, NULL, &prog) == AF_OK, "a state program: %s", af_error_message());
    if (!prog) return;
    const char *nm = NULL;
    CHECK(af_mil_num_results(prog) == 2 && af_mil_result(prog, 1, &nm, NULL) && !strcmp(nm, "s"), "the state's value is result 1, named s");
    af_tensor *in[2] = { af_mil_arg(prog, 0, NULL, NULL), af_mil_arg(prog, 1, NULL, NULL) };
    af_tensor *out[2] = { af_mil_result(prog, 0, NULL, NULL), af_mil_result(prog, 1, NULL, NULL) };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(af_mil_graph(prog), 2, in, 2, out, &o);
    CHECK(m, "compile: %s", af_error_message());
    if (m) {
        float x[2] = { 1, 2 }, s[2] = { 10, 20 }, z[2], s2[2];
        af_buffer bi[2] = { AF_BUF_F32(x, 2), AF_BUF_F32(s, 2) }, bo[2] = { AF_BUF_F32(z, 2), AF_BUF_F32(s2, 2) };
        CHECK(af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
        /* z = (s + x) * s, the state becomes s + x */
        CHECK(z[0] == 110 && z[1] == 440 && s2[0] == 11 && s2[1] == 22, "z %g %g, state %g %g", z[0], z[1], s2[0], s2[1]);
        af_model_free(m);
    }
    af_mil_close(prog);
}

/* A package whose description names another state than its program's argument. */
static void undescribed_state(void) {
    af_llama_weights *w = af_llama_load(FIXDIR "/model_b_v0.bin", NULL);
    char *pkg = path_in("undescribed.mlpackage");
    CHECK(w && af_coreml_export_llama_kv(w, 4, NULL, pkg) == AF_OK, "export: %s", af_error_message());
    af_llama_weights_free(w);
    char model[400];
    snprintf(model, sizeof model, "%s/Data/com.apple.CoreML/model.mlmodel", pkg);
    size_t n;
    char *b = test_read_file(model, &n);
    CHECK(b, "read %s", model);
    if (!b) return;
    char *k = NULL;
    for (size_t i = 0; i + 9 <= n && !k; i++)
        if (!memcmp(b + i, "key_cache", 9)) k = b + i; /* the description comes first */
    if (k) k[2] = 'z';
    FILE *f = fopen(model, "wb");
    if (f) fwrite(b, 1, n, f), fclose(f);
    free(b);
    af_mil_program *p = NULL;
    CHECK(af_coreml_open(pkg, NULL, &p) == AF_ERR_CORRUPT &&
          strstr(af_error_message(), "state input key_cache is not among the model description's states"), "got: %s", af_error_message());
    af_mil_close(p);
}

int main(void) {
    const char *tmp = test_tmpdir_make("af_coreml_kv");
    if (!tmp) return 1;
    decode_equals_forward("model_a_v0.bin", 16); /* 4 query heads over 2 KV heads, tied classifier */
    decode_equals_forward("model_b_v0.bin", 9);  /* 3 layers, a cache shorter than seq_len, own classifier */
    refusals();
    mil_rules();
    undescribed_state();
    test_tmpdir_remove();
    return check_finish("coreml_kv");
}
