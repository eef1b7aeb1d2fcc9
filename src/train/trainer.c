/* The trainer: builds the training programs for its plan, feeds minibatches and the
 * per-step scalars, and keeps (or reads back) the optimizer state. Plan-specific graph
 * construction lives in plans.c; this file is the host side of a step. */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/pool.h"
#include "train/llama_pipeline.h"
#include "train/llama_resident.h"
#include "train/trainer.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

af_train_opts af_train_defaults(void) {
    return (af_train_opts){
        .objective = AF_OBJ_CE, .optimizer = AF_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
        .eps = 1e-8f, .schedule = AF_LR_CONSTANT, .min_lr_ratio = 0.0f, .loss_scale = 1.0f,
        .scale_growth_interval = 1000, .plan = AF_PLAN_HOST, .unroll = 8, .batch = 128, .eval_batch = 500,
    };
}

const char *af_plan_name(af_plan p) {
    static const char *const names[] = { "host", "device", "resident", "unrolled", "pipeline" };
    return (unsigned)p < 5 ? names[p] : "?";
}

/* ------------------------------------------------------------------ schedules */

float tr_lr_at(const af_train_opts *o, int64_t step) {
    if (o->schedule == AF_LR_CONSTANT) return o->lr;
    if (step < o->warmup_steps) return o->lr * (float)(step + 1) / (float)o->warmup_steps;
    int64_t span = o->total_steps - o->warmup_steps;
    double p = span > 0 ? (double)(step - o->warmup_steps) / (double)span : 1.0;
    if (p > 1) p = 1;
    double lo = o->min_lr_ratio;
    return (float)(o->lr * (lo + (1 - lo) * 0.5 * (1 + cos(3.14159265358979323846 * p))));
}

/* Adam's bias correction folded into the fed lr; SGD divides the loss scale out (Adam's
 * m / sqrt(v) cancels it, so dividing there would unscale twice). */
float tr_lr_t(const af_trainer *t, int64_t step) {
    float lr = tr_lr_at(&t->o, step);
    if (t->o.optimizer == AF_OPT_SGD) return lr / t->scale;
    return af_adam_lr_t(lr, t->o.beta1, t->o.beta2, step + 1);
}

/* The factor that brings the programs' moments from the units they were last updated
 * in to the current loss scale's (see trainer.h); 1 unless the scale moved. */
float tr_moment_rescale(const af_trainer *t) { return t->scale / t->moment_unit; }

/* Only a dynamic scale moves: with a static one the programs skip the rescale (a load
 * brings the moments to the scale's units on the host, see trainer_io.c). */
bool tr_rescales_moments(const af_trainer *t) { return t->o.optimizer == AF_OPT_ADAM && t->o.dynamic_loss_scale; }

/* Adam's eps in the programs' moment units (the loss scale's), as the host plan applies
 * it to unscaled moments. In fp16 it is kept at least fp16's smallest subnormal, so it
 * never rounds to 0: m = r = 0 must give a zero step, not 0/0. */
float tr_eps_units(const af_trainer *t) {
    float e = t->o.eps * t->scale;
    return t->fp16 && e < 5.9604645e-08f ? 5.9604645e-08f : e;
}

bool tr_host_moments(const af_trainer *t) { return t->o.plan == AF_PLAN_HOST || t->o.plan == AF_PLAN_PIPELINE; }

int tr_num_metrics(const af_trainer *t) { return t->o.objective == AF_OBJ_CE ? 2 : 1; }

const char *af_metric_source_name(af_metric_source s) {
    static const char *const names[] = { "host_fp32", "graph_fp32", "graph_fp16" };
    return (unsigned)s < 3 ? names[s] : "?";
}

/* After a step that ran at loss scale `ran_at` with (unscaled) loss `loss`: count a skip,
 * warn (the first, every 100th, and AF_SKIP_WARN_CONSECUTIVE in a row that lowering the
 * scale cannot cure, saying why: a loss that is itself inf or nan, or a scale already at
 * 1, is a diverging model, not a scale too large) and move the dynamic scale. */
void tr_after_step(af_trainer *t, bool ok, float ran_at, double loss) {
    if (!ok) {
        t->skipped++;
        t->skipped_consecutive++;
        t->clean_run = 0;
        if (t->skipped == 1 || t->skipped % 100 == 0)
            ir_log(AF_LOG_WARN, "step skipped: non-finite %s (%lld skipped so far, loss scale %g); if this repeats, %s",
                    isfinite(loss) ? "gradients or updated state" : "loss", (long long)t->skipped, (double)ran_at,
                    isfinite(loss) && ran_at > 1.0f ? "lower the loss scale or enable the dynamic loss scale"
                                                    : "lower the learning rate (the loss scale is not the cause)");
        bool can_lower = t->o.dynamic_loss_scale && t->scale > 1.0f;
        t->stuck_skips = can_lower ? 0 : t->stuck_skips + 1;
        if (t->stuck_skips % 100 == AF_SKIP_WARN_CONSECUTIVE) {
            if (t->o.dynamic_loss_scale)
                ir_log(AF_LOG_WARN, "%lld consecutive steps skipped, the dynamic loss scale already at 1: the inf or nan "
                                "does not come from loss scaling; check the data, the learning rate and the model",
                        (long long)t->skipped_consecutive);
            else if (!isfinite(loss))
                ir_log(AF_LOG_WARN, "%lld consecutive steps skipped: the loss itself is %s (not the loss scale %g's doing): "
                                "the model diverged; lower the learning rate (%g) or check the data",
                        (long long)t->skipped_consecutive, isnan(loss) ? "nan" : "inf", (double)ran_at, (double)t->o.lr);
            else if (ran_at <= 1.0f)
                ir_log(AF_LOG_WARN, "%lld consecutive steps skipped at loss scale %g: the gradients overflow without any "
                                "scaling, so the scale is not the cause; the learning rate (%g) is likely too high "
                                "(the model diverges): lower it, or check the data and the model",
                        (long long)t->skipped_consecutive, (double)ran_at, (double)t->o.lr);
            else
                ir_log(AF_LOG_WARN, "%lld consecutive steps skipped: loss scale %g is too large for these gradients; "
                                "lower it (e.g. to %g) or enable the dynamic loss scale",
                        (long long)t->skipped_consecutive, (double)ran_at, (double)(ran_at > 16.0f ? ran_at / 16.0f : 1.0f));
        }
        if (can_lower) t->scale *= 0.5f;
        return;
    }
    t->step++;
    t->skipped_consecutive = t->stuck_skips = 0;
    t->moment_unit = ran_at; /* the programs' moments are now in this scale's units */
    if (t->o.dynamic_loss_scale && ++t->clean_run >= t->o.scale_growth_interval) {
        t->clean_run = 0;
        if (t->scale < 65536.0f) {
            t->scale *= 2.0f;
            tr_guard(t); /* a grown scale may pass the A13 conv weight-gradient ceiling */
        }
    }
}

/* ------------------------------------------------------------------ host optimizer */

/* Any inf or nan has an all-ones exponent; an integer OR-reduction vectorises. */
bool tr_finite(const float *g, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

typedef struct {
    const float *w, *m, *v, *g;
    float *w2, *m2, *v2;
    float b1, b2, lr_t, eps, decay, sgd_a, unscale;
    int sgd;
    atomic_int bad;
} host_opt;

/* 1 when f is inf or nan: an all-ones exponent (integer ops, so loops vectorise). */
static inline uint32_t nonfinite(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/* restrict: the new state never aliases the old, which lets the loop vectorise. Returns
 * nonzero when any new value is inf or nan. */
CPU_VECTOR_CLONES static uint32_t adam_range(int64_t j0, int64_t j1, const float *restrict w, const float *restrict m, const float *restrict v,
                           const float *restrict g, float *restrict w2, float *restrict m2, float *restrict v2, float b1,
                           float b2, float lr_t, float eps, float decay, float unscale) {
    uint32_t bad = 0;
    for (int64_t j = j0; j < j1; j++) {
        float gj = g[j] * unscale;
        float mj = m2[j] = b1 * m[j] + (1.0f - b1) * gj;
        float vj = v2[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
        float wj = w2[j] = w[j] * decay - lr_t * mj / (sqrtf(vj) + eps);
        bad |= nonfinite(mj) | nonfinite(vj) | nonfinite(wj);
    }
    return bad;
}

static void host_opt_range(void *p, int64_t j0, int64_t j1) {
    host_opt *o = p;
    uint32_t bad = 0;
    if (o->sgd) {
        for (int64_t j = j0; j < j1; j++) bad |= nonfinite(o->w2[j] = o->w[j] * o->decay - o->sgd_a * o->g[j]);
    } else {
        bad = adam_range(j0, j1, o->w, o->m, o->v, o->g, o->w2, o->m2, o->v2, o->b1, o->b2, o->lr_t, o->eps, o->decay, o->unscale);
    }
    if (bad) atomic_store(&o->bad, 1); /* chunks run on the pool's threads */
}

/* The fp32 host optimizer on the unscaled gradient (so its moments do not depend on the
 * loss scale), split over the trainer's threads. It writes the new state
 * to t->next; host_commit swaps it in. Returns whether the new state is finite. */
static bool host_update(af_trainer *t, int i, const float *g, int64_t step, float gfactor) {
    int64_t n = t->count[i];
    float lr = tr_lr_at(&t->o, step);
    host_opt o = { t->master[i], t->m[i], t->v[i], g, t->next[i][0], t->next[i][1], t->next[i][2], t->o.beta1,
                   t->o.beta2, 0.0f, t->o.eps, 1.0f - lr * t->o.weight_decay, lr / t->scale * gfactor,
                   gfactor / t->scale, t->o.optimizer == AF_OPT_SGD, 0 }; /* bad: set below (atomic_init) */
    if (!o.sgd) o.lr_t = tr_lr_t(t, step);
    int threads = t->o.compile.threads > 0 ? t->o.compile.threads : cpu_num_cores();
    if (!t->pool && threads > 1) t->pool = cpu_pool_shared(threads); /* NULL: runs inline */
    atomic_init(&o.bad, 0);
    cpu_pool_for(t->pool, n, 32768, host_opt_range, &o);
    t->host_flops += (o.sgd ? 3 : 14) * n;
    return !atomic_load(&o.bad);
}

static void host_commit(af_trainer *t) {
    for (int i = 0; i < t->np; i++) {
        float **cur[3] = { &t->master[i], &t->m[i], &t->v[i] };
        for (int k = 0; k < 3; k++) {
            if (!t->next[i][k]) continue;
            float *old = *cur[k];
            *cur[k] = t->next[i][k];
            t->next[i][k] = old;
        }
    }
}

/* ------------------------------------------------------------------ running programs */

double tr_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tr_phase_seconds(const af_trainer *t, double out[TR_NPHASE]) {
    for (int i = 0; i < TR_NPHASE; i++) out[i] = t ? t->phase_s[i] : 0.0;
}

af_status tr_run(af_trainer *t, af_model *m, const af_buffer *in, af_buffer *out) {
    af_stats before;
    af_model_stats(m, &before);
    af_status st = af_run(m, in, out);
    af_stats after;
    af_model_stats(m, &after);
    t->acc.dispatches += after.dispatches - before.dispatches;
    t->acc.bytes_in += after.bytes_in - before.bytes_in;
    t->acc.bytes_out += after.bytes_out - before.bytes_out;
    t->acc.engine_flops += after.engine_flops - before.engine_flops;
    t->acc.segment_bytes += after.segment_bytes - before.segment_bytes; /* programs cut around bridge ops */
    return st;
}

/* The fed seed factor: dL/dz = (softmax(z) - y) * scale / B for cross-entropy,
 * (z - y) * 2 scale / (B out_dim) for MSE, dL/dloss = scale for a custom loss. */
static float seed_scale(const af_trainer *t) {
    if (t->o.objective == AF_OBJ_CE) return t->scale / (float)t->o.batch;
    if (t->o.objective == AF_OBJ_MSE) return 2.0f * t->scale / (float)(t->o.batch * t->net.out_dim);
    return t->scale;
}

/* Loss and accuracy in fp32 (double sums) on the host from a step's outputs z [B, C]:
 * what seed 000's trainer reports. Accuracy counts rows whose target class has the
 * largest output, as the in-graph count does. */
static void host_metrics(af_trainer *t, const float *z, const float *y, af_step_info *info) {
    int64_t rows = t->o.batch, c = t->net.out_dim;
    double loss = 0;
    int64_t hits = 0;
    for (int64_t b = 0; b < rows; b++) {
        const float *zb = z + b * c, *yb = y + b * c;
        if (t->o.objective == AF_OBJ_MSE) {
            for (int64_t j = 0; j < c; j++) loss += ((double)zb[j] - yb[j]) * ((double)zb[j] - yb[j]);
            continue;
        }
        double mx = zb[0], se = 0, yz = 0, ysum = 0;
        int64_t target = 0;
        for (int64_t j = 1; j < c; j++) mx = zb[j] > mx ? zb[j] : mx;
        for (int64_t j = 0; j < c; j++) {
            se += exp((double)zb[j] - mx);
            yz += (double)yb[j] * zb[j];
            ysum += yb[j];
            if (yb[j] > yb[target]) target = j;
        }
        loss += (log(se) + mx) * ysum - yz;
        hits += zb[target] >= mx;
    }
    info->loss = t->o.objective == AF_OBJ_MSE ? loss / (double)(rows * c) : loss / (double)rows;
    info->accuracy = t->o.objective == AF_OBJ_CE ? (double)hits / (double)rows : 0.0;
    t->host_flops += 5 * rows * c;
}

/* grad += g (the step's batches summed). */
static void add_into(float *restrict sum, const float *restrict g, int64_t n) {
    for (int64_t j = 0; j < n; j++) sum[j] += g[j];
}

/* The factor the host optimizer applies to the (loss-scaled) gradients beyond unscaling:
 * the mean over grad_accum batches, then grad_clip on the global L2 norm. The norm is
 * summed in double; a non-finite norm leaves the factor alone (the update is then not
 * finite and the step is skipped, as without clipping). */
static float grad_factor(af_trainer *t, float *const *g, af_step_info *info) {
    float f = 1.0f / (float)t->o.grad_accum;
    if (t->o.grad_clip <= 0) return f;
    double ss = 0;
    for (int i = 0; i < t->np; i++) {
        const float *gi = g[i];
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < t->count[i]; j++) s += (double)gi[j] * gi[j];
        ss += s;
        t->host_flops += 2 * t->count[i];
    }
    double norm = sqrt(ss) * f / t->scale;
    info->grad_norm = (float)norm;
    if (isfinite(norm) && norm > t->o.grad_clip) f = (float)(f * (t->o.grad_clip / norm));
    return f;
}

/* One batch's forward and backward: the loss (and accuracy) into info, the gradients
 * into t->grad. */
static af_status batch_grads(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    af_buffer *in = t->feed_in, *out = t->feed_out;
    float ls = seed_scale(t), loss_value = 0;
    in[0] = AF_BUF_F32(x, t->x_count);
    in[1] = AF_BUF_F32(y, t->y_count);
    in[2] = AF_BUF_F32(&ls, 1);
    for (int i = 0; i < t->np; i++) in[3 + i] = AF_BUF_F32(t->master[i], t->count[i]);
    /* The first output: the logits (metrics on the host), or a custom loss's value. */
    bool custom = t->o.objective == AF_OBJ_CUSTOM;
    out[0] = custom ? AF_BUF_F32(&loss_value, 1) : AF_BUF_F32(t->logits, t->y_count);
    af_status st;
    double t0 = tr_now_s();
    if (t->pipe) { /* seed 002's kernels: the loss and every gradient */
        if ((st = tr_pipe_grads(t, x, y, &info->loss))) return st;
    } else if (t->fb) { /* one fused program: the first output then every gradient */
        for (int i = 0; i < t->np; i++) out[1 + i] = AF_BUF_F32(t->grad[i], t->count[i]);
        if ((st = tr_run(t, t->fb, in, out))) return st;
    } else { /* the engine's recipe: a forward program and one backward program per param */
        if ((st = tr_run(t, t->fwd, in, out))) return st;
        for (int i = 0; i < t->np; i++) {
            af_buffer go = AF_BUF_F32(t->grad[i], t->count[i]);
            if ((st = tr_run(t, t->bwd[i], in, &go))) return st;
        }
    }
    t->phase_s[TR_PHASE_FWD_BWD] += tr_now_s() - t0;
    if (t->pipe) (void)0; /* its loss is the host's fp32 cross-entropy */
    else if (custom) info->loss = loss_value;
    else host_metrics(t, t->logits, y, info);
    return AF_OK;
}

static af_status step_host_or_device(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    af_status st;
    int nb = t->o.grad_accum;
    float *const *grad = nb > 1 ? t->gsum : t->grad;
    double loss = 0, acc = 0;
    for (int b = 0; b < nb; b++) { /* grad_accum batches: gradients summed into gsum */
        if ((st = batch_grads(t, x + (int64_t)b * t->x_count, y + (int64_t)b * t->y_count, info))) return st;
        loss += info->loss / nb;
        acc += info->accuracy / nb;
        for (int i = 0; nb > 1 && i < t->np; i++) {
            if (b == 0) memcpy(t->gsum[i], t->grad[i], (size_t)t->count[i] * sizeof(float));
            else add_into(t->gsum[i], t->grad[i], t->count[i]);
        }
    }
    info->loss = loss;
    info->accuracy = acc;
    /* The host optimizer finds a non-finite gradient itself (its new state is then not
     * finite): no separate pass over the gradients for it. */
    bool ok = true;
    for (int i = 0; i < t->np && !tr_host_moments(t); i++) ok = ok && tr_finite(t->grad[i], t->count[i]);
    for (int i = 0; i < t->np; i++) t->host_flops += t->count[i] * nb;
    info->lr = tr_lr_at(&t->o, t->step);
    info->loss_scale = t->scale;
    /* The whole new state is computed aside and taken only when all of it is finite. */
    double t2 = tr_now_s();
    float gfactor = tr_host_moments(t) ? grad_factor(t, grad, info) : 1.0f;
    for (int i = 0; ok && i < t->np; i++) {
        if (tr_host_moments(t)) ok = host_update(t, i, grad[i], t->step, gfactor);
        else if ((st = tr_device_update(t, i, t->step, &ok))) return st;
    }
    if (ok) {
        if (tr_host_moments(t)) host_commit(t);
        else tr_device_commit(t);
    }
    t->phase_s[TR_PHASE_OPTIMIZER] += tr_now_s() - t2;
    tr_after_step(t, ok, info->loss_scale, info->loss);
    info->skipped_now = !ok;
    return AF_OK;
}

/* A resident (or shuttled) block of K steps: one dispatch. */
static af_status step_resident(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    int k = t->k, nm = tr_num_metrics(t);
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    af_buffer *in = t->feed_in, *out = t->feed_out;
    memset(in, 0, sizeof *in * (size_t)t->nfeed);
    memset(out, 0, sizeof *out * (size_t)t->nfeed);
    float ls = seed_scale(t), q = tr_moment_rescale(t), eps = tr_eps_units(t), ls_block = t->scale;
    float lr[TR_MAXK], decay[TR_MAXK], metrics[TR_MAXK][2], ok[TR_MAXK];
    int n = 0;
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(x + (size_t)s * t->x_count, t->x_count);
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(y + (size_t)s * t->y_count, t->y_count);
    in[n++] = AF_BUF_F32(&ls, 1);
    /* Entry j: the lr and decay of the block's step after j taken ones (the program
     * picks the entry by the steps it has taken, so skips do not shift them). */
    for (int s = 0; s < k; s++) {
        lr[s] = tr_lr_t(t, t->step + s);
        decay[s] = 1.0f - tr_lr_at(&t->o, t->step + s) * t->o.weight_decay;
    }
    in[n++] = AF_BUF_F32(lr, k);
    if (tr_rescales_moments(t)) in[n++] = AF_BUF_F32(&q, 1);
    if (adam) in[n++] = AF_BUF_F32(&eps, 1);
    if (t->o.weight_decay != 0.0f) in[n++] = AF_BUF_F32(decay, k);
    int m = 0;
    for (int s = 0; s < k; s++)
        for (int j = 0; j < nm; j++) out[m++] = AF_BUF_F32(&metrics[s][j], 1);
    for (int s = 0; s < k; s++) out[m++] = AF_BUF_F32(&ok[s], 1);
    /* Resident state inputs are ignored and their outputs not delivered; shuttled state
     * is fed from the host copies and read back aside. */
    int per_param = adam ? 3 : 1;
    for (int j = 0; !t->state_bound && j < per_param * t->np; j++) {
        int i = j % t->np, kind = j / t->np;
        float *host = kind == 0 ? t->master[i] : kind == 1 ? t->m[i] : t->v[i];
        in[t->state_in[0] + j] = AF_BUF_F32(host, t->count[i]);
        out[t->state_out0 + j] = AF_BUF_F32(t->upd_out[i] + kind * t->count[i], t->count[i]);
    }
    double t0 = tr_now_s();
    af_status st = tr_run(t, t->res, in, out);
    t->phase_s[TR_PHASE_FWD_BWD] += tr_now_s() - t0;
    if (st) return st;
    for (int j = 0; !t->state_bound && j < per_param * t->np; j++) { /* an array move, not tensor math */
        int i = j % t->np, kind = j / t->np;
        float *host = kind == 0 ? t->master[i] : kind == 1 ? t->m[i] : t->v[i];
        memcpy(host, t->upd_out[i] + kind * t->count[i], (size_t)t->count[i] * sizeof(float));
    }
    info->loss = 0;
    info->accuracy = 0;
    info->skipped_now = 0;
    info->loss_scale = t->scale;
    for (int s = 0; s < k; s++) {
        info->loss += metrics[s][0] / k;
        if (nm > 1) info->accuracy += metrics[s][1] / (float)t->o.batch / k;
        info->skipped_now += ok[s] != 1.0f;
        tr_after_step(t, ok[s] == 1.0f, ls_block, metrics[s][0]);
    }
    info->lr = tr_lr_at(&t->o, t->step > 0 ? t->step - 1 : 0); /* the last step taken */
    return AF_OK;
}

/* The llama resident plan's step: one dispatch, the program's loss. */
static af_status step_llama_resident(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    float loss = 0, ran_at = t->scale;
    bool ok = false;
    af_status st = tr_lres_step(t, x, y, &loss, &ok);
    if (st) return st;
    info->loss = loss;
    info->loss_scale = ran_at;
    info->skipped_now = !ok;
    tr_after_step(t, ok, ran_at, loss);
    info->lr = tr_lr_at(&t->o, t->step > 0 ? t->step - 1 : 0);
    return AF_OK;
}

af_status af_trainer_step(af_trainer *t, const float *x, const float *target, af_step_info *info) {
    af_step_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!t) return ir_fail(AF_ERR_INVALID, "af_trainer_step: trainer is NULL");
    if (!x || !target) return ir_fail(AF_ERR_INVALID, "af_trainer_step: x or target is NULL");
    t->acc = (af_stats){ 0 };
    t->host_flops = 0;
    af_status st = t->lres ? step_llama_resident(t, x, target, info)
                   : t->res ? step_resident(t, x, target, info) : step_host_or_device(t, x, target, info);
    info->step = t->step;
    info->skipped = t->skipped;
    info->skipped_consecutive = t->skipped_consecutive;
    info->metric_source = t->metric_source;
    info->stats = t->acc;
    info->stats.host_flops = t->host_flops;
    info->stats.compiles = t->compiles_pending;
    t->compiles_pending = 0;
    t->total.dispatches += t->acc.dispatches;
    t->total.bytes_in += t->acc.bytes_in;
    t->total.bytes_out += t->acc.bytes_out;
    t->total.engine_flops += t->acc.engine_flops;
    t->total.segment_bytes += t->acc.segment_bytes;
    t->total.host_flops += t->host_flops;
    return st;
}

int af_trainer_steps_per_call(const af_trainer *t) { return t ? t->k : 0; }
int af_trainer_batches_per_call(const af_trainer *t) { return t ? t->k * t->o.grad_accum : 0; }
int af_trainer_num_params(const af_trainer *t) { return t ? t->np : 0; }
af_family_id af_trainer_family(const af_trainer *t) { return t ? t->o.compile.family : AF_FAMILY_DEFAULT; }
af_tensor *af_trainer_param(const af_trainer *t, int i) { return t && i >= 0 && i < t->np ? t->p[i] : NULL; }

void af_trainer_stats(const af_trainer *t, af_stats *out) {
    if (out) *out = t ? t->total : (af_stats){ 0 };
}

af_status af_trainer_read_param(af_trainer *t, int i, float *dst) {
    if (!t || i < 0 || i >= t->np || !dst) return ir_fail(AF_ERR_INVALID, "af_trainer_read_param: bad trainer, index %d or NULL dst", i);
    if (t->lres) return tr_lres_read_param(t, i, dst);
    if (t->state_bound) return af_model_read_state(t->res, t->state_in[i], dst);
    memcpy(dst, t->master[i], (size_t)t->count[i] * sizeof(float));
    return AF_OK;
}

af_status af_trainer_predict(af_trainer *t, int64_t n, const float *x, float *out) {
    if (!t || !x || !out || n < 0) return ir_fail(AF_ERR_INVALID, "af_trainer_predict: bad arguments");
    af_status st;
    if (t->pipe) return tr_pipe_predict(t, n, x, out);
    if (t->lres) return tr_lres_predict(t, n, x, out);
    if (!t->eval && (st = tr_build_eval(t))) return st;
    int64_t eb = t->o.eval_batch, xs = af_shape_count(t->net.sample), od = t->net.out_dim;
    for (int i = 0; i < t->np; i++)
        if ((st = af_trainer_read_param(t, i, t->grad[i]))) return st; /* grad buffers as scratch */
    af_buffer *in = t->feed_in;
    for (int i = 0; i < t->np; i++) in[1 + i] = AF_BUF_F32(t->grad[i], t->count[i]);
    for (int64_t b = 0; b < n; b += eb) {
        int64_t m = n - b < eb ? n - b : eb;
        const float *xb = x + b * xs;
        float *ob = out + b * od;
        if (m < eb) { /* pad the last chunk */
            memset(t->eval_x, 0, (size_t)(eb * xs) * sizeof(float));
            memcpy(t->eval_x, xb, (size_t)(m * xs) * sizeof(float));
            xb = t->eval_x;
            ob = t->eval_out;
        }
        in[0] = AF_BUF_F32(xb, eb * xs);
        af_buffer o = AF_BUF_F32(ob, eb * od);
        if ((st = tr_run(t, t->eval, in, &o))) return st;
        if (m < eb) memcpy(out + b * od, t->eval_out, (size_t)(m * od) * sizeof(float));
    }
    return AF_OK;
}
