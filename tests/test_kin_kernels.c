/* Kernel cases the op corpus never reached (issue 32): windows that half-tile the plane,
 * extreme values (logits near +-1000, overflow of exp), and fp16 storage details that hid
 * under the corpus's 2-ulp tolerance, here compared with an exact fp16 reference of the
 * engine's arithmetic. Each test names the one-line bug it was seen to catch ("planted:"):
 * with that change the test fails, without it it passes. */
#include "aneforge.h"
#include "cpu/kernels.h"
#include "ir/fp16.h"
#include "support/check.h"
#include "support/kin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static af_shape shp4(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t v[4] = { a, b, c, d };
    return af_shape_make(4, v);
}
static af_shape shp2(int64_t a, int64_t b) {
    int64_t v[2] = { a, b };
    return af_shape_make(2, v);
}

/* ---------------------------------------------------------------- half-tiled windows */

/* The pool gradient of x [n, c, h, w] in double: each window's dy spread over its
 * inputs (avg: / kernel area; max: to every input equal to the window's max). */
static void ref_pool_grad(bool avg, af_shape xs, const int k[2], const int s[2], const float *x, const float *dy,
                          int64_t ho, int64_t wo, double *dx) {
    int64_t planes = xs.dim[0] * xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    memset(dx, 0, sizeof(double) * (size_t)(planes * h * w));
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oh = 0; oh < ho; oh++)
            for (int64_t ow = 0; ow < wo; ow++) {
                double g = dy[(p * ho + oh) * wo + ow], m = -INFINITY;
                for (int u = 0; u < k[0]; u++)
                    for (int v = 0; v < k[1]; v++) m = fmax(m, x[(p * h + oh * s[0] + u) * w + ow * s[1] + v]);
                for (int u = 0; u < k[0]; u++)
                    for (int v = 0; v < k[1]; v++) {
                        int64_t i = (p * h + oh * s[0] + u) * w + ow * s[1] + v;
                        dx[i] += avg ? g / (k[0] * k[1]) : (x[i] == m ? g : 0.0);
                    }
            }
}

/* planted (src/cpu/k_pool.c, pool_grad_planes): `bool tiles = avg && stride == kernel &&
 * !pad && wo * kernel[1] == w;` (the "ho * kernel[0] == h" condition dropped): the last
 * row of dx for x [1,1,5,4], k = s = 2 keeps whatever the buffer held. Called straight
 * through the kernel table with dx poisoned by NaN, and again through af_compile. */
static void test_pool_grad_half_tiles(void) {
    static const int64_t shapes[][4] = { { 1, 1, 5, 4 }, { 1, 1, 4, 5 }, { 2, 3, 5, 5 }, { 1, 2, 7, 6 }, { 1, 1, 6, 8 } };
    static const int ks[] = { 2, 2, 2, 3, 3 };
    test_rng r = { 3201 };
    for (int avg = 0; avg < 2; avg++)
        for (size_t sc = 0; sc < sizeof shapes / sizeof shapes[0]; sc++) {
            af_shape xs = shp4(shapes[sc][0], shapes[sc][1], shapes[sc][2], shapes[sc][3]);
            int k[2] = { ks[sc], ks[sc] }, s[2] = { ks[sc], ks[sc] };
            af_graph *g = af_graph_new();
            af_tensor *x = af_input(g, "x", AF_F32, xs);
            af_tensor *y = avg ? af_avg_pool(x, k, s, NULL) : af_max_pool(x, k, s, NULL);
            af_tensor *dy = af_input(g, "dy", AF_F32, af_tensor_shape(y));
            af_tensor *dx = ir_pool_grad(avg ? IR_OP_AVG_POOL_GRAD : IR_OP_MAX_POOL_GRAD, x, dy, &y->a);
            CHECK(dx != NULL, "pool grad node: %s", af_error_message());
            if (!dx) { af_graph_free(g); continue; }
            int64_t nx = af_shape_count(xs), ny = af_shape_count(af_tensor_shape(y));
            int64_t ho = af_tensor_shape(y).dim[2], wo = af_tensor_shape(y).dim[3];
            float *xd = malloc(sizeof(float) * (size_t)nx), *dyd = malloc(sizeof(float) * (size_t)ny);
            float *got = malloc(sizeof(float) * (size_t)nx);
            double *want = malloc(sizeof(double) * (size_t)nx);
            test_fill_uniform(&r, xd, nx, -2, 2);
            test_fill_uniform(&r, dyd, ny, -1, 1);
            ref_pool_grad(avg, xs, k, s, xd, dyd, ho, wo, want);
            for (int64_t i = 0; i < nx; i++) got[i] = NAN; /* stale memory, made visible */
            const float *ins[2] = { xd, dyd };
            cpu_call c = { .t = dx, .in = ins, .out = got };
            cpu_kernels[dx->op](&c);
            int bad = 0;
            for (int64_t i = 0; i < nx; i++) bad += !(fabs(got[i] - want[i]) <= 1e-6);
            CHECK(bad == 0, "%s_pool_grad x [%lld,%lld,%lld,%lld] k = s = %d: %d of %lld dx values wrong (stale?)",
                  avg ? "avg" : "max", (long long)xs.dim[0], (long long)xs.dim[1], (long long)xs.dim[2], (long long)xs.dim[3],
                  k[0], bad, (long long)nx);
            kin_graph kg = { .g = g, .nin = 2, .in = { x, dy }, .data = { xd, dyd }, .nout = 2, .out = { dx, y } };
            for (int threads = 1; threads <= 2; threads++) kin_check(&kg, false, threads, 1e-6, 1e-6, "pool + grad, half-tiled");
            kin_check(&kg, true, 1, 0, 2e-3, "pool + grad, half-tiled");
            free(xd);
            free(dyd);
            free(got);
            free(want);
            af_graph_free(g);
        }
}

/* Pools forward with a 2x2 kernel and every stride pair in {1, 2}, on planes that 2
 * does not tile, and a 3x3 kernel with stride 2 and 3.
 * planted (src/cpu/k_pool.c, cpu_k_pool): the 2x2/stride-2 fast path's condition without
 * `a->stride[1] == 2`: k 2x2, stride 2x1 reads the wrong columns. */
static void test_pool_forward_strides(void) {
    test_rng r = { 3208 };
    static const int ks[][4] = { { 2, 2, 2, 2 }, { 2, 2, 2, 1 }, { 2, 2, 1, 2 }, { 2, 2, 1, 1 }, { 3, 3, 2, 2 }, { 3, 3, 3, 3 }, { 2, 3, 2, 3 } };
    static const int64_t hw[][2] = { { 5, 4 }, { 4, 5 }, { 7, 7 } };
    float x[2 * 49];
    test_fill_uniform(&r, x, 2 * 49, -2, 2);
    for (int avg = 0; avg < 2; avg++)
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
            for (size_t s = 0; s < sizeof hw / sizeof hw[0]; s++) {
                af_graph *g = af_graph_new();
                int kk[2] = { ks[k][0], ks[k][1] }, st[2] = { ks[k][2], ks[k][3] };
                af_tensor *xt = af_input(g, "x", AF_F32, shp4(1, 2, hw[s][0], hw[s][1]));
                af_tensor *y = avg ? af_avg_pool(xt, kk, st, NULL) : af_max_pool(xt, kk, st, NULL);
                char what[100];
                snprintf(what, sizeof what, "%s_pool k %dx%d stride %dx%d on %lldx%lld", avg ? "avg" : "max", kk[0], kk[1], st[0], st[1],
                         (long long)hw[s][0], (long long)hw[s][1]);
                CHECK(y != NULL, "%s: %s", what, af_error_message());
                kin_graph kg = { .g = g, .nin = 1, .in = { xt }, .data = { x }, .nout = 1, .out = { y } };
                if (y) {
                    kin_check(&kg, false, 1, 1e-6, 1e-6, what);
                    kin_check(&kg, true, 1, 0, 2e-3, what);
                }
                af_graph_free(g);
            }
}

/* Convolutions whose stride leaves a partial window at the bottom and right edge:
 * x [1, 2, 7, 5], k = s = 2 (and 3), and conv_transpose of the same. */
static void test_conv_half_tiles(void) {
    test_rng r = { 3202 };
    for (int kk = 2; kk <= 3; kk++)
        for (int tr = 0; tr < 2; tr++) {
            af_graph *g = af_graph_new();
            af_shape xs = shp4(1, 2, 7, 5), ws = shp4(tr ? 2 : 3, tr ? 3 : 2, kk, kk);
            float wd[3 * 2 * 9], xd[70];
            test_fill_uniform(&r, wd, af_shape_count(ws), -1, 1);
            test_fill_uniform(&r, xd, 70, -1, 1);
            af_tensor *x = af_input(g, "x", AF_F32, xs), *w = af_const(g, "w", ws, wd);
            int st[2] = { kk, kk };
            af_tensor *y = tr ? af_conv_transpose(x, w, st, NULL, NULL) : af_conv(x, w, st, NULL, NULL, 1);
            CHECK(y != NULL, "conv: %s", af_error_message());
            kin_graph kg = { .g = g, .nin = 1, .in = { x }, .data = { xd }, .nout = 1, .out = { y } };
            if (y) kin_check(&kg, false, 1, 1e-6, 1e-5, tr ? "conv_transpose k = s, odd H and W" : "conv k = s, odd H and W");
            af_graph_free(g);
        }
}

/* ---------------------------------------------------------------- extreme values */

/* planted (src/cpu/k_reduce.c, softmax_row and softmax_range): `mx = 0.0f` instead of the
 * row max: softmax([1000, 0, -1000]) becomes NaN. Contiguous and strided axes, forward
 * and gradient, fp32 and fp16. */
static void test_softmax_extreme(void) {
    static const float rows[2][3] = { { 1000, 0, -1000 }, { -1000, 1000, 999 } };
    static const float seed[6] = { 0.5f, -1, 0.25f, 1, -0.5f, 2 };
    for (int strided = 0; strided < 2; strided++)
        for (int fp16 = 0; fp16 < 2; fp16++) {
            af_graph *g = af_graph_new();
            float xd[6], sd[6];
            /* strided: x [3, 2], softmax over axis 0 (stride 2) */
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                    xd[strided ? j * 2 + i : i * 3 + j] = rows[i][j];
                    sd[strided ? j * 2 + i : i * 3 + j] = seed[i * 3 + j];
                }
            af_shape s = strided ? shp2(3, 2) : shp2(2, 3);
            af_tensor *x = af_input(g, "x", AF_F32, s), *gs = af_input(g, "g", AF_F32, s);
            af_tensor *y = af_softmax(x, strided ? 0 : 1), *dx = NULL;
            CHECK(af_backward_from(gs, y, 1, &x, &dx, NULL) == AF_OK, "softmax backward: %s", af_error_message());
            kin_graph kg = { .g = g, .nin = 2, .in = { x, gs }, .data = { xd, sd }, .nout = 2, .out = { y, dx } };
            char what[80];
            snprintf(what, sizeof what, "softmax of +-1000 logits, %s axis", strided ? "strided" : "contiguous");
            kin_check(&kg, fp16, 1, fp16 ? 2e-3 : 1e-6, fp16 ? 2e-3 : 1e-5, what);
            /* and the values themselves, not only agreement with the reference */
            float *got[2] = { 0 };
            if (kin_run(&kg, fp16, 1, got) == 0) {
                int r1 = strided ? 1 : 3, st = strided ? 2 : 1; /* row 1, element 0 */
                CHECK(got[0][r1] == 0.0f && fabs(got[0][r1 + st] - 0.7310585786) < 2e-3 &&
                          fabs(got[0][r1 + 2 * st] - 0.2689414214) < 2e-3,
                      "%s: row [-1000, 1000, 999] gives %g %g %g", what, got[0][r1], got[0][r1 + st], got[0][r1 + 2 * st]);
            }
            free(got[0]);
            free(got[1]);
            af_graph_free(g);
        }
}

/* planted (src/nn/loss.c, af_loss_value): `lse = af_log(af_reduce_sum(af_exp(z), ...))`
 * without the row max: the cross-entropy of +-1000 logits is inf. */
static void test_cross_entropy_extreme(void) {
    af_graph *g = af_graph_new();
    float z[6] = { 1000, 0, -1000, -1000, 1000, 999 }, t[6] = { 0, 1, 0, 0, 0, 1 };
    af_tensor *x = af_input(g, "z", AF_F32, shp2(2, 3)), *y = af_input(g, "t", AF_F32, shp2(2, 3));
    af_loss *l = af_softmax_cross_entropy(x, y);
    af_tensor *v = af_loss_value(l), *dz = NULL;
    CHECK(af_backward(l, 1, &x, &dz, NULL) == AF_OK, "CE backward: %s", af_error_message());
    kin_graph kg = { .g = g, .nin = 2, .in = { x, y }, .data = { z, t }, .nout = 2, .out = { v, dz } };
    kin_check(&kg, false, 1, 1e-4, 1e-6, "cross-entropy of +-1000 logits");
    float *got[2] = { 0 };
    /* row 0: lse 1000, target logit 0 -> 1000; row 1: lse 1000 + log(1 + e^-1), target 999 */
    if (kin_run(&kg, false, 1, got) == 0)
        CHECK(fabs(got[0][0] - (1000 + 1 + log1p(exp(-1.0))) / 2) < 1e-3, "CE loss %g", got[0][0]);
    free(got[0]);
    free(got[1]);
    af_graph_free(g);
}

/* The exp-based and saturating unary kernels at +-1000, +-88 (the edge of expf) and tiny
 * magnitudes, against the double reference (infinities must match exactly).
 * planted (src/cpu/vmath.h or k_elementwise.c): sigmoid as `cpu_vexpf(x) / (1 + cpu_vexpf(x))`
 * gives NaN at x = 1000. */
static void test_unary_extreme(void) {
    static const float xs[] = { -1000, -89, -88, -20, -1e-30f, 0, 1e-30f, 1e-8f, 20, 88, 89, 1000 };
    int n = (int)(sizeof xs / sizeof xs[0]);
    for (int op = 0; op < 6; op++) {
        af_graph *g = af_graph_new();
        af_tensor *x = af_input(g, "x", AF_F32, af_shape_make(1, (int64_t[]){ n }));
        af_tensor *y = op == 0 ? af_exp(x) : op == 1 ? af_sigmoid(x) : op == 2 ? af_silu(x) : op == 3 ? af_tanh(x)
                     : af_gelu(x, op == 4 ? AF_GELU_EXACT : AF_GELU_TANH);
        kin_graph kg = { .g = g, .nin = 1, .in = { x }, .data = { xs }, .nout = 1, .out = { y } };
        static const char *names[] = { "exp", "sigmoid", "silu", "tanh", "gelu exact", "gelu tanh" };
        char what[60];
        snprintf(what, sizeof what, "%s at extreme arguments", names[op]);
        kin_check(&kg, false, 1, 1e-30, 2e-6, what);
        af_graph_free(g);
    }
}

/* Attention whose scores reach +-1000: the causal kernel's row softmax and sdpa's. */
static void test_attention_extreme(void) {
    test_rng r = { 3203 };
    for (int which = 0; which < 2; which++) {
        af_graph *g = af_graph_new();
        af_shape s = shp4(1, 2, 5, 4);
        float q[40], k[40], v[40];
        for (int i = 0; i < 40; i++) {
            q[i] = (float)(test_uniform(&r) < 0.5 ? -16 : 16);
            k[i] = (float)(test_uniform(&r) < 0.5 ? -16 : 16) * (float)(1 + (i % 3) * 0.0625);
        }
        test_fill_uniform(&r, v, 40, -1, 1);
        af_tensor *qt = af_input(g, "q", AF_F32, s), *kt = af_input(g, "k", AF_F32, s), *vt = af_input(g, "v", AF_F32, s);
        af_tensor *y = which ? af_sdpa(qt, kt, vt, NULL, 1.0f) : af_causal_attention(qt, kt, vt, 1.0f);
        CHECK(y != NULL, "attention: %s", af_error_message());
        kin_graph kg = { .g = g, .nin = 3, .in = { qt, kt, vt }, .data = { q, k, v }, .nout = 1, .out = { y } };
        if (y) kin_check(&kg, false, 1, 1e-5, 1e-5, which ? "sdpa with scores near +-1000" : "causal attention with scores near +-1000");
        af_graph_free(g);
    }
}

/* The norms at huge and tiny magnitudes, against the double reference: rows around +-3e4
 * with a spread of ~1 (the variance is the difference of two ~1e9 terms; the kernel's
 * fp32 mean alone costs up to ulp(3e4) / std = 4e-3, the tolerance), rows of 1e-3 (var
 * near eps) within 1e-6, rows of 1e-20 (the squares underflow fp32, so eps decides; the
 * outputs are ~3e-18) within 1e-24.
 * planted (src/cpu/k_norm.c, norm_group): `float sum = 0, sq = 0` instead of double. */
static void test_norm_magnitudes(void) {
    test_rng r = { 3207 };
    enum { R = 4, D = 16 };
    for (int big = 0; big < 3; big++) { /* 2: +-3e4 and +-1e4; 1: 1e-3; 0: 1e-20 */
        float x[R * D];
        for (int i = 0; i < R * D; i++) {
            int row = i / D;
            double u = 2 * test_uniform(&r) - 1;
            x[i] = (float)(big == 2 ? (row & 1 ? -1 : 1) * (row < 2 ? 30000 : 10000) + u : (big ? 1e-3 : 1e-20) * u);
        }
        for (int op = 0; op < 3; op++) {
            af_graph *g = af_graph_new();
            af_tensor *xt = af_input(g, "x", AF_F32, op == 2 ? shp4(1, R, 4, 4) : shp2(R, D));
            af_tensor *y = op == 0 ? af_layer_norm(xt, NULL, NULL, 1e-5f) : op == 1 ? af_rms_norm(xt, NULL, 1e-5f)
                                                                          : af_group_norm(xt, 2, NULL, NULL, 1e-5f);
            CHECK(y != NULL, "norm %d: %s", op, af_error_message());
            kin_graph kg = { .g = g, .nin = 1, .in = { xt }, .data = { x }, .nout = 1, .out = { y } };
            static const char *names[] = { "layer_norm", "rms_norm", "group_norm" };
            char what[80];
            snprintf(what, sizeof what, "%s at magnitudes %s", names[op], big == 2 ? "+-3e4, +-1e4" : big ? "1e-3" : "1e-20");
            if (y) kin_check(&kg, false, 1, big == 2 ? 4e-3 : big ? 1e-6 : 1e-24, 1e-5, what); /* outputs ~1, ~1, ~3e-18 */
            af_graph_free(g);
        }
    }
}

/* ---------------------------------------------------------------- fp16 storage, exactly */

/* planted (src/cpu/k_lrn.c, lrn): `alpha = af_round_f16((float)alpha)` instead of
 * fp16(alpha * C) / C: alpha 1e-8 rounds to 0 in fp16 while alpha * 15 does not, and
 * the results differ by ~20%. The reference is the engine's arithmetic (alpha * C
 * stored as fp16, the window sum in double, the result rounded to fp16), compared
 * exactly; k (2^-7) and beta (0.75) are exact in fp16 so only alpha's storage matters. */
static void test_lrn_fp16_exact(void) {
    const int C = 15, HW = 6;
    const double alpha = 1e-8, beta = 0.75, kk = 0.0078125;
    test_rng r = { 3204 };
    float x[15 * 6];
    for (int i = 0; i < C * HW; i++) x[i] = af_round_f16((float)(300 * (2 * test_uniform(&r) - 1)));
    for (int fp16 = 0; fp16 < 2; fp16++) {
        af_graph *g = af_graph_new();
        af_tensor *xt = af_input(g, "x", AF_F32, shp4(1, C, 2, 3));
        af_tensor *y = af_lrn(xt, (float)alpha, (float)beta, (float)kk);
        CHECK(y != NULL, "lrn: %s", af_error_message());
        kin_graph kg = { .g = g, .nin = 1, .in = { xt }, .data = { x }, .nout = 1, .out = { y } };
        float *got[1] = { 0 };
        if (y && kin_run(&kg, fp16, 1, got) == 0) {
            double a = fp16 ? (double)af_round_f16((float)((double)(float)alpha * C)) / C : (double)(float)alpha;
            int bad = 0, first = -1;
            double fw = 0;
            for (int c = 0; c < C; c++) {
                int64_t lo, hi;
                ir_lrn_window(c, C, &lo, &hi);
                for (int p = 0; p < HW; p++) {
                    double s = 0;
                    for (int64_t j = lo; j < hi; j++) s += (double)x[j * HW + p] * x[j * HW + p];
                    float want = (float)(x[c * HW + p] / pow((double)(float)kk + a * s, (double)(float)beta));
                    if (fp16) want = af_round_f16(want);
                    bool ok = fp16 ? got[0][c * HW + p] == want : fabs(got[0][c * HW + p] - want) <= 1e-6 * fabs(want);
                    if (!ok && first < 0) { first = c * HW + p; fw = want; }
                    bad += !ok;
                }
            }
            CHECK(bad == 0, "lrn alpha 1e-8, C 15 [%s]: %d of %d values differ from the engine's arithmetic, first [%d] %.9g want %.9g",
                  fp16 ? "fp16" : "fp32", bad, C * HW, first, first < 0 ? 0.0 : got[0][first], fw);
        }
        free(got[0]);
        af_graph_free(g);
    }
}

/* Scalar attributes the engine stores as fp16: x * s (muls), scale * (x + z)
 * (scaled_elementwise) and (x - min) / (max - min + eps) (minmax_norm), each compared
 * exactly with fp32 arithmetic on fp16-rounded operands and an fp16-rounded result.
 * planted (src/cpu/k_elementwise.c, unary_range): `float s = c->t->a.scalar;` (not rounded
 * in fp16); (src/cpu/k_lrn.c) the same for minmax_norm's eps and scaled_elementwise's scale. */
static void test_scalar_attrs_fp16_exact(void) {
    test_rng r = { 3205 };
    enum { N = 64 };
    float x[N], z[N];
    for (int i = 0; i < N; i++) {
        x[i] = af_round_f16((float)(8 * test_uniform(&r) - 4));
        z[i] = af_round_f16((float)(8 * test_uniform(&r) - 4));
    }
    /* minmax rows of 4 whose range is a few fp16 subnormals, so eps = 1e-7 (fp16:
     * 1.19e-7) dominates the divisor */
    float mm[N];
    for (int i = 0; i < N; i++) mm[i] = (float)((i * 7 + i / 4) % 5) * 5.9604644775390625e-08f;
    for (int op = 0; op < 3; op++) {
        af_graph *g = af_graph_new();
        af_shape s = shp4(1, 1, N / 4, 4);
        af_tensor *xt = af_input(g, "x", AF_F32, s), *zt = af_input(g, "z", AF_F32, s);
        const float sc = 0.1f, eps = 1e-7f;
        af_tensor *y = op == 0 ? af_muls(xt, sc) : op == 1 ? af_scaled_elementwise(xt, zt, AF_SEW_ADD, sc) : af_minmax_norm(xt, -1, eps);
        CHECK(y != NULL, "op %d: %s", op, af_error_message());
        const float *xin = op == 2 ? mm : x;
        kin_graph kg = { .g = g, .nin = op == 1 ? 2 : 1, .in = { xt, zt }, .data = { xin, z }, .nout = 1, .out = { y } };
        float *got[1] = { 0 };
        static const char *names[] = { "muls 0.1", "scaled_elementwise add, scale 0.1", "minmax_norm eps 1e-7" };
        if (y && kin_run(&kg, true, 1, got) == 0) {
            int bad = 0, first = -1;
            float fw = 0;
            for (int i = 0; i < N; i++) {
                float xi = af_round_f16(xin[i]), want;
                if (op == 0) want = xi * af_round_f16(sc);
                else if (op == 1) want = af_round_f16(sc) * (xi + af_round_f16(z[i]));
                else {
                    int b = i / 4 * 4;
                    float mn = INFINITY, mx = -INFINITY;
                    for (int j = b; j < b + 4; j++) { mn = fminf(mn, af_round_f16(xin[j])); mx = fmaxf(mx, af_round_f16(xin[j])); }
                    want = (xi - mn) / (mx - mn + af_round_f16(eps));
                }
                want = af_round_f16(want);
                if (got[0][i] != want) {
                    if (first < 0) { first = i; fw = want; }
                    bad++;
                }
            }
            CHECK(bad == 0, "%s in fp16: %d of %d values differ from fp16 arithmetic, first [%d] %.9g want %.9g", names[op], bad, N,
                  first, first < 0 ? 0.0 : got[0][first], fw);
        }
        free(got[0]);
        af_graph_free(g);
    }
}

/* sdpa's scale is the fp16 constant the engine holds (1/sqrt(3) -> 0.57714844).
 * planted (src/cpu/k_sdpa.c): the `ir_round_f16_array(&scale, 1)` line dropped. Raw
 * scores q.k up to 144 and a mask that cancels them (scores near 0 after it) make the
 * scale's 3.5e-4 relative rounding move the weights by ~3%; the reference is double
 * arithmetic on the fp16 scale, within 1 fp16 ulp. */
static void test_sdpa_scale_fp16(void) {
    enum { SQ = 2, SKV = 4, D = 3 };
    af_graph *g = af_graph_new();
    float q[SQ * D] = { 4, 4, 4, 4, -4, 4 }, k[SKV * D], v[SKV * D], mask[SQ * SKV];
    const double sc = af_round_f16((float)(1.0 / sqrt(3.0)));
    for (int j = 0; j < SKV; j++)
        for (int e = 0; e < D; e++) {
            k[j * D + e] = (float)(4 * j);
            v[j * D + e] = af_round_f16((float)((j * D + e) % 5) * 0.25f - 0.5f);
        }
    for (int i = 0; i < SQ; i++)
        for (int j = 0; j < SKV; j++) {
            double d = 0;
            for (int e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
            mask[i * SKV + j] = af_round_f16((float)(-d * sc));
        }
    af_tensor *qt = af_input(g, "q", AF_F32, shp4(1, 1, SQ, D)), *kt = af_input(g, "k", AF_F32, shp4(1, 1, SKV, D));
    af_tensor *vt = af_input(g, "v", AF_F32, shp4(1, 1, SKV, D));
    af_tensor *mt = af_input(g, "mask", AF_F32, af_shape_make(3, (int64_t[]){ SQ, 1, SKV }));
    af_tensor *y = af_sdpa(qt, kt, vt, mt, 0.0f);
    CHECK(y != NULL, "sdpa: %s", af_error_message());
    kin_graph kg = { .g = g, .nin = 4, .in = { qt, kt, vt, mt }, .data = { q, k, v, mask }, .nout = 1, .out = { y } };
    float *got[1] = { 0 };
    if (y && kin_run(&kg, true, 1, got) == 0) {
        int bad = 0;
        for (int i = 0; i < SQ; i++) {
            double sv[SKV], mx = -INFINITY, sum = 0;
            for (int j = 0; j < SKV; j++) {
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)q[i * D + e] * k[j * D + e];
                sv[j] = d * sc + mask[i * SKV + j];
                mx = fmax(mx, sv[j]);
            }
            for (int j = 0; j < SKV; j++) sum += (sv[j] = exp(sv[j] - mx));
            for (int e = 0; e < D; e++) {
                double want = 0;
                for (int j = 0; j < SKV; j++) want += sv[j] / sum * v[j * D + e];
                double ulp = fabs(want) < 6.103515625e-05 ? 5.9604644775390625e-08 : ldexp(1.0, ilogb(want) - 10);
                bad += !(fabs(got[0][i * D + e] - want) <= 1.0 * ulp);
            }
        }
        CHECK(bad == 0, "sdpa in fp16 with the default scale 1/sqrt(3): %d of %d values beyond 1 fp16 ulp of the fp16-scale reference",
              bad, SQ * D);
    }
    free(got[0]);
    af_graph_free(g);
}

int main(void) {
    test_pool_grad_half_tiles();
    test_pool_forward_strides();
    test_conv_half_tiles();
    test_softmax_extreme();
    test_cross_entropy_extreme();
    test_unary_extreme();
    test_attention_extreme();
    test_norm_magnitudes();
    test_lrn_fp16_exact();
    test_scalar_attrs_fp16_exact();
    test_sdpa_scale_fp16();
    return check_finish("kin_kernels");
}
