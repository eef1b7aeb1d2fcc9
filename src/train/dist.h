/* Data-parallel training (dist.c): the trainer's side of it, over a small transport
 * interface so the library builds without MPI. dist_mpi.c is the MPI transport (built
 * with -DAF_MPI=ON, else a stub that says how to get it); a test may bring its own. */
#ifndef AF_TRAIN_DIST_H
#define AF_TRAIN_DIST_H
#include "train/core.h"

/* What a transport does; every call is collective (all ranks, same order, same n). Each
 * returns AF_OK, or the status with the error set (a peer that does not answer within
 * timeout_s is an error that says so, never a hang). */
typedef struct tr_dist_ops {
    af_status (*allreduce_f32)(void *ctx, float *buf, int64_t n, double timeout_s);  /* sum */
    af_status (*allreduce_f64)(void *ctx, double *buf, int n, af_dist_op op, double timeout_s);
    af_status (*bcast_f32)(void *ctx, float *buf, int64_t n, double timeout_s);      /* from rank 0 */
    /* Optional (NULL: the blocking sum above): a sum started now, finished by wait; test
     * lets it progress (MPI moves bytes only inside its calls) and says whether it is done. */
    af_status (*start_f32)(void *ctx, float *buf, int64_t n, void **req);
    int (*test)(void *ctx, void *req);
    af_status (*wait)(void *ctx, void *req, double timeout_s);  /* also frees req */
    void (*abort)(void *ctx, int code);  /* ends every rank's process (NULL: nothing) */
    void (*free)(void *ctx);             /* leaves the job (NULL: nothing) */
} tr_dist_ops;

struct af_dist {
    const tr_dist_ops *ops;
    void *ctx;
    int rank, size;
    double timeout_s;
    int64_t bytes;       /* bytes all-reduced (each rank's contribution), all calls */
    double comm_s;       /* seconds inside the transport, all calls */
};

/* A dist over ops (the MPI one, or a test's); NULL with the error set. */
af_dist *tr_dist_new(const tr_dist_ops *ops, void *ctx, int rank, int size, double timeout_s);
/* Host-optimizer plans, after the step's batches: the gradients (np arrays of t->count
 * floats, loss-scaled) and the step's loss and accuracy averaged over the ranks. */
af_status tr_dist_average_grads(af_trainer *t, float *const *grad, double *loss, double *acc);
/* A plan whose backward finishes the gradients one parameter at a time (the pipeline
 * plan, layer by layer) says so: with grad_accum 1 param i's average starts now and
 * overlaps the rest of the backward; tr_dist_average_grads waits for it. */
void tr_dist_grad_ready(af_trainer *t, int i);
/* After each call of an in-program plan: every sync_every steps, the average. */
af_status tr_dist_after_call(af_trainer *t);
#endif
