/* The host and device plans' gradient programs (grad_programs.h). */
#include "train/grad_programs.h"
#include "train/step_graph.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* in [3 + np], out [1 + np], grads [np]: scratch. */
static af_status gp_programs(af_trainer *t, tr_grad_programs *gp, af_tensor **in, af_tensor **out, af_tensor **grads) {
    af_tensor *met[2], *z;
    in[0] = tr_batch_input(t, "x", t->o.batch);
    in[1] = af_input(t->g, "target", tr_io_dtype(t), AF_SHAPE(t->o.batch, t->net.out_dim));
    in[2] = tr_scalar_input(t, "loss_scale");
    for (int i = 0; i < t->np; i++) in[3 + i] = t->p[i];
    af_status st = tr_build_step(t, in[0], in[1], in[2], t->p, met, &z, grads);
    if (st) return st;
    /* The logits reach the host, which computes loss and accuracy in fp32; a custom
     * loss is only known to the graph, so its value is the output. */
    out[0] = t->o.objective == AF_OBJ_CUSTOM ? met[0] : z;
    if (!t->engine) {
        for (int i = 0; i < t->np; i++) out[1 + i] = grads[i];
        gp->fb = tr_compile(t, 3 + t->np, in, 1 + t->np, out);
        if (!gp->fb) return ir_fail(AF_ERR_INVALID, "trainer: %s", af_error_message());
        /* bounds on the gradients that products' epilogues see: the host optimizer's
         * screen then reads only the others (host_opt.c) */
        model_track_output_bounds(gp->fb);
        return AF_OK;
    }
    gp->fwd = tr_compile(t, 3 + t->np, in, 1, out);
    if (!gp->fwd)
        return ir_fail(AF_ERR_INVALID, "trainer: forward program: %s%s", af_error_message(),
                       t->net.llama_config ? " (a llama: the pipeline or resident plan binds the same few ports at any depth)" : "");
    for (int i = 0; i < t->np; i++) {
        gp->bwd[i] = tr_compile(t, 3 + t->np, in, 1, &grads[i]);
        if (!gp->bwd[i]) return ir_fail(AF_ERR_INVALID, "trainer: backward program of param '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    }
    return AF_OK;
}

af_status tr_grad_programs_build(af_trainer *t, tr_grad_programs *gp) {
    if (!(gp->logits = malloc((size_t)t->y_count * sizeof(float)))) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    af_tensor **in = tr_zalloc((size_t)(3 + t->np), sizeof *in), **out = tr_zalloc((size_t)(1 + t->np), sizeof *out);
    af_tensor **grads = tr_zalloc((size_t)t->np, sizeof *grads);
    gp->bwd = tr_zalloc((size_t)t->np, sizeof *gp->bwd);
    af_status st = in && out && grads && gp->bwd ? gp_programs(t, gp, in, out, grads) : AF_ERR_NOMEM;
    free(in);
    free(out);
    free(grads);
    return st;
}

void tr_grad_programs_free(af_trainer *t, tr_grad_programs *gp) {
    af_model_free(gp->fb);
    af_model_free(gp->fwd);
    for (int i = 0; gp->bwd && i < t->np; i++) af_model_free(gp->bwd[i]);
    free(gp->bwd);
    free(gp->logits);
}

/* Loss and accuracy in fp32 (double sums) on the host from a step's outputs z [B, C]:
 * what seed 000's trainer reports. Accuracy counts rows whose target class has the
 * largest output, as the in-graph count does. */
static void host_metrics(af_trainer *t, const float *z, const float *y, af_step_info *info) {
    int64_t rows = t->o.batch, c = t->net.out_dim;
    double loss = 0;
    int64_t hits = 0;
    for (int64_t b = 0; b < rows; b++) {
        const float *zb = z + b * c, *yb = y + b * c;
        if (t->o.objective == AF_OBJ_MSE) {
            for (int64_t j = 0; j < c; j++) loss += ((double)zb[j] - yb[j]) * ((double)zb[j] - yb[j]);
            continue;
        }
        double mx = zb[0], se = 0, yz = 0, ysum = 0;
        int64_t target = 0;
        for (int64_t j = 1; j < c; j++) mx = zb[j] > mx ? zb[j] : mx;
        for (int64_t j = 0; j < c; j++) {
            se += exp((double)zb[j] - mx);
            yz += (double)yb[j] * zb[j];
            ysum += yb[j];
            if (yb[j] > yb[target]) target = j;
        }
        loss += (log(se) + mx) * ysum - yz;
        hits += zb[target] >= mx;
    }
    info->loss = t->o.objective == AF_OBJ_MSE ? loss / (double)(rows * c) : loss / (double)rows;
    info->accuracy = t->o.objective == AF_OBJ_CE ? (double)hits / (double)rows : 0.0;
    t->host_flops += 5 * rows * c;
}

af_status tr_grad_programs_run(af_trainer *t, tr_grad_programs *gp, const float *x, const float *y, af_step_info *info) {
    af_buffer *in = t->feed_in, *out = t->feed_out;
    float ls = tr_seed_scale(t), loss_value = 0;
    in[0] = AF_BUF_F32(x, t->x_count);
    in[1] = AF_BUF_F32(y, t->y_count);
    in[2] = AF_BUF_F32(&ls, 1);
    for (int i = 0; i < t->np; i++) in[3 + i] = AF_BUF_F32(t->master[i], t->count[i]);
    /* The first output: the logits (metrics on the host), or a custom loss's value. */
    bool custom = t->o.objective == AF_OBJ_CUSTOM;
    out[0] = custom ? AF_BUF_F32(&loss_value, 1) : AF_BUF_F32(gp->logits, t->y_count);
    af_status st;
    double t0 = tr_now_s();
    if (gp->fb) { /* one fused program: the first output then every gradient */
        for (int i = 0; i < t->np; i++) out[1 + i] = AF_BUF_F32(t->grad[i], t->count[i]);
        if ((st = tr_run(t, gp->fb, in, out))) return st;
        for (int i = 0; i < t->np; i++)
            if (!model_output_bound(gp->fb, 1 + i, &t->gbound[i])) t->gbound[i] = INFINITY;
    } else { /* the engine's recipe: a forward program and one backward program per param */
        if ((st = tr_run(t, gp->fwd, in, out))) return st;
        for (int i = 0; i < t->np; i++) {
            af_buffer go = AF_BUF_F32(t->grad[i], t->count[i]);
            if ((st = tr_run(t, gp->bwd[i], in, &go))) return st;
        }
    }
    t->phase_s[TR_PHASE_FWD_BWD] += tr_now_s() - t0;
    if (custom) info->loss = loss_value;
    else host_metrics(t, gp->logits, y, info);
    return AF_OK;
}
