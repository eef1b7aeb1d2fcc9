/* Normalisations. Statistics accumulate in double; every norm is
 * y = (x - mean) * rsqrt(var + eps) * gamma + beta over its group (rms_norm: no mean, no beta).
 * Groups are independent, so large tensors split them across the pool. */
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "ir/op_cases.h"
#include "cpu/norm_bwd.h"

#include <math.h>

#define PAR_MIN 16384 /* elements per task below which threading costs more than it saves */

/* Sum and sum of squares of n contiguous values in double over eight partial sums: one
 * running sum waits on the adder's latency each step, eight vectorise (the llama step's 13
 * RMSNorms on [1024, 288]: 4.1 ms down to 3.1, one thread). */
CPU_VECTOR_CLONES static void sums_wide(const float *x, int64_t n, double *sum, double *sq) {
    double s[8] = { 0 }, q[8] = { 0 };
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++) {
            double v = x[k + l];
            s[l] += v;
            q[l] += v * v;
        }
    double ts = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    double tq = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
    for (; k < n; k++) {
        double v = x[k];
        ts += v;
        tq += v * v;
    }
    *sum = ts;
    *sq = tq;
}

/* Normalises `n` values spaced `stride` apart; gamma/beta indexed by k / per. */
static void norm_group(const float *x, float *y, int64_t n, int64_t stride, int64_t per, const float *gamma,
                       const float *beta, float eps, bool center) {
    double sum = 0.0, sq = 0.0;
    if (stride == 1) {
        sums_wide(x, n, &sum, &sq);
    } else {
        for (int64_t k = 0; k < n; k++) {
            double v = x[k * stride];
            sum += v;
            sq += v * v;
        }
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

/* ------------------------------------------------------------------ RMSNorm backward, channel-first */

enum { RB_CHUNK = 256 }; /* positions per statistics task: its accumulators stay in L1 */

typedef struct {
    int64_t B, C, S;
    float eps;
    const float *x, *dy, *w, *resid;
    float *out, *dw, *r, *k; /* r, k: [B, S] */
} rms_bwd_ctx;

/* Position chunks (tasks never straddle images): r and k per position, summing over
 * the channels one row of positions at a time, in double. */
CPU_VECTOR_CLONES static void rms_bwd_stats(void *ctx, int64_t t0, int64_t t1) {
    const rms_bwd_ctx *s = ctx;
    int64_t per_img = (s->S + RB_CHUNK - 1) / RB_CHUNK;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / per_img, p0 = t % per_img * RB_CHUNK, n = s->S - p0 < RB_CHUNK ? s->S - p0 : RB_CHUNK;
        double ss[RB_CHUNK] = { 0 }, dot[RB_CHUNK] = { 0 };
        for (int64_t c = 0; c < s->C; c++) {
            const float *x = s->x + (b * s->C + c) * s->S + p0, *dy = s->dy + (b * s->C + c) * s->S + p0;
            const double wc = s->w[c];
#pragma omp simd
            for (int64_t j = 0; j < n; j++) {
                ss[j] += (double)x[j] * x[j];
                dot[j] += (double)dy[j] * x[j] * wc;
            }
        }
        float *r = s->r + b * s->S + p0, *k = s->k + b * s->S + p0;
        for (int64_t j = 0; j < n; j++) {
            double rj = 1.0 / sqrt(ss[j] / (double)s->C + s->eps);
            r[j] = (float)rj;
            k[j] = (float)(rj * rj * rj * dot[j] / (double)s->C);
        }
    }
}

/* Channels c0..c1: their dx rows and dw entries. */
CPU_VECTOR_CLONES static void rms_bwd_rows(void *ctx, int64_t c0, int64_t c1) {
    const rms_bwd_ctx *s = ctx;
    const int64_t S = s->S;
    for (int64_t c = c0; c < c1; c++) {
        const float wc = s->w[c];
        double acc = 0;
        for (int64_t b = 0; b < s->B; b++) {
            int64_t off = (b * s->C + c) * S;
            const float *restrict x = s->x + off, *restrict dy = s->dy + off, *restrict r = s->r + b * S, *restrict k = s->k + b * S;
            const float *res = s->resid ? s->resid + off : NULL; /* may be out itself */
            float *out = s->out + off;
            float part = 0;
            if (res) {
#pragma omp simd reduction(+ : part)
                for (int64_t j = 0; j < S; j++) {
                    float g = dy[j] * r[j];
                    out[j] = res[j] + (g * wc - k[j] * x[j]);
                    part += g * x[j];
                }
            } else {
#pragma omp simd reduction(+ : part)
                for (int64_t j = 0; j < S; j++) {
                    float g = dy[j] * r[j];
                    out[j] = g * wc - k[j] * x[j];
                    part += g * x[j];
                }
            }
            acc += part;
        }
        s->dw[c] += (float)acc;
    }
}

/* Two passes, each split over the pool: statistics per position (tasks: position
 * chunks), then dx and dw per channel (tasks: channels), so no task writes another's. */
void cpu_rms_norm_bwd_cf(cpu_pool *pool, int64_t B, int64_t C, int64_t S, float eps, const float *x, const float *dy,
                         const float *w, const float *resid, float *out, float *dw, float *scratch) {
    rms_bwd_ctx s = { B, C, S, eps, x, dy, w, resid, out, dw, scratch, scratch + B * S };
    int64_t tasks = B * ((S + RB_CHUNK - 1) / RB_CHUNK), work = B * C * S;
    if (work <= 0) return;
    bool split = work >= 4 * PAR_MIN;
    cpu_pool_for(pool, tasks, split ? 1 : tasks, rms_bwd_stats, &s);
    cpu_pool_for(pool, C, split ? 1 : C, rms_bwd_rows, &s);
}
