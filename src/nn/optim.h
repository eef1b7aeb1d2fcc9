/* Optimizer updates as graph ops, so the update runs inside engine programs. The
 * learning rate arrives as a fed [1,1] input (bias correction folded in on the host),
 * never as a baked scalar, so it can change every step without a recompile.
 *
 * Adam's second moment is kept as its square root, r = sqrt(v), in the units of the
 * gradient it is fed. Why: in fp16, v = g^2 overflows once |g| > 256 (and the trainer's
 * gradients are loss-scaled), while r' = sqrt(b2 r^2 + (1-b2) g^2) never exceeds
 * max(r, |g|); computed as s * sqrt(b2 (r/s)^2 + (1-b2) (g/s)^2) with s = max(r, |g|),
 * every intermediate lies in [0, 1] or below s, so nothing overflows, and the term that
 * underflows is the one too small to matter. m' likewise never exceeds max(|m|, |g|).
 * So the state cannot overflow while the gradients are finite. */
#ifndef AF_NN_OPTIM_H
#define AF_NN_OPTIM_H
#include "ir/ir.h"

typedef struct {
    float beta1, beta2;
} nn_adam_cfg;

/* [rows, cols] view of a param: cols is the last dim, rows the product of the rest. */
af_shape nn_flat2d(af_shape s);

/* r' = sqrt(b2 r^2 + (1 - b2) g^2) without forming r^2 or g^2 (see above). */
af_tensor *nn_rms_update(float beta2, af_tensor *r, af_tensor *g);
/* Adam: m' = b1 m + (1-b1) g; r' = nn_rms_update; w' = decay w - lr_t m' / (r' + eps).
 * lr_t, eps and decay are [1,1] (or scalar) tensors; decay (1 - lr wd) may be NULL. */
void nn_adam_update(const nn_adam_cfg *c, af_tensor *w, af_tensor *m, af_tensor *r, af_tensor *g, af_tensor *lr_t,
                    af_tensor *eps, af_tensor *decay, af_tensor **w2, af_tensor **m2, af_tensor **r2);
/* SGD: w' = decay w - lr_t g (lr_t has the loss scale divided out by the host). */
af_tensor *nn_sgd_update(af_tensor *w, af_tensor *g, af_tensor *lr_t, af_tensor *decay);
/* [1,1] holding 1 when every element of every tensor (any shapes) is finite, else 0,
 * built as equal(s, s) with s = sum of reduce_sum(x - x): an inf or nan turns s into
 * nan, nan != nan, and finite x - x is exactly 0, so large values cannot overflow s. */
af_tensor *nn_all_finite(int n, af_tensor *const *xs);
/* The three same-shape Adam outputs stacked on axis 0 in their natural width,
 * [3 rows, cols]; a reshape to one wide row would trip the engine's wide-row wall. */
af_tensor *nn_stack3(af_tensor *w, af_tensor *m, af_tensor *v);
/* A weight after an update keeps what conv2d needs to know about its param. */
void nn_carry_param_facts(af_tensor *to, const af_tensor *param);
#endif
