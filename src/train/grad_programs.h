/* The gradient programs of the host and device plans (grad_programs.c): on the CPU one
 * fused forward + backward program; on engine targets a metrics program and one backward
 * program per param (a single program concatenating every gradient trips the wide-row
 * wall). */
#ifndef AF_TRAIN_GRAD_PROGRAMS_H
#define AF_TRAIN_GRAD_PROGRAMS_H
#include "train/core.h"

typedef struct {
    af_model *fb;    /* fused forward + all gradients (CPU target) */
    af_model *fwd;   /* metrics program (engine targets) */
    af_model **bwd;  /* [np]: one backward program per param (engine targets) */
    float *logits;   /* the forward output of a step */
} tr_grad_programs;

af_status tr_grad_programs_build(af_trainer *t, tr_grad_programs *gp);
/* One batch's forward and backward: the loss (and accuracy, computed on the host in fp32
 * from the logits, or a custom loss's value) into info, the gradients into t->grad. */
af_status tr_grad_programs_run(af_trainer *t, tr_grad_programs *gp, const float *x, const float *y, af_step_info *info);
void      tr_grad_programs_free(af_trainer *t, tr_grad_programs *gp);
#endif
