/* The trainer: builds the training programs for its plan, feeds minibatches and the
 * per-step scalars, and keeps (or reads back) the optimizer state. Plan-specific graph
 * construction lives in plans.c; this file is the host side of a step. */
#include "cpu/pool.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

af_train_opts af_train_defaults(void) {
    return (af_train_opts){
        .objective = AF_OBJ_CE, .optimizer = AF_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
        .eps = 1e-8f, .schedule = AF_LR_CONSTANT, .min_lr_ratio = 0.0f, .loss_scale = 1.0f,
        .scale_growth_interval = 1000, .plan = AF_PLAN_HOST, .unroll = 8, .batch = 128, .eval_batch = 500,
    };
}

const char *af_plan_name(af_plan p) {
    static const char *const names[] = { "host", "device", "resident", "unrolled" };
    return (unsigned)p < 4 ? names[p] : "?";
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
    double k = (double)(step + 1);
    return (float)(lr * sqrt(1.0 - pow(t->o.beta2, k)) / (1.0 - pow(t->o.beta1, k)));
}

/* The factor the update programs apply to a gradient before Adam's moments: in fp16 it
 * turns loss-scaled gradients into fixed moment units (the host folds the current loss
 * scale in, so a dynamic scale needs no recompile); in fp32 it is exactly 1. */
float tr_grad_mult(const af_trainer *t) {
    return t->fp16 && t->o.optimizer == AF_OPT_ADAM ? TR_MOMENT_UNIT / t->scale : 1.0f;
}

/* After a step: count a skip (warn on the first and every 100th) and move the dynamic scale. */
static void after_step(af_trainer *t, bool ok) {
    if (!ok) {
        t->skipped++;
        t->clean_run = 0;
        if (t->skipped == 1 || t->skipped % 100 == 0)
            fprintf(stderr, "aneforge: step skipped: non-finite gradients (%lld skipped so far, loss scale %g); "
                            "if this repeats, lower the loss scale or enable the dynamic loss scale\n",
                    (long long)t->skipped, (double)t->scale);
        if (t->o.dynamic_loss_scale && t->scale > 1.0f) t->scale *= 0.5f;
        return;
    }
    t->step++;
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
static bool finite_all(const float *g, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

typedef struct {
    float *w, *m, *v;
    const float *g;
    float b1, b2, lr_t, eps, decay, sgd_a;
    int sgd;
} host_opt;

static void host_opt_range(void *p, int64_t j0, int64_t j1) {
    const host_opt *o = p;
    float *w = o->w, *m = o->m, *v = o->v;
    const float *g = o->g;
    if (o->sgd) {
        for (int64_t j = j0; j < j1; j++) w[j] = w[j] * o->decay - o->sgd_a * g[j];
        return;
    }
    for (int64_t j = j0; j < j1; j++) {
        m[j] = o->b1 * m[j] + (1.0f - o->b1) * g[j];
        v[j] = o->b2 * v[j] + (1.0f - o->b2) * g[j] * g[j];
        w[j] = w[j] * o->decay - o->lr_t * m[j] / (sqrtf(v[j]) + o->eps);
    }
}

/* The fp32 host optimizer, split over the trainer's threads. */
static void host_update(af_trainer *t, int i, const float *g, int64_t step) {
    int64_t n = t->count[i];
    float lr = tr_lr_at(&t->o, step);
    host_opt o = { t->master[i], t->m[i], t->v[i], g, t->o.beta1, t->o.beta2, 0.0f, t->o.eps, /* fp32 on the host */
                   1.0f - lr * t->o.weight_decay, lr / t->scale, t->o.optimizer == AF_OPT_SGD };
    if (!o.sgd) o.lr_t = tr_lr_t(t, step);
    int threads = t->o.compile.threads > 0 ? t->o.compile.threads : cpu_num_cores();
    if (!t->pool && threads > 1) t->pool = cpu_pool_new(threads); /* NULL: runs inline */
    cpu_pool_for(t->pool, n, 32768, host_opt_range, &o);
    t->host_flops += (o.sgd ? 3 : 13) * n;
}

/* ------------------------------------------------------------------ running programs */

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
    return st;
}

/* Feeds the common step inputs: batch, targets and the seed scale. */
static void fill_step_inputs(af_trainer *t, af_buffer *in, const float *x, const float *y, float *ls) {
    *ls = t->o.objective == AF_OBJ_CE ? t->scale / (float)t->o.batch : t->scale;
    in[0] = AF_BUF_F32(x, t->x_count);
    in[1] = AF_BUF_F32(y, t->y_count);
    in[2] = AF_BUF_F32(ls, 1);
}

static af_status step_host_or_device(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    af_buffer in[3 + TR_MAXP], out[2 + TR_MAXP];
    float ls, metrics[2] = { 0, 0 };
    fill_step_inputs(t, in, x, y, &ls);
    for (int i = 0; i < t->np; i++) in[3 + i] = AF_BUF_F32(t->master[i], t->count[i]);
    int nm = t->o.objective == AF_OBJ_CE ? 2 : 1;
    af_status st;
    if (t->fb) { /* one fused program: metrics then every gradient */
        for (int k = 0; k < nm; k++) out[k] = AF_BUF_F32(&metrics[k], 1);
        for (int i = 0; i < t->np; i++) out[nm + i] = AF_BUF_F32(t->grad[i], t->count[i]);
        if ((st = tr_run(t, t->fb, in, out))) return st;
    } else { /* the engine's recipe: a metrics program and one backward program per param */
        for (int k = 0; k < nm; k++) out[k] = AF_BUF_F32(&metrics[k], 1);
        if ((st = tr_run(t, t->fwd, in, out))) return st;
        for (int i = 0; i < t->np; i++) {
            af_buffer go = AF_BUF_F32(t->grad[i], t->count[i]);
            if ((st = tr_run(t, t->bwd[i], in, &go))) return st;
        }
    }
    info->loss = metrics[0];
    info->accuracy = metrics[1] / (float)t->o.batch;
    bool ok = true;
    for (int i = 0; i < t->np; i++) ok = ok && finite_all(t->grad[i], t->count[i]);
    for (int i = 0; i < t->np; i++) t->host_flops += t->count[i];
    info->lr = tr_lr_at(&t->o, t->step);
    info->loss_scale = t->scale;
    if (ok) {
        for (int i = 0; i < t->np; i++) {
            if (t->o.plan == AF_PLAN_HOST) {
                host_update(t, i, t->grad[i], t->step);
                continue;
            }
            if ((st = tr_device_update(t, i, t->step))) return st;
        }
    }
    after_step(t, ok);
    info->skipped_now = !ok;
    return AF_OK;
}

static af_status step_resident(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    int k = t->k, nm = t->o.objective == AF_OBJ_CE ? 2 : 1;
    af_buffer in[TR_MAXIO] = { 0 }, out[TR_MAXIO] = { 0 };
    float ls = t->o.objective == AF_OBJ_CE ? t->scale / (float)t->o.batch : t->scale;
    float lr[TR_MAXK], decay[TR_MAXK], metrics[TR_MAXK][2], ok[TR_MAXK], gm = tr_grad_mult(t);
    int n = 0;
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(x + (size_t)s * t->x_count, t->x_count);
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(y + (size_t)s * t->y_count, t->y_count);
    in[n++] = AF_BUF_F32(&ls, 1);
    /* lr for step s assumes the steps before it in this block are not skipped. */
    for (int s = 0; s < k; s++) {
        lr[s] = tr_lr_t(t, t->step + s);
        decay[s] = 1.0f - tr_lr_at(&t->o, t->step + s) * t->o.weight_decay;
        in[n++] = AF_BUF_F32(&lr[s], 1);
    }
    in[n++] = AF_BUF_F32(&gm, 1);
    if (t->o.weight_decay != 0.0f)
        for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(&decay[s], 1);
    /* state inputs are resident: their buffers are ignored */
    int m = 0;
    for (int s = 0; s < k; s++)
        for (int j = 0; j < nm; j++) out[m++] = AF_BUF_F32(&metrics[s][j], 1);
    for (int s = 0; s < k; s++) out[m++] = AF_BUF_F32(&ok[s], 1);
    af_status st = tr_run(t, t->res, in, out);
    if (st) return st;
    info->loss = 0;
    info->accuracy = 0;
    info->skipped_now = 0;
    info->lr = tr_lr_at(&t->o, t->step + k - 1);
    info->loss_scale = t->scale;
    for (int s = 0; s < k; s++) {
        info->loss += metrics[s][0] / k;
        if (nm > 1) info->accuracy += metrics[s][1] / (float)t->o.batch / k;
        info->skipped_now += ok[s] != 1.0f;
        after_step(t, ok[s] == 1.0f);
    }
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
    af_status st = t->res ? step_resident(t, x, target, info) : step_host_or_device(t, x, target, info);
    info->step = t->step;
    info->skipped = t->skipped;
    info->stats = t->acc;
    info->stats.host_flops = t->host_flops;
    info->stats.compiles = t->compiles_pending;
    t->compiles_pending = 0;
    t->total.dispatches += t->acc.dispatches;
    t->total.bytes_in += t->acc.bytes_in;
    t->total.bytes_out += t->acc.bytes_out;
    t->total.engine_flops += t->acc.engine_flops;
    t->total.host_flops += t->host_flops;
    return st;
}

int af_trainer_steps_per_call(const af_trainer *t) { return t ? t->k : 0; }
int af_trainer_num_params(const af_trainer *t) { return t ? t->np : 0; }
af_tensor *af_trainer_param(const af_trainer *t, int i) { return t && i >= 0 && i < t->np ? t->p[i] : NULL; }

void af_trainer_stats(const af_trainer *t, af_stats *out) {
    if (out) *out = t ? t->total : (af_stats){ 0 };
}

af_status af_trainer_read_param(af_trainer *t, int i, float *dst) {
    if (!t || i < 0 || i >= t->np || !dst) return ir_fail(AF_ERR_INVALID, "af_trainer_read_param: bad trainer, index %d or NULL dst", i);
    if (t->res) return af_model_read_state(t->res, t->state_in[i], dst);
    memcpy(dst, t->master[i], (size_t)t->count[i] * sizeof(float));
    return AF_OK;
}

af_status af_trainer_predict(af_trainer *t, int64_t n, const float *x, float *out) {
    if (!t || !x || !out || n < 0) return ir_fail(AF_ERR_INVALID, "af_trainer_predict: bad arguments");
    af_status st;
    if (!t->eval && (st = tr_build_eval(t))) return st;
    int64_t eb = t->o.eval_batch, xs = af_shape_count(t->net.sample), od = t->net.out_dim;
    for (int i = 0; i < t->np; i++)
        if ((st = af_trainer_read_param(t, i, t->grad[i]))) return st; /* grad buffers as scratch */
    af_buffer in[1 + TR_MAXP];
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
