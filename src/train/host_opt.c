/* The host optimizer (host_opt.h). */
#define _DEFAULT_SOURCE /* madvise */
#include "cpu/cpu_features.h"
#include "cpu/pool.h"
#include "train/dist.h"
#include "train/host_opt.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

typedef struct {
    float *w, *m, *v;
    const float *g;
    float b1, b2, lr_t, eps, decay, sgd_a, unscale;
    int sgd;
    bool store; /* false: only find whether the new state would be finite */
    atomic_int bad;
} host_opt;

/* 1 when f is inf or nan: an all-ones exponent (integer ops, so loops vectorise). */
static inline uint32_t nonfinite(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/* Adam's new state of element j. The check and the update below both expand this one
 * definition, so the check predicts exactly what the update would store. */
#define ADAM_ELEM(j)                                                        \
    float gj = g[j] * unscale;                                              \
    float mj = b1 * m[j] + (1.0f - b1) * gj;                                \
    float vj = b2 * v[j] + (1.0f - b2) * gj * gj;                           \
    float wj = w[j] * decay - lr_t * mj / (sqrtf(vj) + eps)

/* Nonzero when any new value of [j0, j1) would be inf or nan; stores nothing. */
CPU_VECTOR_CLONES static uint32_t adam_check(int64_t j0, int64_t j1, const float *restrict w, const float *restrict m,
                                             const float *restrict v, const float *restrict g, float b1, float b2,
                                             float lr_t, float eps, float decay, float unscale) {
    uint32_t bad = 0;
    for (int64_t j = j0; j < j1; j++) {
        ADAM_ELEM(j);
        bad |= nonfinite(mj) | nonfinite(vj) | nonfinite(wj);
    }
    return bad;
}

/* The update in place (restrict: w, m, v and g are four arrays, each element read
 * before it is written, so the loop vectorises). */
CPU_VECTOR_CLONES static void adam_store(int64_t j0, int64_t j1, float *restrict w, float *restrict m, float *restrict v,
                                         const float *restrict g, float b1, float b2, float lr_t, float eps, float decay,
                                         float unscale) {
    for (int64_t j = j0; j < j1; j++) {
        ADAM_ELEM(j);
        m[j] = mj;
        v[j] = vj;
        w[j] = wj;
    }
}

static void host_opt_range(void *p, int64_t j0, int64_t j1) {
    host_opt *o = p;
    uint32_t bad = 0;
    if (o->sgd && o->store) {
        for (int64_t j = j0; j < j1; j++) o->w[j] = o->w[j] * o->decay - o->sgd_a * o->g[j];
    } else if (o->sgd) {
        for (int64_t j = j0; j < j1; j++) bad |= nonfinite(o->w[j] * o->decay - o->sgd_a * o->g[j]);
    } else if (o->store) {
        adam_store(j0, j1, o->w, o->m, o->v, o->g, o->b1, o->b2, o->lr_t, o->eps, o->decay, o->unscale);
    } else {
        bad = adam_check(j0, j1, o->w, o->m, o->v, o->g, o->b1, o->b2, o->lr_t, o->eps, o->decay, o->unscale);
    }
    if (bad) atomic_store(&o->bad, 1); /* chunks run on the pool's threads */
}

/* The moments are calloc'd, so their pages are untouched until the first step, whose
 * finiteness pass reads them before the update writes them: each page is first mapped to
 * the kernel's shared zero page, then copied on the write, with a TLB flush on every core
 * the process runs on. Stories110M's first step spent over a second in those flushes
 * (perf: native_write_msr under do_wp_page). Linux 5.14's MADV_POPULATE_WRITE faults them
 * in writable first, one plain fault per page, keeping every value (pages a loaded
 * checkpoint already wrote are left as they are); elsewhere, or on an older kernel, the
 * first step takes the faults as before. */
static void prefault_writable(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t b = ((uintptr_t)p + bytes) & ~((uintptr_t)page - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE); /* advice: a failure changes nothing */
#else
    (void)p, (void)bytes;
#endif
}

/* The fp32 update of param i on the unscaled gradient (so its moments do not depend on
 * the loss scale), split over the trainer's threads. store false: only whether the new
 * state is finite (returned); store true: the new state, in place. */
static bool host_update(af_trainer *t, int i, const float *g, int64_t step, float gfactor, bool store) {
    int64_t n = t->count[i];
    float lr = tr_lr_at(&t->o, step);
    host_opt o = { t->master[i], t->m[i], t->v[i], g, t->o.beta1, t->o.beta2, 0.0f, t->o.eps,
                   1.0f - lr * t->o.weight_decay, lr / t->scale * gfactor, gfactor / t->scale,
                   t->o.optimizer == AF_OPT_SGD, store, 0 }; /* bad: set below (atomic_init) */
    if (!o.sgd) o.lr_t = tr_lr_t(t, step);
    struct cpu_pool *pool = tr_pool(t);
    atomic_init(&o.bad, 0);
    cpu_pool_for(pool, n, 32768, host_opt_range, &o);
    if (store) t->host_flops += (o.sgd ? 3 : 14) * n; /* the update's work (the check repeats it) */
    return !atomic_load(&o.bad);
}

/* grad += g (the step's batches summed). */
static void add_into(float *restrict sum, const float *restrict g, int64_t n) {
    for (int64_t j = 0; j < n; j++) sum[j] += g[j];
}

/* The factor the update applies to the (loss-scaled) gradients beyond unscaling: the
 * mean over grad_accum batches, then grad_clip on the global L2 norm. The norm is summed
 * in double; a non-finite norm leaves the factor alone (the update is then not finite
 * and the step is skipped, as without clipping). */
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

af_status tr_host_opt_step(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    af_status st;
    int nb = t->o.grad_accum;
    float *const *grad = nb > 1 ? t->gsum : t->grad;
    double loss = 0, acc = 0;
    for (int b = 0; b < nb; b++) { /* grad_accum batches: gradients summed into gsum */
        if ((st = t->plan->grads(t, x + (int64_t)b * t->x_count, y + (int64_t)b * t->y_count, info))) return st;
        loss += info->loss / nb;
        acc += info->accuracy / nb;
        for (int i = 0; nb > 1 && i < t->np; i++) {
            if (b == 0) memcpy(t->gsum[i], t->grad[i], (size_t)t->count[i] * sizeof(float));
            else add_into(t->gsum[i], t->grad[i], t->count[i]);
        }
    }
    /* Data-parallel: every rank updates with the mean over the ranks' batches. */
    if (t->dist && (st = tr_dist_average_grads(t, grad, &loss, &acc))) return st;
    info->loss = loss;
    info->accuracy = acc;
    /* The update finds a non-finite gradient itself (its new state is then not finite):
     * no separate pass over the gradients for it. */
    for (int i = 0; i < t->np; i++) t->host_flops += t->count[i] * nb;
    info->lr = tr_lr_at(&t->o, t->step);
    info->loss_scale = t->scale;
    /* The step is taken only when all of the new state is finite: a first pass finds that
     * without storing, the second updates in place. A spare copy of the state to swap in
     * would double the largest part of the memory (3 x 4 bytes a param, 1.3 GB at 110M)
     * and write as many bytes; the extra pass only reads. */
    double t2 = tr_now_s();
    if (!t->moments_faulted) {
        for (int i = 0; i < t->np && t->o.optimizer != AF_OPT_SGD; i++) {
            prefault_writable(t->m[i], (size_t)t->count[i] * sizeof(float));
            prefault_writable(t->v[i], (size_t)t->count[i] * sizeof(float));
        }
        t->moments_faulted = true;
    }
    float gfactor = grad_factor(t, grad, info);
    bool ok = true;
    for (int i = 0; ok && i < t->np; i++) ok = host_update(t, i, grad[i], t->step, gfactor, false);
    for (int i = 0; ok && i < t->np; i++) host_update(t, i, grad[i], t->step, gfactor, true);
    t->phase_s[TR_PHASE_OPTIMIZER] += tr_now_s() - t2;
    tr_after_step(t, ok, info->loss_scale, info->loss);
    info->skipped_now = !ok;
    return AF_OK;
}
