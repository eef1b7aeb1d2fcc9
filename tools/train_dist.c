#include "train_dist.h"
#include "cli_args.h"

#include <stdio.h>
#include <string.h>

#define BAD(...) (cli_usage_error(prefix, __VA_ARGS__), -1)

int train_dist_flag(const char *k, train_dist *d) {
    if (strcmp(k, "--distributed")) return 0;
    d->on = true;
    return 1;
}

int train_dist_parse(const char *k, const char *v, train_dist *d, const char *prefix) {
    long n;
    if (!strcmp(k, "--sync-every")) {
        if (cli_parse_long(v, 1, 1000000, &n)) return BAD("--sync-every wants a positive integer (steps), not '%s'", v);
        d->sync_every = (int)n;
    } else if (!strcmp(k, "--dist-timeout")) {
        if (cli_parse_long(v, 1, 86400, &n)) return BAD("--dist-timeout wants seconds, 1..86400, not '%s'", v);
        d->timeout_s = (double)n;
    } else return 0;
    return 1;
}

int train_dist_begin(train_dist *d, const char *prefix) {
    d->rank = 0, d->size = 1;
    if (!d->sync_every) d->sync_every = 8;
    if (!d->on) {
        if (d->sync_every != 8 || d->timeout_s) return BAD("%s", "--sync-every and --dist-timeout go with --distributed");
        return 0;
    }
    if (!(d->d = af_dist_mpi(d->timeout_s))) {
        fprintf(stderr, "%s: --distributed: %s\n", prefix, af_error_message());
        return -1;
    }
    d->rank = af_dist_rank(d->d);
    d->size = af_dist_size(d->d);
    return 0;
}

int train_dist_trainer(train_dist *d, af_trainer *t, const af_train_opts *o, const char *prefix) {
    if (!d->d) return 0;
    if (af_trainer_set_dist(t, d->d, d->sync_every)) {
        fprintf(stderr, "%s: rank %d: %s\n", prefix, d->rank, af_error_message());
        return -1;
    }
    af_dist_stats(d->d, &d->bytes0, &d->comm0);
    if (d->rank == 0 && d->size > 1) {
        if (af_plan_host_optimizer(o->plan))
            fprintf(stderr, "%s: %d ranks, gradients averaged before every step (global batch %d x %d)\n", prefix, d->size,
                    d->size, o->batch);
        else
            fprintf(stderr, "%s: %d ranks, plan %s: local SGD, parameters and moments averaged every %d steps\n", prefix,
                    d->size, af_plan_name(o->plan), d->sync_every);
    }
    return 0;
}

int train_dist_any(train_dist *d, bool mine) {
    if (!d->d || d->size == 1) return mine;
    double v = mine;
    if (af_dist_allreduce(d->d, &v, 1, AF_DIST_MAX)) return -1;
    return v != 0;
}

void train_dist_summary(train_dist *d, double train_s, int64_t steps, bool print, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!d->d || d->size == 1) return;
    int64_t bytes;
    double comm;
    af_dist_stats(d->d, &bytes, &comm);
    bytes -= d->bytes0;
    comm -= d->comm0;
    double ms = steps ? 1000.0 * train_s / (double)steps : 0, share = train_s > 0 ? comm / train_s : 0;
    double lo[2] = { ms, share }, hi[2] = { ms, share }, sum[2] = { ms, share };
    if (af_dist_allreduce(d->d, lo, 2, AF_DIST_MIN) || af_dist_allreduce(d->d, hi, 2, AF_DIST_MAX) ||
        af_dist_allreduce(d->d, sum, 2, AF_DIST_SUM))
        return;
    double per_step = steps ? (double)bytes / (double)steps : 0;
    if (d->rank) return;
    if (print)
        fprintf(stderr, "ranks: %d, ms per step min %.3f mean %.3f max %.3f; %.0f bytes all-reduced per step; "
                        "communication %.1f%% of rank 0's step time\n",
                d->size, lo[0], sum[0] / d->size, hi[0], per_step, 100 * share);
    snprintf(buf, cap, ",\"ranks\":%d,\"rank_ms_per_step_min\":%.4f,\"rank_ms_per_step_mean\":%.4f,\"rank_ms_per_step_max\":%.4f,"
             "\"allreduce_bytes_per_step\":%.0f,\"comm_share\":%.4f", d->size, lo[0], sum[0] / d->size, hi[0], per_step, share);
}

void train_dist_fail(train_dist *d, int rc) {
    if (!d->d || d->size == 1) return;
    fprintf(stderr, "rank %d of %d stops: ending every rank\n", d->rank, d->size);
    fflush(stderr);
    af_dist_abort(d->d, rc ? rc : 1);
}

void train_dist_end(train_dist *d) {
    af_dist_free(d->d);
    d->d = NULL;
}
