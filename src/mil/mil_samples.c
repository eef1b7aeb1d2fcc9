/* Built-in programs for `aneforge mil emit` and the golden MIL tests: small, fixed
 * graphs whose values come from closed-form formulas (no RNG), so the emitted text
 * and weight file are the same bytes on every machine. */
#include "mil/mil.h"
#include "nn/llama_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const mil_sample_names[] = { "mlp-step", "conv", "attention", "llama-fwdAttn", "llama-fwdFFN", "llama-ffnBwd",
                                         "llama-sdpaBwd1", "llama-sdpaBwd2", "llama-qkvBwd", "llama-clsFwd", "llama-clsBwd", NULL };
enum { FIRST_LLAMA = 3 };

/* The golden shapes of the llama kernels: 32 wide, 4 heads over 2 KV heads, seq 8. */
static const lk_shape llama_golden = { 32, 48, 4, 2, 8, 1, 24 };

static float *values(int64_t n, float scale, int salt) {
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (v)
        for (int64_t i = 0; i < n; i++) v[i] = scale * (float)sin(0.7 * (double)i + salt); /* deterministic, varied */
    return v;
}

static af_tensor *param(af_graph *g, const char *name, af_shape s, int salt) {
    float *v = values(af_shape_count(s), 0.3f, salt);
    af_tensor *t = v ? af_parameter(g, name, s, v) : NULL;
    free(v);
    return t;
}

static af_tensor *konst(af_graph *g, const char *name, af_shape s, int salt) {
    float *v = values(af_shape_count(s), 0.25f, salt);
    af_tensor *t = v ? af_const(g, name, s, v) : NULL;
    free(v);
    return t;
}

/* Gives an output its MIL name. */
static af_tensor *named(af_tensor *t, const char *name) {
    if (t) {
        char *n = ir_strdup(name);
        if (n) { free(t->name); t->name = n; }
    }
    return t;
}

/* One SGD step of a 2-layer MLP on centred inputs: forward, softmax cross-entropy,
 * backward, p - lr * g. The parameters are inputs: the host (or resident state) feeds
 * them and takes the *_next results back. */
static void mlp_step(mil_sample *s) {
    af_graph *g = s->g;
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(4, 12));
    af_tensor *y = af_input(g, "onehot", AF_F32, AF_SHAPE(4, 3));
    af_tensor *lr = af_input(g, "lr", AF_F32, AF_SHAPE(1));
    af_tensor *p[4] = { param(g, "w1", AF_SHAPE(6, 12), 1), param(g, "b1", AF_SHAPE(6), 2),
                        param(g, "w2", AF_SHAPE(3, 6), 3), param(g, "b2", AF_SHAPE(3), 4) };
    /* the dataset's per-feature mean, baked into the program (it goes to the weight file) */
    af_tensor *xc = af_sub(x, konst(g, "x_mean", AF_SHAPE(12), 11));
    af_tensor *h = af_relu(af_linear(xc, p[0], p[1]));
    af_loss *loss = af_softmax_cross_entropy(af_linear(h, p[2], p[3]), y);
    af_tensor *grads[4] = { 0 };
    if (!loss || af_backward(loss, 4, p, grads, NULL) != AF_OK) return;
    static const char *const next[4] = { "w1_next", "b1_next", "w2_next", "b2_next" };
    s->out[s->nout++] = named(af_loss_value(loss), "loss");
    for (int i = 0; i < 4; i++) s->out[s->nout++] = named(af_sub(p[i], af_mul(grads[i], lr)), next[i]);
    af_tensor *in[7] = { x, y, lr, p[0], p[1], p[2], p[3] };
    memcpy(s->in, in, sizeof in);
    s->nin = 7;
}

/* conv 3x3 (baked weight, pad 1) + bias, relu, 2x2 max pool. */
static void conv_block(mil_sample *s) {
    af_graph *g = s->g;
    af_tensor *x = af_input(g, "image", AF_F32, AF_SHAPE(1, 3, 8, 8));
    int pad[2] = { 1, 1 }, k[2] = { 2, 2 };
    af_tensor *c = af_conv(x, konst(g, "conv_w", AF_SHAPE(4, 3, 3, 3), 5), NULL, pad, NULL, 1);
    af_tensor *r = af_relu(af_add(c, konst(g, "conv_b", AF_SHAPE(4, 1, 1), 6)));
    s->in[s->nin++] = x;
    s->out[s->nout++] = named(af_max_pool(r, k, NULL, NULL), "features");
}

/* Causal 2-head self-attention on [1, 4, 8] with baked projections, then layer norm. */
static void attention(mil_sample *s) {
    af_graph *g = s->g;
    af_tensor *x = af_input(g, "tokens", AF_F32, AF_SHAPE(1, 4, 8));
    af_tensor *a = af_mha(x, 2, konst(g, "wq", AF_SHAPE(8, 8), 7), konst(g, "wk", AF_SHAPE(8, 8), 8),
                          konst(g, "wv", AF_SHAPE(8, 8), 9), konst(g, "wo", AF_SHAPE(8, 8), 10), NULL, NULL, NULL, NULL, 1);
    s->in[s->nin++] = x;
    s->out[s->nout++] = named(af_layer_norm(af_add(x, a), NULL, NULL, 1e-5f), "hidden");
}

af_status mil_llama_kernel(const char *kernel, const lk_shape *shape, mil_sample *s) {
    if (!s || !shape) return ir_fail(AF_ERR_INVALID, "mil_llama_kernel: NULL argument");
    memset(s, 0, sizeof *s);
    int k = lk_parse(kernel);
    if (k < 0) {
        char names[200] = "";
        for (int i = 0; i < LK_COUNT; i++) { strcat(names, i ? ", " : ""); strcat(names, lk_names[i]); }
        return ir_fail(AF_ERR_INVALID, "unknown llama kernel '%s'; use one of %s", kernel ? kernel : "(null)", names);
    }
    if (!(s->g = af_graph_new())) return ir_fail(AF_ERR_NOMEM, "out of memory");
    lk_program p;
    af_status st = lk_build(s->g, (lk_kind)k, shape, AF_F16, &p);
    if (st) {
        af_graph_free(s->g);
        memset(s, 0, sizeof *s);
        return st;
    }
    s->nin = p.nin;
    s->nout = p.nout;
    memcpy(s->in, p.in, sizeof(af_tensor *) * (size_t)p.nin);
    memcpy(s->out, p.out, sizeof(af_tensor *) * (size_t)p.nout);
    return AF_OK;
}

af_status mil_sample_build(const char *name, mil_sample *s) {
    if (!s) return ir_fail(AF_ERR_INVALID, "mil_sample_build: s is NULL");
    memset(s, 0, sizeof *s);
    int k = 0;
    while (mil_sample_names[k] && (!name || strcmp(mil_sample_names[k], name))) k++;
    if (!mil_sample_names[k])
        return ir_fail(AF_ERR_INVALID, "unknown built-in program '%s'; use mlp-step, conv, attention or llama-<kernel> (fwdAttn, "
                                       "fwdFFN, ffnBwd, sdpaBwd1, sdpaBwd2, qkvBwd, clsFwd, clsBwd)", name ? name : "(null)");
    if (k >= FIRST_LLAMA) return mil_llama_kernel(mil_sample_names[k] + 6, &llama_golden, s);
    if (!(s->g = af_graph_new())) return ir_fail(AF_ERR_NOMEM, "out of memory");
    if (k == 0) mlp_step(s);
    else if (k == 1) conv_block(s);
    else attention(s);
    const char *err = af_graph_error(s->g);
    bool ok = !err && s->nout > 0;
    for (int i = 0; i < s->nout; i++) ok &= s->out[i] != NULL;
    if (!ok) {
        af_status st = ir_fail(AF_ERR_INVALID, "building '%s' failed: %s", name, err ? err : af_error_message());
        af_graph_free(s->g);
        memset(s, 0, sizeof *s);
        return st;
    }
    return AF_OK;
}
