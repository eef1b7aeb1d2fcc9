/* The trainer's state and what every plan shares (core.c): schedules, loss-scale
 * bookkeeping, running and compiling programs. The plans (plan.h) sit above this file,
 * the registry above them, the driver (trainer.c, trainer_io.c) on top. */
#ifndef AF_TRAIN_CORE_H
#define AF_TRAIN_CORE_H
#include "ir/ir.h"
#include "train/plan.h"

#define TR_MAXK 64    /* unrolled steps */
/* Room the trainer offers make_params (af_net): per-param state is then sized to the
 * count it returns, so the depth of a model is limited by memory, not by a table. */
#define TR_PARAM_ROOM 65536
/* Where a trainer's wall time goes (tr_phase_seconds): the programs of a step (forward
 * and backward; on the resident and unrolled plans the one step program, optimizer
 * included), the optimizer (host update or update programs) and compiling. */
enum { TR_PHASE_FWD_BWD, TR_PHASE_OPTIMIZER, TR_PHASE_COMPILE, TR_NPHASE };
/* Adam's moments on the host (TR_HOST_OPTIMIZER plans): fp32 m and v of the unscaled
 * gradient. In programs (device, resident, unrolled plans): m and r = sqrt(v)
 * (nn/optim.h) of the loss-scaled gradient, i.e. in units of the loss scale
 * `moment_unit` they were last updated at; a step at another scale first multiplies them
 * by scale / moment_unit (fed as "moment_rescale", a power of two for the dynamic scale),
 * so they always share the units of the fp16 gradients they are combined with and cannot
 * overflow where those gradients do not. */

/* Bounds on one param's host state, kept by the host optimizer's update (host_opt.c):
 * no |m| above m_max, no v above v_max, no v negative, no |w| above w_max. INFINITY once
 * anything else wrote them (tr_forget_state_bounds): the next update then reads w to
 * bound it, or checks its new state in a pass of its own, instead of proving it finite
 * from the bounds. Zero moments start at zero; the weights start unbounded. */
typedef struct { float m_max, v_max, w_max; } tr_state_bound;

struct af_trainer {
    af_net net;
    af_train_opts o;
    const tr_plan *plan;       /* registry.c's entry for o.plan (or the variant it chose) */
    void *ps;                  /* the plan's own parts (its programs, buffers) */
    af_graph *g;
    int np, k;                 /* params; steps per call */
    /* Per-param arrays below hold np entries. */
    af_tensor **p;
    int64_t *count;
    af_shape *flat;            /* [rows, cols] view used by the update programs */
    int64_t x_count, y_count;  /* floats in one batch of x and of targets */
    bool engine;               /* the target computes as the Neural Engine (af_target_is_engine) */
    bool fp16;                 /* the programs run in fp16 storage */
    af_metric_source metric_source;

    /* host-side state (the host copies; plans with resident state sync them on demand):
     * v holds v with a host optimizer, r = sqrt(v) in moment units elsewhere; master[i]
     * is p[i]'s own value (af_tensor_value), owned by the graph */
    float **master, **m, **v, **grad;
    float **gsum;              /* grad_accum > 1: the step's gradients summed over its batches */
    bool moments_faulted;      /* m and v faulted in writable before the host optimizer's first read (host_opt.c) */
    tr_state_bound *bound;     /* [np]: what the host optimizer's last update left in m, v and w */
    float *gbound;             /* [np]: a bound on |grad[i]| from the run that computed it (INFINITY: none) */
    int64_t step, skipped, skipped_consecutive, clean_run;
    int64_t stuck_skips;       /* consecutive skips that a lower loss scale cannot cure */
    float scale, moment_unit;

    af_model *eval;            /* compiled on first use from eval_in -> eval_z */
    af_tensor **eval_in, *eval_z; /* [1 + np], built by af_trainer_new: the net is never used after it */
    af_buffer *feed_in, *feed_out; /* [nfeed] each: the buffers a step hands its programs */
    int nfeed;
    float *eval_x, *eval_out;

    af_stats acc, total;       /* this call, all calls */
    double phase_s[TR_NPHASE]; /* seconds per phase, all calls (two clock reads a phase) */
    int64_t host_flops, compiles_pending;
    struct cpu_pool *pool;     /* the shared pool host work runs on (taken on first use) */
    af_dist *dist;             /* data-parallel (dist.c); NULL: alone */
    int sync_every;            /* in-program plans: steps between averages */
    int64_t since_sync;        /* steps since the last average */
    void **dist_req;           /* [np]: gradient sums started during the backward (dist.c) */
};

double    tr_now_s(void);     /* monotonic clock, seconds */
/* Seconds spent in each phase so far (creation's compiles included); zeros for NULL. */
void      tr_phase_seconds(const af_trainer *t, double out[TR_NPHASE]);
float     tr_lr_at(const af_train_opts *o, int64_t step);
float     tr_lr_t(const af_trainer *t, int64_t step);
bool      tr_finite(const float *x, int64_t n);
float     tr_moment_rescale(const af_trainer *t);
bool      tr_rescales_moments(const af_trainer *t);
float     tr_eps_units(const af_trainer *t);
/* Adam's moments are the host optimizer's fp32 (m, v) of the unscaled gradient, not
 * programs' (m, r) in loss-scale units (the plan's TR_HOST_OPTIMIZER). */
bool      tr_host_moments(const af_trainer *t);
/* Every writer of the host moments other than the host optimizer calls this after it. */
void      tr_forget_state_bounds(af_trainer *t);
int       tr_num_metrics(const af_trainer *t);
/* The fed seed factor: dL/dz = (softmax(z) - y) * scale / B for cross-entropy,
 * (z - y) * 2 scale / (B out_dim) for MSE, dL/dloss = scale for a custom loss. */
float     tr_seed_scale(const af_trainer *t);
/* The dtype of the programs' ports: fp16 on engine targets (the host feeds fp32). */
af_dtype  tr_io_dtype(const af_trainer *t);
/* The shared thread pool for host work (taken on first use; NULL runs inline). */
struct cpu_pool *tr_pool(af_trainer *t);
af_status tr_run(af_trainer *t, af_model *m, const af_buffer *in, af_buffer *out);
af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out);
/* After a step that ran at loss scale ran_at: counts a skip or a step, moves the
 * dynamic scale, warns. */
void      tr_after_step(af_trainer *t, bool ok, float ran_at, double loss);
/* Engine-target guards (the A13 conv loss-scale warning). */
void      tr_guard(af_trainer *t);
/* n floats (or pointers) zeroed, or NULL with the error set (out of memory). */
void     *tr_zalloc(size_t n, size_t size);
#endif
