/* ane-sim numerics per family: fp16 storage, matmul/conv saturating to +-inf beyond
 * +-32752, reduce_sum accumulating in fp16, and the A13/A14 crop-DMA saturation of
 * last-axis slices at |v| > 4094, including seed 000's synthetic conv weight-gradient
 * repro that breaks on A13 at loss_scale >= 512 and stays clean on A16. */
#include "aneforge.h"
#include "support/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const af_family_id families[4] = { AF_FAMILY_A13, AF_FAMILY_A14, AF_FAMILY_A15, AF_FAMILY_A16 };

static af_model *sim(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, af_family_id fam) {
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    CHECK(m != NULL, "ane-sim %s compile failed: %s", af_family_name_of(fam), af_error_message());
    return m;
}

static af_model *cpu(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, af_precision p) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = p, .threads = 1 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    CHECK(m != NULL, "cpu compile failed: %s", af_error_message());
    return m;
}

/* Runs a one-input one-output model; returns its status. */
static af_status run1(af_model *m, const float *x, int64_t nx, float *y, int64_t ny) {
    if (!m) return AF_ERR_INVALID;
    af_buffer in = AF_BUF_F32(x, nx), out = AF_BUF_F32(y, ny);
    af_status st = af_run(m, &in, &out);
    CHECK(st == AF_OK, "af_run failed: %s", af_error_message());
    return st;
}

/* ------------------------------------------------------------------ saturation */

static void test_accumulator_saturation(void) {
    af_graph *g = af_graph_new();
    af_tensor *a = af_input(g, "a", AF_F16, AF_SHAPE(3, 2));
    float ones[2] = { 1, 1 };
    af_tensor *b = af_const(g, "ones", AF_SHAPE(2, 1), ones);
    af_tensor *mm = af_matmul(a, b, 0, 0);                       /* row sums, accumulated wide */
    af_tensor *mw = af_matmul_w(a, af_const(g, "wt", AF_SHAPE(1, 2), ones));
    af_tensor *ew = af_add(a, a); /* 2 * 16384 elementwise */
    af_tensor *in[1] = { a }, *out[3] = { mm, mw, ew };
    /* 32000 stays; 32768 and -32768 are past +-32752 */
    float x[6] = { 16000, 16000, 16384, 16384, -16384, -16384 };
    for (int f = 0; f < 4; f++) {
        af_model *m = sim(g, 1, in, 3, out, families[f]);
        float y[3][6];
        af_buffer ib = AF_BUF_F32(x, 6), ob[3] = { AF_BUF_F32(y[0], 3), AF_BUF_F32(y[1], 3), AF_BUF_F32(y[2], 6) };
        if (!m || af_run(m, &ib, ob)) { CHECK(0, "run failed: %s", af_error_message()); af_model_free(m); continue; }
        for (int k = 0; k < 2; k++) {
            CHECK(y[k][0] == 32000.0f, "%s %s: 32000 became %g", af_family_name_of(families[f]), k ? "matmul_w" : "matmul", y[k][0]);
            CHECK(isinf(y[k][1]) && y[k][1] > 0, "%s: 32768 from a matmul must saturate to +inf, got %g", af_family_name_of(families[f]), y[k][1]);
            CHECK(isinf(y[k][2]) && y[k][2] < 0, "%s: -32768 from a matmul must saturate to -inf, got %g", af_family_name_of(families[f]), y[k][2]);
        }
        CHECK(y[2][2] == 32768.0f, "%s: an elementwise add does not saturate at 32752, got %g", af_family_name_of(families[f]), y[2][2]);
        af_model_free(m);
    }
    /* The CPU's fp16 emulation has no such limit. */
    af_model *c = cpu(g, 1, in, 1, out, AF_PRECISION_FP16);
    float y[3];
    if (run1(c, x, 6, y, 3) == AF_OK) CHECK(y[1] == 32768.0f, "cpu fp16 matmul gave %g, want 32768", y[1]);
    af_model_free(c);
    af_graph_free(g);

    /* conv: the same accumulator. */
    g = af_graph_new();
    af_tensor *cx = af_input(g, "x", AF_F16, AF_SHAPE(1, 2, 1, 2));
    af_tensor *w = af_const(g, "w", AF_SHAPE(1, 2, 1, 1), ones);
    af_tensor *cy = af_conv(cx, w, NULL, NULL, NULL, 1);
    float xc[4] = { 16000, 16384, 16000, 16384 }, yc[2];
    af_model *m = sim(g, 1, &cx, 1, &cy, AF_FAMILY_A16);
    if (run1(m, xc, 4, yc, 2) == AF_OK)
        CHECK(yc[0] == 32000.0f && isinf(yc[1]), "conv: want 32000 and inf, got %g %g", yc[0], yc[1]);
    af_model_free(m);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ reduce_sum */

static void test_reduce_accumulates_narrow(void) {
    enum { N = 4096 };
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, N));
    float *ones = malloc(N * sizeof *ones);
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    af_tensor *sum = af_reduce_sum(x, 1, (int[]){ 1 }, 1);
    af_tensor *dot = af_matmul(x, af_const(g, "ones", AF_SHAPE(N, 1), ones), 0, 0); /* x @ ones: the wide route */
    af_tensor *in[1] = { x }, *out[2] = { sum, dot };
    float ys[2];
    for (int f = 0; f < 4; f++) {
        af_model *m = sim(g, 1, in, 2, out, families[f]);
        af_buffer ib = AF_BUF_F32(ones, N), ob[2] = { AF_BUF_F32(&ys[0], 1), AF_BUF_F32(&ys[1], 1) };
        if (m && af_run(m, &ib, ob) == AF_OK) {
            /* 2048 + 1 rounds back to 2048 in fp16: the running sum stalls */
            CHECK(ys[0] == 2048.0f, "%s: reduce_sum of 4096 ones accumulates in fp16 and stalls at 2048, got %g",
                  af_family_name_of(families[f]), ys[0]);
            CHECK(ys[1] == 4096.0f, "%s: x @ ones accumulates wide, got %g", af_family_name_of(families[f]), ys[1]);
        } else if (m) {
            CHECK(0, "%s: run failed: %s", af_family_name_of(families[f]), af_error_message());
        }
        af_model_free(m);
    }
    af_model *c = cpu(g, 1, in, 1, out, AF_PRECISION_FP16);
    if (run1(c, ones, N, ys, 1) == AF_OK) CHECK(ys[0] == 4096.0f, "cpu fp16 reduce_sum accumulates wide, got %g", ys[0]);
    af_model_free(c);
    free(ones);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ crop DMA */

static void test_crop_dma(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(2, 8));
    af_tensor *last = af_slice(x, (int64_t[]){ 0, 1 }, (int64_t[]){ 2, 6 });  /* begin 1 on the last axis */
    af_tensor *zero = af_slice(x, (int64_t[]){ 0, 0 }, (int64_t[]){ 2, 6 });  /* begin 0 */
    af_tensor *rows = af_slice(x, (int64_t[]){ 1, 0 }, (int64_t[]){ 1, 8 });  /* begin on a non-last axis */
    af_tensor *parts[2], *parts0[2];
    af_split(x, 1, 2, NULL, parts);  /* the second part starts at a last-axis offset of 4 */
    af_split(x, 0, 2, NULL, parts0);
    af_tensor *in[1] = { x }, *out[6] = { last, zero, rows, parts[0], parts[1], parts0[1] };
    float xv[16] = { 1, 5000, -6000, 4094, 4096, 3000, -4094, 7,
                     2, 5000, -5000, 100, 4200, -4200, 1, 9 };
    for (int f = 0; f < 4; f++) {
        af_family_id fam = families[f];
        bool quirk = fam == AF_FAMILY_A13 || fam == AF_FAMILY_A14;
        const char *name = af_family_name_of(fam);
        af_model *m = sim(g, 1, in, 6, out, fam);
        float y[6][16];
        af_buffer ib = AF_BUF_F32(xv, 16), ob[6];
        for (int k = 0; k < 6; k++) ob[k] = AF_BUF_F32(y[k], af_shape_count(af_tensor_shape(out[k])));
        if (!m || af_run(m, &ib, ob)) { CHECK(0, "%s: run failed: %s", name, af_error_message()); af_model_free(m); continue; }
        /* last: rows of x[:, 1:7] */
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 6; c++) {
                float v = xv[r * 8 + 1 + c], got = y[0][r * 6 + c];
                if (quirk && fabsf(v) > 4094.0f) CHECK(isinf(got) && (got > 0) == (v > 0), "%s: slice at a last-axis offset must saturate %g, got %g", name, v, got);
                else CHECK(got == v, "%s: slice element %g became %g", name, v, got);
            }
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 6; c++) CHECK(y[1][r * 6 + c] == xv[r * 8 + c], "%s: a begin-0 slice must not saturate (%g -> %g)", name, xv[r * 8 + c], y[1][r * 6 + c]);
        for (int c = 0; c < 8; c++) CHECK(y[2][c] == xv[8 + c], "%s: a non-last-axis slice must not saturate (%g -> %g)", name, xv[8 + c], y[2][c]);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++) {
                float v0 = xv[r * 8 + c], v1 = xv[r * 8 + 4 + c], g0 = y[3][r * 4 + c], g1 = y[4][r * 4 + c];
                CHECK(g0 == v0, "%s: split part 0 (offset 0) changed %g to %g", name, v0, g0);
                if (quirk && fabsf(v1) > 4094.0f) CHECK(isinf(g1), "%s: split part 1 (last-axis offset 4) must saturate %g, got %g", name, v1, g1);
                else CHECK(g1 == v1, "%s: split part 1 changed %g to %g", name, v1, g1);
            }
        for (int c = 0; c < 8; c++) CHECK(y[5][c] == xv[8 + c], "%s: a split on axis 0 must not saturate", name);
        af_model_free(m);
    }
    af_graph_free(g);
}

/* ------------------------------------------------------------------ conv weight gradient */

/* Seed 000's synthetic repro: two convs from af_conv_param/af_conv2d and loss
 * 0.5 * sum(y^2), with magnitudes set so that the loss-scaled gradient at the first
 * conv's output passes 4094 from loss scale 512: on A13 the width-offset rows of that
 * conv's weight gradient become inf (test_sim_conv_wgrad checks a natural network). */
enum { CN = 1, CIN = 1, CH = 8, CW = 8, C1 = 3, C2 = 3 };

typedef struct {
    af_graph *g;
    af_tensor *x, *w1, *w2, *grad[2];
} conv_net;

static void conv_net_build(conv_net *n, af_dtype dt, float loss_scale, const float *w1, const float *w2) {
    n->g = af_graph_new();
    n->x = af_input(n->g, "x", dt, AF_SHAPE(CN, CIN, CH, CW));
    n->w1 = af_conv_param(n->g, "w1", C1, CIN, 3, 3, w1);
    n->w2 = af_conv_param(n->g, "w2", C2, C1, 3, 3, w2);
    af_tensor *h = af_conv2d(n->x, n->w1, 1, 0);  /* [N, C1, 6, 6] */
    af_tensor *y = af_conv2d(h, n->w2, 1, 1);     /* [N, C2, 6, 6], zero-padded input */
    af_tensor *l = af_muls(af_reduce_sum(af_square(y), 4, (int[]){ 0, 1, 2, 3 }, 0), 0.5f);
    af_tensor *params[2] = { n->w1, n->w2 };
    af_backward_opts bo = { .loss_scale = loss_scale };
    af_status st = af_backward(af_loss_scalar(l), 2, params, n->grad, &bo);
    CHECK(st == AF_OK, "af_backward failed: %s", af_error_message());
}

/* Runs the gradient program; writes both gradients divided by the loss scale. */
static bool conv_net_grads(conv_net *n, const af_compile_opts *o, const float *x, float scale, float *g1, float *g2) {
    af_tensor *in[3] = { n->x, n->w1, n->w2 };
    af_model *m = af_compile(n->g, 3, in, 2, n->grad, o);
    CHECK(m != NULL, "conv net compile failed: %s", af_error_message());
    if (!m) return false;
    int64_t n1 = af_shape_count(af_tensor_shape(n->w1)), n2 = af_shape_count(af_tensor_shape(n->w2));
    af_buffer ib[3] = { AF_BUF_F32(x, CN * CIN * CH * CW), AF_BUF_F32(af_tensor_value(n->w1), n1), AF_BUF_F32(af_tensor_value(n->w2), n2) };
    af_buffer ob[2] = { AF_BUF_F32(g1, n1), AF_BUF_F32(g2, n2) };
    af_status st = af_run(m, ib, ob);
    CHECK(st == AF_OK, "conv net run failed: %s", af_error_message());
    for (int64_t i = 0; i < n1; i++) g1[i] /= scale;
    for (int64_t i = 0; i < n2; i++) g2[i] /= scale;
    af_model_free(m);
    return st == AF_OK;
}

static bool all_finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* Largest |got - want| relative to the largest |want|. */
static double rel_err(const float *got, const float *want, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)got[i] - want[i]));
        s = fmax(s, fabs((double)want[i]));
    }
    return e / fmax(s, 1e-30);
}

static void test_conv_weight_gradient(void) {
    test_rng r = { 2024 };
    float x[CN * CIN * CH * CW], w1[C1 * CIN * 9], w2[C2 * C1 * 9];
    /* Magnitudes chosen so max |dL/dh| lies between 4094/512 and 4094/256, and every
     * loss-scaled matmul result up to loss_scale 1024 stays under 32752. */
    test_fill_uniform(&r, x, CN * CIN * CH * CW, -0.1, 0.1);
    test_fill_uniform(&r, w1, C1 * CIN * 9, -1, 1);
    test_fill_uniform(&r, w2, C2 * C1 * 9, -2, 2);
    enum { N1 = C1 * CIN * 9, N2 = C2 * C1 * 9 };
    float ref1[N1], ref2[N2], g1[N1], g2[N2];

    /* The fp32 CPU reference at loss scale 1. */
    conv_net ref;
    conv_net_build(&ref, AF_F32, 1.0f, w1, w2);
    af_compile_opts oc = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    bool ok = conv_net_grads(&ref, &oc, x, 1.0f, ref1, ref2);
    af_graph_free(ref.g);
    if (!ok) return;

    const float scales[] = { 1, 64, 256, 512, 1024 };
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        float s = scales[k];
        for (int f = 0; f < 4; f += 3) { /* A13 and A16 */
            conv_net n;
            conv_net_build(&n, AF_F16, s, w1, w2);
            af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = families[f], .threads = 1 };
            if (!conv_net_grads(&n, &o, x, s, g1, g2)) { af_graph_free(n.g); continue; }
            const char *name = af_family_name_of(families[f]);
            bool broken = families[f] == AF_FAMILY_A13 && s >= 512;
            if (broken) {
                CHECK(!all_finite(g1, N1), "%s at loss_scale %g: the first conv's weight gradient should have hit the crop-DMA saturation", name, (double)s);
            } else {
                double e1 = rel_err(g1, ref1, N1), e2 = rel_err(g2, ref2, N2);
                CHECK(all_finite(g1, N1) && e1 < 5e-3, "%s at loss_scale %g: w1 gradient off by %.3g of its scale", name, (double)s, e1);
                CHECK(all_finite(g2, N2) && e2 < 5e-3, "%s at loss_scale %g: w2 gradient off by %.3g of its scale", name, (double)s, e2);
            }
            /* The second conv's loss-scaled output gradient s*y stays under 4094: clean everywhere. */
            CHECK(all_finite(g2, N2), "%s at loss_scale %g: w2 gradient is not finite", name, (double)s);
            af_graph_free(n.g);
        }
    }
}

int main(void) {
    af_ane_budget_set_limits(NULL, 100000, 0); /* this file tests numerics, not the compile budget */
    test_accumulator_saturation();
    test_reduce_accumulates_narrow();
    test_crop_dma();
    test_conv_weight_gradient();
    return check_finish("sim_numerics");
}
