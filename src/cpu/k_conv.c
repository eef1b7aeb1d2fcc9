/* Convolution through im2col + GEMM, and transposed convolution through GEMM + col2im. */
#include "cpu/gemm.h"
#include "cpu/kernels.h"

#include <string.h>

/* The product of five dims, each <= 2^40, may pass int64: saturate so the memory plan
 * refuses it (cpu_plan_memory) instead of wrapping to a small scratch. */
static int64_t prod5(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    int64_t r = a;
    if (!ir_mul64(r, b, &r) || !ir_mul64(r, c, &r) || !ir_mul64(r, d, &r) || !ir_mul64(r, e, &r)) return INT64_MAX;
    return r;
}

int64_t cpu_conv_scratch(const af_tensor *t) {
    af_shape x = t->src[0]->shape, w = t->src[1]->shape, o = t->shape;
    if (t->op == IR_OP_CONV_WEIGHT_GRAD) return prod5(o.dim[1], o.dim[2], o.dim[3], w.dim[2], w.dim[3]); /* one image's patches */
    if (t->op == IR_OP_CONV) return prod5(w.dim[1], w.dim[2], w.dim[3], o.dim[2], o.dim[3]);
    return prod5(w.dim[1], w.dim[2], w.dim[3], x.dim[2], x.dim[3]);
}

/* The output columns ow whose input column ow*s - p + v*d lies inside [0, w): a
 * contiguous run [lo, hi), so the inner loops need no bounds checks. */
static void valid_run(int64_t wo, int64_t w, int s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = 0, b = wo; /* smallest ow with ow*s + off >= 0, then past the last inside */
    if (off < 0) a = (-off + s - 1) / s;
    if ((wo - 1) * s + off >= w) b = off >= w ? 0 : (w - 1 - off) / s + 1;
    *lo = a < b ? a : b;
    *hi = b;
}

/* cols[(ci*kh + u)*kw + v, oh*Wo + ow] = x[ci, oh*s - p + u*d, ow*s - p + v*d] (0 outside). */
static void im2col(const float *x, int64_t cin, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   const int *s, const int *p, const int *d, int64_t ho, int64_t wo, float *cols) {
    for (int64_t ci = 0; ci < cin; ci++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                float *row = cols + ((ci * kh + u) * kw + v) * ho * wo;
                int64_t off = v * d[1] - p[1], lo, hi;
                valid_run(wo, w, s[1], off, &lo, &hi);
                for (int64_t oh = 0; oh < ho; oh++) {
                    int64_t ih = oh * s[0] - p[0] + u * d[0];
                    float *r = row + oh * wo;
                    if (ih < 0 || ih >= h) { memset(r, 0, (size_t)wo * sizeof *r); continue; }
                    const float *xr = x + (ci * h + ih) * w;
                    for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0.0f;
                    if (s[1] == 1) memcpy(r + lo, xr + lo + off, (size_t)(hi - lo) * sizeof *r);
                    else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * s[1] + off];
                    for (int64_t ow = hi; ow < wo; ow++) r[ow] = 0.0f;
                }
            }
}

/* Images are split into one contiguous group per pool thread, each with its own slice
 * of scratch, and every image's GEMM runs on its thread alone. */
typedef struct {
    const cpu_call *c;
    int64_t groups, per_slot;
    void (*image)(const cpu_call *c, int64_t b, float *scratch);
} conv_ctx;

static void conv_groups(void *p, int64_t g0, int64_t g1) {
    const conv_ctx *x = p;
    int64_t n = x->c->t->src[0]->shape.dim[0];
    for (int64_t gi = g0; gi < g1; gi++)
        for (int64_t b = gi * n / x->groups; b < (gi + 1) * n / x->groups; b++)
            x->image(x->c, b, x->c->scratch + gi * x->per_slot);
}

static void run_images(const cpu_call *c, void (*image)(const cpu_call *, int64_t, float *)) {
    int threads = cpu_pool_threads(c->pool);
    int64_t n = c->t->src[0]->shape.dim[0];
    conv_ctx x = { c, threads < n ? threads : n, cpu_conv_scratch(c->t), image };
    if (x.groups < 1) x.groups = 1;
    cpu_pool_for(c->pool, x.groups, 1, conv_groups, &x);
}

static void conv_image(const cpu_call *c, int64_t b, float *scratch) {
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t cin = xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    int64_t cout = ws.dim[0], cin_g = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3];
    int64_t ho = os.dim[2], wo = os.dim[3], g = a->groups, cout_g = cout / g;
    int64_t kk = cin_g * kh * kw;
    bool pointwise = kh == 1 && kw == 1 && a->stride[0] == 1 && a->stride[1] == 1 && a->pad[0] == 0 && a->pad[1] == 0;
    for (int64_t gi = 0; gi < g; gi++) {
        const float *x = c->in[0] + (b * cin + gi * cin_g) * h * w;
        const float *cols = x;
        if (!pointwise) {
            im2col(x, cin_g, h, w, kh, kw, a->stride, a->pad, a->dilation, ho, wo, scratch);
            cols = scratch;
        }
        float *o = c->out + (b * cout + gi * cout_g) * ho * wo;
        cpu_epilogue ep; /* a fused bias is per output channel: per GEMM row */
        if (c->ep) ep = (cpu_epilogue){ c->ep->bias ? c->ep->bias + gi * cout_g : NULL, true, c->ep->relu };
        cpu_kgemm(c, NULL, 0, 0, cout_g, ho * wo, kk, c->in[1] + gi * cout_g * kk, kk, cols, ho * wo, 0.0f, o, ho * wo,
                  c->ep ? &ep : NULL);
    }
}

void cpu_k_conv(const cpu_call *c) { run_images(c, conv_image); }

static void conv_transpose_image(const cpu_call *c, int64_t b, float *scratch) {
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t cin = xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    int64_t cout = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3], ho = os.dim[2], wo = os.dim[3];
    int64_t rows = cout * kh * kw;
    float *o = c->out + b * cout * ho * wo;
    memset(o, 0, (size_t)(cout * ho * wo) * sizeof(float));
    /* cols[Cout*kh*kw, H*W] = W^T @ x_b, with W viewed as [Cin, Cout*kh*kw]; then col2im. */
    cpu_kgemm(c, NULL, 1, 0, rows, h * w, cin, c->in[1], rows, c->in[0] + b * cin * h * w, h * w, 0.0f, scratch, h * w, NULL);
    /* col2im: each input column iw lands on ow = iw*s - p + v*d; the iw that land inside
     * form a contiguous run, so the inner loop is branch-free. */
    for (int64_t co = 0; co < cout; co++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                const float *col = scratch + ((co * kh + u) * kw + v) * h * w;
                int64_t off = v * a->dilation[1] - a->pad[1], lo = 0, hi = w;
                while (lo < w && lo * a->stride[1] + off < 0) lo++;
                while (hi > lo && (hi - 1) * a->stride[1] + off >= wo) hi--;
                for (int64_t ih = 0; ih < h; ih++) {
                    int64_t oh = ih * a->stride[0] - a->pad[0] + u * a->dilation[0];
                    if (oh < 0 || oh >= ho) continue;
                    float *orow = o + (co * ho + oh) * wo;
                    const float *crow = col + ih * w;
                    if (a->stride[1] == 1) for (int64_t iw = lo; iw < hi; iw++) orow[iw + off] += crow[iw];
                    else for (int64_t iw = lo; iw < hi; iw++) orow[iw * a->stride[1] + off] += crow[iw];
                }
            }
}

void cpu_k_conv_transpose(const cpu_call *c) { run_images(c, conv_transpose_image); }

/* A conv's weight gradient dW[Cout, Cin*kh*kw] = sum over images of dy_b [Cout, L] times
 * the image's im2col patches [Cin*kh*kw, L] transposed: one im2col and one accumulating
 * GEMM per image, where the graph-built construction needed slices, concats and
 * transposes of the whole batch. The per-image products are small (the CNN's conv1:
 * 16x9x784), so the images are split over the threads instead of each GEMM: each thread
 * sums its images into its own partial (the first thread's is the output), and the
 * partials are added at the end. */
typedef struct {
    const cpu_call *c;
    int64_t groups, slot;  /* threads used; scratch floats per thread: patches, then a partial */
} wgrad_ctx;

static void wgrad_groups(void *p, int64_t g0, int64_t g1) {
    const wgrad_ctx *x = p;
    const cpu_call *c = x->c;
    const ir_attrs *a = &c->t->a;
    af_shape xs = c->t->src[0]->shape, ds = c->t->src[1]->shape;
    int64_t n = xs.dim[0], cin = xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    int64_t cout = ds.dim[1], ho = ds.dim[2], wo = ds.dim[3], kh = a->kernel[0], kw = a->kernel[1];
    int64_t kk = cin * kh * kw, l = ho * wo;
    for (int64_t gi = g0; gi < g1; gi++) {
        float *cols = c->scratch + gi * x->slot, *dw = gi ? cols + kk * l : c->out;
        int64_t b0 = gi * n / x->groups, b1 = (gi + 1) * n / x->groups;
        if (b0 == b1) memset(dw, 0, (size_t)(cout * kk) * sizeof *dw);
        for (int64_t b = b0; b < b1; b++) {
            im2col(c->in[0] + b * cin * h * w, cin, h, w, kh, kw, a->stride, a->pad, a->dilation, ho, wo, cols);
            cpu_kgemm(c, NULL, 0, 1, cout, kk, l, c->in[1] + b * cout * l, l, cols, l, b > b0 ? 1.0f : 0.0f, dw, kk, NULL);
        }
    }
}

void cpu_k_conv_weight_grad(const cpu_call *c) {
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ds = t->src[1]->shape;
    int64_t n = xs.dim[0], kk = xs.dim[1] * a->kernel[0] * a->kernel[1], cout = ds.dim[1], l = ds.dim[2] * ds.dim[3];
    int threads = cpu_pool_threads(c->pool);
    wgrad_ctx x = { c, threads < n ? threads : n, cpu_conv_scratch(t) + cout * kk };
    if (x.groups < 1) x.groups = 1;
    cpu_pool_for(c->pool, x.groups, 1, wgrad_groups, &x);
    for (int64_t gi = 1; gi < x.groups; gi++) { /* the partials into the output */
        const float *part = c->scratch + gi * x.slot + kk * l;
        for (int64_t i = 0; i < cout * kk; i++) c->out[i] += part[i];
    }
}
