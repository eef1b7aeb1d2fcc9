/* The training plan interface: what the trainer (trainer.c, trainer_io.c) asks of a plan.
 * A plan is a table of functions over the trainer, in the manner of the backends'
 * backend_iface (compile/backend.h); registry.c lists them, one line each. A plan builds
 * its programs from the net once, runs a call's steps, and keeps whatever state it holds
 * outside the host copies (t->master, t->m, t->v) behind read_param and sync_state; its
 * private parts hang off t->ps.
 *
 * Adding a plan: a file with its tr_plan (build and step at least) and one line in
 * registry.c; af_plan_parse and the CLI's --plan then know its name. */
#ifndef AF_TRAIN_PLAN_H
#define AF_TRAIN_PLAN_H
#include "aneforge.h"

#include <stdbool.h>

/* What a plan is, for the trainer's checks and bookkeeping. */
enum {
    /* The optimizer runs on the host in fp32 (host_opt.h): moments are fp32 (m, v) of the
     * unscaled gradient, grad_clip and grad_accum apply, and x holds grad_accum batches. */
    TR_HOST_OPTIMIZER = 1 << 0,
    /* Loss and accuracy of CE and MSE are computed on the host in fp32 from the programs'
     * outputs (a custom loss is only known to the graph). */
    TR_HOST_METRICS = 1 << 1,
    /* Runs opts.unroll steps per call (1..TR_MAXK); otherwise one. */
    TR_UNROLLS = 1 << 2,
    /* Accepts opts.shuttle_state (state fed in and read back around every call). */
    TR_SHUTTLES = 1 << 3,
    /* Computes even the net's own loss on the host (the pipeline plan's cross-entropy). */
    TR_HOST_LOSS = 1 << 4,
};

typedef struct tr_plan {
    const char *name; /* as --plan, af_plan_name and checkpoints' "trainer.plan" spell it */
    af_plan id;
    unsigned caps;    /* TR_* above */
    /* Builds the plan's programs and host buffers from t's params and net (the only time
     * the net is used); may hand over to a variant by setting t->plan to it and calling
     * its build (the resident plan on a llama). AF_OK or the status with the error set;
     * on failure the trainer calls free. */
    af_status (*build)(struct af_trainer *t);
    /* One call: steps_per_call steps (x, y: batches_per_call batches back to back). Fills
     * info's loss, accuracy, lr, loss_scale, skipped_now; moves the step counters and the
     * loss scale through tr_after_step. */
    af_status (*step)(struct af_trainer *t, const float *x, const float *y, af_step_info *info);
    /* TR_HOST_OPTIMIZER: one batch's loss (and accuracy) into info and its loss-scaled
     * gradients into t->grad; the host optimizer (host.c) does the rest. */
    af_status (*grads)(struct af_trainer *t, const float *x, const float *y, af_step_info *info);
    /* Outputs [n, out_dim] for n samples through the plan's own forward; NULL: the
     * trainer's evaluation program, fed read_param's values. */
    af_status (*predict)(struct af_trainer *t, int64_t n, const float *x, float *out);
    /* Param i's current value; NULL: the host copy t->master[i] is current. */
    af_status (*read_param)(struct af_trainer *t, int i, float *dst);
    /* Moves params and moments between the host copies and the plan's resident state
     * (read: onto the host, before a checkpoint; write: into the programs, after a load);
     * NULL: the host copies are the state. */
    af_status (*sync_state)(struct af_trainer *t, bool read);
    /* Releases t->ps (NULL-safe; called once, also after a failed build). */
    void (*free)(struct af_trainer *t);
} tr_plan;
#endif
