/* The fp32 optimizer on the host (host_opt.c), for the plans whose programs stop at the
 * gradients (TR_HOST_OPTIMIZER: host, pipeline): gradient accumulation, clipping, Adam or
 * SGD on the unscaled gradient, in place, and a step taken only when all new state is
 * finite. */
#ifndef AF_TRAIN_HOST_OPT_H
#define AF_TRAIN_HOST_OPT_H
#include "train/core.h"

/* A whole step: grad_accum batches through t->plan->grads, then the update. */
af_status tr_host_opt_step(af_trainer *t, const float *x, const float *y, af_step_info *info);

/* Whether Adam's update (b1, b2, lr_t, eps, decay: host_opt.c's ADAM_ELEM) stores only
 * finite values for every |g * unscale| <= gmax, |w| <= wmax and moments within b:
 * the proof that lets a step skip the pass that checks its new state. */
bool tr_adam_surely_finite(float b1, float b2, float lr_t, float eps, float decay, double gmax, double wmax,
                           tr_state_bound b);
#endif
