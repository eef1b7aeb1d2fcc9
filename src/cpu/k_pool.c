/* Average and max pooling over the last two axes of [N, C, H, W]. avg_pool divides by
 * the full kernel area (padding counts as zeros); max_pool ignores padding. */
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"

#include <math.h>
#include <string.h>

/* One range of [N*C] planes per call: the planes are split over the pool's threads. */
static void pool_planes(void *ctx, int64_t p0, int64_t p1) {
    const cpu_call *c = ctx;
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, os = t->shape;
    int64_t h = xs.dim[2], w = xs.dim[3], ho = os.dim[2], wo = os.dim[3];
    bool avg = t->op == IR_OP_AVG_POOL;
    float inv = 1.0f / (float)(a->kernel[0] * a->kernel[1]);
    if (avg && a->pad[0] == 0 && a->pad[1] == 0 && a->kernel[0] == 2 && a->kernel[1] == 2 && a->stride[0] == 2 && a->stride[1] == 2) {
        /* 2x2 average, stride 2: the CNN's downsampling, worth its own loop */
        for (int64_t p = p0; p < p1; p++)
            for (int64_t oh = 0; oh < ho; oh++) {
                const float *r0 = c->in[0] + (p * h + 2 * oh) * w, *r1 = r0 + w;
                float *o = c->out + (p * ho + oh) * wo;
                for (int64_t ow = 0; ow < wo; ow++) o[ow] = (r0[2 * ow] + r0[2 * ow + 1] + r1[2 * ow] + r1[2 * ow + 1]) * 0.25f;
            }
        return;
    }
    if (a->pad[0] == 0 && a->pad[1] == 0) { /* every window lies inside: no bounds checks */
        int kh = a->kernel[0], kw = a->kernel[1], sh = a->stride[0], sw = a->stride[1];
        for (int64_t p = p0; p < p1; p++)
            for (int64_t oh = 0; oh < ho; oh++) {
                const float *x = c->in[0] + (p * h + oh * sh) * w;
                float *o = c->out + (p * ho + oh) * wo;
                for (int64_t ow = 0; ow < wo; ow++) {
                    const float *xw = x + ow * sw;
                    float acc = avg ? 0.0f : -INFINITY;
                    for (int u = 0; u < kh; u++)
                        for (int v = 0; v < kw; v++) {
                            float val = xw[u * w + v];
                            acc = avg ? acc + val : (val > acc ? val : acc);
                        }
                    o[ow] = avg ? acc * inv : acc;
                }
            }
        return;
    }
    for (int64_t p = p0; p < p1; p++) {
        const float *x = c->in[0] + p * h * w;
        float *o = c->out + p * ho * wo;
        for (int64_t oh = 0; oh < ho; oh++)
            for (int64_t ow = 0; ow < wo; ow++) {
                float acc = avg ? 0.0f : -INFINITY;
                for (int u = 0; u < a->kernel[0]; u++) {
                    int64_t ih = oh * a->stride[0] - a->pad[0] + u;
                    if (ih < 0 || ih >= h) continue;
                    for (int v = 0; v < a->kernel[1]; v++) {
                        int64_t iw = ow * a->stride[1] - a->pad[1] + v;
                        if (iw < 0 || iw >= w) continue;
                        float val = x[ih * w + iw];
                        acc = avg ? acc + val : (val > acc ? val : acc);
                    }
                }
                o[oh * wo + ow] = avg ? acc * inv : acc;
            }
    }
}

void cpu_k_pool(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    cpu_pool_for(c->pool, xs.dim[0] * xs.dim[1], 8, pool_planes, (void *)c);
}

/* The input gradient of a pool from x and dy, one range of [N*C] planes per call: each
 * window spreads its dy over its in-bounds inputs, avg_pool's divided by the full
 * kernel area, max_pool's to every input equal to the window's max. */
/* A fused ReLU gradient (fuse.h): dx where x > x - x, else x - x (+0, or NaN for an
 * infinite or NaN x), as the unfused select computes it. */
CPU_VECTOR_CLONES static void relu_mask(float *restrict dx, const float *restrict x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float z = x[i] - x[i];
        dx[i] = x[i] > z ? dx[i] : z;
    }
}

static void pool_grad_planes(void *ctx, int64_t p0, int64_t p1) {
    const cpu_call *c = ctx;
    const af_tensor *t = c->t;
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ds = t->src[1]->shape;
    int64_t h = xs.dim[2], w = xs.dim[3], ho = ds.dim[2], wo = ds.dim[3];
    bool avg = t->op == IR_OP_AVG_POOL_GRAD;
    float inv = 1.0f / (float)(a->kernel[0] * a->kernel[1]);
    /* non-overlapping average windows tiling the plane: each dx is its window's dy / k */
    bool tiles = avg && a->stride[0] == a->kernel[0] && a->stride[1] == a->kernel[1] && !a->pad[0] && !a->pad[1] &&
                 ho * a->kernel[0] == h && wo * a->kernel[1] == w;
    for (int64_t p = p0; p < p1; p++) {
        const float *x = c->in[0] + p * h * w, *dy = c->in[1] + p * ho * wo;
        float *dx = c->out + p * h * w;
        if (tiles) { /* the first row of each band of windows, then its copies */
            const int64_t kh = a->kernel[0], kw = a->kernel[1];
            for (int64_t oh = 0; oh < ho; oh++) {
                float *r = dx + oh * kh * w;
                for (int64_t ow = 0; ow < wo; ow++)
                    for (int64_t v = 0; v < kw; v++) r[ow * kw + v] = dy[oh * wo + ow] * inv;
                for (int64_t u = 1; u < kh; u++) memcpy(r + u * w, r, (size_t)w * sizeof *r);
            }
            /* masked over the whole plane in one call: masking each copied row as it was
             * made (one call per 28-float row) measured 2-10% slower on the CNN's step */
            if (c->relu_x) relu_mask(dx, c->relu_x + p * h * w, h * w);
            continue;
        }
        memset(dx, 0, (size_t)(h * w) * sizeof *dx);
        for (int64_t oh = 0; oh < ho; oh++) {
            int64_t h0 = oh * a->stride[0] - a->pad[0], h1 = h0 + a->kernel[0];
            if (h0 < 0) h0 = 0;
            if (h1 > h) h1 = h;
            for (int64_t ow = 0; ow < wo; ow++) {
                int64_t w0 = ow * a->stride[1] - a->pad[1], w1 = w0 + a->kernel[1];
                if (w0 < 0) w0 = 0;
                if (w1 > w) w1 = w;
                float g = dy[oh * wo + ow];
                if (avg) {
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) dx[ih * w + iw] += g * inv;
                    continue;
                }
                float m = -INFINITY;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) m = x[ih * w + iw] > m ? x[ih * w + iw] : m;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) dx[ih * w + iw] += x[ih * w + iw] == m ? g : 0.0f;
            }
        }
        if (c->relu_x) relu_mask(dx, c->relu_x + p * h * w, h * w);
    }
}

void cpu_k_pool_grad(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    cpu_pool_for(c->pool, xs.dim[0] * xs.dim[1], 8, pool_grad_planes, (void *)c);
}
