/* The resident plan for af_net_llama (llama_resident.c): one step program with every
 * tensor within the engine's limits at any vocabulary, parameters and moments resident. */
#ifndef AF_TRAIN_LLAMA_RESIDENT_H
#define AF_TRAIN_LLAMA_RESIDENT_H
#include "train/trainer.h"

/* Builds and compiles the step program into t->res (state bound) and the prediction
 * graph (compiled on first use). */
af_status tr_lres_build(af_trainer *t);
/* One step: x token ids [B, T], y one-hot next tokens [B, T * V]; *loss the program's
 * mean cross-entropy, *ok whether the update was taken (all new state finite). */
af_status tr_lres_step(af_trainer *t, const float *x, const float *y, float *loss, bool *ok);
af_status tr_lres_predict(af_trainer *t, int64_t n, const float *x, float *out);
/* Param i's current value from its group's resident state. */
af_status tr_lres_read_param(af_trainer *t, int i, float *dst);
/* Every group's state to the host's masters and moments (read) or back (write). */
af_status tr_lres_move_state(af_trainer *t, bool read);
void      tr_lres_free(tr_lres *r);
#endif
