/* Bounds on outputs from GEMM epilogues (exec.c's cpu_exec_track_bounds, reached through
 * model_track_output_bounds): the host optimizer skips reading a gradient whose largest
 * |g| the product that wrote it reported, so a bound that is too small would let a step
 * store inf. Each bound must equal the largest |x| of the delivered output exactly, bit
 * for bit, run after run (smaller values shrink it), INFINITY with a nan inside; and
 * outputs no product's epilogue sees whole (a bias gradient's sum, a tied embedding's
 * gradient, whose rows are added after its product) must report none, on 1 and 2
 * threads, in fp32 and in bf16 (where this CPU has a bf16 path, its kernels take the
 * bound from each block they store; the test asks the same of both).
 *
 * planted: the bound not reset between runs -> the smaller run's bound is the first
 * run's; the tied embedding's acc_into not excluded -> its output reports a bound below
 * its largest |x|. */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "model/model.h"
#include "support/check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static test_rng rng = {2024};

/* The largest |x| of n floats as a float (INFINITY when an inf or nan is inside). */
static float largest_abs(const float *x, int64_t n) {
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        m = (u & 0x7fffffffu) > m ? u & 0x7fffffffu : m;
    }
    if (m >= 0x7f800000u) return INFINITY;
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

/* After a run: outputs with want[i] report a bound equal to their largest |x|, the others none. */
static void check_bounds(const af_model *m, int nout, const af_buffer *out, const bool *want, const char *what) {
    for (int i = 0; i < nout; i++) {
        float b = -1.0f;
        bool has = model_output_bound(m, i, &b);
        CHECK(has == want[i], "%s: output %d %s a bound", what, i, has ? "has" : "lacks");
        if (!has) continue;
        float exact = largest_abs(out[i].data, out[i].count);
        CHECK(b == exact || (isinf(b) && isinf(exact)), "%s: output %d bound %.9g, largest |x| %.9g", what, i, (double)b,
              (double)exact);
    }
}

/* A two-layer MLP's loss and gradients: the weights' (matmuls, ta) bounded, the biases'
 * (sums) and the loss not. Three runs: as drawn, x scaled by 1/64 (every gradient
 * smaller), a nan in x (the weights' bounds INFINITY). */
static void test_mlp_grads(int threads, af_precision precision) {
    enum { B = 24, I = 70, H = 300, C = 37 };
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(B, I)), *y = af_input(g, "y", AF_F32, AF_SHAPE(B, C));
    af_tensor *p[4] = { af_input(g, "w1", AF_F32, AF_SHAPE(H, I)), af_input(g, "b1", AF_F32, AF_SHAPE(H)),
                        af_input(g, "w2", AF_F32, AF_SHAPE(C, H)), af_input(g, "b2", AF_F32, AF_SHAPE(C)) };
    af_tensor *h = af_relu(af_add(af_matmul(x, p[0], 0, 1), p[1]));
    af_loss *loss = af_softmax_cross_entropy(af_add(af_matmul(h, p[2], 0, 1), p[3]), y);
    af_tensor *in[6] = { x, y, p[0], p[1], p[2], p[3] }, *out[5] = { af_loss_value(loss) };
    CHECK(af_backward(loss, 4, p, out + 1, NULL) == AF_OK, "backward: %s", af_error_message());
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = precision, .threads = threads };
    af_model *m = af_compile(g, 6, in, 5, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    static float xv[B * I], yv[B * C], w1[H * I], b1[H], w2[C * H], b2[C], lv, gw1[H * I], gb1[H], gw2[C * H], gb2[C];
    test_fill_uniform(&rng, xv, B * I, -1, 1);
    test_fill_uniform(&rng, w1, H * I, -0.3f, 0.3f);
    test_fill_uniform(&rng, b1, H, -0.1f, 0.1f);
    test_fill_uniform(&rng, w2, C * H, -0.3f, 0.3f);
    test_fill_uniform(&rng, b2, C, -0.1f, 0.1f);
    memset(yv, 0, sizeof yv);
    for (int b = 0; b < B; b++) yv[b * C + (b * 7) % C] = 1.0f;
    af_buffer inb[6] = { AF_BUF_F32(xv, B * I), AF_BUF_F32(yv, B * C), AF_BUF_F32(w1, H * I), AF_BUF_F32(b1, H),
                         AF_BUF_F32(w2, C * H), AF_BUF_F32(b2, C) };
    af_buffer outb[5] = { AF_BUF_F32(&lv, 1), AF_BUF_F32(gw1, H * I), AF_BUF_F32(gb1, H), AF_BUF_F32(gw2, C * H),
                          AF_BUF_F32(gb2, C) };
    const bool want[5] = { false, true, false, true, false };
    char what[96];
    if (m && model_track_output_bounds(m)) {
        for (int run = 0; run < 3; run++) {
            if (run == 1)
                for (int i = 0; i < B * I; i++) xv[i] /= 64.0f;
            if (run == 2) xv[5] = NAN;
            float before = largest_abs(gw1, H * I);
            CHECK(af_run(m, inb, outb) == AF_OK, "run: %s", af_error_message());
            snprintf(what, sizeof what, "mlp, %d threads, %s, run %d", threads, precision == AF_PRECISION_BF16 ? "bf16" : "fp32",
                     run);
            check_bounds(m, 5, outb, want, what);
            if (run == 1) CHECK(largest_abs(gw1, H * I) < before, "%s: the scaled run's dW1 did not shrink", what);
            if (run == 2) {
                float b = 0.0f;
                CHECK(model_output_bound(m, 1, &b) && isinf(b), "%s: a nan in x left dW1's bound %g", what, (double)b);
            }
        }
    } else {
        CHECK(0, "the cpu backend offers no bounds");
    }
    af_model_free(m);
    af_graph_free(g);
}

/* A product whose fused add (a residual computed before it) is the output: bounded after
 * the add; a product read by a second output's ReLU, and requested twice: bounded on its
 * own, both times; a weight the size of an lm_head (matmul_w, more than 8,192 rows). */
static void test_fused_and_chunked(int threads, af_precision precision) {
    enum { M = 40, K = 256, N = 96, V = 8200 };
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(M, K)), *r = af_input(g, "r", AF_F32, AF_SHAPE(M, N));
    static float wv[N * K], lm[V * K], xv[M * K], rv[M * N], o0[M * N], o1[M * N], o2[M * N], o3[M * V], o4[M * N];
    test_fill_uniform(&rng, wv, N * K, -1, 1);
    test_fill_uniform(&rng, lm, V * K, -1, 1);
    test_fill_uniform(&rng, xv, M * K, -1, 1);
    test_fill_uniform(&rng, rv, M * N, -3, 3);
    lm[4321 * K + 7] = 40.0f; /* a large entry far down the weight: a chunk past the first */
    af_tensor *w = af_const(g, "w", AF_SHAPE(N, K), wv), *wl = af_const(g, "lm", AF_SHAPE(V, K), lm);
    af_tensor *xw = af_matmul_w(x, w);
    af_tensor *out[5] = { af_add(af_matmul_w(x, w), r), xw, af_relu(xw), af_matmul_w(x, wl), xw }, *in[2] = { x, r };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = precision, .threads = threads };
    af_model *m = af_compile(g, 2, in, 5, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    af_buffer inb[2] = { AF_BUF_F32(xv, M * K), AF_BUF_F32(rv, M * N) };
    af_buffer outb[5] = { AF_BUF_F32(o0, M * N), AF_BUF_F32(o1, M * N), AF_BUF_F32(o2, M * N), AF_BUF_F32(o3, M * V),
                          AF_BUF_F32(o4, M * N) };
    const bool want[5] = { true, true, false, true, true };
    char what[96];
    snprintf(what, sizeof what, "fused and chunked, %d threads, %s", threads, precision == AF_PRECISION_BF16 ? "bf16" : "fp32");
    if (m && model_track_output_bounds(m) && af_run(m, inb, outb) == AF_OK) check_bounds(m, 5, outb, want, what);
    else CHECK(0, "%s: %s", what, af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* A tied embedding (the table is also the classifier): its gradient is the classifier's
 * product with the embedding's rows added after it, so no epilogue sees its final values. */
static void test_tied_embedding(void) {
    enum { B = 2, T = 16, V = 300, D = 64 };
    af_graph *g = af_graph_new();
    af_tensor *ids = af_input(g, "ids", AF_F32, AF_SHAPE(B, T)), *y = af_input(g, "y", AF_F32, AF_SHAPE(B * T, V));
    af_tensor *w = af_input(g, "w", AF_F32, AF_SHAPE(V, D));
    af_tensor *h = af_reshape(af_embedding(w, ids), AF_SHAPE(B * T, D));
    af_loss *loss = af_softmax_cross_entropy(af_matmul(h, w, 0, 1), y);
    af_tensor *in[3] = { ids, y, w }, *out[2] = { af_loss_value(loss) };
    CHECK(af_backward(loss, 1, &w, out + 1, NULL) == AF_OK, "backward: %s", af_error_message());
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 2 };
    af_model *m = af_compile(g, 3, in, 2, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    static float idv[B * T], yv[B * T * V], wv[V * D], lv, gw[V * D];
    for (int i = 0; i < B * T; i++) idv[i] = (float)((i * 37) % V);
    for (int i = 0; i < B * T; i++) yv[i * V + (i * 11) % V] = 1.0f;
    test_fill_uniform(&rng, wv, V * D, -1, 1);
    af_buffer inb[3] = { AF_BUF_F32(idv, B * T), AF_BUF_F32(yv, B * T * V), AF_BUF_F32(wv, V * D) };
    af_buffer outb[2] = { AF_BUF_F32(&lv, 1), AF_BUF_F32(gw, V * D) };
    const bool want[2] = { false, false };
    if (m && model_track_output_bounds(m) && af_run(m, inb, outb) == AF_OK) check_bounds(m, 2, outb, want, "tied embedding");
    else CHECK(0, "tied embedding: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

int main(void) {
    int precisions = cpu_gemm_bf16_best() != CPU_BF16_NONE ? 2 : 1; /* af_compile refuses bf16 without the instructions */
    if (precisions == 1) printf("note: this CPU has neither AMX-BF16 nor AVX512-BF16: the bf16 bounds are not checked here\n");
    for (int threads = 1; threads <= 2; threads++)
        for (int bf = 0; bf < precisions; bf++) {
            af_precision pr = bf ? AF_PRECISION_BF16 : AF_PRECISION_FP32;
            test_mlp_grads(threads, pr);
            test_fused_and_chunked(threads, pr);
        }
    test_tied_embedding();
    return check_finish("exec_bounds");
}
