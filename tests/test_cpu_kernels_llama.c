/* The CPU kernels rewritten for llama training's speed, against direct references:
 *  - cpu_vexpf (src/cpu/vmath.h) against exp in double over [-110, 100], and its edges
 *    (-inf -> 0, +inf and overflow -> inf, NaN -> NaN, underflow -> 0);
 *  - softmax over the last axis (vectorised exp, 16-lane sums) on rows of lengths 1..40
 *    with -inf (masked) entries, huge and equal values, against a double softmax;
 *  - exp, sigmoid and SiLU at ordinary values, +-100, +-inf and NaN against double formulas;
 *  - concat of 1-wide and 3-wide pieces along the last axis (RoPE's interleave: the
 *    strided paths) and slices/splits of such tensors (size-1 axes dropped from the
 *    copy plan), against index arithmetic;
 *  - the native swiglu node and its gradient nodes (what the llama builds on CPU
 *    graphs) bit for bit equal to the silu/mul chain and its VJP. */
#include "support/check.h"
#include "aneforge.h"
#include "cpu/vmath.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Compiles y = f(x) for the CPU in fp32 and runs it once. */
static void run1(af_graph *g, af_tensor *x, af_tensor *y, const float *xv, float *yv) {
    af_model *m = af_compile(g, 1, &x, 1, &y, NULL);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return;
    af_buffer in = AF_BUF_F32((float *)xv, af_shape_count(af_tensor_shape(x)));
    af_buffer out = AF_BUF_F32(yv, af_shape_count(af_tensor_shape(y)));
    CHECK(af_run(m, &in, &out) == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
}

static void test_vexp(void) {
    double worst = 0;
    for (int i = 0; i <= 2100000; i++) {
        float x = -110.0f + 210.0f * (float)i / 2100000.0f;
        double ref = exp((double)x);
        float got = cpu_vexpf(x);
        if (ref >= 1.1754943508222875e-38 && ref <= 3.4028234663852886e38) worst = fmax(worst, fabs(got - ref) / ref);
        else if (ref < 1.1754943508222875e-38) CHECK(got >= 0 && got <= 2e-38, "vexp(%g) = %g, want tiny", x, got);
        else CHECK(isinf(got) && got > 0, "vexp(%g) = %g, want inf", x, got);
    }
    CHECK(worst <= 2e-7, "vexp's worst relative error %.3g over the normal range", worst);
    CHECK(cpu_vexpf(-INFINITY) == 0.0f && isinf(cpu_vexpf(INFINITY)) && isnan(cpu_vexpf(NAN)) && cpu_vexpf(0.0f) == 1.0f,
          "vexp edges: -inf %g, inf %g, nan %g, 0 %g", cpu_vexpf(-INFINITY), cpu_vexpf(INFINITY), cpu_vexpf(NAN),
          cpu_vexpf(0.0f));
    CHECK(cpu_vexpf(-105.0f) == 0.0f, "vexp(-105) = %g", cpu_vexpf(-105.0f));
}

static void test_softmax(void) {
    test_rng r = { 21 };
    for (int n = 1; n <= 40; n++) {
        enum { ROWS = 4 };
        float x[ROWS * 40], y[ROWS * 40];
        for (int i = 0; i < ROWS * n; i++) x[i] = (float)(test_normal(&r) * 4);
        for (int i = 1; i < n; i += 3) x[i] = -INFINITY; /* row 0: a causal-mask pattern */
        for (int i = 0; i < n; i++) x[n + i] = 7.0f;    /* row 1: all equal */
        x[2 * n] = 80.0f;                               /* row 2: one huge logit */
        af_graph *g = af_graph_new();
        af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(ROWS, n));
        run1(g, in, af_softmax(in, -1), x, y);
        af_graph_free(g);
        double worst = 0;
        for (int row = 0; row < ROWS; row++) {
            double mx = -INFINITY, z = 0;
            for (int i = 0; i < n; i++) mx = fmax(mx, x[row * n + i]);
            for (int i = 0; i < n; i++) z += exp((double)x[row * n + i] - mx);
            for (int i = 0; i < n; i++) {
                double ref = exp((double)x[row * n + i] - mx) / z;
                worst = fmax(worst, fabs(y[row * n + i] - ref));
                if (isinf(x[row * n + i])) CHECK(y[row * n + i] == 0.0f, "n %d: masked entry got %g", n, y[row * n + i]);
            }
        }
        CHECK(worst <= 1e-6, "softmax rows of %d: worst |diff| %.3g", n, worst);
    }
}

static void test_exp_sigmoid_silu(void) {
    float x[64], ys[64], yl[64], ye[64];
    test_rng r = { 5 };
    for (int i = 0; i < 57; i++) x[i] = (float)(test_normal(&r) * 6);
    const float edge[7] = { 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f };
    memcpy(x + 57, edge, sizeof edge);
    af_graph *g = af_graph_new();
    af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(64));
    run1(g, in, af_sigmoid(in), x, ys);
    run1(g, in, af_silu(in), x, yl);
    run1(g, in, af_exp(in), x, ye);
    af_graph_free(g);
    for (int i = 0; i < 64; i++) {
        double s = 1.0 / (1.0 + exp(-(double)x[i])), l = (double)x[i] * s;
        if (isnan(x[i])) {
            CHECK(isnan(ys[i]) && isnan(yl[i]) && isnan(ye[i]), "NaN in: sigmoid %g, silu %g, exp %g", ys[i], yl[i], ye[i]);
            continue;
        }
        double e = exp((double)x[i]);
        if (e > 3.4e38) CHECK(isinf(ye[i]), "exp(%g) = %g", x[i], ye[i]);
        else if (e < 1e-37) CHECK(ye[i] >= 0 && ye[i] < 1e-37, "exp(%g) = %g", x[i], ye[i]);
        else CHECK(fabs(ye[i] - e) <= 2e-7 * e, "exp(%g) = %.9g vs %.9g", x[i], ye[i], e);
        CHECK(fabs(ys[i] - s) <= 2e-7, "sigmoid(%g) = %.9g vs %.9g", x[i], ys[i], s);
        if (isinf(x[i]) && x[i] < 0) CHECK(isnan(yl[i]), "silu(-inf) = %g (-inf / inf, as the libm form)", yl[i]);
        else if (isinf(x[i])) CHECK(isinf(yl[i]) && yl[i] > 0, "silu(inf) = %g", yl[i]);
        else CHECK(fabs(yl[i] - l) <= 2e-7 * fmax(1, fabs(l)), "silu(%g) = %.9g vs %.9g", x[i], yl[i], l);
    }
}

/* [A, B, C, 2] from two [A, B, C, 1] halves, and the halves back by slice and split. */
static void test_interleave(int chunk) {
    enum { A = 3, B = 5, C = 7 };
    float x[A * B * C * 2 * 3], y[A * B * C * 2 * 3], back[A * B * C * 3];
    int64_t half = (int64_t)A * B * C * chunk;
    for (int64_t i = 0; i < 2 * half; i++) x[i] = (float)i;
    af_graph *g = af_graph_new();
    af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(2 * half));
    af_tensor *parts[2] = { af_reshape(af_slice(in, (int64_t[]){ 0 }, (int64_t[]){ half }), AF_SHAPE(A, B, C, chunk)),
                            af_reshape(af_slice(in, (int64_t[]){ half }, (int64_t[]){ half }), AF_SHAPE(A, B, C, chunk)) };
    run1(g, in, af_reshape(af_concat(2, parts, 3), AF_SHAPE(-1)), x, y);
    for (int64_t o = 0; o < A * B * C; o++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < chunk; j++)
                CHECK(y[o * 2 * chunk + k * chunk + j] == x[k * half + o * chunk + j], "concat chunk %d at %lld", chunk,
                      (long long)o);
    /* The odd pieces back: a slice along the last axis of [A, B, C, 2 * chunk] (size-1 axes inside) and a split. */
    af_tensor *inter = af_input(g, "y", AF_F32, AF_SHAPE(A, 1, B, C, 2 * chunk));
    af_tensor *sl = af_slice(inter, (int64_t[]){ 0, 0, 0, 0, chunk }, (int64_t[]){ -1, -1, -1, -1, chunk });
    run1(g, inter, sl, y, back);
    for (int64_t o = 0; o < half; o++) CHECK(back[o] == x[half + o], "slice chunk %d at %lld", chunk, (long long)o);
    af_tensor *sp[2];
    CHECK(af_split(inter, 4, 2, NULL, sp) == AF_OK, "split: %s", af_error_message());
    run1(g, inter, sp[0], y, back);
    for (int64_t o = 0; o < half; o++) CHECK(back[o] == x[o], "split chunk %d at %lld", chunk, (long long)o);
    af_graph_free(g);
}

/* y = gate(a, b) and the gradients of sum(y * r) for a and b; native: the swiglu node. */
enum { SN = 5003 };

static void run_gate(bool native, const float *a, const float *b, const float *r, float out[3][SN]) {
    af_graph *g = af_graph_new();
    if (native) af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *p[2] = { af_parameter(g, "a", AF_SHAPE(SN), a), af_parameter(g, "b", AF_SHAPE(SN), b) }, *gr[2] = { 0 };
    af_tensor *y = native ? ir_swiglu(p[0], p[1]) : af_mul(af_silu(p[0]), p[1]);
    CHECK(y && y->op == (native ? IR_OP_SWIGLU : IR_OP_MUL), "gate (native %d): the expected node", native);
    int ax = 0;
    af_tensor *l = af_reduce_sum(af_mul(y, af_const(g, "r", AF_SHAPE(SN), r)), 1, &ax, 0);
    CHECK(af_backward(af_loss_scalar(l), 2, p, gr, NULL) == AF_OK, "gate backward: %s", af_error_message());
    af_tensor *outs[3] = { y, gr[0], gr[1] };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 2 };
    af_model *m = af_compile(g, 2, p, 3, outs, &o);
    af_buffer ib[2] = { AF_BUF_F32(a, SN), AF_BUF_F32(b, SN) };
    af_buffer ob[3] = { AF_BUF_F32(out[0], SN), AF_BUF_F32(out[1], SN), AF_BUF_F32(out[2], SN) };
    CHECK(m && af_run(m, ib, ob) == AF_OK, "gate (native %d): %s", native, af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

static void test_swiglu_bits(void) {
    static float a[SN], b[SN], r[SN], chain[3][SN], native[3][SN];
    test_rng rng = { 31 };
    test_fill_uniform(&rng, a, SN, -9, 9);
    test_fill_uniform(&rng, b, SN, -1, 1);
    test_fill_uniform(&rng, r, SN, -1, 1);
    a[0] = 0.0f, a[1] = -100.0f, a[2] = 100.0f;
    run_gate(false, a, b, r, chain);
    run_gate(true, a, b, r, native);
    const char *what[3] = { "silu(a) * b", "its gradient for a", "its gradient for b" };
    for (int k = 0; k < 3; k++)
        CHECK(!memcmp(chain[k], native[k], sizeof chain[k]), "swiglu: %s differs from the chain's bits", what[k]);
}

int main(void) {
    test_vexp();
    test_softmax();
    test_exp_sigmoid_silu();
    test_interleave(1);
    test_interleave(3);
    test_swiglu_bits();
    return check_finish("cpu_kernels_llama");
}
