/* The pipeline plan for af_net_llama (seed 002's kernels, llama_pipeline.c): the trainer
 * keeps the host plan's state and Adam, and takes its gradients from here. */
#ifndef AF_TRAIN_LLAMA_PIPELINE_H
#define AF_TRAIN_LLAMA_PIPELINE_H
#include "train/trainer.h"

/* Compiles the kernels once into t->pipe (fails for a net that is not af_net_llama). */
af_status tr_pipe_build(af_trainer *t);
/* One batch: x token ids [B, S], y one-hot next tokens [B, S * V]. Writes every
 * gradient (scaled by the loss scale) to t->grad and the mean cross-entropy to *loss. */
af_status tr_pipe_grads(af_trainer *t, const float *x, const float *y, double *loss);
/* Logits [n, S * V] for n windows of ids, through the same forward kernels. */
af_status tr_pipe_predict(af_trainer *t, int64_t n, const float *x, float *out);
void      tr_pipe_free(tr_pipe *p);
#endif
