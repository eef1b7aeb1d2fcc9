/* RMSNorm's gradient chains fused by the CPU executor (src/cpu/fuse_norm.c): that the
 * planner finds all three in what af_backward builds for af_rms_norm, that a chain
 * with a value requested midway is left alone, and that the fused run computes what a
 * double-precision loop computes, for dx and for dgamma. */
#include "aneforge.h"
#include "compile/plan.h"
#include "cpu/fuse_norm.h"
#include "ir/ir.h"
#include "support/check.h"
#include "support/fusion_plan.h"

#include <math.h>
#include <stdlib.h>

enum { R = 37, D = 53 }; /* odd sizes: the kernels' 8-wide loops have remainders */
#define EPS 1e-5f

static test_rng rng = { 11 };

/* How many nodes of each CPU_FUSE_* kind the planner marks (kinds[0]: how many recompute
 * xhat), and how many it absorbs. */
static int plan_kinds(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int kinds[4]) {
    int n, absorbed;
    for (int k = 0; k < 4; k++) kinds[k] = 0;
    cpu_fusion *f = test_fusion_plan(g, nin, in, nout, out, &n, &absorbed);
    for (int s = 0; f && s < n; s++)
        if (f[s].kind > 0 && f[s].kind < 4) kinds[f[s].kind]++, kinds[0] += f[s].scaled;
    free(f);
    return absorbed;
}

static void run_cpu(af_graph *g, int nin, af_tensor **in, af_buffer *inb, int nout, af_tensor **out, af_buffer *outb) {
    for (int threads = 1; threads <= 2; threads++) {
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
        af_model *m = af_compile(g, nin, in, nout, out, &o);
        CHECK(m != NULL, "compile: %s", af_error_message());
        if (!m) return;
        CHECK(af_run(m, inb, outb) == AF_OK, "run: %s", af_error_message());
        CHECK(af_run(m, inb, outb) == AF_OK, "second run: %s", af_error_message()); /* arena reuse */
        af_model_free(m);
    }
}

/* RMSNorm's backward in double: dx and dgamma for upstream gradient g. */
static void ref_grad(const float *x, const float *gam, const float *g, double *dx, double *dgam) {
    for (int j = 0; j < D; j++) dgam[j] = 0;
    for (int i = 0; i < R; i++) {
        double ss = 0, dot = 0;
        for (int j = 0; j < D; j++) ss += (double)x[i * D + j] * x[i * D + j];
        double r = 1 / sqrt(ss / D + EPS);
        for (int j = 0; j < D; j++) dot += (double)g[i * D + j] * gam[j] * x[i * D + j] * r;
        for (int j = 0; j < D; j++) {
            double xh = x[i * D + j] * r;
            dx[i * D + j] = r * ((double)g[i * D + j] * gam[j] - xh * dot / D);
            dgam[j] += (double)g[i * D + j] * xh;
        }
    }
}

/* af_backward of af_rms_norm (plus x itself when resid: the residual path, whose
 * gradient the dx pass adds) from a seed: every chain fuses and the values are right. */
static void test_backward(bool resid) {
    static float x[R * D], gam[D], g[R * D], dx[R * D], dgam[D];
    static double wdx[R * D], wdgam[D];
    test_fill_uniform(&rng, x, R * D, -2, 2);
    test_fill_uniform(&rng, gam, D, 0.5, 1.5);
    test_fill_uniform(&rng, g, R * D, -1, 1);
    ref_grad(x, gam, g, wdx, wdgam);
    for (int i = 0; resid && i < R * D; i++) wdx[i] += g[i];
    af_graph *gr = af_graph_new();
    af_tensor *xi = af_input(gr, "x", AF_F32, AF_SHAPE(R, D)), *gi = af_input(gr, "gamma", AF_F32, AF_SHAPE(D));
    af_tensor *seed = af_input(gr, "g", AF_F32, AF_SHAPE(R, D)), *in[3] = { xi, gi, seed }, *params[2] = { xi, gi },
              *out[2];
    af_tensor *y = af_rms_norm(xi, gi, EPS);
    if (resid) y = af_add(y, xi);
    CHECK(af_backward_from(seed, y, 2, params, out, NULL) == AF_OK, "backward: %s", af_error_message());
    int kinds[4];
    int absorbed = plan_kinds(gr, 3, in, 2, out, kinds);
    CHECK(kinds[CPU_FUSE_RMS_DX] == 1 && kinds[CPU_FUSE_SQ_MEAN] == 1 && kinds[CPU_FUSE_MUL_SUM] == 1 &&
              kinds[0] == 2 && absorbed == 8 + resid,
          "rms_norm backward, residual %d: fused dx %d, mean of squares %d, column sums %d, xhat recomputed by %d, "
          "absorbed %d (want 1, 1, 1, 2, %d)",
          resid, kinds[CPU_FUSE_RMS_DX], kinds[CPU_FUSE_SQ_MEAN], kinds[CPU_FUSE_MUL_SUM], kinds[0], absorbed, 8 + resid);
    af_buffer inb[3] = { AF_BUF_F32(x, R * D), AF_BUF_F32(gam, D), AF_BUF_F32(g, R * D) };
    af_buffer outb[2] = { AF_BUF_F32(dx, R * D), AF_BUF_F32(dgam, D) };
    run_cpu(gr, 3, in, inb, 2, out, outb);
    check_close_scaled(resid ? "rms_norm + residual dx" : "rms_norm dx", dx, wdx, R * D, 1e-5);
    check_close_scaled(resid ? "rms_norm + residual dgamma" : "rms_norm dgamma", dgam, wdgam, D, 1e-5);
    af_graph_free(gr);
}

/* The chain written out node by node, alone (keep 0) and with a value requested midway:
 * the projection (keep 1: the dx chain must not fuse, the projection would have no
 * buffer) or xhat (keep 2: the chains fuse but read xhat rather than recompute it).
 * The values stay right in every case. */
static void test_requested_midway(void) {
    static float x[R * D], gam[D], g[R * D], dx[R * D], dgam[D], extra[R * D];
    static double wdx[R * D], wdgam[D];
    test_fill_uniform(&rng, x, R * D, -2, 2);
    test_fill_uniform(&rng, gam, D, 0.5, 1.5);
    test_fill_uniform(&rng, g, R * D, -1, 1);
    ref_grad(x, gam, g, wdx, wdgam);
    static const char *what[3] = { "written out", "projection requested", "xhat requested" };
    static const int want_absorbed[3] = { 8, 2, 7 }, want_dx[3] = { 1, 0, 1 }, want_scaled[3] = { 2, 0, 0 };
    for (int keep = 0; keep < 3; keep++) {
        af_graph *gr = af_graph_new();
        af_tensor *xi = af_input(gr, "x", AF_F32, AF_SHAPE(R, D)), *gi = af_input(gr, "gamma", AF_F32, AF_SHAPE(D));
        af_tensor *gs = af_input(gr, "g", AF_F32, AF_SHAPE(R, D)), *in[3] = { xi, gi, gs };
        int last = 1, rows = 0;
        af_tensor *r = af_rsqrt(af_adds(af_reduce_mean(af_square(xi), 1, &last, 1), EPS));
        af_tensor *xhat = af_mul(xi, r), *dxhat = af_mul(gs, af_reshape(gi, AF_SHAPE(1, D)));
        af_tensor *pr = af_mul(xhat, af_reduce_mean(af_mul(dxhat, xhat), 1, &last, 1));
        af_tensor *out[3] = { af_mul(af_sub(dxhat, pr), r), af_reduce_sum(af_mul(gs, xhat), 1, &rows, 0),
                              keep == 2 ? xhat : pr };
        int kinds[4], nout = 2 + (keep > 0);
        int absorbed = plan_kinds(gr, 3, in, nout, out, kinds);
        CHECK(kinds[CPU_FUSE_RMS_DX] == want_dx[keep] && kinds[0] == want_scaled[keep] && absorbed == want_absorbed[keep],
              "%s: fused dx %d, xhat recomputed by %d, absorbed %d (want %d, %d, %d)", what[keep],
              kinds[CPU_FUSE_RMS_DX], kinds[0], absorbed, want_dx[keep], want_scaled[keep], want_absorbed[keep]);
        af_buffer inb[3] = { AF_BUF_F32(x, R * D), AF_BUF_F32(gam, D), AF_BUF_F32(g, R * D) };
        af_buffer outb[3] = { AF_BUF_F32(dx, R * D), AF_BUF_F32(dgam, D), AF_BUF_F32(extra, R * D) };
        run_cpu(gr, 3, in, inb, nout, out, outb);
        check_close_scaled(what[keep], dx, wdx, R * D, 1e-5);
        check_close_scaled(what[keep], dgam, wdgam, D, 1e-5);
        if (keep == 2) { /* xhat itself, as requested */
            double worst = 0;
            for (int i = 0; i < R; i++) {
                double ss = 0;
                for (int j = 0; j < D; j++) ss += (double)x[i * D + j] * x[i * D + j];
                for (int j = 0; j < D; j++)
                    worst = fmax(worst, fabs(extra[i * D + j] - x[i * D + j] / sqrt(ss / D + EPS)));
            }
            CHECK(worst < 1e-5, "xhat requested: worst error %g", worst);
        }
        af_graph_free(gr);
    }
}

int main(void) {
    test_backward(false);
    test_backward(true);
    test_requested_midway();
    return check_finish("cpu_fuse_norm");
}
