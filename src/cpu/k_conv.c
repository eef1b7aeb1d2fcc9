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

/* Images per weight-gradient product: as many as keep a block's patches and output
 * gradients, (Cin*kh*kw + Cout) * L floats an image, within about half of a 1 MiB L2
 * (the CNN's conv1: 6 images, K = 4,704 instead of 784). */
enum { WGRAD_BLOCK_FLOATS = 1 << 17 };
/* Only thin gradients are blocked: from conv2's 32 x 144 up the per-image product runs
 * as fast and the gather of dy would cost more than it saves. */
enum { WGRAD_THIN = 2048 };

/* (Cin*kh*kw + Cout) * L: one image's share of a block, saturated. */
static int64_t wgrad_per_image(const af_tensor *t) {
    af_shape ds = t->src[1]->shape, o = t->shape;
    int64_t rows = prod5(o.dim[1], o.dim[2], o.dim[3], 1, 1);
    if (!ir_add64(rows, o.dim[0], &rows)) return INT64_MAX;
    return prod5(rows, ds.dim[2], ds.dim[3], 1, 1);
}

static int64_t wgrad_block(const af_tensor *t) {
    int64_t n = t->src[1]->shape.dim[0], per = wgrad_per_image(t);
    if (prod5(t->shape.dim[0], t->shape.dim[1], t->shape.dim[2], t->shape.dim[3], 1) >= WGRAD_THIN) return 1;
    int64_t nb = per > 0 && per < WGRAD_BLOCK_FLOATS ? WGRAD_BLOCK_FLOATS / per : 1;
    return nb < n ? nb : (n > 0 ? n : 1);
}

int64_t cpu_conv_scratch(const af_tensor *t) {
    af_shape x = t->src[0]->shape, w = t->src[1]->shape, o = t->shape;
    if (t->op == IR_OP_CONV_WEIGHT_GRAD) /* a block of images' patches and output gradients */
        return prod5(wgrad_per_image(t), wgrad_block(t), 1, 1, 1);
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

/* im2col of a stride-1 conv whose output is as wide as its input ("same" padding, the
 * CNN's 3x3 pad 1): then every row of the patches is the input plane shifted by one
 * offset, oh*W + ow -> (oh + u*d - p)*W + ow + v*d - p, so each row is one copy of the
 * plane instead of one short copy per output row; the copy wraps around the row ends,
 * and the wrapped columns are zeroed after. */
static void im2col_same(const float *x, int64_t cin, int64_t h, int64_t w, int64_t kh, int64_t kw, const int *p,
                        const int *d, int64_t ho, float *cols, int64_t ld) {
    int64_t plane = h * w, l = ho * w;
    for (int64_t ci = 0; ci < cin; ci++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                float *r = cols + ((ci * kh + u) * kw + v) * ld;
                const float *xp = x + ci * plane;
                int64_t dh = u * d[0] - p[0], dw = v * d[1] - p[1], shift = dh * w + dw, lo, hi;
                int64_t oh0 = dh < 0 ? -dh : 0, oh1 = h - dh < ho ? h - dh : ho;
                if (oh1 < oh0) oh1 = oh0;
                int64_t j0 = oh0 * w, j1 = oh1 * w; /* the rows inside, less what would read past the plane */
                if (j0 + shift < 0) j0 = -shift;
                if (j1 + shift > plane) j1 = plane - shift;
                if (j1 < j0) j1 = j0;
                memset(r, 0, (size_t)j0 * sizeof *r);
                memcpy(r + j0, xp + j0 + shift, (size_t)(j1 - j0) * sizeof *r);
                memset(r + j1, 0, (size_t)(l - j1) * sizeof *r);
                valid_run(w, w, 1, dw, &lo, &hi);
                for (int64_t oh = oh0; oh < oh1 && (lo > 0 || hi < w); oh++) {
                    for (int64_t ow = 0; ow < lo; ow++) r[oh * w + ow] = 0.0f;
                    for (int64_t ow = hi; ow < w; ow++) r[oh * w + ow] = 0.0f;
                }
            }
}

/* cols[(ci*kh + u)*kw + v, oh*Wo + ow] = x[ci, oh*s - p + u*d, ow*s - p + v*d] (0 outside);
 * rows ld floats apart. (A loop in place of the memcpy of a row's run measured 3% slower
 * on the CNN's 14-float runs.) */
static void im2col(const float *x, int64_t cin, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   const int *s, const int *p, const int *d, int64_t ho, int64_t wo, float *cols, int64_t ld) {
    if (s[0] == 1 && s[1] == 1 && wo == w) {
        im2col_same(x, cin, h, w, kh, kw, p, d, ho, cols, ld);
        return;
    }
    for (int64_t ci = 0; ci < cin; ci++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                float *row = cols + ((ci * kh + u) * kw + v) * ld;
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
            im2col(x, cin_g, h, w, kh, kw, a->stride, a->pad, a->dilation, ho, wo, scratch, ho * wo);
            cols = scratch;
        }
        float *o = c->out + (b * cout + gi * cout_g) * ho * wo;
        cpu_epilogue ep; /* a fused bias is per output channel: per GEMM row */
        if (c->ep) ep = (cpu_epilogue){ .bias = c->ep->bias ? c->ep->bias + gi * cout_g : NULL, .bias_rows = true, .relu = c->ep->relu };
        cpu_kgemm(c, NULL, 0, 0, cout_g, ho * wo, kk, c->in[1] + gi * cout_g * kk, kk, cols, ho * wo, 0.0f, o, ho * wo,
                  c->ep ? &ep : NULL);
    }
}

void cpu_k_conv(const cpu_call *c) { run_images(c, conv_image); }

/* col2im of a stride-1 transposed conv as wide as its input (the CNN's input gradients):
 * each row of cols lands on the output plane shifted by one offset (im2col_same's
 * inverse), so it is added in one run; the columns that would wrap around a row end are
 * zeroed in cols (our scratch) first, so the run adds nothing there. */
static void col2im_same(float *cols, int64_t cout, int64_t h, int64_t w, int64_t kh, int64_t kw, const int *p,
                        const int *d, int64_t ho, float *o) {
    int64_t plane = ho * w;
    for (int64_t co = 0; co < cout; co++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                float *col = cols + ((co * kh + u) * kw + v) * h * w, *op = o + co * plane;
                int64_t dh = u * d[0] - p[0], dw = v * d[1] - p[1], shift = dh * w + dw, lo, hi;
                int64_t ih0 = dh < 0 ? -dh : 0, ih1 = ho - dh < h ? ho - dh : h;
                if (ih1 < ih0) ih1 = ih0;
                int64_t j0 = ih0 * w, j1 = ih1 * w;
                if (j0 + shift < 0) j0 = -shift;
                if (j1 + shift > plane) j1 = plane - shift;
                valid_run(w, w, 1, dw, &lo, &hi);
                for (int64_t ih = ih0; ih < ih1 && (lo > 0 || hi < w); ih++) {
                    for (int64_t iw = 0; iw < lo; iw++) col[ih * w + iw] = 0.0f;
                    for (int64_t iw = hi; iw < w; iw++) col[ih * w + iw] = 0.0f;
                }
                float *dst = op + shift;
                for (int64_t j = j0; j < j1; j++) dst[j] += col[j];
            }
}

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
    if (a->stride[0] == 1 && a->stride[1] == 1 && wo == w) {
        col2im_same(scratch, cout, h, w, kh, kw, a->pad, a->dilation, ho, o);
        return;
    }
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
 * the image's im2col patches [Cin*kh*kw, L] transposed. The images are split over the
 * threads, each summing its images into its own partial (the first thread's is the
 * output; the partials are added at the end), and within a thread a block of images
 * (wgrad_block) is one product over K = images * L: their patches side by side and their
 * output gradients gathered into [Cout, images * L]. Per image the products were too thin
 * to run fast (the CNN's conv1: 16 x 9 over K = 784, 18 GFLOP/s). */
typedef struct {
    const cpu_call *c;
    int64_t groups, slot, block; /* threads used; scratch floats per thread; images per product */
    bool tr;                     /* per image, dW^T = patches dy^T into per-thread partials */
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
        float *cols = c->scratch + gi * x->slot, *dyb = cols + kk * l * x->block;
        float *dw = gi || x->tr ? dyb + cout * l * x->block : c->out;
        int64_t b0 = gi * n / x->groups, b1 = (gi + 1) * n / x->groups;
        if (b0 == b1) memset(dw, 0, (size_t)(cout * kk) * sizeof *dw);
        for (int64_t bb = b0; bb < b1; bb += x->block) {
            int64_t nb = b1 - bb < x->block ? b1 - bb : x->block, ld = nb * l;
            const float *dy = c->in[1] + bb * cout * l; /* one image: read in place */
            for (int64_t j = 0; j < nb; j++) {
                int64_t b = bb + j;
                im2col(c->in[0] + b * cin * h * w, cin, h, w, kh, kw, a->stride, a->pad, a->dilation, ho, wo, cols + j * l, ld);
                for (int64_t co = 0; nb > 1 && co < cout; co++)
                    memcpy(dyb + co * ld + j * l, c->in[1] + (b * cout + co) * l, (size_t)l * sizeof *dyb);
            }
            if (nb > 1) dy = dyb;
            if (x->tr) cpu_kgemm(c, NULL, 0, 1, kk, cout, ld, cols, ld, dy, ld, bb > b0 ? 1.0f : 0.0f, dw, cout, NULL);
            else cpu_kgemm(c, NULL, 0, 1, cout, kk, ld, dy, ld, cols, ld, bb > b0 ? 1.0f : 0.0f, dw, kk, NULL);
        }
    }
}

void cpu_k_conv_weight_grad(const cpu_call *c) {
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ds = t->src[1]->shape;
    int64_t n = xs.dim[0], kk = xs.dim[1] * a->kernel[0] * a->kernel[1], cout = ds.dim[1];
    int threads = cpu_pool_threads(c->pool);
    wgrad_ctx x = { c, threads < n ? threads : n, cpu_conv_scratch(t) + cout * kk, wgrad_block(t), false };
    /* Per image, dW^T [Cin*kh*kw, Cout] = patches dy^T puts the channels on the packed
     * kernel's wide side and packs the smaller dy transposed (the CNN's conv2: 144 x 32 x
     * 196, 15.3 -> 13.7 us). Not under bf16, whose cache would take dy for a weight. */
    x.tr = x.block == 1 && !c->bf16;
    if (x.groups < 1) x.groups = 1;
    cpu_pool_for(c->pool, x.groups, 1, wgrad_groups, &x);
    if (x.tr) { /* the transposed partials into the output */
        for (int64_t co = 0; co < cout; co++)
            for (int64_t k = 0; k < kk; k++) {
                float acc = 0.0f;
                for (int64_t gi = 0; gi < x.groups; gi++) acc += c->scratch[gi * x.slot + x.slot - cout * kk + k * cout + co];
                c->out[co * kk + k] = acc;
            }
        return;
    }
    for (int64_t gi = 1; gi < x.groups; gi++) { /* the partials into the output */
        const float *part = c->scratch + gi * x.slot + x.slot - cout * kk;
        for (int64_t i = 0; i < cout * kk; i++) c->out[i] += part[i];
    }
}
