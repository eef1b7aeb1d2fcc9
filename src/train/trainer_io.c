/* Creating and freeing trainers, and their checkpoints. */
#include "cpu/pool.h"
#include "nn/optim.h"
#include "train/ckpt.h"
#include "train/registry.h"
#include "train/trainer.h"
#include "train/trainer_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static af_status check_opts(const af_net *net, const af_train_opts *o, const tr_plan *plan) {
    if (!net || !net->make_params || !net->forward)
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: the net needs make_params and forward functions");
    if (net->out_dim < 1 || af_shape_count(net->sample) < 1)
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: the net's sample shape and out_dim must be set (out_dim %lld)", (long long)net->out_dim);
    if ((unsigned)o->objective > AF_OBJ_CUSTOM) return ir_fail(AF_ERR_INVALID, "af_trainer_new: unknown objective %d", (int)o->objective);
    if (o->objective == AF_OBJ_CUSTOM && !net->loss)
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: objective AF_OBJ_CUSTOM needs the net's loss function (af_net.loss)");
    if (o->shuttle_state && plan && !(plan->caps & TR_SHUTTLES))
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: shuttle_state applies to the unrolled (and resident) plans, not '%s'", plan->name);
    if (o->optimizer != AF_OPT_ADAM && o->optimizer != AF_OPT_SGD) return ir_fail(AF_ERR_INVALID, "af_trainer_new: unknown optimizer %d", (int)o->optimizer);
    if (!plan) return ir_fail(AF_ERR_INVALID, "af_trainer_new: unknown plan %d", (int)o->plan);
    if (!(o->lr > 0) || !isfinite(o->lr)) return ir_fail(AF_ERR_INVALID, "af_trainer_new: learning rate %g must be positive and finite", (double)o->lr);
    if (o->batch < 1 || o->eval_batch < 1) return ir_fail(AF_ERR_INVALID, "af_trainer_new: batch %d and eval_batch %d must be >= 1", o->batch, o->eval_batch);
    if ((plan->caps & TR_UNROLLS) && (o->unroll < 1 || o->unroll > TR_MAXK))
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: unroll %d must be in 1..%d", o->unroll, TR_MAXK);
    if (!(o->loss_scale >= 0) || !isfinite(o->loss_scale)) return ir_fail(AF_ERR_INVALID, "af_trainer_new: loss scale %g must be >= 0 (0 means 1)", (double)o->loss_scale);
    if (o->optimizer == AF_OPT_ADAM && !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: Adam needs 0 <= beta1, beta2 < 1 and eps > 0");
    if (!(o->grad_clip >= 0) || !isfinite(o->grad_clip))
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: grad_clip %g must be >= 0 (0 = off)", (double)o->grad_clip);
    if (o->grad_accum < 0 || o->grad_accum > 4096)
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: grad_accum %d must be in 0..4096 (0 or 1 = one batch per step)", o->grad_accum);
    if ((o->grad_clip > 0 || o->grad_accum > 1) && !(plan->caps & TR_HOST_OPTIMIZER))
        return ir_fail(AF_ERR_INVALID,
                       "af_trainer_new: grad_clip and grad_accum need the host or pipeline plan (the optimizer runs on "
                       "the host there); plan '%s' updates inside its programs", plan->name);
    if (o->schedule == AF_LR_COSINE && o->total_steps <= o->warmup_steps)
        return ir_fail(AF_ERR_INVALID, "af_trainer_new: the cosine schedule needs total_steps (%lld) > warmup_steps (%lld)",
                       (long long)o->total_steps, (long long)o->warmup_steps);
    return AF_OK;
}

/* Per-param arrays of np entries, zeroed; the feed buffers of a step. */
static af_status alloc_params(af_trainer *t, int np) {
    size_t n = (size_t)np;
    t->nfeed = 3 * t->k + 16 + 3 * np; /* the most a step feeds or reads: x, y per step, scalars, state */
    t->p = calloc(n, sizeof *t->p);
    t->count = calloc(n, sizeof *t->count);
    t->flat = calloc(n, sizeof *t->flat);
    t->master = calloc(n, sizeof *t->master);
    t->m = calloc(n, sizeof *t->m);
    t->v = calloc(n, sizeof *t->v);
    t->bound = calloc(n, sizeof *t->bound); /* zeros: the moments start at zero (w_max: unknown, below) */
    t->gbound = calloc(n, sizeof *t->gbound);
    t->grad = calloc(n, sizeof *t->grad);
    t->gsum = calloc(n, sizeof *t->gsum);
    t->eval_in = calloc(n + 1, sizeof *t->eval_in);
    t->feed_in = calloc((size_t)t->nfeed, sizeof *t->feed_in);
    t->feed_out = calloc((size_t)t->nfeed, sizeof *t->feed_out);
    if (!t->p || !t->count || !t->flat || !t->master || !t->m || !t->v || !t->bound || !t->gbound || !t->grad || !t->gsum ||
        !t->eval_in || !t->feed_in || !t->feed_out)
        return ir_fail(AF_ERR_NOMEM, "af_trainer_new: out of memory for %d params", np);
    for (int i = 0; i < np; i++) t->bound[i].w_max = t->gbound[i] = INFINITY; /* the net's weights: unknown */
    t->np = np;
    return AF_OK;
}

/* The net's params: make_params gets TR_PARAM_ROOM slots and the trainer keeps as many
 * as it made. Its own reason for failing (the graph's error, or the error it set)
 * reaches the caller. */
static af_status make_params(af_trainer *t, const af_net *net) {
    af_tensor **room = calloc(TR_PARAM_ROOM, sizeof *room);
    if (!room) return ir_fail(AF_ERR_NOMEM, "af_trainer_new: out of memory");
    ir_clear_error();
    int np = net->make_params(net->ctx, t->g, room, TR_PARAM_ROOM);
    af_status st = AF_OK;
    if (np < 1 || np > TR_PARAM_ROOM || t->g->error) {
        char why[900];
        if (t->g->error) snprintf(why, sizeof why, "%s", t->g->error);
        else if (af_error_message()[0]) snprintf(why, sizeof why, "%s", af_error_message());
        else snprintf(why, sizeof why, "it returned %d (room for %d params) and gave no reason", np, TR_PARAM_ROOM);
        st = ir_fail(AF_ERR_INVALID, "af_trainer_new: make_params failed: %s", why);
    }
    if (!st && !(st = alloc_params(t, np))) memcpy(t->p, room, sizeof *room * (size_t)np);
    free(room);
    return st;
}

af_trainer *af_trainer_new(const af_net *net, const af_train_opts *opts) {
    af_train_opts o = opts ? *opts : af_train_defaults();
    const tr_plan *plan = tr_plan_for(o.plan);
    if (check_opts(net, &o, plan)) return NULL;
    /* The family, once (the device's on the ane target): every program and every size
     * chosen for a family (the classifier's blocks) then agrees with what the backend checks. */
    af_family_id fam;
    if (af_compile_family(&o.compile, &fam)) {
        char why[900];
        snprintf(why, sizeof why, "%s", af_error_message());
        ir_fail(AF_ERR_UNSUPPORTED, "af_trainer_new: %s", why);
        return NULL;
    }
    o.compile.family = fam;
    af_trainer *t = calloc(1, sizeof *t);
    if (!t) { ir_fail(AF_ERR_NOMEM, "af_trainer_new: out of memory"); return NULL; }
    t->net = *net;
    t->o = o;
    t->plan = plan;
    t->g = af_graph_new();
    t->k = plan->caps & TR_UNROLLS ? o.unroll : 1;
    if (t->o.grad_accum < 1) t->o.grad_accum = 1;
    t->scale = o.loss_scale > 0 ? o.loss_scale : 1.0f;
    if (o.scale_growth_interval < 1) t->o.scale_growth_interval = 1000;
    bool engine = t->engine = af_target_is_engine(o.compile.target);
    bool fp16 = t->fp16 = af_compile_opts_fp16(&o.compile);
    t->moment_unit = t->scale;
    bool host_metrics = (plan->caps & TR_HOST_METRICS && o.objective != AF_OBJ_CUSTOM) || plan->caps & TR_HOST_LOSS;
    t->metric_source = host_metrics ? AF_METRIC_HOST_FP32 : fp16 ? AF_METRIC_GRAPH_FP16 : AF_METRIC_GRAPH_FP32;
    if (t->g) af_graph_set_target(t->g, o.compile.target);
    if (!t->g || make_params(t, net)) {
        if (!t->g) ir_fail(AF_ERR_NOMEM, "af_trainer_new: out of memory");
        af_trainer_free(t);
        return NULL;
    }
    for (int i = 0; i < t->np; i++) {
        af_tensor *p = t->p[i];
        if (!p || !(p->flags & IR_TF_PARAM)) {
            ir_fail(AF_ERR_INVALID, "af_trainer_new: make_params result %d is not an af_parameter", i);
            af_trainer_free(t);
            return NULL;
        }
        int64_t n = t->count[i] = af_shape_count(p->shape);
        t->flat[i] = nn_flat2d(p->shape);
        /* The host copy of the weights is the param's own value (af_parameter's copy of the
         * net's initial values): no second copy. The graph owns and frees it. */
        t->master[i] = p->data;
        t->m[i] = calloc((size_t)n, sizeof(float));
        t->v[i] = calloc((size_t)n, sizeof(float));
        t->grad[i] = malloc((size_t)n * sizeof(float));
        if (t->o.grad_accum > 1) t->gsum[i] = malloc((size_t)n * sizeof(float));
        if (!t->master[i] || !t->m[i] || !t->v[i] || !t->grad[i] || (t->o.grad_accum > 1 && !t->gsum[i])) {
            ir_fail(AF_ERR_NOMEM, "af_trainer_new: out of memory");
            af_trainer_free(t);
            return NULL;
        }
        /* Engine programs take fp16 inputs: the host still feeds fp32, converted on the way in. */
        if (engine) p->dtype = AF_F16;
    }
    t->x_count = (int64_t)o.batch * af_shape_count(net->sample);
    t->y_count = (int64_t)o.batch * net->out_dim;
    /* The plan may hand over to a variant of itself (t->plan changes). */
    if (t->plan->build(t) || tr_build_eval_graph(t)) { /* every use of the net happens here */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", af_error_message());
        af_trainer_free(t);
        ir_fail(AF_ERR_INVALID, "%s", msg);
        return NULL;
    }
    tr_guard(t);
    return t;
}

void af_trainer_free(af_trainer *t) {
    if (!t) return;
    if (t->plan) t->plan->free(t);
    af_model_free(t->eval);
    for (int i = 0; i < t->np; i++) { /* master[i] is the param's value: the graph frees it */
        free(t->m[i]);
        free(t->v[i]);
        free(t->grad[i]);
        free(t->gsum[i]);
    }
    void *arrays[] = { t->p, t->count, t->flat, t->master, t->m, t->v, t->bound, t->gbound, t->grad, t->gsum,
                       t->eval_in, t->feed_in, t->feed_out, t->dist_req };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    free(t->eval_x);
    free(t->eval_out);
    af_graph_free(t->g);
    cpu_pool_release(t->pool);
    free(t);
}

/* ------------------------------------------------------------------ checkpoints */

/* Brings the host copies up to date (read) or seeds the plan's resident state from them
 * (write, after a checkpoint load). */
static af_status move_state(af_trainer *t, bool read) {
    return t->plan->sync_state ? t->plan->sync_state(t, read) : AF_OK;
}

af_status tr_export(af_trainer *t, ckpt *c) {
    af_status st = move_state(t, true);
    char name[64];
    if (!st) st = ckpt_put_str(c, "trainer.plan", af_plan_name(t->o.plan));
    if (!st) st = ckpt_put_i64(c, "trainer.nparams", t->np);
    if (!st) st = ckpt_put_i64(c, "trainer.step", t->step);
    if (!st) st = ckpt_put_i64(c, "trainer.skipped", t->skipped);
    if (!st) st = ckpt_put_i64(c, "trainer.clean_run", t->clean_run);
    if (!st) st = ckpt_put_i64(c, "trainer.skipped_consecutive", t->skipped_consecutive);
    if (!st) st = ckpt_put(c, "trainer.scale", &t->scale, sizeof t->scale);
    /* adam_v holds v (host plan, unscaled: unit 1) or r = sqrt(v) in units of moment_unit. */
    float unit = tr_host_moments(t) ? 1.0f : t->moment_unit;
    if (!st) st = ckpt_put_str(c, "trainer.moments", tr_host_moments(t) ? "v" : "rms");
    if (!st) st = ckpt_put(c, "trainer.moment_unit", &unit, sizeof unit);
    for (int i = 0; i < t->np && !st; i++) {
        int64_t bytes = t->count[i] * (int64_t)sizeof(float);
        snprintf(name, sizeof name, "param.%d", i);
        st = ckpt_put(c, name, t->master[i], bytes);
        snprintf(name, sizeof name, "adam_m.%d", i);
        if (!st) st = ckpt_put(c, name, t->m[i], bytes);
        snprintf(name, sizeof name, "adam_v.%d", i);
        if (!st) st = ckpt_put(c, name, t->v[i], bytes);
    }
    return st;
}

af_status tr_check_floats(const char *where, const char *name, const void *p, int64_t n, bool nonneg) {
    for (int64_t j = 0; j < n; j++) {
        float x;
        memcpy(&x, (const char *)p + j * (int64_t)sizeof x, sizeof x);
        if (isfinite(x) && (!nonneg || x >= 0)) continue;
        return ir_fail(AF_ERR_CORRUPT,
                       "%s: record '%s' holds %g at element %lld, which %s: the checkpoint was saved from a run "
                       "that had already diverged, or edited; resume from an earlier checkpoint or start again",
                       where, name, (double)x, (long long)j,
                       !isfinite(x) ? "is not finite" : "is negative (a second moment is a mean of squares, >= 0)");
    }
    return AF_OK;
}

/* The float array record `name` of n floats, or NULL (with the error set) when it is
 * missing, mis-sized, or holds a value no run produces: the checksum proves only that the
 * file is what was written. Weights and first moments are finite; second moments
 * ("adam_v": v, or its root) finite and >= 0. */
static const void *get_array(const ckpt *c, const char *name, int64_t n) {
    int64_t bytes = 0;
    const void *p = ckpt_get(c, name, &bytes);
    if (!p) {
        ir_fail(AF_ERR_CORRUPT, "checkpoint: record '%s' is missing", name);
        return NULL;
    }
    if (bytes != n * (int64_t)sizeof(float)) {
        ir_fail(AF_ERR_CORRUPT, "checkpoint: record '%s' holds %lld bytes but the model needs %lld; was it saved for another model?",
                name, (long long)bytes, (long long)(n * (int64_t)sizeof(float)));
        return NULL;
    }
    if (tr_check_floats("checkpoint", name, p, n, !strncmp(name, "adam_v.", 7))) return NULL;
    return p;
}

/* Brings loaded moments (v, or r = sqrt(v), in units `unit`) to this plan's form: the
 * host plan's unscaled v; elsewhere r in the same units, or with a static loss scale
 * (whose programs never rescale) in the scale's. Same form and units: untouched. */
static void convert_moments(af_trainer *t, int i, bool saved_rms, float unit) {
    bool host = tr_host_moments(t);
    float to = host ? 1.0f : tr_rescales_moments(t) ? unit : t->scale;
    if (saved_rms != host && to == unit) return;
    double inv = (double)to / unit;
    for (int64_t j = 0; j < t->count[i]; j++) {
        double r = (saved_rms ? t->v[i][j] : sqrt(t->v[i][j])) * inv;
        t->m[i][j] = (float)(t->m[i][j] * inv);
        t->v[i][j] = (float)(host ? r * r : r);
    }
}

/* convert_moments would turn moments m, v of param i (saved in `unit`, the checkpoint's
 * loss scale `scale`) into finite floats: a moment unit far from the values' (tiny, or
 * huge) overflows them. AF_ERR_CORRUPT naming the record otherwise. */
static af_status check_converted(const af_trainer *t, int i, const void *m, const void *v, bool saved_rms, float unit,
                                 float scale) {
    bool host = tr_host_moments(t);
    float to = host ? 1.0f : tr_rescales_moments(t) ? unit : scale;
    if (saved_rms != host && to == unit) return AF_OK;
    double inv = (double)to / unit;
    for (int64_t j = 0; j < t->count[i]; j++) {
        float mj, vj;
        memcpy(&mj, (const char *)m + j * 4, 4);
        memcpy(&vj, (const char *)v + j * 4, 4);
        double r = (saved_rms ? vj : sqrt(vj)) * inv;
        if (isfinite((float)(mj * inv)) && isfinite((float)(host ? r * r : r))) continue;
        return ir_fail(AF_ERR_CORRUPT,
                       "checkpoint: records 'adam_m.%d'/'adam_v.%d' element %lld (%g, %g) overflow a float in this plan's "
                       "moment units (record 'trainer.moment_unit' %g, to %g): the checkpoint is damaged or edited; "
                       "resume from an earlier checkpoint or start again", i, i, (long long)j, (double)mj, (double)vj,
                       (double)unit, (double)to);
    }
    return AF_OK;
}

/* Checks every record it needs before it changes anything, so a checkpoint that fails
 * leaves the trainer as it was. */
af_status tr_import(af_trainer *t, const ckpt *c) {
    int64_t np = 0, step = 0, skipped = 0, clean_run = 0, consecutive = 0, bytes = 0;
    af_status st = ckpt_get_i64(c, "trainer.nparams", &np);
    if (st) return st;
    if (np != t->np) return ir_fail(AF_ERR_CORRUPT, "checkpoint: it holds %lld params but the model has %d; was it saved for another model?", (long long)np, t->np);
    if ((st = ckpt_get_i64(c, "trainer.step", &step)) || (st = ckpt_get_i64(c, "trainer.skipped", &skipped)) ||
        (st = ckpt_get_i64(c, "trainer.clean_run", &clean_run)))
        return st;
    if (ckpt_get_i64(c, "trainer.skipped_consecutive", &consecutive)) consecutive = 0;
    /* Steps advance these (and step + 1 enters the bias correction): a negative count or
     * one near INT64_MAX cannot come from a run. */
    const int64_t counter[4] = { step, skipped, clean_run, consecutive };
    static const char *const counter_name[4] = { "step", "skipped", "clean_run", "skipped_consecutive" };
    for (int k = 0; k < 4; k++)
        if (counter[k] < 0 || counter[k] > INT64_MAX / 2)
            return ir_fail(AF_ERR_CORRUPT, "checkpoint: record 'trainer.%s' is %lld, not a step count in 0..2^62",
                           counter_name[k], (long long)counter[k]);
    float scale;
    const void *sc = ckpt_get(c, "trainer.scale", &bytes);
    if (!sc || bytes != sizeof scale) return ir_fail(AF_ERR_CORRUPT, "checkpoint: record 'trainer.scale' is missing or mis-sized");
    memcpy(&scale, sc, sizeof scale);
    if (!(scale > 0) || !isfinite(scale)) /* gradients are divided by it */
        return ir_fail(AF_ERR_CORRUPT, "checkpoint: loss scale %g is not positive and finite", (double)scale);
    /* Checkpoints without the moment records hold v in loss-scale units. */
    const char *rep = ckpt_get_str(c, "trainer.moments");
    bool saved_rms = rep && !strcmp(rep, "rms");
    float unit = scale;
    const void *u = ckpt_get(c, "trainer.moment_unit", &bytes);
    if (u && bytes == sizeof unit) memcpy(&unit, u, sizeof unit);
    if (!(unit > 0) || !isfinite(unit)) return ir_fail(AF_ERR_CORRUPT, "checkpoint: moment unit %g is not positive", (double)unit);
    const void *(*rec)[3] = calloc((size_t)t->np, sizeof *rec);
    if (!rec) return ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory");
    static const char *const kind[3] = { "param", "adam_m", "adam_v" };
    for (int i = 0; i < t->np; i++) {
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s.%d", kind[k], i);
            if (!(rec[i][k] = get_array(c, name, t->count[i]))) { free(rec); return AF_ERR_CORRUPT; }
        }
    }
    for (int i = 0; i < t->np; i++)
        if ((st = check_converted(t, i, rec[i][1], rec[i][2], saved_rms, unit, scale))) {
            free(rec);
            return st;
        }
    t->step = step, t->skipped = skipped, t->clean_run = clean_run, t->skipped_consecutive = consecutive;
    t->scale = scale;
    for (int i = 0; i < t->np; i++) {
        size_t n = (size_t)t->count[i] * sizeof(float);
        memcpy(t->master[i], rec[i][0], n);
        memcpy(t->m[i], rec[i][1], n);
        memcpy(t->v[i], rec[i][2], n);
        convert_moments(t, i, saved_rms, unit);
    }
    tr_forget_state_bounds(t);
    free(rec);
    t->moment_unit = tr_host_moments(t) ? 1.0f : tr_rescales_moments(t) ? unit : t->scale;
    return move_state(t, false);
}

af_status af_trainer_save(af_trainer *t, const char *path) {
    if (!t || !path) return ir_fail(AF_ERR_INVALID, "af_trainer_save: trainer or path is NULL");
    ckpt *c = ckpt_new();
    if (!c) return ir_fail(AF_ERR_NOMEM, "af_trainer_save: out of memory");
    af_status st = tr_export(t, c);
    if (!st) st = ckpt_save(c, path);
    ckpt_free(c);
    return st;
}

af_status af_trainer_load(af_trainer *t, const char *path) {
    if (!t || !path) return ir_fail(AF_ERR_INVALID, "af_trainer_load: trainer or path is NULL");
    ckpt *c = NULL;
    af_status st = ckpt_load(path, &c);
    if (!st) st = tr_import(t, c);
    ckpt_free(c);
    return st;
}
