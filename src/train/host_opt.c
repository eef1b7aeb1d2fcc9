/* The host optimizer (host_opt.h). */
#define _DEFAULT_SOURCE /* madvise */
#include "cpu/absmax.h"
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

/* The passes of an update (host_update). */
typedef enum {
    PASS_SCREEN, /* Adam: the largest |g * unscale| (and |w| when unbounded), to prove the new state finite */
    PASS_CHECK,  /* whether the new state would be finite, storing nothing */
    PASS_STORE,  /* the new state, in place (Adam: and the moments' new bounds) */
} host_pass;

typedef struct {
    float *w, *m, *v;
    const float *g;
    float b1, b2, lr_t, eps, decay, sgd_a, unscale;
    int sgd;
    host_pass pass;
    bool read_w;          /* screen: w has no bound from the last store */
    bool read_g;          /* screen: g has no bound from the run that computed it */
    atomic_uint bad;      /* check: some new value is not finite */
    _Atomic uint32_t max0, max1, max2; /* the largest bit patterns: screen |g * unscale|, |w|; store |m|, v, |w| */
} host_opt;

static inline uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* 1 when f is inf or nan: an all-ones exponent (integer ops, so loops vectorise). */
static inline uint32_t nonfinite(float f) { return (bits_of(f) & 0x7f800000u) == 0x7f800000u; }

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

/* The largest |g * unscale| of [j0, j1) where gmax is not NULL, and of |w| where wmax is
 * not NULL, as bit patterns (cpu/absmax.h). */
CPU_VECTOR_CLONES static void adam_screen(int64_t j0, int64_t j1, const float *restrict w, const float *restrict g,
                                          float unscale, uint32_t *gmax, uint32_t *wmax) {
    uint32_t gb = 0, wb = 0;
    if (gmax)
        for (int64_t j = j0; j < j1; j++) {
            uint32_t a = bits_of(g[j] * unscale) & 0x7fffffffu;
            gb = a > gb ? a : gb;
        }
    if (wmax)
        for (int64_t j = j0; j < j1; j++) {
            uint32_t b = bits_of(w[j]) & 0x7fffffffu;
            wb = b > wb ? b : wb;
        }
    if (gmax) *gmax = gb;
    if (wmax) *wmax = wb;
}

/* The update in place (restrict: w, m, v and g are four arrays, each element read
 * before it is written, so the loop vectorises), with the largest |m|, raw v and |w|
 * pattern it stored. The screen that let this run bounded w by the last update's
 * largest |w| without reading it; a caller may have written the weights since
 * (af_trainer_param's value), so a w' that is not finite keeps w: the update never
 * stores one. */
CPU_VECTOR_CLONES static void adam_store(int64_t j0, int64_t j1, float *restrict w, float *restrict m, float *restrict v,
                                         const float *restrict g, float b1, float b2, float lr_t, float eps, float decay,
                                         float unscale, uint32_t *mmax, uint32_t *vmax, uint32_t *wmax) {
    uint32_t mb = 0, vb = 0, wb = 0;
    for (int64_t j = j0; j < j1; j++) {
        ADAM_ELEM(j);
        wj = nonfinite(wj) ? w[j] : wj;
        m[j] = mj;
        v[j] = vj;
        w[j] = wj;
        uint32_t a = bits_of(mj) & 0x7fffffffu, b = bits_of(vj), c = bits_of(wj) & 0x7fffffffu;
        mb = a > mb ? a : mb;
        vb = b > vb ? b : vb;
        wb = c > wb ? c : wb;
    }
    *mmax = mb, *vmax = vb, *wmax = wb;
}

static void host_opt_range(void *p, int64_t j0, int64_t j1) {
    host_opt *o = p;
    uint32_t bad = 0, max0 = 0, max1 = 0, max2 = 0;
    if (o->sgd && o->pass == PASS_STORE) {
        for (int64_t j = j0; j < j1; j++) o->w[j] = o->w[j] * o->decay - o->sgd_a * o->g[j];
    } else if (o->sgd) {
        for (int64_t j = j0; j < j1; j++) bad |= nonfinite(o->w[j] * o->decay - o->sgd_a * o->g[j]);
    } else if (o->pass == PASS_STORE) {
        adam_store(j0, j1, o->w, o->m, o->v, o->g, o->b1, o->b2, o->lr_t, o->eps, o->decay, o->unscale, &max0, &max1,
                   &max2);
    } else if (o->pass == PASS_SCREEN) {
        adam_screen(j0, j1, o->w, o->g, o->unscale, o->read_g ? &max0 : NULL, o->read_w ? &max1 : NULL);
    } else {
        bad = adam_check(j0, j1, o->w, o->m, o->v, o->g, o->b1, o->b2, o->lr_t, o->eps, o->decay, o->unscale);
    }
    /* chunks run on the pool's threads */
    if (bad) atomic_store(&o->bad, 1);
    cpu_absmax_merge(&o->max0, max0);
    cpu_absmax_merge(&o->max1, max1);
    cpu_absmax_merge(&o->max2, max2);
}

/* |m'| <= b1 m_max + (1 - b1) gmax, v' <= b2 v_max + (1 - b2) gmax^2 and
 * |w'| <= |decay| wmax + |lr_t| |m'| / eps (the root is >= 0). Each kept under 1e37, and
 * a sum of two under 2e37, the roundings of the float operations (relative 2^-24 each)
 * stay far from FLT_MAX (3.4e38). A bound that is inf or nan fails a comparison. */
bool tr_adam_surely_finite(float b1f, float b2f, float lr_t, float eps, float decay, double gmax, double wmax,
                           tr_state_bound b) {
    const double lim = 1e37, b1 = b1f, b2 = b2f;
    if (!(b1 >= 0 && b1 <= 1 && b2 >= 0 && b2 <= 1 && eps > 0)) return false;
    double m1 = b1 * b.m_max + (1 - b1) * gmax, v1 = b2 * b.v_max + (1 - b2) * gmax * gmax;
    double w1 = fabs((double)decay) * wmax, u1 = fabs((double)lr_t) * m1 / eps;
    return m1 < lim && v1 < lim && w1 < lim && u1 < lim;
}

/* The moments are calloc'd, so their pages are untouched until the first step, which
 * reads each element before it writes it: each page is first mapped to
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

/* One pass (host_pass) of the fp32 update of param i on the unscaled gradient (so its
 * moments do not depend on the loss scale), split over the trainer's threads. Returns
 * whether the new state is finite: a check finds out; a screen proves it from bounds or
 * returns false (then a check must decide); a store returns true. */
static bool host_update(af_trainer *t, int i, const float *g, int64_t step, float gfactor, host_pass pass) {
    int64_t n = t->count[i];
    float lr = tr_lr_at(&t->o, step);
    host_opt o = { t->master[i], t->m[i], t->v[i], g, t->o.beta1, t->o.beta2, 0.0f, t->o.eps,
                   1.0f - lr * t->o.weight_decay, lr / t->scale * gfactor, gfactor / t->scale,
                   t->o.optimizer == AF_OPT_SGD, pass, !isfinite(t->bound[i].w_max), !isfinite(t->gbound[i]),
                   0, 0, 0, 0 }; /* atomics: below */
    if (!o.sgd) o.lr_t = tr_lr_t(t, step);
    if (o.sgd && pass == PASS_SCREEN) return false; /* SGD's check reads no more than a screen would */
    struct cpu_pool *pool = tr_pool(t);
    atomic_init(&o.bad, 0);
    atomic_init(&o.max0, 0);
    atomic_init(&o.max1, 0);
    atomic_init(&o.max2, 0);
    /* The screen reads g only without the run's bound on it, and w only without the last
     * store's: usually it reads nothing. */
    if (pass != PASS_SCREEN || o.read_g || o.read_w) cpu_pool_for(pool, n, 32768, host_opt_range, &o);
    if (pass == PASS_SCREEN) {
        /* |g| <= G gives |fl(g u)| <= fl(G |u|): rounding is monotone */
        double gmax = o.read_g ? cpu_absmax_value(atomic_load(&o.max0)) : t->gbound[i] * fabsf(o.unscale);
        double wmax = o.read_w ? cpu_absmax_value(atomic_load(&o.max1)) : t->bound[i].w_max;
        return tr_adam_surely_finite(o.b1, o.b2, o.lr_t, o.eps, o.decay, gmax, wmax, t->bound[i]);
    }
    if (pass == PASS_STORE) {
        if (!o.sgd)
            t->bound[i] = (tr_state_bound){ cpu_absmax_value(atomic_load(&o.max0)),
                                            cpu_absmax_value(atomic_load(&o.max1)),
                                            cpu_absmax_value(atomic_load(&o.max2)) };
        else t->bound[i].w_max = INFINITY; /* SGD's store keeps no bound */
        t->host_flops += (o.sgd ? 3 : 14) * n; /* the update's work (a check repeats it) */
    }
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
    for (int i = 0; i < t->np; i++) t->gbound[i] = INFINITY; /* a plan's grads may set them */
    for (int b = 0; b < nb; b++) { /* grad_accum batches: gradients summed into gsum */
        if ((st = t->plan->grads(t, x + (int64_t)b * t->x_count, y + (int64_t)b * t->y_count, info))) return st;
        loss += info->loss / nb;
        acc += info->accuracy / nb;
        for (int i = 0; nb > 1 && i < t->np; i++) {
            if (b == 0) memcpy(t->gsum[i], t->grad[i], (size_t)t->count[i] * sizeof(float));
            else add_into(t->gsum[i], t->grad[i], t->count[i]);
        }
    }
    /* The run's bounds hold for its own gradients only: not for a sum of batches, nor
     * for the ranks' mean. */
    for (int i = 0; (nb > 1 || t->dist) && i < t->np; i++) t->gbound[i] = INFINITY;
    /* Data-parallel: every rank updates with the mean over the ranks' batches. */
    if (t->dist && (st = tr_dist_average_grads(t, grad, &loss, &acc))) return st;
    info->loss = loss;
    info->accuracy = acc;
    /* The update finds a non-finite gradient itself (its new state is then not finite):
     * no separate pass over the gradients for it. */
    for (int i = 0; i < t->np; i++) t->host_flops += t->count[i] * nb;
    info->lr = tr_lr_at(&t->o, t->step);
    info->loss_scale = t->scale;
    /* The step is taken only when all of the new state is finite, known before anything
     * is stored. A check pass finds that by computing the update without storing it
     * (reading w, m, v, g); for most Adam steps a screen proves it instead, reading only
     * g, from the bounds the last update left on the moments and the weights (the update
     * is limited by memory: Stories110M's took 128-135 ms a step with a check, 92-96 with
     * a screen that read w and g, two threads). A spare copy of the state to swap in
     * would double the largest part of the memory (3 x 4 bytes a param, 1.3 GB at 110M)
     * and write as many bytes. */
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
    for (int i = 0; ok && i < t->np; i++)
        ok = host_update(t, i, grad[i], t->step, gfactor, PASS_SCREEN) ||
             host_update(t, i, grad[i], t->step, gfactor, PASS_CHECK);
    for (int i = 0; ok && i < t->np; i++) host_update(t, i, grad[i], t->step, gfactor, PASS_STORE);
    t->phase_s[TR_PHASE_OPTIMIZER] += tr_now_s() - t2;
    tr_after_step(t, ok, info->loss_scale, info->loss);
    info->skipped_now = !ok;
    return AF_OK;
}
