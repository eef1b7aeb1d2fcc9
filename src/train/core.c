/* What every plan shares: schedules, the loss scale's bookkeeping, running and
 * compiling programs (core.h). */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_features.h"
#include "cpu/pool.h"
#include "sim/guards.h"
#include "train/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
 * in to the current loss scale's (see core.h); 1 unless the scale moved. */
float tr_moment_rescale(const af_trainer *t) { return t->scale / t->moment_unit; }

/* Only a dynamic scale moves: with a static one the programs skip the rescale (a load
 * brings the moments to the scale's units on the host, see trainer_io.c). */
bool tr_rescales_moments(const af_trainer *t) { return t->o.optimizer == AF_OPT_ADAM && t->o.dynamic_loss_scale; }

/* Adam's eps in the programs' moment units (the loss scale's), as the host optimizer
 * applies it to unscaled moments. In fp16 it is kept at least fp16's smallest subnormal,
 * so it never rounds to 0: m = r = 0 must give a zero step, not 0/0. */
float tr_eps_units(const af_trainer *t) {
    float e = t->o.eps * t->scale;
    return t->fp16 && e < 5.9604645e-08f ? 5.9604645e-08f : e;
}

bool tr_host_moments(const af_trainer *t) { return (t->plan->caps & TR_HOST_OPTIMIZER) != 0; }

void tr_forget_state_bounds(af_trainer *t) {
    for (int i = 0; i < t->np; i++) t->bound[i] = (tr_state_bound){ INFINITY, INFINITY, INFINITY };
}

int tr_num_metrics(const af_trainer *t) { return t->o.objective == AF_OBJ_CE ? 2 : 1; }

float tr_seed_scale(const af_trainer *t) {
    if (t->o.objective == AF_OBJ_CE) return t->scale / (float)t->o.batch;
    if (t->o.objective == AF_OBJ_MSE) return 2.0f * t->scale / (float)(t->o.batch * t->net.out_dim);
    return t->scale;
}

af_dtype tr_io_dtype(const af_trainer *t) { return t->engine ? AF_F16 : AF_F32; }

void *tr_zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    return p;
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

struct cpu_pool *tr_pool(af_trainer *t) {
    int threads = t->o.compile.threads > 0 ? t->o.compile.threads : cpu_num_cores();
    if (!t->pool && threads > 1) t->pool = cpu_pool_shared(threads); /* NULL: runs inline */
    return t->pool;
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

af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out) {
    double t0 = tr_now_s();
    af_model *m = af_compile(t->g, nin, in, nout, out, &t->o.compile);
    t->phase_s[TR_PHASE_COMPILE] += tr_now_s() - t0;
    if (m) {
        t->compiles_pending++;
        t->total.compiles++;
    }
    return m;
}

void tr_guard(af_trainer *t) {
    /* Warns (never caps) when an A13-class conv weight gradient could saturate. */
    if (t->engine) ane_guard_conv_loss_scale(t->o.compile.family, t->np, t->p, t->scale);
}
