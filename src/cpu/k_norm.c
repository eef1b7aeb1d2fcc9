/* Normalisations. Statistics accumulate in double; every norm is
 * y = (x - mean) * rsqrt(var + eps) * gamma + beta over its group (rms_norm: no mean, no beta).
 * Groups are independent, so large tensors split them across the pool. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

#include <math.h>

#define PAR_MIN 16384 /* elements per task below which threading costs more than it saves */

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
    if (stride == 1 && per == 1) { /* the last-axis norms: contiguous, one gamma per element */
        if (beta)
            for (int64_t k = 0; k < n; k++) y[k] = (x[k] - m) * r * gamma[k] + beta[k];
        else
            for (int64_t k = 0; k < n; k++) y[k] = (x[k] - m) * r * gamma[k];
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        float v = (x[k * stride] - m) * r * gamma[k / per];
        y[k * stride] = beta ? v + beta[k / per] : v;
    }
}

typedef struct {
    const cpu_call *c;
    const float *gamma, *beta;
    int64_t n, ch, sp, groups; /* batch, channels, spatial size, groups (group_norm) */
} norm_ctx;

/* Tasks are rows (rms/layer norm), (batch, position) pairs (channel_layer_norm) or
 * (batch, group) pairs (group_norm). */
static void norm_range(void *p, int64_t t0, int64_t t1) {
    const norm_ctx *s = p;
    const cpu_call *c = s->c;
    const af_tensor *t = c->t;
    const float *x = c->in[0];
    float eps = t->a.eps;
    for (int64_t i = t0; i < t1; i++) {
        if (t->op == IR_OP_RMS_NORM || t->op == IR_OP_LAYER_NORM) {
            int64_t d = s->ch;
            norm_group(x + i * d, c->out + i * d, d, 1, 1, s->gamma, s->beta, eps, t->op == IR_OP_LAYER_NORM);
        } else if (t->op == IR_OP_CHANNEL_LAYER_NORM) {
            int64_t b = i / s->sp, sp = i % s->sp, off = b * s->ch * s->sp + sp;
            norm_group(x + off, c->out + off, s->ch, s->sp, 1, s->gamma, s->beta, eps, true);
        } else {
            int64_t b = i / s->groups, gi = i % s->groups, cg = s->ch / s->groups;
            int64_t off = (b * s->ch + gi * cg) * s->sp;
            norm_group(x + off, c->out + off, cg * s->sp, 1, s->sp, s->gamma + gi * cg, s->beta + gi * cg, eps, true);
        }
    }
}

void cpu_k_norm(const cpu_call *c) {
    const af_tensor *t = c->t;
    switch (t->op) { /* the four the code below tells apart */
    case IR_OP_RMS_NORM: case IR_OP_LAYER_NORM: case IR_OP_CHANNEL_LAYER_NORM: case IR_OP_GROUP_NORM: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, NORM, id)
#include "ir/ops.def"
#undef X
        return; /* another kind's op: never dispatched here */
    }
    af_shape xs = t->shape;
    norm_ctx s = { .c = c, .gamma = c->in[1], .beta = t->op == IR_OP_RMS_NORM ? NULL : c->in[2] };
    int64_t total = af_shape_count(xs), tasks;
    if (t->op == IR_OP_RMS_NORM || t->op == IR_OP_LAYER_NORM) {
        s.ch = xs.dim[xs.rank - 1];
        tasks = total / s.ch;
    } else {
        s.n = xs.dim[0];
        s.ch = xs.dim[1];
        s.sp = total / (s.n * s.ch);
        s.groups = t->op == IR_OP_GROUP_NORM ? t->a.groups : 1;
        tasks = t->op == IR_OP_CHANNEL_LAYER_NORM ? s.n * s.sp : s.n * s.groups;
    }
    if (tasks <= 0) return;
    int64_t per_task = total / tasks;
    cpu_pool_for(c->pool, tasks, per_task >= PAR_MIN ? 1 : PAR_MIN / per_task + 1, norm_range, &s);
}
