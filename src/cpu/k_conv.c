/* Convolution through im2col + GEMM, and transposed convolution through GEMM + col2im. */
#include "cpu/gemm.h"
#include "cpu/kernels.h"

#include <string.h>

int64_t cpu_conv_scratch(const af_tensor *t) {
    af_shape x = t->src[0]->shape, w = t->src[1]->shape, o = t->shape;
    if (t->op == AF_OP_CONV) {
        int64_t cin_g = w.dim[1];
        return cin_g * w.dim[2] * w.dim[3] * o.dim[2] * o.dim[3];
    }
    return w.dim[1] * w.dim[2] * w.dim[3] * x.dim[2] * x.dim[3];
}

/* cols[(ci*kh + u)*kw + v, oh*Wo + ow] = x[ci, oh*s - p + u*d, ow*s - p + v*d] (0 outside). */
static void im2col(const float *x, int64_t cin, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   const int *s, const int *p, const int *d, int64_t ho, int64_t wo, float *cols) {
    for (int64_t ci = 0; ci < cin; ci++)
        for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
                float *row = cols + ((ci * kh + u) * kw + v) * ho * wo;
                for (int64_t oh = 0; oh < ho; oh++) {
                    int64_t ih = oh * s[0] - p[0] + u * d[0];
                    float *r = row + oh * wo;
                    if (ih < 0 || ih >= h) { memset(r, 0, (size_t)wo * sizeof *r); continue; }
                    const float *xr = x + (ci * h + ih) * w;
                    for (int64_t ow = 0; ow < wo; ow++) {
                        int64_t iw = ow * s[1] - p[1] + v * d[1];
                        r[ow] = iw >= 0 && iw < w ? xr[iw] : 0.0f;
                    }
                }
            }
}

void cpu_k_conv(const cpu_call *c) {
    const af_tensor *t = c->t;
    const af_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t n = xs.dim[0], cin = xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    int64_t cout = ws.dim[0], cin_g = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3];
    int64_t ho = os.dim[2], wo = os.dim[3], g = a->groups, cout_g = cout / g;
    int64_t kk = cin_g * kh * kw;
    bool pointwise = kh == 1 && kw == 1 && a->stride[0] == 1 && a->stride[1] == 1 && a->pad[0] == 0 && a->pad[1] == 0;
    for (int64_t b = 0; b < n; b++)
        for (int64_t gi = 0; gi < g; gi++) {
            const float *x = c->in[0] + (b * cin + gi * cin_g) * h * w;
            const float *cols = x;
            if (!pointwise) {
                im2col(x, cin_g, h, w, kh, kw, a->stride, a->pad, a->dilation, ho, wo, c->scratch);
                cols = c->scratch;
            }
            float *o = c->out + (b * cout + gi * cout_g) * ho * wo;
            cpu_sgemm(c->pool, 0, 0, cout_g, ho * wo, kk, 1.0f, c->in[1] + gi * cout_g * kk, kk, cols, ho * wo, 0.0f, o, ho * wo);
        }
}

void cpu_k_conv_transpose(const cpu_call *c) {
    const af_tensor *t = c->t;
    const af_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t n = xs.dim[0], cin = xs.dim[1], h = xs.dim[2], w = xs.dim[3];
    int64_t cout = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3], ho = os.dim[2], wo = os.dim[3];
    int64_t rows = cout * kh * kw;
    memset(c->out, 0, (size_t)af_shape_count(os) * sizeof(float));
    for (int64_t b = 0; b < n; b++) {
        /* cols[Cout*kh*kw, H*W] = W^T @ x_b, with W viewed as [Cin, Cout*kh*kw]. */
        cpu_sgemm(c->pool, 1, 0, rows, h * w, cin, 1.0f, c->in[1], rows, c->in[0] + b * cin * h * w, h * w, 0.0f, c->scratch, h * w);
        float *o = c->out + b * cout * ho * wo;
        for (int64_t co = 0; co < cout; co++)
            for (int64_t u = 0; u < kh; u++)
                for (int64_t v = 0; v < kw; v++) {
                    const float *col = c->scratch + ((co * kh + u) * kw + v) * h * w;
                    for (int64_t ih = 0; ih < h; ih++) {
                        int64_t oh = ih * a->stride[0] - a->pad[0] + u * a->dilation[0];
                        if (oh < 0 || oh >= ho) continue;
                        float *orow = o + (co * ho + oh) * wo;
                        for (int64_t iw = 0; iw < w; iw++) {
                            int64_t ow = iw * a->stride[1] - a->pad[1] + v * a->dilation[1];
                            if (ow >= 0 && ow < wo) orow[ow] += col[ih * w + iw];
                        }
                    }
                }
    }
}
