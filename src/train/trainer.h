/* Trainer internals shared by trainer.c (host side of a step), plans.c (building the
 * programs of each plan) and trainer_io.c (creation, checkpoints). */
#ifndef AF_TRAIN_TRAINER_H
#define AF_TRAIN_TRAINER_H
#include "ir/ir.h"

#define TR_MAXP 64    /* params */
#define TR_MAXK 64    /* unrolled steps */
#define TR_MAXIO 1024 /* inputs or outputs of one program */
/* fp16 Adam keeps its moments in units of 1/128 of a gradient whatever the loss scale:
 * v = (scale g)^2 overflows fp16 once |scale g| > 256, and plain g^2 underflows. */
#define TR_MOMENT_UNIT 128.0f

struct af_trainer {
    af_net net;
    af_train_opts o;
    af_graph *g;
    int np, k;                 /* params; steps per call */
    af_tensor *p[TR_MAXP];
    int64_t count[TR_MAXP];
    af_shape flat[TR_MAXP];    /* [rows, cols] view used by the update programs */
    int64_t x_count, y_count;  /* floats in one batch of x and of targets */
    float eps_engine;          /* Adam eps as the programs see it, in moment units */
    int fp16;                  /* the programs run in fp16 storage */

    /* host-side state (host and device plans; resident plans read back on demand) */
    float *master[TR_MAXP], *m[TR_MAXP], *v[TR_MAXP], *grad[TR_MAXP];
    int64_t step, skipped, clean_run;
    float scale;

    /* programs */
    af_model *fb;              /* fused forward + all gradients (CPU target) */
    af_model *fwd;             /* metrics program (engine targets) */
    af_model *bwd[TR_MAXP];    /* one backward program per param (engine targets) */
    af_model *upd[TR_MAXP];    /* device plan: one update program per param */
    float *upd_out[TR_MAXP];   /* device plan: the stacked [3 rows, cols] Adam output */
    af_model *res;             /* resident / unrolled step program */
    int state_in[TR_MAXP];     /* res: input index holding param i */
    int nstate;                /* res: inputs bound as resident state */
    af_model *eval;            /* compiled on first use from eval_in -> eval_z */
    af_tensor *eval_in[1 + TR_MAXP], *eval_z; /* built by af_trainer_new: the net is never used after it */
    float *eval_x, *eval_out;

    af_stats acc, total;       /* this call, all calls */
    int64_t host_flops, compiles_pending;
    struct cpu_pool *pool;     /* threads of the host optimizer (made on first use) */
};

float     tr_lr_at(const af_train_opts *o, int64_t step);
float     tr_lr_t(const af_trainer *t, int64_t step);
float     tr_grad_mult(const af_trainer *t);
af_status tr_run(af_trainer *t, af_model *m, const af_buffer *in, af_buffer *out);
af_status tr_build_programs(af_trainer *t);
af_status tr_build_eval_graph(af_trainer *t); /* the evaluation forward, without compiling it */
af_status tr_build_eval(af_trainer *t);
af_status tr_device_update(af_trainer *t, int i, int64_t step);
/* Engine-target guards (the A13 conv loss-scale warning). */
void      tr_guard(af_trainer *t);
af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out);
#endif
