/* The built-in MLP and CNN, written against the public API only. */
#include "aneforge.h"
#include "ir/ir.h" /* ir_fail */

#include <math.h>
#include <stdlib.h>

typedef struct {
    int kind; /* 0 mlp, 1 cnn */
    af_shape sample;
    int hidden, classes;
    uint64_t seed;
    float mean, inv_std; /* input standardisation inside the graph; inv_std 0 = off */
} net_ctx;

/* splitmix64: small, seeded, identical on every platform. */
static double uniform(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* PyTorch's default for Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
static float *init(uint64_t *s, int64_t n, int64_t fan_in) {
    float *v = malloc((size_t)n * sizeof *v);
    double b = 1.0 / sqrt((double)fan_in);
    for (int64_t i = 0; v && i < n; i++) v[i] = (float)((2.0 * uniform(s) - 1.0) * b);
    return v;
}

static af_tensor *param(af_graph *g, const char *name, af_shape s, uint64_t *rs, int64_t fan_in) {
    float *v = init(rs, af_shape_count(s), fan_in);
    af_tensor *p = v ? af_parameter(g, name, s, v) : NULL;
    free(v);
    return p;
}

static af_tensor *conv_param(af_graph *g, const char *name, int cout, int cin, uint64_t *rs) {
    float *v = init(rs, (int64_t)cout * cin * 9, (int64_t)cin * 9);
    af_tensor *p = v ? af_conv_param(g, name, cout, cin, 3, 3, v) : NULL;
    free(v);
    return p;
}

static int make_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    net_ctx *c = ctx;
    uint64_t rs = c->seed;
    if (max < 6) return -1;
    if (c->kind == 0) {
        int64_t in = af_shape_count(c->sample);
        p[0] = param(g, "fc1.weight", AF_SHAPE(c->hidden, in), &rs, in);
        p[1] = param(g, "fc1.bias", AF_SHAPE(c->hidden), &rs, in);
        p[2] = param(g, "fc2.weight", AF_SHAPE(c->classes, c->hidden), &rs, c->hidden);
        p[3] = param(g, "fc2.bias", AF_SHAPE(c->classes), &rs, c->hidden);
        return 4;
    }
    int cin = (int)c->sample.dim[0];
    int64_t flat = 32 * (c->sample.dim[1] / 4) * (c->sample.dim[2] / 4);
    p[0] = conv_param(g, "conv1.weight", 16, cin, &rs);
    p[1] = param(g, "conv1.bias", AF_SHAPE(1, 16, 1, 1), &rs, (int64_t)cin * 9);
    p[2] = conv_param(g, "conv2.weight", 32, 16, &rs);
    p[3] = param(g, "conv2.bias", AF_SHAPE(1, 32, 1, 1), &rs, 16 * 9);
    p[4] = param(g, "fc.weight", AF_SHAPE(c->classes, flat), &rs, flat);
    p[5] = param(g, "fc.bias", AF_SHAPE(c->classes), &rs, flat);
    return 6;
}

static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    net_ctx *c = ctx;
    int64_t b = af_tensor_shape(x).dim[0];
    if (c->inv_std != 0.0f) x = af_muls(af_adds(x, -c->mean), c->inv_std);
    if (c->kind == 0) {
        af_tensor *h = af_relu(af_linear(af_reshape(x, AF_SHAPE(b, -1)), w[0], w[1]));
        return af_linear(h, w[2], w[3]);
    }
    int k[2] = { 2, 2 };
    af_tensor *h = af_avg_pool(af_relu(af_add(af_conv2d(x, w[0], 1, 1), w[1])), k, k, NULL);
    h = af_avg_pool(af_relu(af_add(af_conv2d(h, w[2], 1, 1), w[3])), k, k, NULL);
    return af_linear(af_reshape(h, AF_SHAPE(b, -1)), w[4], w[5]);
}

static af_net make(int kind, af_shape sample, int hidden, int classes, uint64_t seed) {
    net_ctx *c = malloc(sizeof *c);
    af_net n = { 0 };
    if (!c) return n;
    *c = (net_ctx){ kind, sample, hidden, classes, seed, 0.0f, 0.0f };
    n.ctx = c;
    n.make_params = make_params;
    n.forward = forward;
    n.sample = sample;
    n.out_dim = classes;
    return n;
}

af_net af_net_mlp(af_shape sample, int hidden, int classes, uint64_t seed) {
    return make(0, sample, hidden > 0 ? hidden : 128, classes, seed);
}

af_net af_net_cnn(af_shape sample, int classes, uint64_t seed) {
    if (sample.rank != 3 || sample.dim[1] % 4 || sample.dim[2] % 4) {
        af_net none = { 0 };
        ir_fail(AF_ERR_SHAPE, "af_net_cnn: the sample must be [C, H, W] with H and W divisible by 4");
        return none;
    }
    return make(1, sample, 0, classes, seed);
}

void af_net_set_input_norm(af_net *net, float mean, float std) {
    if (net && net->ctx && std > 0) {
        net_ctx *c = net->ctx;
        c->mean = mean;
        c->inv_std = 1.0f / std;
    }
}

void af_net_free(af_net *net) {
    if (!net) return;
    free(net->ctx);
    net->ctx = NULL;
}
