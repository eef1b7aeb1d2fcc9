/* The `device` plan (seed 000): the gradient programs (grad_programs.h) and one update
 * program per param, Adam's (w', m', r') stacked on axis 0; the host shuttles the state. */
#include "nn/optim.h"
#include "train/grad_programs.h"
#include "train/step_graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tr_grad_programs gp;
    af_model **upd;   /* [np] update programs */
    float **upd_out;  /* [np] the stacked [3 rows, cols] Adam output (SGD: w') */
} device_plan;

/* Adam: (w, m, r, g, lr_t[, moment_rescale], eps[, decay]) -> stack(w', m', r');
 * SGD: (w, g, lr_t[, decay]) -> w'. */
static af_status build_update_program(af_trainer *t, device_plan *d, int i) {
    af_graph *g = t->g;
    af_dtype dt = tr_io_dtype(t);
    af_shape f = t->flat[i];
    bool adam = t->o.optimizer == AF_OPT_ADAM, decay = t->o.weight_decay != 0.0f;
    af_tensor *in[8], *out;
    int n = 0;
    af_tensor *w = in[n++] = af_input(g, "w", dt, f);
    af_tensor *m = adam ? (in[n++] = af_input(g, "m", dt, f)) : NULL;
    af_tensor *r = adam ? (in[n++] = af_input(g, "r", dt, f)) : NULL;
    af_tensor *gr = in[n++] = af_input(g, "grad", dt, f);
    af_tensor *lr = in[n++] = tr_scalar_input(t, "lr_t");
    af_tensor *q = tr_rescales_moments(t) ? (in[n++] = tr_scalar_input(t, "moment_rescale")) : NULL;
    af_tensor *eps = adam ? (in[n++] = tr_scalar_input(t, "eps")) : NULL;
    af_tensor *dc = decay ? (in[n++] = tr_scalar_input(t, "decay")) : NULL;
    g->vouching++;
    if (adam) {
        nn_adam_cfg c = { t->o.beta1, t->o.beta2 };
        af_tensor *w2, *m2, *r2;
        nn_adam_update(&c, w, q ? af_mul(m, q) : m, q ? af_mul(r, q) : r, gr, lr, eps, dc, &w2, &m2, &r2);
        out = nn_stack3(w2, m2, r2);
    } else {
        out = nn_sgd_update(w, gr, lr, dc);
    }
    g->vouching--;
    if (!out) return tr_graph_error(t, "building an update program");
    d->upd[i] = tr_compile(t, n, in, 1, &out);
    if (!d->upd[i]) return ir_fail(AF_ERR_INVALID, "trainer: update program of '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    return AF_OK;
}

static af_status device_build(af_trainer *t) {
    device_plan *d = tr_zalloc(1, sizeof *d);
    if (!(t->ps = d)) return AF_ERR_NOMEM;
    int rows = t->o.optimizer == AF_OPT_ADAM ? 3 : 1;
    if (!(d->upd = tr_zalloc((size_t)t->np, sizeof *d->upd)) || !(d->upd_out = tr_zalloc((size_t)t->np, sizeof *d->upd_out)))
        return AF_ERR_NOMEM;
    for (int i = 0; i < t->np; i++)
        if (!(d->upd_out[i] = malloc((size_t)rows * (size_t)t->count[i] * sizeof(float)))) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    af_status st = tr_grad_programs_build(t, &d->gp);
    for (int i = 0; !st && i < t->np; i++) st = build_update_program(t, d, i);
    return st;
}

/* Runs param i's update program into upd_out[i]; *ok becomes false when the new state
 * is not all finite. */
static af_status device_update(af_trainer *t, device_plan *d, int i, int64_t step, bool *ok) {
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    float lr = tr_lr_t(t, step), decay = 1.0f - tr_lr_at(&t->o, step) * t->o.weight_decay;
    float q = tr_moment_rescale(t), eps = tr_eps_units(t);
    int64_t n = t->count[i];
    af_buffer in[8];
    int k = 0;
    in[k++] = AF_BUF_F32(t->master[i], n);
    if (adam) { in[k++] = AF_BUF_F32(t->m[i], n); in[k++] = AF_BUF_F32(t->v[i], n); }
    in[k++] = AF_BUF_F32(t->grad[i], n);
    in[k++] = AF_BUF_F32(&lr, 1);
    if (tr_rescales_moments(t)) in[k++] = AF_BUF_F32(&q, 1);
    if (adam) in[k++] = AF_BUF_F32(&eps, 1);
    if (t->o.weight_decay != 0.0f) in[k++] = AF_BUF_F32(&decay, 1);
    af_buffer out = AF_BUF_F32(d->upd_out[i], (adam ? 3 : 1) * n);
    af_status st = tr_run(t, d->upd[i], in, &out);
    if (st) return st;
    *ok = *ok && tr_finite(d->upd_out[i], (adam ? 3 : 1) * n);
    return AF_OK;
}

/* Splits the stacked rows back on the host: an array move, not tensor math. */
static void device_commit(af_trainer *t, device_plan *d) {
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    for (int i = 0; i < t->np; i++) {
        size_t bytes = (size_t)t->count[i] * sizeof(float);
        memcpy(t->master[i], d->upd_out[i], bytes);
        if (adam) {
            memcpy(t->m[i], d->upd_out[i] + t->count[i], bytes);
            memcpy(t->v[i], d->upd_out[i] + 2 * t->count[i], bytes);
        }
    }
}

/* One batch (grad_accum and grad_clip need the host optimizer): gradients, then every
 * param's update program; the new state is taken only when all of it is finite. */
static af_status device_step(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    device_plan *d = t->ps;
    af_status st = tr_grad_programs_run(t, &d->gp, x, y, info);
    if (st) return st;
    bool ok = true;
    for (int i = 0; i < t->np; i++) ok = ok && tr_finite(t->grad[i], t->count[i]);
    for (int i = 0; i < t->np; i++) t->host_flops += t->count[i];
    info->lr = tr_lr_at(&t->o, t->step);
    info->loss_scale = t->scale;
    double t2 = tr_now_s();
    for (int i = 0; ok && i < t->np; i++)
        if ((st = device_update(t, d, i, t->step, &ok))) return st;
    if (ok) device_commit(t, d);
    t->phase_s[TR_PHASE_OPTIMIZER] += tr_now_s() - t2;
    tr_after_step(t, ok, info->loss_scale, info->loss);
    info->skipped_now = !ok;
    return AF_OK;
}

static void device_free(af_trainer *t) {
    device_plan *d = t->ps;
    if (!d) return;
    tr_grad_programs_free(t, &d->gp);
    for (int i = 0; i < t->np; i++) {
        if (d->upd) af_model_free(d->upd[i]);
        if (d->upd_out) free(d->upd_out[i]);
    }
    free(d->upd);
    free(d->upd_out);
    free(d);
}

const tr_plan tr_plan_device = {
    .name = "device",
    .id = AF_PLAN_DEVICE,
    .caps = TR_HOST_METRICS,
    .build = device_build,
    .step = device_step,
    .free = device_free,
};
