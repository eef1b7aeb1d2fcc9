/* Data-parallel training (dist.h): what the trainer does with a dist, whatever carries
 * the bytes. The host-optimizer plans average their gradients before every update, so
 * every rank takes the same step from the same state; the in-program plans keep their
 * state in programs and average it every sync_every steps (local SGD). */
#include "train/dist.h"

#include <stdlib.h>

af_dist *tr_dist_new(const tr_dist_ops *ops, void *ctx, int rank, int size, double timeout_s) {
    if (!ops || size < 1 || rank < 0 || rank >= size) {
        ir_fail(AF_ERR_INVALID, "dist: rank %d of %d is not a place in the job", rank, size);
        return NULL;
    }
    af_dist *d = calloc(1, sizeof *d);
    if (!d) { ir_fail(AF_ERR_NOMEM, "dist: out of memory"); return NULL; }
    *d = (af_dist){ ops, ctx, rank, size, timeout_s > 0 ? timeout_s : 120.0, 0, 0 };
    return d;
}

int af_dist_rank(const af_dist *d) { return d ? d->rank : 0; }
int af_dist_size(const af_dist *d) { return d ? d->size : 1; }

void af_dist_stats(const af_dist *d, int64_t *bytes, double *seconds) {
    if (bytes) *bytes = d ? d->bytes : 0;
    if (seconds) *seconds = d ? d->comm_s : 0;
}

void af_dist_abort(af_dist *d, int code) {
    if (d && d->ops->abort) d->ops->abort(d->ctx, code);
}

void af_dist_free(af_dist *d) {
    if (!d) return;
    if (d->ops->free) d->ops->free(d->ctx);
    free(d);
}

af_status af_dist_allreduce(af_dist *d, double *v, int n, af_dist_op op) {
    if (!d || (!v && n) || n < 0 || (unsigned)op > AF_DIST_MAX) return ir_fail(AF_ERR_INVALID, "af_dist_allreduce: bad arguments");
    if (d->size == 1 || !n) return AF_OK;
    double t0 = tr_now_s();
    af_status st = d->ops->allreduce_f64(d->ctx, v, n, op, d->timeout_s);
    d->comm_s += tr_now_s() - t0;
    d->bytes += (int64_t)n * (int64_t)sizeof(double);
    return st;
}

/* Sums n floats over the ranks, then takes the mean (1/N is exact for N a power of two). */
static af_status mean_f32(af_dist *d, float *buf, int64_t n) {
    double t0 = tr_now_s();
    af_status st = d->ops->allreduce_f32(d->ctx, buf, n, d->timeout_s);
    d->comm_s += tr_now_s() - t0;
    d->bytes += n * (int64_t)sizeof(float);
    float inv = 1.0f / (float)d->size;
    for (int64_t j = 0; !st && j < n; j++) buf[j] *= inv;
    return st;
}

static af_status bcast_f32(af_dist *d, float *buf, int64_t n) {
    double t0 = tr_now_s();
    af_status st = d->ops->bcast_f32(d->ctx, buf, n, d->timeout_s);
    d->comm_s += tr_now_s() - t0;
    return st;
}

void tr_dist_grad_ready(af_trainer *t, int i) {
    af_dist *d = t->dist;
    if (!d || d->size == 1 || !d->ops->start_f32 || t->o.grad_accum > 1 || !t->dist_req || t->dist_req[i]) return;
    double t0 = tr_now_s();
    if (d->ops->start_f32(d->ctx, t->grad[i], t->count[i], &t->dist_req[i])) t->dist_req[i] = NULL; /* summed blocking later */
    else d->bytes += t->count[i] * (int64_t)sizeof(float);
    for (int j = 0; j < t->np; j++) /* the earlier ones move on while this rank computes */
        if (t->dist_req[j] && j != i) d->ops->test(d->ctx, t->dist_req[j]);
    d->comm_s += tr_now_s() - t0;
}

af_status tr_dist_average_grads(af_trainer *t, float *const *grad, double *loss, double *acc) {
    af_dist *d = t->dist;
    if (!d || d->size == 1) return AF_OK;
    af_status st = AF_OK;
    /* In parameter order: a sum started during the backward is waited for, any other
     * summed now (every rank started the same ones, so the collectives match). */
    float inv = 1.0f / (float)d->size;
    for (int i = 0; i < t->np; i++) {
        void *req = t->dist_req ? t->dist_req[i] : NULL;
        if (!req) {
            if (!st) st = mean_f32(d, grad[i], t->count[i]);
            continue;
        }
        t->dist_req[i] = NULL;
        double t0 = tr_now_s();
        af_status w = d->ops->wait(d->ctx, req, d->timeout_s); /* even after an error: frees req */
        d->comm_s += tr_now_s() - t0;
        if (!st) st = w;
        for (int64_t j = 0; !st && j < t->count[i]; j++) grad[i][j] *= inv;
    }
    double m[2] = { *loss, *acc };
    if (!st) st = af_dist_allreduce(d, m, 2, AF_DIST_SUM);
    *loss = m[0] / d->size;
    *acc = m[1] / d->size;
    return st;
}

/* Params and moments: (0) rank 0's onto every rank, or (1) the mean over ranks. */
static af_status share_state(af_trainer *t, int mean) {
    af_dist *d = t->dist;
    af_status st = t->plan->sync_state ? t->plan->sync_state(t, true) : AF_OK;
    for (int i = 0; !st && i < t->np; i++) {
        float *arr[3] = { t->master[i], t->m[i], t->v[i] };
        for (int k = 0; !st && k < 3; k++) st = mean ? mean_f32(d, arr[k], t->count[i]) : bcast_f32(d, arr[k], t->count[i]);
    }
    if (!st && t->plan->sync_state) st = t->plan->sync_state(t, false);
    tr_forget_state_bounds(t); /* even after a failure: some arrays may hold the others' values */
    return st;
}

af_status af_trainer_set_dist(af_trainer *t, af_dist *d, int sync_every) {
    if (!t) return ir_fail(AF_ERR_INVALID, "af_trainer_set_dist: trainer is NULL");
    if (sync_every < 1) return ir_fail(AF_ERR_INVALID, "af_trainer_set_dist: sync_every is %d; it counts steps, 1 or more", sync_every);
    t->dist = d;
    t->sync_every = sync_every;
    t->since_sync = 0;
    if (!d || d->size == 1) return AF_OK;
    if (d->ops->start_f32 && !t->dist_req && !(t->dist_req = tr_zalloc((size_t)t->np, sizeof *t->dist_req))) {
        t->dist = NULL;
        return AF_ERR_NOMEM;
    }
    /* Every rank must have built the same model on the same plan: compare before any
     * collective whose length depends on it. */
    int64_t total = 0;
    for (int i = 0; i < t->np; i++) total += t->count[i];
    double mine[3] = { (double)t->np, (double)total, (double)t->o.plan }, lo[3], hi[3];
    for (int j = 0; j < 3; j++) lo[j] = hi[j] = mine[j];
    af_status st = af_dist_allreduce(d, lo, 3, AF_DIST_MIN);
    if (!st) st = af_dist_allreduce(d, hi, 3, AF_DIST_MAX);
    if (st) { t->dist = NULL; return st; }
    if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2]) {
        t->dist = NULL;
        return ir_fail(AF_ERR_INVALID, "af_trainer_set_dist: the ranks built different trainers (rank %d: %d params, %lld floats, "
                       "plan %s); start every rank with the same model, options and plan", d->rank, t->np, (long long)total,
                       af_plan_name(t->o.plan));
    }
    /* Counters and the loss scale: rank 0's (a sum where only rank 0 adds). */
    double c[7] = { (double)t->step, (double)t->skipped, (double)t->skipped_consecutive, (double)t->clean_run,
                    (double)t->stuck_skips, t->scale, t->moment_unit };
    if (d->rank) for (int j = 0; j < 7; j++) c[j] = 0;
    if (!(st = af_dist_allreduce(d, c, 7, AF_DIST_SUM))) {
        t->step = (int64_t)c[0], t->skipped = (int64_t)c[1], t->skipped_consecutive = (int64_t)c[2];
        t->clean_run = (int64_t)c[3], t->stuck_skips = (int64_t)c[4], t->scale = (float)c[5], t->moment_unit = (float)c[6];
        st = share_state(t, 0);
    }
    if (st) t->dist = NULL;
    return st;
}

af_status af_trainer_dist_sync(af_trainer *t) {
    if (!t) return ir_fail(AF_ERR_INVALID, "af_trainer_dist_sync: trainer is NULL");
    t->since_sync = 0;
    if (!t->dist || t->dist->size == 1 || (t->plan->caps & TR_HOST_OPTIMIZER)) return AF_OK; /* equal already */
    return share_state(t, 1);
}

af_status tr_dist_after_call(af_trainer *t) {
    if (!t->dist || t->dist->size == 1 || (t->plan->caps & TR_HOST_OPTIMIZER)) return AF_OK;
    if ((t->since_sync += t->k) < t->sync_every) return AF_OK;
    return af_trainer_dist_sync(t);
}
