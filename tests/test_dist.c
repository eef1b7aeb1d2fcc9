#define _POSIX_C_SOURCE 200809L
/* Data-parallel training (src/train/dist.c) over an in-process transport: N threads, one
 * trainer each, summing in rank order through shared slots. The reference is one
 * trainer on the concatenated batch (N x B): after 10 steps its parameters equal every
 * rank's to 1e-6 relative (Adam, SGD, clipping, accumulation; the MLP on the host plan,
 * llama on the host and pipeline plans). The in-program plans' local SGD is checked
 * against its definition: separate trainers, their parameters averaged every K steps.
 * Runs without MPI; tests/test_dist_mpi.c runs the same over mpirun. */
#include "aneforge.h"
#include "aneforge_llama.h"
#include "aneforge_data.h"
#include "support/check.h"
#include "train/ckpt.h"
#include "train/dist.h"
#include "train/trainer_io.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 2, MAXN = 4096 * 64 };

/* ------------------------------------------------------------ the threads' transport */
static pthread_barrier_t bar;
static float *slot_f[N];
static double *slot_d[N];

static af_status th_allreduce_f32(void *ctx, float *buf, int64_t n, double timeout_s) {
    (void)timeout_s;
    int r = (int)(intptr_t)ctx;
    slot_f[r] = buf;
    pthread_barrier_wait(&bar);
    float *sum = malloc((size_t)n * sizeof *sum);
    for (int64_t j = 0; j < n; j++) {
        float s = 0;
        for (int k = 0; k < N; k++) s += slot_f[k][j];
        sum[j] = s;
    }
    pthread_barrier_wait(&bar); /* every rank has read every slot */
    memcpy(buf, sum, (size_t)n * sizeof *sum);
    free(sum);
    return AF_OK;
}

static af_status th_allreduce_f64(void *ctx, double *buf, int n, af_dist_op op, double timeout_s) {
    (void)timeout_s;
    int r = (int)(intptr_t)ctx;
    slot_d[r] = buf;
    pthread_barrier_wait(&bar);
    double out[16];
    for (int j = 0; j < n; j++) {
        double v = slot_d[0][j];
        for (int k = 1; k < N; k++)
            v = op == AF_DIST_SUM ? v + slot_d[k][j] : op == AF_DIST_MIN ? fmin(v, slot_d[k][j]) : fmax(v, slot_d[k][j]);
        out[j] = v;
    }
    pthread_barrier_wait(&bar);
    memcpy(buf, out, (size_t)n * sizeof *out);
    return AF_OK;
}

static af_status th_bcast_f32(void *ctx, float *buf, int64_t n, double timeout_s) {
    (void)timeout_s;
    int r = (int)(intptr_t)ctx;
    slot_f[r] = buf;
    pthread_barrier_wait(&bar);
    if (r) memcpy(buf, slot_f[0], (size_t)n * sizeof *buf);
    pthread_barrier_wait(&bar);
    return AF_OK;
}

static const tr_dist_ops th_ops = { th_allreduce_f32, th_allreduce_f64, th_bcast_f32, NULL, NULL, NULL, NULL, NULL };

/* ------------------------------------------------------------ the cases */
typedef struct {
    const char *name;
    int llama;            /* 0: MLP; 1: tiny llama */
    af_train_opts o;      /* per-rank options (batch B) */
    int sync_every;
    int steps;
    int local_sgd;        /* in-program plan: compare with separate trainers averaged */
} dcase;

#define B 4
#define SEQ 8
#define VOC 32
static af_llama_weights *lw;

static af_trainer *make(const dcase *c, int batch, uint64_t seed) {
    af_train_opts o = c->o;
    o.batch = batch;
    o.eval_batch = batch;
    af_net net;
    if (c->llama) net = af_net_llama(lw, SEQ);
    else net = af_net_mlp(AF_SHAPE(12), 16, 5, seed);
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "%s: trainer: %s", c->name, af_error_message());
    return t;
}

static int64_t xs(const dcase *c) { return c->llama ? SEQ : 12; }
static int64_t ys(const dcase *c) { return c->llama ? SEQ * VOC : 5; }

/* Rows of step s's global batch (N * B * accum samples), seeded by s: x then targets. */
static void global_batch(const dcase *c, int s, int rows, float *x, float *y) {
    test_rng r = { 1000u + (unsigned)s };
    memset(y, 0, sizeof(float) * (size_t)(rows * ys(c)));
    for (int i = 0; i < rows; i++) {
        if (c->llama) {
            int tok = (int)(test_uniform(&r) * VOC);
            for (int t = 0; t < SEQ; t++) {
                int next = (tok * 5 + 1 + (int)(test_uniform(&r) * 3)) % VOC;
                x[i * SEQ + t] = (float)tok;
                y[((int64_t)i * SEQ + t) * VOC + next] = 1.0f;
                tok = next;
            }
        } else {
            test_fill_uniform(&r, x + i * 12, 12, -1, 1);
            y[i * 5 + (int)(test_uniform(&r) * 5)] = 1.0f;
        }
    }
}

typedef struct {
    const dcase *c;
    int rank;
    af_trainer *t;
    af_status st;
    char err[256];
} rank_arg;

static void *rank_main(void *p) {
    rank_arg *a = p;
    const dcase *c = a->c;
    int accum = c->o.grad_accum > 1 ? c->o.grad_accum : 1, rows = N * B * accum;
    float *x = malloc(sizeof(float) * (size_t)(rows * xs(c))), *y = malloc(sizeof(float) * (size_t)(rows * ys(c)));
    float *xr = malloc(sizeof(float) * (size_t)(B * accum * xs(c))), *yr = malloc(sizeof(float) * (size_t)(B * accum * ys(c)));
    af_dist *d = tr_dist_new(&th_ops, (void *)(intptr_t)a->rank, a->rank, N, 10);
    /* Rank 1 starts from other weights: set_dist must hand it rank 0's. */
    a->t = make(c, B, a->rank ? 99 : 7);
    a->st = a->t ? af_trainer_set_dist(a->t, d, c->sync_every) : AF_ERR_INVALID;
    for (int s = 0; !a->st && s < c->steps; s++) {
        global_batch(c, s, rows, x, y);
        /* Accumulation batch b of the global step is rows [b N B, (b + 1) N B); this
         * rank's share of it rows [b N B + rank B, ... + B). */
        for (int b = 0; b < accum; b++) {
            memcpy(xr + b * B * xs(c), x + (b * N * B + a->rank * B) * xs(c), sizeof(float) * (size_t)(B * xs(c)));
            memcpy(yr + b * B * ys(c), y + (b * N * B + a->rank * B) * ys(c), sizeof(float) * (size_t)(B * ys(c)));
        }
        a->st = af_trainer_step(a->t, xr, yr, NULL);
    }
    if (a->st) snprintf(a->err, sizeof a->err, "%s", af_error_message());
    if (a->t) af_trainer_set_dist(a->t, NULL, 1);
    af_dist_free(d);
    free(x), free(y), free(xr), free(yr);
    return NULL;
}

/* ||a - b|| / ||b|| over all params of two trainers (L2) */
static double rel_diff(af_trainer *a, af_trainer *b) {
    double num = 0, den = 0;
    for (int i = 0; i < af_trainer_num_params(a); i++) {
        int64_t n = af_shape_count(af_trainer_param(a, i)->shape);
        float *pa = malloc(sizeof(float) * (size_t)n), *pb = malloc(sizeof(float) * (size_t)n);
        af_trainer_read_param(a, i, pa);
        af_trainer_read_param(b, i, pb);
        for (int64_t j = 0; j < n; j++) {
            num += ((double)pa[j] - pb[j]) * ((double)pa[j] - pb[j]);
            den += (double)pb[j] * pb[j];
        }
        free(pa), free(pb);
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void run_case(const dcase *c) {
    pthread_barrier_init(&bar, NULL, N);
    rank_arg ra[N];
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        ra[r] = (rank_arg){ c, r, NULL, AF_OK, "" };
        pthread_create(&th[r], NULL, rank_main, &ra[r]);
    }
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&bar);
    for (int r = 0; r < N; r++) CHECK(ra[r].st == AF_OK, "%s: rank %d: %s", c->name, r, ra[r].err);
    int accum = c->o.grad_accum > 1 ? c->o.grad_accum : 1, rows = N * B * accum;
    float *x = malloc(sizeof(float) * (size_t)(rows * xs(c))), *y = malloc(sizeof(float) * (size_t)(rows * ys(c)));
    if (!c->local_sgd) { /* one process, batch N x B */
        af_trainer *ref = make(c, N * B, 7);
        for (int s = 0; ref && s < c->steps; s++) {
            global_batch(c, s, rows, x, y);
            CHECK(af_trainer_step(ref, x, y, NULL) == AF_OK, "%s: ref step: %s", c->name, af_error_message());
        }
        for (int r = 0; ref && r < N; r++) {
            double d = ra[r].t ? rel_diff(ra[r].t, ref) : 1;
            CHECK(d <= 1e-6, "%s: rank %d vs one process with batch %d: %.3g relative", c->name, r, N * B, d);
        }
        af_trainer_free(ref);
    } else { /* separate trainers on their shards, averaged every sync_every steps */
        af_trainer *sep[N];
        for (int r = 0; r < N; r++) sep[r] = make(c, B, 7);
        float *xr = malloc(sizeof(float) * (size_t)(B * xs(c))), *yr = malloc(sizeof(float) * (size_t)(B * ys(c)));
        for (int s = 0; s < c->steps; s++) { /* steps == sync_every: one average, at the end */
            global_batch(c, s, rows, x, y);
            for (int r = 0; r < N; r++) {
                memcpy(xr, x + r * B * xs(c), sizeof(float) * (size_t)(B * xs(c)));
                memcpy(yr, y + r * B * ys(c), sizeof(float) * (size_t)(B * ys(c)));
                CHECK(af_trainer_step(sep[r], xr, yr, NULL) == AF_OK, "%s: sep step: %s", c->name, af_error_message());
            }
        }
        double num = 0, den = 0, spread = 0;
        for (int i = 0; ra[0].t && ra[1].t && i < af_trainer_num_params(sep[0]); i++) {
            int64_t n = af_shape_count(af_trainer_param(sep[0], i)->shape);
            float *p[4];
            for (int k = 0; k < 4; k++) p[k] = malloc(sizeof(float) * (size_t)n);
            af_trainer_read_param(sep[0], i, p[0]);
            af_trainer_read_param(sep[1], i, p[1]);
            af_trainer_read_param(ra[0].t, i, p[2]);
            af_trainer_read_param(ra[1].t, i, p[3]);
            for (int64_t j = 0; j < n; j++) {
                double mean = ((double)p[0][j] + p[1][j]) / 2;
                num = fmax(num, fabs(p[2][j] - mean));
                den = fmax(den, fabs(mean));
                spread = fmax(spread, fabs((double)p[0][j] - p[1][j]) + fabs((double)p[2][j] - p[3][j]) * 1e9);
            }
            for (int k = 0; k < 4; k++) free(p[k]);
        }
        CHECK(num <= 1e-6 * den, "%s: rank 0 after the sync vs the mean of separate runs: %.3g relative", c->name, num / den);
        CHECK(spread > 0 && spread < 1e3, "%s: the separate runs must differ (they did not, or the ranks differ after the sync): %g", c->name, spread);
        free(xr), free(yr);
        for (int r = 0; r < N; r++) af_trainer_free(sep[r]);
    }
    free(x), free(y);
    for (int r = 0; r < N; r++) af_trainer_free(ra[r].t);
}

/* Ranks that built different models: both refuse, naming the problem. */
typedef struct { int rank; af_status st; char err[300]; } mismatch_arg;
static void *mismatch_main(void *p) {
    mismatch_arg *a = p;
    af_train_opts o = af_train_defaults();
    o.batch = B;
    o.compile.threads = 1;
    af_net net = af_net_mlp(AF_SHAPE(12), a->rank ? 8 : 16, 5, 1);
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    af_dist *d = tr_dist_new(&th_ops, (void *)(intptr_t)a->rank, a->rank, N, 10);
    a->st = af_trainer_set_dist(t, d, 1);
    snprintf(a->err, sizeof a->err, "%s", af_error_message());
    af_trainer_free(t);
    af_dist_free(d);
    return NULL;
}

static void mismatch(void) {
    pthread_barrier_init(&bar, NULL, N);
    mismatch_arg ma[N];
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        ma[r] = (mismatch_arg){ r, AF_OK, "" };
        pthread_create(&th[r], NULL, mismatch_main, &ma[r]);
    }
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&bar);
    for (int r = 0; r < N; r++)
        CHECK(ma[r].st == AF_ERR_INVALID && strstr(ma[r].err, "the ranks built different trainers") &&
              strstr(ma[r].err, "start every rank with the same model"), "rank %d, different models: %s", r, ma[r].err);
}

/* Joining the ranks overwrites rank 1's moments with rank 0's, so rank 1 must forget the
 * bounds its own update kept on them (host_opt.c's screen proves a step finite from those
 * and then skips the pass that checks it). Rank 0 loads moments m = +-3e38, v = 0; rank 1
 * took one step of its own (small bounds). The next batch has a zero feature, so some
 * gradients are 0, their v stays 0 and w - lr_t m / (sqrt(v) + eps) overflows: both
 * ranks must skip the step and keep finite weights.
 * planted: share_state without tr_forget_state_bounds -> rank 1 stores inf. */
enum { SB = 2, SD = 4 };
static const float sx[SB * SD] = { 1, -2, 0.5f, 3, -1, 0, 2, 1 }, sx0[SB * SD] = { 1, 0, 0.5f, 3, -1, 0, 2, 1 };
static const float sy[SB * 2] = { 1, 0, 0, 1 };
static char share_path[256];
typedef struct { int rank, skipped; bool finite; af_status st; } share_arg;

static af_trainer *small_mlp(void) {
    af_net net = af_net_mlp(AF_SHAPE(SD), 3, 2, 7);
    af_train_opts o = af_train_defaults();
    o.plan = AF_PLAN_HOST;
    o.batch = o.eval_batch = SB;
    o.compile.threads = 1;
    o.compile.precision = AF_PRECISION_FP32;
    o.loss_scale = 1;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    return t;
}

static void *share_main(void *p) {
    share_arg *a = p;
    af_trainer *t = small_mlp();
    af_dist *d = tr_dist_new(&th_ops, (void *)(intptr_t)a->rank, a->rank, N, 10);
    a->st = !t || !d ? AF_ERR_NOMEM : a->rank == 0 ? af_trainer_load(t, share_path) : af_trainer_step(t, sx, sy, NULL);
    af_status st = af_trainer_set_dist(t, d, 1); /* every rank joins, whatever happened above */
    af_step_info info = { 0 };
    if (!a->st) a->st = st;
    if (!a->st) a->st = af_trainer_step(t, sx0, sy, &info);
    a->skipped = info.skipped_now;
    a->finite = true;
    for (int i = 0; !a->st && i < af_trainer_num_params(t); i++) {
        af_tensor *w = af_trainer_param(t, i);
        const float *v = af_tensor_value(w);
        for (int64_t j = 0; j < af_shape_count(af_tensor_shape(w)); j++) a->finite = a->finite && isfinite(v[j]);
    }
    af_trainer_free(t);
    af_dist_free(d);
    return NULL;
}

/* A copy of src with records m_name and v_name replaced by n floats of m and of 0. */
static ckpt *with_moments(const ckpt *src, const char *m_name, const char *v_name, const float *m, const float *zero, int64_t bytes) {
    ckpt *c = ckpt_new();
    for (int64_t i = 0; c && i < ckpt_count(src); i++) {
        const char *nm = ckpt_name(src, i);
        int64_t nb;
        const void *dp = ckpt_get(src, nm, &nb);
        if (!strcmp(nm, m_name)) dp = m, nb = bytes;
        else if (!strcmp(nm, v_name)) dp = zero, nb = bytes;
        if (ckpt_put(c, nm, dp, nb)) { ckpt_free(c); return NULL; }
    }
    return c;
}

static void share_forgets_bounds(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(share_path, sizeof share_path, "%s/af_dist_bounds_%d.ckpt", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    af_trainer *t = small_mlp();
    ckpt *c = ckpt_new(), *e = NULL;
    CHECK(t && c && af_trainer_step(t, sx, sy, NULL) == AF_OK && tr_export(t, c) == AF_OK, "setup: %s", af_error_message());
    int64_t bytes = 0;
    if (c) ckpt_get(c, "adam_m.0", &bytes);
    float *m = malloc((size_t)bytes + 4), *zero = calloc(1, (size_t)bytes + 4);
    for (int64_t j = 0; m && j < bytes / 4; j++) m[j] = j % 2 ? -3e38f : 3e38f;
    e = m && zero && bytes > 0 ? with_moments(c, "adam_m.0", "adam_v.0", m, zero, bytes) : NULL;
    CHECK(e && ckpt_save(e, share_path) == AF_OK, "save: %s", af_error_message());
    pthread_barrier_init(&bar, NULL, N);
    share_arg sa[N];
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        sa[r] = (share_arg){ r, 0, false, AF_OK };
        pthread_create(&th[r], NULL, share_main, &sa[r]);
    }
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&bar);
    for (int r = 0; r < N; r++)
        CHECK(!sa[r].st && sa[r].skipped == 1 && sa[r].finite, "rank %d after joining: status %d, skipped %d, weights %s", r,
              (int)sa[r].st, sa[r].skipped, sa[r].finite ? "finite" : "not finite");
    remove(share_path);
    free(m), free(zero);
    ckpt_free(e), ckpt_free(c);
    af_trainer_free(t);
}

static dcase mk(const char *name, int llama, af_plan plan, af_optimizer opt) {
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.optimizer = opt;
    o.lr = opt == AF_OPT_SGD ? 0.1f : 3e-3f;
    o.compile.threads = 1;
    o.compile.precision = AF_PRECISION_FP32;
    o.loss_scale = 1;
    if (llama) o.objective = AF_OBJ_CUSTOM;
    return (dcase){ name, llama, o, 1, 10, 0 };
}

int main(void) {
    af_llama_config lc;
    CHECK(af_llama_preset("tiny", VOC, &lc) == AF_OK, "preset: %s", af_error_message());
    lc.seq_len = SEQ;
    lw = af_llama_weights_new(&lc);
    test_rng r = { 5 };
    float *d = af_llama_weights_data(lw);
    for (int i = 0; i < af_llama_param_count(&lc); i++) {
        int64_t off;
        af_shape sh;
        af_llama_param_at(&lc, i, &off, &sh, NULL);
        for (int64_t j = 0; j < af_shape_count(sh); j++)
            d[off + j] = sh.rank == 1 ? 1.0f + 0.2f * (float)(test_uniform(&r) - 0.5) : 0.15f * (float)(test_uniform(&r) - 0.5);
    }
    dcase cases[8];
    int nc = 0;
    cases[nc++] = mk("mlp host adam", 0, AF_PLAN_HOST, AF_OPT_ADAM);
    cases[nc++] = mk("mlp host sgd", 0, AF_PLAN_HOST, AF_OPT_SGD);
    dcase clip = mk("mlp host adam clip", 0, AF_PLAN_HOST, AF_OPT_ADAM);
    clip.o.grad_clip = 0.05f; /* below the gradients' norm: every step clips */
    cases[nc++] = clip;
    dcase acc = mk("mlp host sgd accum 3", 0, AF_PLAN_HOST, AF_OPT_SGD);
    acc.o.grad_accum = 3;
    cases[nc++] = acc;
    cases[nc++] = mk("llama host adam", 1, AF_PLAN_HOST, AF_OPT_ADAM);
    cases[nc++] = mk("llama pipeline adam", 1, AF_PLAN_PIPELINE, AF_OPT_ADAM);
    dcase res = mk("mlp resident local sgd", 0, AF_PLAN_RESIDENT, AF_OPT_ADAM);
    res.local_sgd = 1, res.sync_every = 4, res.steps = 4;
    cases[nc++] = res;
    dcase dev = mk("mlp device local sgd", 0, AF_PLAN_DEVICE, AF_OPT_SGD);
    dev.local_sgd = 1, dev.sync_every = 3, dev.steps = 3;
    cases[nc++] = dev;
    for (int i = 0; i < nc; i++) run_case(&cases[i]);
    mismatch();
    share_forgets_bounds();

    /* Bad input: sync_every 0, and ranks that built different models. */
    af_trainer *t = make(&cases[0], B, 1);
    CHECK(af_trainer_set_dist(t, NULL, 0) == AF_ERR_INVALID && strstr(af_error_message(), "sync_every is 0"), "sync 0: %s", af_error_message());
    af_trainer_free(t);
#ifndef AF_HAVE_MPI_TESTS
    af_dist *m = af_dist_mpi(0);
    CHECK(m == NULL && strstr(af_error_message(), "-DAF_MPI=ON"), "without MPI: %s", m ? "joined" : af_error_message());
#endif
    af_llama_weights_free(lw);
    return check_finish("dist");
}
