/* Public API contracts (issue 12 part 5), each against an independent reference:
 *   a. af_shape_count is the checked product of the dims (a double-precision product
 *      decides what it must be): shapes near and past AF_MAX_ELEMENTS and past int64
 *      give 0, never a wrapped count; leaves and builder results of such shapes are
 *      refused with a message naming the shape and the fix;
 *   b. af_backward_from takes af_backward_opts like af_backward and gives the same
 *      gradients from the equivalent seed (hand-derived values, evaluated in double);
 *   c. af_mil_load's arrays belong to the graph: they stay valid while the graph grows
 *      and models are compiled from it, and a failed load clears every output.
 * (af_dataset_batch's status and the npy rank limit are in test_data.c.) */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_data.h"
#include "support/check.h"
#include "support/refgraph.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a. element counts */

/* What af_shape_count must return, from the product in double (exact below 2^53). */
static int64_t want_count(af_shape s) {
    double p = 1;
    for (int i = 0; i < s.rank; i++) {
        if (s.dim[i] < 0) return 0;
        p *= (double)s.dim[i];
    }
    return p > (double)AF_MAX_ELEMENTS ? 0 : (int64_t)p;
}

static void shape_counts(void) {
    const int64_t M = (int64_t)1 << 20; /* M * M is the cap itself */
    CHECK(AF_MAX_ELEMENTS == M * M, "AF_MAX_ELEMENTS is 2^40");
    CHECK(af_shape_count(AF_SHAPE(M, M)) == AF_MAX_ELEMENTS, "exactly the cap counts");
    CHECK(af_shape_count(AF_SHAPE(M, M - 1)) == M * (M - 1), "just under the cap");
    CHECK(af_shape_count(AF_SHAPE(M + 1, M)) == 0, "one row past the cap is invalid");
    CHECK(af_shape_count(AF_SHAPE(2, M, M / 2 + 1)) == 0, "past the cap in three dims");
    /* Products past int64 that wrap to a plausible count, to a negative one, to zero. */
    CHECK(af_shape_count(AF_SHAPE(4294967296LL, 4294967297LL)) == 0, "2^64 + 2^32 (wraps to 2^32)");
    CHECK(af_shape_count(AF_SHAPE(3037000500LL, 3037000500LL)) == 0, "just past INT64_MAX (wraps negative)");
    CHECK(af_shape_count(AF_SHAPE(INT64_MAX, 2)) == 0, "INT64_MAX * 2");
    CHECK(af_shape_count(AF_SHAPE(4294967296LL, 4294967296LL, 3)) == 0, "2^64 * 3 (wraps to 0)");
    CHECK(af_shape_count(AF_SHAPE(2, 0, INT64_MAX)) == 0 && af_shape_count(AF_SHAPE(2, -1)) == 0,
          "an empty or negative dim");
    CHECK(af_shape_count(AF_SHAPE(1, 2, 3, 4, 5, 6, 7)) == 0 && af_shape_count(AF_SHAPE()) == 1,
          "too many dims; a scalar");
    /* Seeded shapes whose products straddle the cap and int64. */
    test_rng r = { 12 };
    int agree = 1;
    for (int k = 0; k < 2000; k++) {
        af_shape s = { .rank = 1 + (int)(test_uniform(&r) * AF_MAX_RANK) };
        for (int i = 0; i < s.rank; i++) s.dim[i] = 1 + (int64_t)(test_uniform(&r) * test_uniform(&r) * 3e6);
        if (k % 5 == 0) s.dim[0] = (int64_t)(test_uniform(&r) * (double)INT64_MAX);
        int64_t got = af_shape_count(s), want = want_count(s);
        if (got != want) {
            agree = 0;
            fprintf(stderr, "shape %d: count %lld, want %lld\n", k, (long long)got, (long long)want);
            break;
        }
    }
    CHECK(agree, "af_shape_count equals the checked product on 2000 random shapes");
}

/* A builder on a fresh graph must fail with a message naming `shape` and the cap. */
static void expect_refused(af_graph *g, af_tensor *t, const char *shape, const char *what) {
    const char *e = af_graph_error(g);
    CHECK(t == NULL && e && strstr(e, shape) && strstr(e, "AF_MAX_ELEMENTS") && strstr(e, "split"),
          "%s refused, naming %s and the fix: %s", what, shape, e ? e : "(no error)");
    af_graph_free(g);
}

static void leaves_and_results_capped(void) {
    const int64_t M = (int64_t)1 << 20;
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(M, M));
    CHECK(x && !af_graph_error(g), "an input of exactly AF_MAX_ELEMENTS: %s", af_graph_error(g));
    af_graph_free(g);

    g = af_graph_new();
    expect_refused(g, af_input(g, "x", AF_F32, AF_SHAPE(M + 1, M)), "[1048577,1048576]", "af_input past the cap");
    g = af_graph_new();
    expect_refused(g, af_input(g, "x", AF_F16, AF_SHAPE(4294967296LL, 4294967297LL)), "[4294967296,4294967297]",
                   "af_input past int64");
    g = af_graph_new();
    expect_refused(g, af_const_fill(g, AF_SHAPE(3037000500LL, 3037000500LL), 1.0f), "[3037000500,3037000500]",
                   "af_const_fill past int64");
    g = af_graph_new();
    expect_refused(g, af_parameter(g, "w", AF_SHAPE(2, M, M), NULL), "[2,1048576,1048576]", "af_parameter past the cap");

    /* Operands within the cap whose result is not. */
    g = af_graph_new();
    af_tensor *col = af_input(g, "col", AF_F32, AF_SHAPE(2 * M, 1)), *row = af_input(g, "row", AF_F32, AF_SHAPE(1, M));
    expect_refused(g, af_add(col, row), "[2097152,1048576]", "a broadcast add past the cap");
    g = af_graph_new();
    col = af_input(g, "col", AF_F32, AF_SHAPE(2 * M, 1)), row = af_input(g, "row", AF_F32, AF_SHAPE(1, M));
    expect_refused(g, af_matmul(col, row, 0, 0), "[2097152,1048576]", "an outer product past the cap");
    /* A reshape target whose product wraps to the source's count: 2^32 (2^32 + 1) is
     * 2^64 + 2^32, which int64 arithmetic takes for 2^32. */
    g = af_graph_new();
    af_tensor *sq = af_input(g, "sq", AF_F32, AF_SHAPE(65536, 65536));
    af_tensor *bad = af_reshape(sq, AF_SHAPE(4294967296LL, 4294967297LL));
    CHECK(bad == NULL && af_graph_error(g) && strstr(af_graph_error(g), "AF_MAX_ELEMENTS"),
          "a reshape whose target count wraps: %s", af_graph_error(g) ? af_graph_error(g) : "(accepted)");
    af_graph_free(g);
}

/* ---------------------------------------------------------------- b. af_backward_from */

/* Two SGD steps on L = 0.5 (w x - y)^2 unrolled: the root is L1 + L2 where L2 uses the
 * updated weight w1. With w1 on the frontier, dL/dw is L1's gradient alone. */
typedef struct {
    af_graph *g;
    af_tensor *w, *w1, *root;
    double want_w, want_w1, want_w_full;
} unrolled;

static unrolled build_unrolled(void) {
    const float w0 = 0.7f, x1 = 1.5f, y1 = 2.0f, x2 = -0.5f, y2 = 0.25f, lr = 0.1f;
    unrolled u = { 0 };
    u.g = af_graph_new();
    u.w = af_parameter(u.g, "w", AF_SHAPE(1), &w0);
    af_tensor *e1 = af_adds(af_muls(u.w, x1), -y1);
    u.w1 = af_sub(u.w, af_muls(af_muls(e1, x1), lr));
    af_tensor *e2 = af_adds(af_muls(u.w1, x2), -y2);
    u.root = af_add(af_muls(af_square(e1), 0.5f), af_muls(af_square(e2), 0.5f));
    double wv1 = w0 - lr * (w0 * x1 - y1) * x1;
    u.want_w = (w0 * x1 - y1) * x1;
    u.want_w1 = (wv1 * x2 - y2) * x2;
    u.want_w_full = u.want_w + (1 - lr * x1 * x1) * u.want_w1;
    return u;
}

static double eval1(af_graph *g, af_tensor *t) {
    double v = NAN;
    if (!t || refgraph_eval(g, NULL, 1, &t, (double *[]){ &v }) != 0) return NAN;
    return v;
}

static void backward_from_opts(void) {
    unrolled u = build_unrolled();
    af_tensor *seed = af_const_fill(u.g, AF_SHAPE(1), 1.0f);
    af_tensor *params[2] = { u.w, u.w1 }, *gf[2] = { 0 }, *gb[2] = { 0 };
    af_backward_opts o = { .loss_scale = 3.0f, .nstop = 2, .stop = params };
    CHECK(af_backward_from(seed, u.root, 2, params, gf, &o) == AF_OK, "from, scaled, frontier: %s", af_error_message());
    CHECK(af_backward(af_loss_scalar(u.root), 2, params, gb, &o) == AF_OK, "af_backward, same opts: %s", af_error_message());
    CHECK_NEAR(eval1(u.g, gf[0]), 3 * u.want_w, 1e-5, "from: 3 dL/dw with w1 a leaf");
    CHECK_NEAR(eval1(u.g, gf[1]), 3 * u.want_w1, 1e-5, "from: 3 dL/dw1");
    CHECK_NEAR(eval1(u.g, gb[0]), eval1(u.g, gf[0]), 1e-9, "af_backward and af_backward_from agree on w");
    CHECK_NEAR(eval1(u.g, gb[1]), eval1(u.g, gf[1]), 1e-9, "af_backward and af_backward_from agree on w1");

    /* NULL options: scale 1, the params as the frontier, so with only w the gradient
     * flows through the update. loss_scale 1 adds no node. */
    af_tensor *full = NULL, *again = NULL;
    CHECK(af_backward_from(seed, u.root, 1, &u.w, &full, NULL) == AF_OK, "from, NULL opts: %s", af_error_message());
    CHECK_NEAR(eval1(u.g, full), u.want_w_full, 1e-5, "from: dL/dw through the update");
    af_backward_opts one = { .loss_scale = 1.0f };
    CHECK(af_backward_from(seed, u.root, 1, &u.w, &again, &one) == AF_OK, "from, scale 1: %s", af_error_message());
    CHECK_NEAR(eval1(u.g, again), u.want_w_full, 1e-5, "from, scale 1: same gradient");

    /* Errors name the function. */
    af_tensor *g1[1];
    af_backward_opts nostop = { .nstop = 1 };
    CHECK(af_backward_from(seed, u.root, 1, &u.w, g1, &nostop) == AF_ERR_INVALID &&
              strstr(af_error_message(), "af_backward_from") && strstr(af_error_message(), "stop is NULL"),
          "nstop without stop: %s", af_error_message());
    af_tensor *seed2 = af_const_fill(u.g, AF_SHAPE(2), 1.0f);
    CHECK(af_backward_from(seed2, u.root, 1, &u.w, g1, NULL) == AF_ERR_SHAPE, "seed shape: %s", af_error_message());
    CHECK(af_backward_from(NULL, u.root, 1, &u.w, g1, NULL) == AF_ERR_INVALID, "NULL seed");
    af_graph_free(u.g);
}

/* ---------------------------------------------------------------- c. af_mil_load */

static const char *SUM_MIL =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4]> a, tensor<fp16, [1, 4]> b) {\n"
    "            tensor<fp16, [1, 4]> s = add(x = a, y = b)[name = string(\"s\")];\n"
    "            tensor<fp16, [1, 4]> p = mul(x = a, y = b)[name = string(\"p\")];\n"
    "        } -> (s, p);\n"
    "}\n";

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void mil_load_lifetime(const char *dir) {
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/sum.mil", dir);
    snprintf(bad, sizeof bad, "%s/bad.mil", dir);
    write_text(path, SUM_MIL);
    af_graph *g = NULL;
    int nin = 0, nout = 0;
    af_tensor **in = NULL, **out = NULL;
    CHECK(af_mil_load(path, NULL, &g, &nin, &in, &nout, &out) == AF_OK, "load: %s", af_error_message());
    if (!g) return;
    CHECK(nin == 2 && nout == 2 && !strcmp(af_tensor_name(in[0]), "a") && !strcmp(af_tensor_name(in[1]), "b"),
          "arguments a, b");
    af_tensor *in0 = in[0], *in1 = in[1], *out0 = out[0], *out1 = out[1];

    /* Grow the graph well past its first allocations, compile and run, free the model:
     * the arrays and what they hold are unchanged. */
    af_tensor *chain = out[0];
    for (int i = 0; i < 500; i++) chain = af_adds(chain, 1.0f);
    af_tensor *outs[3] = { out[0], out[1], chain };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *m = af_compile(g, nin, in, 3, outs, &o);
    CHECK(m != NULL, "compile the loaded graph: %s", af_error_message());
    float a[4] = { 1, -2, 0.5f, 3 }, b[4] = { 4, 0.25f, -1, 2 }, s[4], p[4], c[4];
    af_buffer bi[2] = { AF_BUF_F32(a, 4), AF_BUF_F32(b, 4) };
    af_buffer bo[3] = { AF_BUF_F32(s, 4), AF_BUF_F32(p, 4), AF_BUF_F32(c, 4) };
    CHECK(m && af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
    int exact = 1;
    for (int i = 0; i < 4; i++) /* small dyadic values: exact in fp16 */
        exact &= s[i] == a[i] + b[i] && p[i] == a[i] * b[i] && c[i] == a[i] + b[i] + 500;
    CHECK(exact, "a + b, a * b and a + b + 500 exactly");
    CHECK(in[0] == in0 && in[1] == in1 && out[0] == out0 && out[1] == out1, "the arrays are unchanged");
    CHECK(!strcmp(af_tensor_name(in[1]), "b") && af_tensor_shape(out[1]).dim[1] == 4 && af_tensor_graph(out[1]) == g,
          "their tensors are still the graph's");
    af_graph_free(g); /* frees the arrays too: ASan reports a leak or a double free */

    /* Without the optional outputs nothing leaks either. */
    CHECK(af_mil_load(path, NULL, &g, NULL, NULL, NULL, NULL) == AF_OK, "load without outputs");
    af_graph_free(g);

    /* A failed load clears every output, even ones holding a previous load. */
    write_text(bad, "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4]> a) {\n        } -> (nope);\n}\n");
    const char *fails[2] = { bad, "/nonexistent/model.mil" };
    for (int k = 0; k < 2; k++) {
        g = (af_graph *)&nin, nin = nout = 7, in = out = (af_tensor **)&g;
        CHECK(af_mil_load(fails[k], NULL, &g, &nin, &in, &nout, &out) != AF_OK, "%s fails", fails[k]);
        CHECK(g == NULL && nin == 0 && in == NULL && nout == 0 && out == NULL, "%s: every output cleared", fails[k]);
    }
    remove(path);
    remove(bad);
}

int main(void) {
    char dir[] = "/tmp/af_test_api_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    shape_counts();
    leaves_and_results_capped();
    backward_from_opts();
    mil_load_lifetime(dir);
    rmdir(dir);
    return check_finish("api");
}
