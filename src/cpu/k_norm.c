/* Normalisations. Statistics accumulate in double; every norm is
 * y = (x - mean) * rsqrt(var + eps) * gamma + beta over its group (rms_norm: no mean, no beta). */
#include "cpu/kernels.h"

#include <math.h>

/* Normalises `n` values spaced `stride` apart; gamma/beta indexed by k / per. */
static void norm_group(const float *x, float *y, int64_t n, int64_t stride, int64_t per, const float *gamma,
                       const float *beta, float eps, bool center) {
    double sum = 0.0, sq = 0.0;
    for (int64_t k = 0; k < n; k++) {
        double v = x[k * stride];
        sum += v;
        sq += v * v;
    }
    double mean = center ? sum / (double)n : 0.0;
    double var = sq / (double)n - mean * mean;
    if (var < 0) var = 0;
    float m = (float)mean, r = (float)(1.0 / sqrt(var + eps));
    for (int64_t k = 0; k < n; k++) {
        float v = (x[k * stride] - m) * r * gamma[k / per];
        y[k * stride] = beta ? v + beta[k / per] : v;
    }
}

void cpu_k_norm(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape xs = t->shape;
    const float *x = c->in[0], *gamma = c->in[1], *beta = t->op == AF_OP_RMS_NORM ? NULL : c->in[2];
    float eps = t->a.eps;
    if (t->op == AF_OP_RMS_NORM || t->op == AF_OP_LAYER_NORM) {
        int64_t d = xs.dim[xs.rank - 1], rows = af_shape_count(xs) / d;
        for (int64_t r = 0; r < rows; r++)
            norm_group(x + r * d, c->out + r * d, d, 1, 1, gamma, beta, eps, t->op == AF_OP_LAYER_NORM);
        return;
    }
    int64_t n = xs.dim[0], ch = xs.dim[1], sp = af_shape_count(xs) / (n * ch);
    if (t->op == AF_OP_CHANNEL_LAYER_NORM) {
        for (int64_t b = 0; b < n; b++)
            for (int64_t s = 0; s < sp; s++)
                norm_group(x + b * ch * sp + s, c->out + b * ch * sp + s, ch, sp, 1, gamma, beta, eps, true);
        return;
    }
    int64_t g = t->a.groups, cg = ch / g;
    for (int64_t b = 0; b < n; b++)
        for (int64_t gi = 0; gi < g; gi++) {
            int64_t off = (b * ch + gi * cg) * sp;
            norm_group(x + off, c->out + off, cg * sp, 1, sp, gamma + gi * cg, beta + gi * cg, eps, true);
        }
}
