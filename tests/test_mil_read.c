/* The MIL reader on text it did not write: Apple's program(1.0)/ios16 spelling with
 * tensor<string, []> scalars, hand-written ios18 programs with literals as arguments
 * and fp16 bit patterns, and malformed or unsupported text, each refused with its
 * status and the right line and column. Every prefix of a valid program is refused
 * cleanly; weight-file problems (no record at the offset, a dtype or size mismatch, a
 * missing file, a path leaving the model directory) are reported; a decomposition
 * whose intermediates are used elsewhere is not fused. */
#include "aneforge.h"
#include "mil/mil.h"
#include "support/check.h"
#include "support/milrun.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

static const char *apple_v10 =
    "program(1.0)\n"
    "[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{\"coremlc-component-MIL\", \"3402.3.2\"}, {\"coremlc-version\", \"3402.4.1\"}})]\n"
    "{\n"
    "    func main<ios16>(tensor<fp16, [1, 4]> x, tensor<fp16, [1, 4]> y) {\n"
    "            tensor<fp16, [1, 4]> var_3 = mul(x = x, y = y)[name = tensor<string, []>(\"op_3_cast_fp16\")];\n"
    "            tensor<int32, [1]> var_5 = const()[name = tensor<string, []>(\"op_5\"), val = tensor<int32, [1]>([-1])];\n"
    "            tensor<bool, []> var_6 = const()[name = tensor<string, []>(\"op_6\"), val = tensor<bool, []>(true)];\n"
    "            tensor<fp16, [1, 1]> var_7 = reduce_sum(axes = var_5, keep_dims = var_6, x = var_3)[name = tensor<string, []>(\"op_7\")];\n"
    "            tensor<fp16, []> half = const()[name = tensor<string, []>(\"half\"), val = tensor<fp16, []>(0x1p-1)];\n"
    "            tensor<fp16, [1, 4]> var_9 = sub(x = var_3, y = var_7)[name = tensor<string, []>(\"op_9\")];\n"
    "            tensor<fp16, [1, 4]> var_10 = mul(x = var_9, y = half)[name = tensor<string, []>(\"op_10\")];\n"
    "        } -> (var_10, var_7);\n"
    "}\n";

static void test_apple_v10(void) {
    mil_module m;
    af_status st = mil_parse(apple_v10, strlen(apple_v10), NULL, &m);
    CHECK(st == AF_OK, "program(1.0): %s", af_error_message());
    if (st) return;
    CHECK(m.nin == 2 && m.nout == 2 && !strcmp(m.in_names[0], "x") && !strcmp(m.out_names[1], "var_7"), "arguments/results");
    CHECK(m.in[0]->dtype == AF_F16 && m.out[1]->shape.rank == 2 && m.out[1]->shape.dim[1] == 1, "types");
    float x[4] = { 1, 2, 3, 4 }, y[4] = { 0.5f, -1, 2, 0.25f }, r0[4], r1[1];
    const float *in[2] = { x, y };
    float *out[2] = { r0, r1 };
    test_mil_run(&m, in, out);
    float p[4], s = 0;
    for (int i = 0; i < 4; i++) { p[i] = x[i] * y[i]; s += p[i]; }
    CHECK(r1[0] == s, "reduce_sum: %g vs %g", r1[0], s);
    for (int i = 0; i < 4; i++) CHECK(r0[i] == (p[i] - s) * 0.5f, "element %d: %g", i, r0[i]);
    af_graph_free(m.g);
}

static void test_handwritten_ios18(void) {
    const char *t =
        "program(1.3)\n{\n  func main<ios18>(tensor<fp16, [2, 2]> a) {\n"
        "    tensor<fp16, [2, 2]> w = const()[name = string(\"w\"), val = tensor<fp16, [2, 2]>([[0x3c00, 0x4000], [0xbc00, 0.5]])];\n"
        "    tensor<fp16, [2, 2]> m = matmul(x = a, y = w, transpose_x = bool(false), transpose_y = bool(true));\n"
        "    tensor<bool, [2, 2]> pos = greater_equal(x = m, y = fp16(0));\n"
        "    tensor<fp16, [2, 2]> r = select(cond = pos, a = m, b = fp16(-0x1p+0));\n"
        "    tensor<fp16, [4]> f = reshape(x = r, shape = tensor<int32, [1]>([-1]))[name = string(\"flat\")];\n"
        "    // a comment\n"
        "    tensor<fp16, [1, 4]> e = expand_dims(x = f, axes = tensor<int32, [1]>([0]));\n"
        "  } -> (e);\n}\n";
    mil_module m;
    af_status st = mil_parse(t, strlen(t), NULL, &m);
    CHECK(st == AF_OK, "ios18 hand-written: %s", af_error_message());
    if (st) return;
    float a[4] = { 1, 2, 3, -4 }, r[4];
    const float *in[1] = { a };
    float *out[1] = { r };
    test_mil_run(&m, in, out);
    /* m = a @ w^T with w = [[1, 2], [-1, 0.5]]: [[5, 0], [-5, -5]] -> negatives become -1 */
    const float want[4] = { 5, 0, -1, -1 };
    for (int i = 0; i < 4; i++) CHECK(r[i] == want[i], "element %d: %g, want %g", i, r[i], want[i]);
    af_graph_free(m.g);
}

typedef struct { const char *text; af_status st; const char *where, *what; } bad_case;

#define HEAD "program(1.3)\n{\n  func main<ios18>(tensor<fp16, [4]> x) {\n"
#define TAIL "  } -> (y);\n}\n"

static const bad_case bad[] = {
    { HEAD "    tensor<fp16, [4]> y = frobnicate(x = x);\n" TAIL, AF_ERR_UNSUPPORTED, ":4:5:", "unknown op 'frobnicate'" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x)\n" TAIL, AF_ERR_CORRUPT, ":5:3:", "expected ';'" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = z);\n" TAIL, AF_ERR_INVALID, ":4:36:", "'z' is not defined" },
    { HEAD "    tensor<fp16, [5]> y = relu(x = x);\n" TAIL, AF_ERR_SHAPE, ":4:5:", "declared with another shape" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x);\n    tensor<fp16, [4]> y = relu(x = x);\n" TAIL, AF_ERR_CORRUPT, ":5:5:", "defined twice" },
    { HEAD "    tensor<fp16, [2]> c = const()[val = tensor<fp16, [2]>([1, 2, 3])];\n    tensor<fp16, [4]> y = relu(x = x);\n" TAIL, AF_ERR_CORRUPT, ":4:64:", "more than 2 elements" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x, x = x);\n" TAIL, AF_ERR_CORRUPT, ":4:39:", "given twice" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x);\n  } -> (q);\n}\n", AF_ERR_INVALID, ":5:9:", "returned 'q'" },
    { "program(1.3)\n{\n  func main<ios18>(tensor<fp16, [?, 4]> x) {\n" TAIL, AF_ERR_UNSUPPORTED, ":3:20:", "static shape" },
    { "program(2.0)\n{\n}\n", AF_ERR_UNSUPPORTED, ":1:9:", "not 1.x" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x);\n" "  } -> (y);\n}\n}\n", AF_ERR_CORRUPT, ":7:1:", "end of the text" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = \"x);\n" TAIL, AF_ERR_CORRUPT, ":4:36:", "unterminated string" },
    { HEAD "    tensor<fp16, [4]> y = relu(x = x) @;\n" TAIL, AF_ERR_CORRUPT, ":4:39:", "unexpected character '@'" },
    { HEAD "    fp16 c = const()[val = fp16(0x1p-1)];\n    tensor<fp16, [4]> y = cast(x = x, dtype = string(\"int64\"));\n" TAIL, AF_ERR_UNSUPPORTED, ":5:39:", "cast to int64" },
    { HEAD "    tensor<fp16, [4]> y = layer_norm(x = x, axes = tensor<int32, [1]>([0]), epsilon = fp16(0), gamma = fp16(1));\n" TAIL, AF_ERR_SHAPE, ":4:5:", "gamma" },
    { HEAD "    tensor<fp16, [4]> y = const()[val = tensor<fp16, [4]>(BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(64)))];\n" TAIL,
      AF_ERR_IO, ":4:41:", "no weight file" },
    { HEAD "    tensor<fp16, [4]> y = const()[val = tensor<fp16, [4]>(BLOBFILE(path = string(\"@model_path/../secret.bin\"), offset = uint64(64)))];\n" TAIL,
      AF_ERR_INVALID, ":4:41:", "leaves the model directory" },
    { HEAD "    tensor<int32, [2]> y = const()[val = tensor<int32, [2]>([1, 2.5])];\n" TAIL, AF_ERR_CORRUPT, ":4:65:", "expected an integer" },
    { "", AF_ERR_CORRUPT, ":1:1:", "expected 'program'" },
};

static void test_errors(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mil_module m;
        af_status st = mil_parse(bad[i].text, strlen(bad[i].text), NULL, &m);
        const char *msg = af_error_message();
        CHECK(st == bad[i].st, "bad case %zu: status %s, want %s (%s)", i, af_status_name(st), af_status_name(bad[i].st), msg);
        CHECK(st != AF_OK && strstr(msg, bad[i].where) && strstr(msg, bad[i].what), "bad case %zu: message '%s' lacks '%s' / '%s'", i, msg,
              bad[i].where, bad[i].what);
        CHECK(m.g == NULL, "bad case %zu left a graph", i);
        if (st == AF_OK) af_graph_free(m.g);
    }
}

static char *emitted(size_t *len, milblob_writer **w) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(3, 16));
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = 0.5f + 0.125f * (float)i;
    af_tensor *y = af_layer_norm(af_rms_norm(x, af_const(g, "gamma", AF_SHAPE(16), v), 1e-5f), NULL, NULL, 1e-5f);
    char *text = NULL;
    CHECK(mil_emit_mem(g, 1, &x, 1, &y, &text, len, w, NULL) == AF_OK, "emit: %s", af_error_message());
    af_graph_free(g);
    return text;
}

/* Every strict prefix fails cleanly (no crash, no graph), with a position. */
static void test_prefixes(void) {
    size_t len, nb;
    milblob_writer *w;
    char *text = emitted(&len, &w);
    if (!text) return;
    mil_blobsrc b = { AF_MIL_WEIGHT_PATH, milblob_bytes(w, &nb), 0 };
    b.n = nb;
    mil_read_opts o = { .nblobs = 1, .blobs = &b };
    int bad_prefix = 0;
    for (size_t n = 0; n < len - 1; n++) {
        mil_module m;
        if (mil_parse(text, n, &o, &m) == AF_OK) { bad_prefix++; af_graph_free(m.g); }
        else if (!strstr(af_error_message(), "<mil>:")) bad_prefix++;
    }
    CHECK(bad_prefix == 0, "%d prefixes were accepted or reported without a position", bad_prefix);
    mil_module m;
    CHECK(mil_parse(text, len, &o, &m) == AF_OK, "whole text: %s", af_error_message());
    af_graph_free(m.g);

    /* Weight-file problems. */
    const uint8_t *bytes = milblob_bytes(w, &nb);
    b.n = nb - 1; /* truncated */
    CHECK(mil_parse(text, len, &o, &m) == AF_ERR_CORRUPT && strstr(af_error_message(), "weight file"), "truncated weights: %s", af_error_message());
    b.n = nb;
    char *t2 = malloc(len + 8);
    strcpy(t2, text);
    char *off = strstr(t2, "offset = uint64(64)");
    if (off) memcpy(off, "offset = uint64(65)", 19);
    CHECK(off && mil_parse(t2, len, &o, &m) == AF_ERR_CORRUPT && strstr(af_error_message(), "no weight record at offset 65"), "bad offset: %s", af_error_message());
    strcpy(t2, text);
    char *dt = strstr(t2, "tensor<fp16, [16]> gamma = const()[name = string(\"gamma\"), val = tensor<fp16, [16]>");
    if (dt) memcpy(strstr(dt, "val = tensor<fp16") + 13, "fp32", 4), memcpy(dt + 7, "fp32", 4);
    CHECK(dt && mil_parse(t2, len, &o, &m) == AF_ERR_CORRUPT && strstr(af_error_message(), "holds 32 bytes of fp16"), "dtype mismatch: %s", af_error_message());
    (void)bytes;
    free(t2);
    free(text);
    milblob_writer_free(w);
}

static void test_no_fusion_when_shared(void) {
    const char *t =
        "program(1.3)\n{\n  func main<ios18>(tensor<fp16, [2, 4]> x, tensor<fp16, [4]> g) {\n"
        "    tensor<fp16, [2, 4]> sq = mul(x = x, y = x);\n"
        "    tensor<fp16, [2, 1]> ms = reduce_mean(x = sq, axes = tensor<int32, [1]>([-1]), keep_dims = bool(true));\n"
        "    tensor<fp16, [2, 1]> rs = rsqrt(x = ms, epsilon = fp32(0x1p-20));\n"
        "    tensor<fp16, [2, 4]> xn = mul(x = x, y = rs);\n"
        "    tensor<fp16, [2, 4]> y = mul(x = xn, y = g);\n"
        "  } -> (y, rs);\n}\n";
    mil_module m;
    CHECK(mil_parse(t, strlen(t), NULL, &m) == AF_OK, "%s", af_error_message());
    if (!m.g) return;
    bool fused = false;
    for (int i = 0; i < m.g->n; i++) fused |= m.g->t[i]->op == IR_OP_RMS_NORM;
    CHECK(!fused, "rs is also returned, so the chain must not fuse");
    af_graph_free(m.g);
    const char *u = strstr(t, "  } -> (y, rs)");
    char t2[2048];
    snprintf(t2, sizeof t2, "%.*s  } -> (y);\n}\n", (int)(u - t), t);
    CHECK(mil_parse(t2, strlen(t2), NULL, &m) == AF_OK, "%s", af_error_message());
    fused = false;
    for (int i = 0; m.g && i < m.g->n; i++) fused |= m.g->t[i]->op == IR_OP_RMS_NORM && m.g->t[i]->a.eps == 0x1p-20f;
    CHECK(fused, "the unshared chain must fuse into rms_norm with its fp32 epsilon");
    af_graph_free(m.g);
}

static void test_load_from_disk(void) {
    af_graph *g = NULL;
    int nin = 0, nout = 0;
    af_tensor **in = NULL, **out = NULL;
    af_status st = af_mil_load(AF_SOURCE_DIR "/tests/golden/conv/model.mil", AF_SOURCE_DIR "/tests/golden/conv/weights", &g, &nin, &in, &nout, &out);
    CHECK(st == AF_OK && nin == 1 && nout == 1 && !strcmp(af_tensor_name(in[0]), "image"), "af_mil_load with weights_dir: %s", af_error_message());
    af_graph_free(g);
    st = af_mil_load(AF_SOURCE_DIR "/tests/golden/conv/model.mil", AF_SOURCE_DIR "/tests", &g, NULL, NULL, NULL, NULL);
    CHECK(st == AF_ERR_IO && strstr(af_error_message(), "model.mil:"), "a weights dir without weight.bin: %s", af_error_message());
    CHECK(af_mil_load("/nonexistent/model.mil", NULL, &g, NULL, NULL, NULL, NULL) == AF_ERR_IO && g == NULL, "missing file");
}

int main(void) {
    test_apple_v10();
    test_handwritten_ios18();
    test_errors();
    test_prefixes();
    test_no_fusion_when_shared();
    test_load_from_disk();
    return check_finish("mil_read");
}
