/* The trainer's steps and predictions: the per-call bookkeeping around its plan's step,
 * and the evaluation program that plans without their own predict share. */
#include "nn/optim.h"
#include "train/dist.h"
#include "train/step_graph.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

af_train_opts af_train_defaults(void) {
    return (af_train_opts){
        .objective = AF_OBJ_CE, .optimizer = AF_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
        .eps = 1e-8f, .schedule = AF_LR_CONSTANT, .min_lr_ratio = 0.0f, .loss_scale = 1.0f,
        .scale_growth_interval = 1000, .plan = AF_PLAN_HOST, .unroll = 8, .batch = 128, .eval_batch = 500,
    };
}

const char *af_metric_source_name(af_metric_source s) {
    static const char *const names[] = { "host_fp32", "graph_fp32", "graph_fp16" };
    return (unsigned)s < 3 ? names[s] : "?";
}

af_status af_trainer_step(af_trainer *t, const float *x, const float *target, af_step_info *info) {
    af_step_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!t) return ir_fail(AF_ERR_INVALID, "af_trainer_step: trainer is NULL");
    if (!x || !target) return ir_fail(AF_ERR_INVALID, "af_trainer_step: x or target is NULL");
    t->acc = (af_stats){ 0 };
    t->host_flops = 0;
    af_status st = t->plan->step(t, x, target, info);
    if (!st) st = tr_dist_after_call(t); /* in-program plans: local SGD's average */
    info->step = t->step;
    info->skipped = t->skipped;
    info->skipped_consecutive = t->skipped_consecutive;
    info->metric_source = t->metric_source;
    info->stats = t->acc;
    info->stats.host_flops = t->host_flops;
    info->stats.compiles = t->compiles_pending;
    t->compiles_pending = 0;
    t->total.dispatches += t->acc.dispatches;
    t->total.bytes_in += t->acc.bytes_in;
    t->total.bytes_out += t->acc.bytes_out;
    t->total.engine_flops += t->acc.engine_flops;
    t->total.segment_bytes += t->acc.segment_bytes;
    t->total.host_flops += t->host_flops;
    return st;
}

int af_trainer_steps_per_call(const af_trainer *t) { return t ? t->k : 0; }
int af_trainer_batches_per_call(const af_trainer *t) { return t ? t->k * t->o.grad_accum : 0; }
int af_trainer_num_params(const af_trainer *t) { return t ? t->np : 0; }
af_family_id af_trainer_family(const af_trainer *t) { return t ? t->o.compile.family : AF_FAMILY_DEFAULT; }
af_tensor *af_trainer_param(const af_trainer *t, int i) { return t && i >= 0 && i < t->np ? t->p[i] : NULL; }

void af_trainer_stats(const af_trainer *t, af_stats *out) {
    if (out) *out = t ? t->total : (af_stats){ 0 };
}

af_status af_trainer_read_param(af_trainer *t, int i, float *dst) {
    if (!t || i < 0 || i >= t->np || !dst) return ir_fail(AF_ERR_INVALID, "af_trainer_read_param: bad trainer, index %d or NULL dst", i);
    if (t->plan->read_param) return t->plan->read_param(t, i, dst);
    if (dst != t->master[i]) memcpy(dst, t->master[i], (size_t)t->count[i] * sizeof(float)); /* dst: maybe af_tensor_value's */
    return AF_OK;
}

/* ------------------------------------------------------------------ evaluation */

af_status tr_build_eval_graph(af_trainer *t) {
    af_tensor **in = t->eval_in, **w;
    if (t->plan->predict) return AF_OK; /* the plan predicts through its own programs */
    if (!(w = tr_zalloc((size_t)t->np, sizeof *w))) return AF_ERR_NOMEM;
    in[0] = tr_batch_input(t, "eval_x", t->o.eval_batch);
    /* Its own weight inputs, fed the current masters: it never shares ports with training. */
    for (int i = 0; i < t->np; i++) {
        char name[32];
        snprintf(name, sizeof name, "eval_w%d", i);
        in[1 + i] = w[i] = af_input(t->g, name, tr_io_dtype(t), t->p[i]->shape);
        nn_carry_param_facts(w[i], t->p[i]);
    }
    t->eval_z = t->net.forward(t->net.ctx, in[0], w);
    free(w);
    return t->eval_z ? AF_OK : tr_graph_error(t, "building the evaluation program");
}

static af_status build_eval(af_trainer *t) {
    int64_t eb = t->o.eval_batch, xs = af_shape_count(t->net.sample);
    t->eval = tr_compile(t, 1 + t->np, t->eval_in, 1, &t->eval_z);
    t->eval_x = malloc((size_t)(eb * xs) * sizeof(float));
    t->eval_out = malloc((size_t)(eb * t->net.out_dim) * sizeof(float));
    if (!t->eval || !t->eval_x || !t->eval_out) return ir_fail(AF_ERR_INVALID, "trainer: evaluation program: %s", af_error_message());
    return AF_OK;
}

af_status af_trainer_predict(af_trainer *t, int64_t n, const float *x, float *out) {
    if (!t || !x || !out || n < 0) return ir_fail(AF_ERR_INVALID, "af_trainer_predict: bad arguments");
    if (t->plan->predict) return t->plan->predict(t, n, x, out);
    af_status st;
    if (!t->eval && (st = build_eval(t))) return st;
    int64_t eb = t->o.eval_batch, xs = af_shape_count(t->net.sample), od = t->net.out_dim;
    for (int i = 0; i < t->np; i++)
        if ((st = af_trainer_read_param(t, i, t->grad[i]))) return st; /* grad buffers as scratch */
    af_buffer *in = t->feed_in;
    for (int i = 0; i < t->np; i++) in[1 + i] = AF_BUF_F32(t->grad[i], t->count[i]);
    for (int64_t b = 0; b < n; b += eb) {
        int64_t m = n - b < eb ? n - b : eb;
        const float *xb = x + b * xs;
        float *ob = out + b * od;
        if (m < eb) { /* pad the last chunk */
            memset(t->eval_x, 0, (size_t)(eb * xs) * sizeof(float));
            memcpy(t->eval_x, xb, (size_t)(m * xs) * sizeof(float));
            xb = t->eval_x;
            ob = t->eval_out;
        }
        in[0] = AF_BUF_F32(xb, eb * xs);
        af_buffer o = AF_BUF_F32(ob, eb * od);
        if ((st = tr_run(t, t->eval, in, &o))) return st;
        if (m < eb) memcpy(out + b * od, t->eval_out, (size_t)(m * od) * sizeof(float));
    }
    return AF_OK;
}
