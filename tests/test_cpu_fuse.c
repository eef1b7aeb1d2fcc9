/* Epilogue fusion in the CPU executor (src/cpu/fuse.c): which chains fuse, which must
 * not (a value read twice or requested, a bias computed after the head), and that every
 * case, fused or not, computes what a double-precision loop computes. */
#include "aneforge.h"
#include "compile/plan.h"
#include "cpu/fuse.h"
#include "ir/ir.h"
#include "support/check.h"
#include "support/fusion_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static test_rng rng = {7};

/* The fusion the CPU executor would plan for these outputs. Returns the number of
 * absorbed nodes; *heads counts fused heads, *bias and *relu what the first one fused. */
static int plan_fusion(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int *heads, bool *bias,
                       bool *relu) {
    int n, absorbed;
    *heads = 0;
    *bias = *relu = false;
    cpu_fusion *f = test_fusion_plan(g, nin, in, nout, out, &n, &absorbed);
    for (int s = 0; f && s < n; s++)
        if (f[s].tail >= 0 && (*heads)++ == 0) {
            *bias = f[s].bias_id >= 0;
            *relu = f[s].relu;
        }
    free(f);
    return absorbed;
}

static void run_cpu(af_graph *g, int nin, af_tensor **in, af_buffer *inb, int nout, af_tensor **out, af_buffer *outb) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 2 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return;
    CHECK(af_run(m, inb, outb) == AF_OK, "run: %s", af_error_message());
    CHECK(af_run(m, inb, outb) == AF_OK, "second run: %s", af_error_message()); /* arena reuse across runs */
    af_model_free(m);
}

/* y = relu?(x @ w^T + b) in double; x [m, k], w [n, k], b [n] or NULL. */
static void ref_linear(const float *x, const float *w, const float *b, int64_t m, int64_t n, int64_t k, bool relu,
                       double *y) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = b ? b[j] : 0.0;
            for (int64_t q = 0; q < k; q++) s += (double)x[i * k + q] * w[j * k + q];
            y[i * n + j] = relu && s < 0 ? 0 : s;
        }
}

/* Linear layers, matmul (weight an input) and matmul_w (baked), in the fusable and the
 * non-fusable arrangements. */
static void test_linear(void) {
    enum { M = 37, N = 19, K = 53 };
    float x[M * K], w[N * K], b[N], y[M * N], y2[M * N];
    double want[M * N];
    test_fill_uniform(&rng, x, M * K, -1, 1);
    test_fill_uniform(&rng, w, N * K, -1, 1);
    test_fill_uniform(&rng, b, N, -1, 1);
    for (int kind = 0; kind < 6; kind++) {
        af_graph *g = af_graph_new();
        af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(M, K)), *wi = af_input(g, "w", AF_F32, AF_SHAPE(N, K));
        af_tensor *bi = af_input(g, "b", AF_F32, AF_SHAPE(N)), *in[3] = { xi, wi, bi }, *out[2];
        int nin = 3, nout = 1, want_heads = 1;
        bool want_bias = true, want_relu = true;
        const char *name = "";
        if (kind == 0) { /* matmul + bias + relu: all fused */
            name = "matmul+bias+relu";
            out[0] = af_relu(af_add(af_matmul(xi, wi, 0, 1), bi));
        } else if (kind == 1) { /* baked weight, bias first in the add, no relu */
            name = "matmul_w+bias";
            af_tensor *wc = af_const(g, "wc", AF_SHAPE(N, K), w);
            out[0] = af_add(bi, af_matmul_w(xi, wc));
            in[1] = bi; /* the baked weight is not an input */
            nin = 2;
            want_relu = false;
        } else if (kind == 2) { /* relu straight after the product */
            name = "matmul+relu";
            out[0] = af_relu(af_matmul(xi, wi, 0, 1));
            nin = 2;
            want_bias = false;
        } else if (kind == 3) { /* the sum is requested too: bias fuses, relu must not */
            name = "sum requested";
            out[0] = af_add(af_matmul(xi, wi, 0, 1), bi);
            out[1] = af_relu(out[0]);
            nout = 2;
            want_relu = false;
        } else if (kind == 4) { /* the product is read twice: nothing fuses */
            name = "product read twice";
            af_tensor *p = af_matmul(xi, wi, 0, 1);
            out[0] = af_relu(af_add(p, bi));
            out[1] = af_muls(p, 1.0f);
            nout = 2;
            want_heads = 0;
        } else { /* the bias is computed after the product: it cannot be read early */
            name = "late bias";
            af_tensor *p = af_matmul(xi, wi, 0, 1);
            out[0] = af_add(p, af_muls(bi, 1.0f));
            want_heads = 0;
        }
        int heads;
        bool fb, fr;
        plan_fusion(g, nin, in, nout, out, &heads, &fb, &fr);
        CHECK(heads == want_heads, "%s: %d fused heads, want %d", name, heads, want_heads);
        if (want_heads) CHECK(fb == want_bias && fr == want_relu, "%s: fused bias %d relu %d", name, fb, fr);
        af_buffer inb[3] = { AF_BUF_F32(x, M * K), AF_BUF_F32(kind == 1 ? b : w, kind == 1 ? N : N * K),
                             AF_BUF_F32(b, N) };
        af_buffer outb[2] = { AF_BUF_F32(y, M * N), AF_BUF_F32(y2, M * N) };
        run_cpu(g, nin, in, inb, nout, out, outb);
        bool has_bias = kind != 2;
        bool relu0 = kind == 0 || kind == 2 || kind == 4;
        ref_linear(x, w, has_bias ? b : NULL, M, N, K, relu0, want);
        check_close_scaled(name, y, want, M * N, 1e-5);
        if (kind == 3) {
            ref_linear(x, w, b, M, N, K, true, want);
            check_close_scaled("sum requested: relu", y2, want, M * N, 1e-5);
        }
        if (kind == 4) {
            ref_linear(x, w, NULL, M, N, K, false, want);
            check_close_scaled("product read twice: product", y2, want, M * N, 1e-5);
        }
        af_graph_free(g);
    }
}

/* conv [+ per-channel bias] [+ relu], plain and grouped, against a direct loop. */
static void test_conv(void) {
    enum { B = 3, CI = 4, H = 9, W = 7, CO = 6, KH = 3, KW = 3 };
    for (int groups = 1; groups <= 2; groups++) {
        int cig = CI / groups, cog = CO / groups;
        float x[B * CI * H * W], w[CO * CI * KH * KW], b[CO], y[B * CO * H * W];
        double want[B * CO * H * W];
        test_fill_uniform(&rng, x, B * CI * H * W, -1, 1);
        test_fill_uniform(&rng, w, CO * cig * KH * KW, -1, 1);
        test_fill_uniform(&rng, b, CO, -1, 1);
        af_graph *g = af_graph_new();
        af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(B, CI, H, W));
        af_tensor *bi = af_input(g, "b", AF_F32, AF_SHAPE(1, CO, 1, 1));
        af_tensor *wc = af_const(g, "w", AF_SHAPE(CO, cig, KH, KW), w);
        int pad[2] = { 1, 1 };
        af_tensor *in[2] = { xi, bi }, *out = af_relu(af_add(af_conv(xi, wc, NULL, pad, NULL, groups), bi));
        int heads;
        bool fb, fr;
        plan_fusion(g, 2, in, 1, &out, &heads, &fb, &fr);
        CHECK(heads == 1 && fb && fr, "conv groups %d: fused heads %d bias %d relu %d", groups, heads, fb, fr);
        af_buffer inb[2] = { AF_BUF_F32(x, B * CI * H * W), AF_BUF_F32(b, CO) }, outb = AF_BUF_F32(y, B * CO * H * W);
        run_cpu(g, 2, in, inb, 1, &out, &outb);
        for (int n = 0; n < B; n++)
            for (int co = 0; co < CO; co++)
                for (int i = 0; i < H; i++)
                    for (int j = 0; j < W; j++) {
                        double s = b[co];
                        int gi = co / cog;
                        for (int ci = 0; ci < cig; ci++)
                            for (int u = 0; u < KH; u++)
                                for (int v = 0; v < KW; v++) {
                                    int ih = i - 1 + u, iw = j - 1 + v;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                    s += (double)x[((n * CI + gi * cig + ci) * H + ih) * W + iw] *
                                         w[((co * cig + ci) * KH + u) * KW + v];
                                }
                        want[((n * CO + co) * H + i) * W + j] = s < 0 ? 0 : s;
                    }
        check_close_scaled(groups == 1 ? "conv+bias+relu" : "grouped conv+bias+relu", y, want, B * CO * H * W, 1e-5);
        af_graph_free(g);
    }
}

/* A ReLU's gradient as autograd writes it, select(x > x - x, g, x - x), runs as one pass
 * with the same values (infinities and NaN included); x stays alive until that pass even
 * though the nodes that read it are absorbed (a buffer computed in between would
 * otherwise take its place). */
static void test_relu_grad(void) {
    enum { N = 4099 };
    float x[N], gr[N], y[N], zout[N];
    test_fill_uniform(&rng, x, N, -1, 1);
    test_fill_uniform(&rng, gr, N, -3, 3);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY, x[3] = -INFINITY, x[4] = NAN;
    for (int kind = 0; kind < 2; kind++) {
        af_graph *g = af_graph_new();
        af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(N)), *gi = af_input(g, "g", AF_F32, AF_SHAPE(N));
        af_tensor *xv = af_muls(xi, 1.0f); /* an intermediate, so its buffer can be reused */
        af_tensor *z = af_sub(xv, xv), *c = af_greater(xv, z);
        af_tensor *gv = af_muls(gi, 2.0f); /* scheduled between the compare and the select */
        af_tensor *out[2] = { af_select(c, gv, z), z }, *in[2] = { xi, gi };
        int nout = kind ? 2 : 1; /* kind 1 requests x - x too: nothing may be absorbed */
        compile_plan p;
        char msg[256];
        CHECK(plan_build(&p, g, 2, in, nout, out, msg, sizeof msg) == AF_OK, "plan: %s", msg);
        cpu_fusion f[16];
        int absorbed = p.nsched <= 16 ? cpu_fuse_plan(&p, f) : -1, fused = 0;
        for (int s = 0; s < p.nsched && absorbed >= 0; s++) fused += f[s].relu_grad_x >= 0;
        CHECK(kind ? absorbed == 0 && fused == 0 : absorbed == 2 && fused == 1, "relu gradient kind %d: %d absorbed, %d fused",
              kind, absorbed, fused);
        plan_free(&p);
        af_buffer inb[2] = { AF_BUF_F32(x, N), AF_BUF_F32(gr, N) }, outb[2] = { AF_BUF_F32(y, N), AF_BUF_F32(zout, N) };
        run_cpu(g, 2, in, inb, nout, out, outb);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            double zz = (double)x[i] - (double)x[i], want = x[i] > zz ? 2.0 * gr[i] : zz;
            bool same = isnan(want) ? isnan(y[i]) : (double)y[i] == want && !signbit(y[i]) == !signbit(want);
            if (!same && bad < 3) fprintf(stderr, "x %g g %g: got %g want %g\n", x[i], gr[i], y[i], want);
            bad += !same;
        }
        CHECK(bad == 0, "relu gradient kind %d: %d wrong values", kind, bad);
        af_graph_free(g);
    }
}

/* The same ReLU gradient when g is a pool gradient nothing else reads: the pool
 * gradient's kernel writes the masked values itself (no g buffer, no extra pass).
 * Checked against a double-precision pool gradient and mask for average pooling that
 * tiles the plane (the fast path), overlapping padded average pooling, and max pooling;
 * with x's other readers scheduled before the pool gradient (x must stay alive for it)
 * and after it. */
static void test_pool_relu_grad(void) {
    enum { N = 2, C = 3, H = 6, W = 6, HW = H * W };
    static const struct { ir_op op; int k, s, p; } cases[] = {
        { IR_OP_AVG_POOL_GRAD, 2, 2, 0 }, { IR_OP_AVG_POOL_GRAD, 3, 1, 1 }, { IR_OP_MAX_POOL_GRAD, 2, 2, 0 },
    };
    for (int ci = 0; ci < 3; ci++)
        for (int early = 0; early < 2; early++) {
            int k = cases[ci].k, st = cases[ci].s, pd = cases[ci].p;
            int ho = (H + 2 * pd - k) / st + 1, wo = (W + 2 * pd - k) / st + 1;
            float x[N * C * HW], dy[N * C * 36], out[N * C * HW];
            test_fill_uniform(&rng, x, N * C * HW, -1, 1);
            test_fill_uniform(&rng, dy, N * C * ho * wo, -3, 3);
            x[0] = 0.0f, x[1] = -0.0f, x[7] = INFINITY, x[8] = -INFINITY, x[9] = NAN;
            af_graph *g = af_graph_new();
            af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(N, C, H, W));
            af_tensor *di = af_input(g, "dy", AF_F32, AF_SHAPE(N, C, ho, wo));
            af_tensor *xv = af_muls(xi, 1.0f), *yv = af_relu(xv), *z = NULL, *c = NULL;
            if (early) z = af_sub(xv, xv), c = af_greater(xv, z);
            ir_attrs pa = { 0 };
            pa.kernel[0] = pa.kernel[1] = k, pa.stride[0] = pa.stride[1] = st, pa.pad[0] = pa.pad[1] = pd;
            af_tensor *gp = ir_pool_grad(cases[ci].op, yv, af_muls(di, 2.0f), &pa);
            af_tensor *later = af_muls(di, 3.0f); /* a buffer that could take x's place */
            if (!early) z = af_sub(xv, xv), c = af_greater(xv, z);
            af_tensor *res[2] = { af_select(c, gp, z), af_muls(later, 1.0f) }, *in[2] = { xi, di };
            CHECK(res[0] && res[1], "pool relu grad: build: %s", af_error_message());
            compile_plan p;
            char msg[256];
            CHECK(plan_build(&p, g, 2, in, 2, res, msg, sizeof msg) == AF_OK, "plan: %s", msg);
            cpu_fusion f[32];
            int absorbed = p.nsched <= 32 ? cpu_fuse_plan(&p, f) : -1, masked = 0;
            for (int s = 0; s < p.nsched && absorbed >= 0; s++) masked += f[s].mask_x >= 0 && p.sched[s] == gp;
            CHECK(masked == 1 && absorbed >= 3, "pool relu grad case %d: %d absorbed, %d masked", ci, absorbed, masked);
            plan_free(&p);
            float out2[N * C * 36];
            af_buffer inb[2] = { AF_BUF_F32(x, N * C * HW), AF_BUF_F32(dy, N * C * ho * wo) },
                      ob[2] = { AF_BUF_F32(out, N * C * HW), AF_BUF_F32(out2, N * C * ho * wo) };
            run_cpu(g, 2, in, inb, 2, res, ob);
            int bad = 0;
            for (int pl = 0; pl < N * C; pl++) {
                const float *xp = x + pl * HW, *dp = dy + pl * ho * wo;
                double want[HW] = { 0 };
                for (int oh = 0; oh < ho; oh++)
                    for (int ow = 0; ow < wo; ow++) {
                        double gg = 2.0 * dp[oh * wo + ow], m = -INFINITY;
                        for (int i = oh * st - pd; i < oh * st - pd + k; i++)
                            for (int j = ow * st - pd; j < ow * st - pd + k; j++)
                                if (i >= 0 && i < H && j >= 0 && j < W && fmax(xp[i * W + j], 0) > m) m = fmax(xp[i * W + j], 0);
                        for (int i = oh * st - pd; i < oh * st - pd + k; i++)
                            for (int j = ow * st - pd; j < ow * st - pd + k; j++) {
                                if (i < 0 || i >= H || j < 0 || j >= W) continue;
                                double yv2 = xp[i * W + j] > 0 ? xp[i * W + j] : 0; /* relu; NaN -> 0 as the kernel's max */
                                if (cases[ci].op == IR_OP_AVG_POOL_GRAD) want[i * W + j] += gg / (k * k);
                                else if (yv2 == m) want[i * W + j] += gg;
                            }
                    }
                for (int i = 0; i < HW; i++) {
                    double xx = xp[i], zz = xx - xx, w = xx > zz ? want[i] : zz;
                    float got = out[pl * HW + i];
                    bool same = isnan(w) ? isnan(got) : fabs(got - w) <= 1e-5 * (1 + fabs(w));
                    if (!same && bad < 3) fprintf(stderr, "case %d plane %d i %d x %g: got %g want %g\n", ci, pl, i, xx, got, w);
                    bad += !same;
                }
            }
            CHECK(bad == 0, "pool relu grad case %d early %d: %d wrong values", ci, early, bad);
            af_graph_free(g);
        }
}

/* (x + a) * b, a model's input normalisation, runs as one pass over x with the values
 * of the two nodes; not when the sum is also requested or read by another node. */
static void test_add_mul(void) {
    enum { N = 40001 }; /* more than one chunk per thread */
    static float x[N], y[N], sum[N], other[N];
    test_fill_uniform(&rng, x, N, -2, 2);
    const float a = -0.1307f, b = 1.0f / 0.3081f;
    for (int kind = 0; kind < 3; kind++) {
        af_graph *g = af_graph_new();
        af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(N));
        af_tensor *s = af_adds(xi, a), *out[2] = { af_muls(s, b), kind == 1 ? s : af_neg(s) }, *in[1] = { xi };
        int nout = kind ? 2 : 1; /* kind 1: the sum requested; kind 2: the sum read twice */
        compile_plan p;
        char msg[256];
        CHECK(plan_build(&p, g, 1, in, nout, out, msg, sizeof msg) == AF_OK, "plan: %s", msg);
        cpu_fusion f[8];
        int absorbed = p.nsched <= 8 ? cpu_fuse_plan(&p, f) : -1, fused = 0;
        for (int k = 0; k < p.nsched && absorbed >= 0; k++) fused += f[k].add_mul;
        CHECK(kind ? absorbed == 0 && fused == 0 : absorbed == 1 && fused == 1, "add-mul kind %d: %d absorbed, %d fused",
              kind, absorbed, fused);
        plan_free(&p);
        af_buffer inb[1] = { AF_BUF_F32(x, N) }, outb[2] = { AF_BUF_F32(y, N), AF_BUF_F32(kind == 1 ? sum : other, N) };
        run_cpu(g, 1, in, inb, nout, out, outb);
        int bad = 0;
        double worst = 0;
        for (int i = 0; i < N; i++) {
            float two_nodes = x[i] + a; /* the unfused nodes: a rounded sum, then a rounded product */
            two_nodes = two_nodes * b;
            bad += y[i] != two_nodes;
            worst = fmax(worst, fabs((double)y[i] - ((double)x[i] + a) * b));
        }
        CHECK(bad == 0, "add-mul kind %d: %d values differ from the two nodes'", kind, bad);
        CHECK(worst < 1e-6 * 2.5 / 0.3081, "add-mul kind %d: worst error %g against double", kind, worst);
        af_graph_free(g);
    }
}

/* How many heads fused an added tensor (fuse.c: x W^T + r, or a second product added to
 * a first), and how many nodes were absorbed. */
static int added_heads(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int *absorbed) {
    int n, heads = 0;
    cpu_fusion *f = test_fusion_plan(g, nin, in, nout, out, &n, absorbed);
    for (int s = 0; f && s < n; s++) heads += f[s].tail >= 0 && f[s].add_id >= 0;
    free(f);
    return heads;
}

/* A product plus a tensor of its shape: the residual x W^T + r (with and without a ReLU
 * after it, matmul and matmul_w, a batched x), and three products summed as a gradient's
 * paths are, (p1 + p2) + p3. The fused result must equal, bit for bit, the products run
 * alone with the sums taken in float in the graph's order, and a double loop within
 * rounding. Not fused: an added tensor computed after the product, a product read twice,
 * a sum requested as an output. */
static void test_added(void) {
    enum { B = 2, M = 37, N = 45, K = 300 }; /* K past one KC block of the tile loop */
    static float x[3][B * M * K], w[3][N * K], r[B * M * N], y[B * M * N], p[3][B * M * N], y2[B * M * N];
    static double want[B * M * N];
    for (int i = 0; i < 3; i++) {
        test_fill_uniform(&rng, x[i], B * M * K, -1, 1);
        test_fill_uniform(&rng, w[i], N * K, -1, 1);
    }
    test_fill_uniform(&rng, r, B * M * N, -3, 3);
    for (int kind = 0; kind < 7; kind++) {
        af_graph *g = af_graph_new();
        int rows = kind == 3 ? B * M : M; /* kind 3: x [B, M, K] */
        af_shape xs = kind == 3 ? AF_SHAPE(B, M, K) : AF_SHAPE(M, K), ys = kind == 3 ? AF_SHAPE(B, M, N) : AF_SHAPE(M, N);
        af_tensor *xi[3], *wi[3], *ri = af_input(g, "r", AF_F32, ys), *out[2];
        const char *names[3][2] = { { "x0", "w0" }, { "x1", "w1" }, { "x2", "w2" } };
        for (int i = 0; i < 3; i++) {
            xi[i] = af_input(g, names[i][0], AF_F32, xs);
            wi[i] = af_input(g, names[i][1], AF_F32, AF_SHAPE(N, K));
        }
        af_tensor *in[7] = { ri, xi[0], wi[0], xi[1], wi[1], xi[2], wi[2] };
        int nin = 3, nout = 1, want_heads = 1, want_absorbed = 1;
        bool relu = false, three = false;
        const char *name = "";
        if (kind == 0) {
            name = "x W^T + r";
            out[0] = af_add(af_matmul(xi[0], wi[0], 0, 1), ri);
        } else if (kind == 1) {
            name = "relu(r + x W^T)";
            out[0] = af_relu(af_add(ri, af_matmul(xi[0], wi[0], 0, 1)));
            relu = true;
            want_absorbed = 2;
        } else if (kind == 2) {
            name = "matmul_w + r";
            out[0] = af_add(af_matmul_w(xi[0], af_const(g, "wc", AF_SHAPE(N, K), w[0])), ri);
            in[2] = NULL; /* the baked weight is not an input */
            nin = 2;
        } else if (kind == 3) {
            name = "batched x W^T + r";
            out[0] = af_add(af_matmul(xi[0], wi[0], 0, 1), ri);
        } else if (kind == 4) {
            name = "three products summed";
            af_tensor *a = af_matmul(xi[0], wi[0], 0, 1), *b = af_matmul(xi[1], wi[1], 0, 1);
            af_tensor *s = af_add(a, b);
            out[0] = af_add(s, af_matmul(xi[2], wi[2], 0, 1));
            in[0] = xi[0], in[1] = wi[0], in[2] = xi[1], in[3] = wi[1], in[4] = xi[2], in[5] = wi[2];
            nin = 6;
            three = true;
            want_heads = want_absorbed = 2;
        } else if (kind == 5) {
            name = "late addend";
            af_tensor *pr = af_matmul(xi[0], wi[0], 0, 1);
            out[0] = af_add(pr, af_muls(ri, 1.0f)); /* computed after the product */
            want_heads = want_absorbed = 0;
        } else {
            name = "sum requested, product read twice";
            af_tensor *pr = af_matmul(xi[0], wi[0], 0, 1);
            out[0] = af_add(pr, ri);
            out[1] = af_muls(pr, 1.0f);
            nout = 2;
            want_heads = want_absorbed = 0;
        }
        if (kind == 2) in[1] = xi[0];
        int absorbed, heads = added_heads(g, nin, in, nout, out, &absorbed);
        CHECK(heads == want_heads && absorbed == want_absorbed, "%s: %d heads fused an addend, %d absorbed; want %d, %d",
              name, heads, absorbed, want_heads, want_absorbed);
        af_buffer inb[7];
        for (int i = 0; i < nin; i++) {
            const af_tensor *t = in[i];
            const float *v = t == ri ? r : t == xi[0] ? x[0] : t == xi[1] ? x[1] : t == xi[2] ? x[2] : t == wi[0] ? w[0]
                           : t == wi[1] ? w[1] : w[2];
            inb[i] = (af_buffer)AF_BUF_F32((float *)v, af_shape_count(t->shape));
        }
        af_buffer outb[2] = { AF_BUF_F32(y, rows * N), AF_BUF_F32(y2, rows * N) };
        run_cpu(g, nin, in, inb, nout, out, outb);
        /* the products alone, the same GEMM calls: their sums in float are the unfused nodes' */
        for (int i = 0; i < (three ? 3 : 1); i++) {
            af_graph *h = af_graph_new();
            af_tensor *hx = af_input(h, "x", AF_F32, xs), *hw = af_input(h, "w", AF_F32, AF_SHAPE(N, K));
            af_tensor *hin[2] = { hx, hw }, *hout[1] = { af_matmul(hx, hw, 0, 1) };
            af_buffer hb[2] = { AF_BUF_F32(x[i], rows * K), AF_BUF_F32(w[i], N * K) }, ho[1] = { AF_BUF_F32(p[i], rows * N) };
            run_cpu(h, 2, hin, hb, 1, hout, ho);
            af_graph_free(h);
        }
        int differ = 0;
        for (int64_t e = 0; e < (int64_t)rows * N; e++) {
            float two = three ? (p[0][e] + p[1][e]) + p[2][e] : p[0][e] + r[e];
            if (relu) two = two > 0.0f ? two : 0.0f;
            differ += y[e] != two;
            double d = 0;
            for (int i = 0; i < (three ? 3 : 1); i++)
                for (int64_t q = 0; q < K; q++) d += (double)x[i][(e / N) * K + q] * w[i][(e % N) * K + q];
            d += three ? 0.0 : r[e];
            want[e] = relu && d < 0 ? 0 : d;
        }
        CHECK(differ == 0, "%s: %d values differ from the unfused nodes'", name, differ);
        check_close_scaled(name, y, want, rows * N, 1e-5);
        af_graph_free(g);
    }
}

int main(void) {
    test_linear();
    test_conv();
    test_relu_grad();
    test_pool_relu_grad();
    test_add_mul();
    test_added();
    return check_finish("cpu_fuse");
}
