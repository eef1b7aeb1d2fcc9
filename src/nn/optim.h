/* Optimizer updates as graph ops, so the update runs inside engine programs. The
 * learning rate arrives as a fed [1,1] input (bias correction folded in on the host),
 * never as a baked scalar, so it can change every step without a recompile. All
 * tensors here are 2-D [rows, cols]: params are flattened first (see nn_flat2d). */
#ifndef AF_NN_OPTIM_H
#define AF_NN_OPTIM_H
#include "ir/ir.h"

typedef struct {
    float beta1, beta2, eps;
} nn_adam_cfg;

/* [rows, cols] view of a param: cols is the last dim, rows the product of the rest. */
af_shape nn_flat2d(af_shape s);

/* Adam: m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2; w' = decay w - lr_t m' / (sqrt(v') + eps).
 * decay (fed [1,1], 1 - lr wd) may be NULL. */
void nn_adam_update(const nn_adam_cfg *c, af_tensor *w, af_tensor *m, af_tensor *v, af_tensor *g, af_tensor *lr_t,
                    af_tensor *decay, af_tensor **w2, af_tensor **m2, af_tensor **v2);
/* SGD: w' = decay w - lr_t g (lr_t has the loss scale divided out by the host). */
af_tensor *nn_sgd_update(af_tensor *w, af_tensor *g, af_tensor *lr_t, af_tensor *decay);
/* [1,1] holding 1 when every gradient is finite, else 0, built as equal(s, s) with
 * s = sum of reduce_sum(g - g): an inf or nan turns s into nan, and nan != nan. */
af_tensor *nn_all_finite(int n, af_tensor *const *grads2d);
/* The three same-shape Adam outputs stacked on axis 0 in their natural width,
 * [3 rows, cols]; a reshape to one wide row would trip the engine's wide-row wall. */
af_tensor *nn_stack3(af_tensor *w, af_tensor *m, af_tensor *v);
#endif
