/* Trainer internals shared by trainer.c (host side of a step), plans.c (building the
 * programs of each plan) and trainer_io.c (creation, checkpoints). */
#ifndef AF_TRAIN_TRAINER_H
#define AF_TRAIN_TRAINER_H
#include "ir/ir.h"

#define TR_MAXK 64    /* unrolled steps */
/* Room the trainer offers make_params (af_net): per-param state is then sized to the
 * count it returns, so the depth of a model is limited by memory, not by a table. */
#define TR_PARAM_ROOM 65536
/* Where a trainer's wall time goes (tr_phase_seconds): the programs of a step (forward
 * and backward; on the resident and unrolled plans the one step program, optimizer
 * included), the optimizer (host update or update programs) and compiling. */
enum { TR_PHASE_FWD_BWD, TR_PHASE_OPTIMIZER, TR_PHASE_COMPILE, TR_NPHASE };
/* Adam's moments on the host (host plan): fp32 m and v of the unscaled gradient.
 * In programs (device, resident, unrolled plans): m and r = sqrt(v) (nn/optim.h) of the
 * loss-scaled gradient, i.e. in units of the loss scale `moment_unit` they were last
 * updated at; a step at another scale first multiplies them by scale / moment_unit (fed
 * as "moment_rescale", a power of two for the dynamic scale), so they always share the
 * units of the fp16 gradients they are combined with and cannot overflow where those
 * gradients do not. */

typedef struct tr_pipe tr_pipe; /* the pipeline plan's kernels and activations */
typedef struct tr_lres tr_lres; /* the resident plan's llama-specific parts */

struct af_trainer {
    af_net net;
    af_train_opts o;
    af_graph *g;
    int np, k;                 /* params; steps per call */
    /* Per-param arrays below hold np entries (tr_alloc_params). */
    af_tensor **p;
    int64_t *count;
    af_shape *flat;            /* [rows, cols] view used by the update programs */
    int64_t x_count, y_count;  /* floats in one batch of x and of targets */
    int fp16;                  /* the programs run in fp16 storage */
    bool state_bound;          /* res holds params and moments as resident state */
    af_metric_source metric_source;

    /* host-side state (host and device plans, shuttled unrolled; resident plans read
     * back on demand): v holds v on the host plan, r = sqrt(v) in moment units elsewhere */
    float **master, **m, **v, **grad;
    float **gsum;              /* grad_accum > 1: the step's gradients summed over its batches */
    float *(*next)[3];         /* host plan: the updated state, swapped in when finite */
    int64_t step, skipped, skipped_consecutive, clean_run;
    int64_t stuck_skips;       /* consecutive skips that a lower loss scale cannot cure */
    float scale, moment_unit;

    /* programs */
    af_model *fb;              /* fused forward + all gradients (CPU target) */
    af_model *fwd;             /* metrics program (engine targets) */
    af_model **bwd;            /* one backward program per param (engine targets) */
    af_model **upd;            /* device plan: one update program per param */
    float **upd_out;           /* device plan: the stacked [3 rows, cols] Adam output (SGD: w');
                                * shuttled unrolled plan: w', m', r' read back */
    float *logits;             /* host and device plans: the forward output of a step */
    af_model *res;             /* resident / unrolled step program */
    int *state_in;             /* res: input index holding param i (m, v follow np and 2 np later) */
    int state_out0;            /* res: output index of param 0's new value (same layout) */
    int nstate;                /* res: state inputs (params, then m, then v) */
    tr_pipe *pipe;             /* pipeline plan (af_net_llama): seed 002's kernels */
    tr_lres *lres;             /* resident plan for af_net_llama: ids as fp16 digits, blocked vocabulary */
    af_model *eval;            /* compiled on first use from eval_in -> eval_z */
    af_tensor **eval_in, *eval_z; /* [1 + np], built by af_trainer_new: the net is never used after it */
    af_buffer *feed_in, *feed_out; /* [nfeed] each: the buffers a step hands its programs */
    int nfeed;
    float *eval_x, *eval_out;

    af_stats acc, total;       /* this call, all calls */
    double phase_s[TR_NPHASE]; /* seconds per phase, all calls (two clock reads a phase) */
    int64_t host_flops, compiles_pending;
    struct cpu_pool *pool;     /* the shared pool the host optimizer runs on (taken on first use) */
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
/* Adam's moments are the host plan's fp32 (m, v) of the unscaled gradient (host and
 * pipeline plans), not programs' (m, r) in loss-scale units. */
bool      tr_host_moments(const af_trainer *t);
int       tr_num_metrics(const af_trainer *t);
af_status tr_run(af_trainer *t, af_model *m, const af_buffer *in, af_buffer *out);
/* After a step that ran at loss scale ran_at: counts a skip or a step, moves the
 * dynamic scale, warns. */
void      tr_after_step(af_trainer *t, bool ok, float ran_at, double loss);
af_status tr_build_programs(af_trainer *t);
af_status tr_build_eval_graph(af_trainer *t); /* the evaluation forward, without compiling it */
af_status tr_build_eval(af_trainer *t);
/* Runs param i's update program into upd_out[i]; *ok becomes false when the new state
 * is not all finite. tr_device_commit then takes every param's new state. */
af_status tr_device_update(af_trainer *t, int i, int64_t step, bool *ok);
void      tr_device_commit(af_trainer *t);
/* Engine-target guards (the A13 conv loss-scale warning). */
void      tr_guard(af_trainer *t);
af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out);
#endif
