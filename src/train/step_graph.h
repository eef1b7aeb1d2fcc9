/* The graph of a training step from the user's af_net (step_graph.c): inputs, forward,
 * the objective's metrics and seed, and the backward pass. The host, device, resident
 * and unrolled plans build their programs from it. */
#ifndef AF_TRAIN_STEP_GRAPH_H
#define AF_TRAIN_STEP_GRAPH_H
#include "train/core.h"

/* The error "trainer (<plan> plan): what: <the graph's error>", returned. */
af_status tr_graph_error(af_trainer *t, const char *what);
/* A batch input [b, sample...] in the programs' dtype. */
af_tensor *tr_batch_input(af_trainer *t, const char *name, int64_t b);
/* A fed per-step scalar, [1,1] so it broadcasts over the [rows, cols] update views. */
af_tensor *tr_scalar_input(af_trainer *t, const char *name);
/* Forward, metrics, seed and backward for one step with weights w. *z is the forward
 * output; met[0] the in-graph mean loss, met[1] (cross-entropy) the number of rows whose
 * target class has the largest output; grads [np] the loss-scaled gradients. */
af_status tr_build_step(af_trainer *t, af_tensor *x, af_tensor *y, af_tensor *ls, af_tensor *const *w,
                        af_tensor **met, af_tensor **z_out, af_tensor **grads);
#endif
