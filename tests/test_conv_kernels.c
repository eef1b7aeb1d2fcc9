/* The CPU conv kernels (src/cpu/k_conv.c) against double loops: the forward (im2col +
 * GEMM, with the one-copy-per-row im2col of a stride-1 conv as wide as its input), the
 * weight gradient (images blocked into one product when the gradient is thin) and the
 * transposed conv that is the input gradient, over odd shapes, strides, paddings,
 * dilations and batch sizes that leave partial blocks, on one thread and two. And the
 * pooling kernels (k_pool.c): the forward split over planes, and the tiling average
 * pool's gradient with a fused ReLU gradient for windows of 2 and 3 rows. */
#include "aneforge.h"
#include "ir/ir.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw;
} conv_case;

static int64_t out_dim(int in, int k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

/* y[b, co, oh, ow] = sum over ci, u, v of w[co, ci, u, v] x[b, ci, oh*s - p + u*d, ow*s - p + v*d]. */
static double xat(const conv_case *c, const float *x, int b, int ci, int64_t ih, int64_t iw) {
    if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) return 0;
    return x[(((int64_t)b * c->cin + ci) * c->h + ih) * c->w + iw];
}

static void check_close(const char *what, const conv_case *c, int threads, const float *got, const double *want, int64_t n) {
    double scale = 1e-30, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    CHECK(worst <= 2e-6 * scale, "%s, x [%d,%d,%d,%d] k %dx%d s %d,%d p %d,%d d %d,%d, %d threads: worst |got - want| %g (scale %g)",
          what, c->n, c->cin, c->h, c->w, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, threads, worst, scale);
}

static void run_cpu(af_graph *g, int nin, af_tensor **in, af_buffer *inb, af_tensor *out, af_buffer outb, int threads) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
    af_model *m = af_compile(g, nin, in, 1, &out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return;
    CHECK(af_run(m, inb, &outb) == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
}

static void check_case(const conv_case *c, test_rng *r, int threads) {
    int64_t ho = out_dim(c->h, c->kh, c->sh, c->ph, c->dh), wo = out_dim(c->w, c->kw, c->sw, c->pw, c->dw);
    int64_t nx = (int64_t)c->n * c->cin * c->h * c->w, nw = (int64_t)c->cout * c->cin * c->kh * c->kw;
    int64_t ny = (int64_t)c->n * c->cout * ho * wo;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
    float *dy = malloc(sizeof(float) * (size_t)ny), *y = malloc(sizeof(float) * (size_t)ny);
    float *dw = malloc(sizeof(float) * (size_t)nw), *dx = malloc(sizeof(float) * (size_t)nx);
    double *ry = calloc((size_t)ny, sizeof(double)), *rdw = calloc((size_t)nw, sizeof(double));
    double *rdx = calloc((size_t)nx, sizeof(double));
    test_fill_uniform(r, x, (long)nx, -1, 1);
    test_fill_uniform(r, w, (long)nw, -1, 1);
    test_fill_uniform(r, dy, (long)ny, -1, 1);
    /* The references: one double loop over every (output, tap) pair gives all three. */
    for (int b = 0; b < c->n; b++)
        for (int co = 0; co < c->cout; co++)
            for (int64_t oh = 0; oh < ho; oh++)
                for (int64_t ow = 0; ow < wo; ow++) {
                    int64_t yi = (((int64_t)b * c->cout + co) * ho + oh) * wo + ow;
                    for (int ci = 0; ci < c->cin; ci++)
                        for (int u = 0; u < c->kh; u++)
                            for (int v = 0; v < c->kw; v++) {
                                int64_t ih = oh * c->sh - c->ph + u * c->dh, iw = ow * c->sw - c->pw + v * c->dw;
                                int64_t wi = (((int64_t)co * c->cin + ci) * c->kh + u) * c->kw + v;
                                double xv = xat(c, x, b, ci, ih, iw);
                                ry[yi] += w[wi] * xv;
                                rdw[wi] += (double)dy[yi] * xv;
                                if (ih >= 0 && ih < c->h && iw >= 0 && iw < c->w)
                                    rdx[(((int64_t)b * c->cin + ci) * c->h + ih) * c->w + iw] += (double)dy[yi] * w[wi];
                            }
                }
    int st[2] = { c->sh, c->sw }, pd[2] = { c->ph, c->pw }, dl[2] = { c->dh, c->dw };
    af_shape xs = AF_SHAPE(c->n, c->cin, c->h, c->w), ws = AF_SHAPE(c->cout, c->cin, c->kh, c->kw);
    af_shape ys = AF_SHAPE(c->n, c->cout, ho, wo);
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *tx = af_input(g, "x", AF_F32, xs), *tw = af_const(g, "w", ws, w), *tdy = af_input(g, "dy", AF_F32, ys);
    af_tensor *ty = af_conv(tx, tw, st, pd, dl, 1);
    af_tensor *tdw = ir_conv_weight_grad(tx, tdy, c->kh, c->kw, st, pd, dl);
    af_tensor *tdx = c->sh == 1 && c->sw == 1 ? af_conv_transpose(tdy, tw, st, pd, dl) : NULL;
    CHECK(ty && tdw && !af_graph_error(g), "graph: %s", af_graph_error(g) ? af_graph_error(g) : "?");
    if (ty && tdw) {
        af_buffer bx = AF_BUF_F32(x, nx), bdy = AF_BUF_F32(dy, ny);
        run_cpu(g, 1, &tx, &bx, ty, AF_BUF_F32(y, ny), threads);
        check_close("conv forward", c, threads, y, ry, ny);
        run_cpu(g, 2, (af_tensor *[]){ tx, tdy }, (af_buffer[]){ bx, bdy }, tdw, AF_BUF_F32(dw, nw), threads);
        check_close("conv weight gradient", c, threads, dw, rdw, nw);
        if (tdx) {
            run_cpu(g, 1, &tdy, &bdy, tdx, AF_BUF_F32(dx, nx), threads);
            check_close("conv input gradient (conv_transpose)", c, threads, dx, rdx, nx);
        }
    }
    af_graph_free(g);
    free(x), free(w), free(dy), free(y), free(dw), free(dx), free(ry), free(rdw), free(rdx);
}

/* avg/max pool forward over many planes (split over threads) and odd shapes. */
static void check_pool_forward(test_rng *r, int threads) {
    static const struct { int n, c, h, w, k, s, p; } cases[] = {
        { 5, 7, 10, 6, 2, 2, 0 }, { 3, 5, 9, 7, 3, 2, 1 }, { 4, 9, 7, 8, 3, 1, 0 }, { 2, 3, 5, 5, 2, 1, 1 },
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int max = 0; max < 2; max++) {
            int n = cases[ci].n, ch = cases[ci].c, h = cases[ci].h, w = cases[ci].w, k = cases[ci].k, st = cases[ci].s, pd = cases[ci].p;
            if (max && pd * 2 > k) continue;
            int ho = (h + 2 * pd - k) / st + 1, wo = (w + 2 * pd - k) / st + 1;
            int64_t nx = (int64_t)n * ch * h * w, ny = (int64_t)n * ch * ho * wo;
            float *x = malloc(sizeof(float) * (size_t)nx), *y = malloc(sizeof(float) * (size_t)ny);
            double *want = malloc(sizeof(double) * (size_t)ny);
            test_fill_uniform(r, x, (long)nx, -1, 1);
            for (int64_t pl = 0; pl < (int64_t)n * ch; pl++)
                for (int oh = 0; oh < ho; oh++)
                    for (int ow = 0; ow < wo; ow++) {
                        double acc = max ? -INFINITY : 0;
                        for (int i = oh * st - pd; i < oh * st - pd + k; i++)
                            for (int j = ow * st - pd; j < ow * st - pd + k; j++) {
                                if (i < 0 || i >= h || j < 0 || j >= w) continue;
                                double v = x[(pl * h + i) * w + j];
                                acc = max ? fmax(acc, v) : acc + v;
                            }
                        want[(pl * ho + oh) * wo + ow] = max ? acc : acc / (k * k);
                    }
            af_graph *g = af_graph_new();
            af_graph_set_target(g, AF_TARGET_CPU);
            int kk[2] = { k, k }, ss[2] = { st, st }, pp[2] = { pd, pd };
            af_tensor *tx = af_input(g, "x", AF_F32, AF_SHAPE(n, ch, h, w));
            af_tensor *ty = max ? af_max_pool(tx, kk, ss, pp) : af_avg_pool(tx, kk, ss, pp);
            CHECK(ty != NULL, "pool: %s", af_graph_error(g));
            if (ty) {
                run_cpu(g, 1, &tx, (af_buffer[]){ AF_BUF_F32(x, nx) }, ty, AF_BUF_F32(y, ny), threads);
                double worst = 0;
                for (int64_t i = 0; i < ny; i++) worst = fmax(worst, fabs(y[i] - want[i]));
                CHECK(worst <= 1e-6, "%s pool k %d s %d p %d on [%d,%d,%d,%d], %d threads: worst %g", max ? "max" : "avg", k,
                      st, pd, n, ch, h, w, threads, worst);
            }
            af_graph_free(g);
            free(x), free(y), free(want);
        }
}

/* The ReLU gradient through a tiling average pool's gradient, which the executor fuses
 * into the pool gradient's kernel: dx = (x > 0 ? dy / k^2 over the window : 0), for
 * windows of 2 and 3 rows (the band's first row is masked last, after its copies). */
static void check_pool_relu_grad(test_rng *r, int threads) {
    for (int k = 2; k <= 3; k++) {
        int n = 3, ch = 5, h = 3 * k, w = 4 * k, ho = h / k, wo = w / k;
        int64_t nx = (int64_t)n * ch * h * w, ny = (int64_t)n * ch * ho * wo;
        float *x = malloc(sizeof(float) * (size_t)nx), *dy = malloc(sizeof(float) * (size_t)ny);
        float *dx = malloc(sizeof(float) * (size_t)nx);
        test_fill_uniform(r, x, (long)nx, -1, 1);
        test_fill_uniform(r, dy, (long)ny, -1, 1);
        af_graph *g = af_graph_new();
        af_graph_set_target(g, AF_TARGET_CPU);
        af_tensor *tx = af_input(g, "x", AF_F32, AF_SHAPE(n, ch, h, w)), *tdy = af_input(g, "dy", AF_F32, AF_SHAPE(n, ch, ho, wo));
        af_tensor *xv = af_muls(tx, 1.0f), *yv = af_relu(xv);
        ir_attrs pa = { 0 };
        pa.kernel[0] = pa.kernel[1] = pa.stride[0] = pa.stride[1] = k;
        af_tensor *gp = ir_pool_grad(IR_OP_AVG_POOL_GRAD, yv, tdy, &pa);
        af_tensor *z = af_sub(xv, xv), *res = af_select(af_greater(xv, z), gp, z);
        CHECK(res != NULL, "pool relu grad: %s", af_graph_error(g));
        if (res) {
            run_cpu(g, 2, (af_tensor *[]){ tx, tdy }, (af_buffer[]){ AF_BUF_F32(x, nx), AF_BUF_F32(dy, ny) }, res,
                    AF_BUF_F32(dx, nx), threads);
            double worst = 0;
            for (int64_t i = 0; i < nx; i++) {
                int64_t pl = i / (h * w), ih = i / w % h, iw = i % w;
                double want = x[i] > 0 ? (double)dy[(pl * ho + ih / k) * wo + iw / k] / (k * k) : 0;
                worst = fmax(worst, fabs(dx[i] - want));
            }
            CHECK(worst <= 1e-7, "avg pool %dx%d gradient with a fused ReLU gradient, %d threads: worst %g", k, k, threads, worst);
        }
        af_graph_free(g);
        free(x), free(dy), free(dx);
    }
}

int main(void) {
    test_rng r = { 2811 };
    const conv_case cases[] = {
        /* n cin h w cout kh kw sh sw ph pw dh dw */
        { 13, 1, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1 },    /* "same", thin gradient: blocked images, a partial block */
        { 5, 3, 6, 11, 4, 5, 3, 1, 1, 2, 1, 1, 1 },    /* "same" with a 5x3 kernel */
        { 4, 2, 7, 9, 3, 3, 3, 1, 1, 0, 2, 1, 2 },     /* dilation 2 pad 2: as wide, not as tall */
        { 3, 2, 5, 4, 3, 3, 3, 1, 1, 3, 1, 1, 1 },     /* pad past the kernel: whole rows of zeros */
        { 2, 3, 8, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1 },     /* pointwise, two columns */
        { 6, 2, 9, 8, 3, 3, 2, 1, 1, 1, 0, 1, 1 },     /* not as wide: the row-by-row im2col */
        { 7, 3, 9, 10, 4, 3, 3, 2, 2, 1, 1, 1, 1 },    /* stride 2 */
        { 3, 2, 11, 9, 3, 3, 3, 3, 2, 0, 1, 2, 1 },    /* stride 3x2, dilation 2x1 */
        { 9, 16, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1 },   /* the CNN's conv2 layout: a wide gradient, per image */
        { 1, 1, 3, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1 },     /* one image */
        { 5, 7, 6, 5, 37, 3, 3, 2, 1, 1, 1, 1, 1 },    /* a wide gradient (dW^T per image), odd Cout, stride 2x1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int threads = 1; threads <= 2; threads++) check_case(&cases[i], &r, threads);
    for (int threads = 1; threads <= 2; threads++) {
        check_pool_forward(&r, threads);
        check_pool_relu_grad(&r, threads);
    }
    return check_finish("conv_kernels");
}
