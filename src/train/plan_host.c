/* The `host` plan (seed 000): the gradient programs (grad_programs.h) and the fp32
 * optimizer on the host (host_opt.h). */
#include "train/grad_programs.h"
#include "train/host_opt.h"

#include <stdlib.h>

static af_status host_build(af_trainer *t) {
    tr_grad_programs *gp = tr_zalloc(1, sizeof *gp);
    if (!(t->ps = gp)) return AF_ERR_NOMEM;
    return tr_grad_programs_build(t, gp);
}

static af_status host_grads(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    return tr_grad_programs_run(t, t->ps, x, y, info);
}

static void host_free(af_trainer *t) {
    if (t->ps) tr_grad_programs_free(t, t->ps);
    free(t->ps);
}

const tr_plan tr_plan_host = {
    .name = "host",
    .id = AF_PLAN_HOST,
    .caps = TR_HOST_OPTIMIZER | TR_HOST_METRICS,
    .build = host_build,
    .step = tr_host_opt_step,
    .grads = host_grads,
    .free = host_free,
};
