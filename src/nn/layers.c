/* Trainable layers composed from ops, so they differentiate through the VJP rules and
 * compile for every target. */
#include "grad/grad.h"

#include <math.h>
#include <stdlib.h>

af_tensor *af_linear(af_tensor *x, af_tensor *w, af_tensor *b) {
    af_tensor *y = NULL;
    if (x && w && x->shape.rank > 2) { /* fold leading dims into rows */
        af_shape s = x->shape;
        af_tensor *x2 = af_reshape(x, AF_SHAPE(-1, s.dim[s.rank - 1]));
        y = af_matmul(x2, w, 0, 1);
        if (y) { s.dim[s.rank - 1] = w->shape.dim[0]; y = af_reshape(y, s); }
    } else {
        y = af_matmul(x, w, 0, 1);
    }
    return b ? af_add(y, b) : y;
}

af_tensor *af_conv_param(af_graph *g, const char *name, int cout, int cin, int kh, int kw, const float *init) {
    if (!g) { ir_fail(AF_ERR_INVALID, "af_conv_param: graph is NULL"); return NULL; }
    if (g->error) return NULL;
    if (cout < 1 || cin < 1 || kh < 1 || kw < 1) {
        ir_graph_fail(g, "af_conv_param '%s': sizes must be >= 1 (cout %d, cin %d, kernel %dx%d)", name ? name : "", cout, cin, kh, kw);
        return NULL;
    }
    int64_t k = (int64_t)cin * kh * kw;
    float *m = NULL;
    if (init) {
        m = malloc((size_t)(k * cout) * sizeof *m);
        if (!m) { ir_graph_fail(g, "af_conv_param: out of memory"); return NULL; }
        for (int co = 0; co < cout; co++) /* [Cout, K] -> [K, Cout] */
            for (int64_t r = 0; r < k; r++) m[r * cout + co] = init[co * k + r];
    }
    af_tensor *p = af_parameter(g, name, AF_SHAPE(k, cout), m);
    free(m);
    if (p) {
        p->flags |= IR_TF_CONV;
        p->a.kernel[0] = kh;
        p->a.kernel[1] = kw;
        p->a.groups = cin;
    }
    return p;
}

af_tensor *af_conv2d(af_tensor *x, af_tensor *w, int stride, int pad) {
    if (!x || !w) { if (x && !x->g->error) ir_graph_fail(x->g, "af_conv2d: weight is NULL"); return NULL; }
    af_graph *g = x->g;
    if (g->error) return NULL;
    if (!(w->flags & IR_TF_CONV)) {
        ir_graph_fail(g, "af_conv2d: the weight must come from af_conv_param (a [Cin*kH*kW, Cout] patch matrix)");
        return NULL;
    }
    if (stride != 1) {
        ir_graph_fail(g, "af_conv2d: stride %d is not supported (the engine has no strided slice); use stride 1 and downsample with af_avg_pool", stride);
        return NULL;
    }
    if (pad < 0) { ir_graph_fail(g, "af_conv2d: pad %d must be >= 0", pad); return NULL; }
    int kh = w->a.kernel[0], kw = w->a.kernel[1], cin = w->a.groups;
    if (x->shape.rank != 4 || x->shape.dim[1] != cin) {
        char s[100];
        ir_shape_str(x->shape, s, sizeof s);
        ir_graph_fail(g, "af_conv2d: x %s must be [N, %d, H, W] to match the weight's %d input channels", s, cin, cin);
        return NULL;
    }
    int64_t n = x->shape.dim[0], cout = w->shape.dim[1];
    int64_t ho = x->shape.dim[2] + 2 * pad - kh + 1, wo = x->shape.dim[3] + 2 * pad - kw + 1;
    if (ho < 1 || wo < 1) { ir_graph_fail(g, "af_conv2d: the %dx%d kernel is larger than the padded input", kh, kw); return NULL; }
    if (g->cpu_only) {
        /* One native conv node: its kernel does im2col in C, its input gradient is a
         * conv_transpose and its weight gradient one matmul against im2col patches. */
        int perm[2] = { 1, 0 }, pads[2] = { pad, pad };
        af_tensor *w4 = af_reshape(af_transpose(w, perm), AF_SHAPE(cout, cin, kh, kw));
        return af_conv(x, w4, NULL, pads, NULL, 1);
    }
    /* [K, Cout]^T @ [N, K, L] -> [N, Cout, L]: the weight broadcasts over the batch. */
    af_tensor *y = af_matmul(w, grad_im2col(x, kh, kw, pad, pad), 1, 0);
    return af_reshape(y, AF_SHAPE(n, cout, ho, wo));
}

/* [B, T, D] -> [B, H, T, D/H] */
static af_tensor *split_heads(af_tensor *x, int64_t b, int64_t t, int heads, int64_t dh) {
    int perm[4] = { 0, 2, 1, 3 };
    return af_transpose(af_reshape(x, AF_SHAPE(b, t, heads, dh)), perm);
}

af_tensor *af_mha(af_tensor *x, int heads, af_tensor *wq, af_tensor *wk, af_tensor *wv, af_tensor *wo,
                  af_tensor *bq, af_tensor *bk, af_tensor *bv, af_tensor *bo, int causal) {
    if (!x || !wq || !wk || !wv || !wo) {
        if (x && !x->g->error) ir_graph_fail(x->g, "af_mha: a weight is NULL");
        return NULL;
    }
    af_graph *g = x->g;
    if (g->error) return NULL;
    if (x->shape.rank != 3 || heads < 1 || x->shape.dim[2] % heads) {
        char s[100];
        ir_shape_str(x->shape, s, sizeof s);
        ir_graph_fail(g, "af_mha: x %s must be [B, T, D] with D divisible by heads = %d", s, heads);
        return NULL;
    }
    int64_t b = x->shape.dim[0], t = x->shape.dim[1], d = x->shape.dim[2], dh = d / heads;
    af_tensor *q = split_heads(af_linear(x, wq, bq), b, t, heads, dh);
    af_tensor *k = split_heads(af_linear(x, wk, bk), b, t, heads, dh);
    af_tensor *v = split_heads(af_linear(x, wv, bv), b, t, heads, dh);
    af_tensor *s = af_muls(af_matmul(q, k, 0, 1), 1.0f / sqrtf((float)dh));
    if (causal) s = af_causal_mask(s, 0);
    af_tensor *o = af_matmul(af_softmax(s, -1), v, 0, 0); /* [B, H, T, dh] */
    int perm[4] = { 0, 2, 1, 3 };
    o = af_reshape(af_transpose(o, perm), AF_SHAPE(b, t, d));
    return af_linear(o, wo, bo);
}
