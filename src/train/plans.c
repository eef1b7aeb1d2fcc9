/* Building the programs of each training plan (seed 000):
 *   host/device  forward + backward; on engine targets a metrics program and one backward
 *                program per param (a single program concatenating every gradient trips
 *                the wide-row wall); on the CPU one fused program;
 *   device       plus one update program per param, Adam's outputs stacked on axis 0;
 *   resident     the whole step in one program, state outputs aliased onto their inputs;
 *   unrolled     K resident steps in one program, each step's weights a stop frontier.
 * The loss, accuracy, seed, backward and update nodes are the library's own vouched
 * kernels; only the user's forward is subject to the engine's precision heuristic. */
#include "ane/guards.h"
#include "grad/grad.h"
#include "nn/optim.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool engine_target(const af_trainer *t) { return t->o.compile.target != AF_TARGET_CPU; }
static af_dtype io_dtype(const af_trainer *t) { return engine_target(t) ? AF_F16 : AF_F32; }

af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out) {
    af_model *m = af_compile(t->g, nin, in, nout, out, &t->o.compile);
    if (m) {
        t->compiles_pending++;
        t->total.compiles++;
    }
    return m;
}

static af_status graph_error(af_trainer *t, const char *what) {
    return ir_fail(AF_ERR_INVALID, "trainer (%s plan): %s: %s", af_plan_name(t->o.plan), what,
                   t->g->error ? t->g->error : af_error_message());
}

/* Batch input [B, sample...]. */
static af_tensor *batch_input(af_trainer *t, const char *name, int64_t b) {
    af_shape s = t->net.sample;
    if (s.rank + 1 > AF_MAX_RANK) return NULL;
    for (int i = s.rank; i > 0; i--) s.dim[i] = s.dim[i - 1];
    s.dim[0] = b;
    s.rank++;
    return af_input(t->g, name, io_dtype(t), s);
}

static af_tensor *scalar_input(af_trainer *t, const char *name, bool rank0) {
    return af_input(t->g, name, io_dtype(t), rank0 ? (af_shape){ .rank = 0 } : AF_SHAPE(1, 1));
}

/* Forward, metrics, seed and backward for one step with weights w. met[0] is the
 * mean loss; met[1] (cross-entropy) the number of rows whose argmax hits the target. */
static af_status build_step(af_trainer *t, af_tensor *x, af_tensor *y, af_tensor *ls, af_tensor *const *w,
                            af_tensor **met, af_tensor **grads) {
    af_tensor *z = t->net.forward(t->net.ctx, x, w);
    if (!z) return graph_error(t, "the forward function failed");
    if (z->shape.rank != 2 || z->shape.dim[0] != x->shape.dim[0] || z->shape.dim[1] != t->net.out_dim) {
        char s[100];
        ir_shape_str(z->shape, s, sizeof s);
        return ir_fail(AF_ERR_SHAPE, "trainer: the forward output is %s but must be [%lld, %lld] (batch, out_dim)", s,
                       (long long)x->shape.dim[0], (long long)t->net.out_dim);
    }
    t->g->vouching++;
    af_tensor *seed, *root;
    if (t->o.objective == AF_OBJ_CE) {
        af_loss *l = af_softmax_cross_entropy(z, y);
        met[0] = af_loss_value(l);
        int ax = 1, both[2] = { 0, 1 };
        af_tensor *hit = af_equal(af_reduce_sum(af_mul(z, y), 1, &ax, 1), af_reduce_max(z, 1, &ax, 1));
        met[1] = af_reduce_sum(hit, 2, both, 0);
        seed = af_mul(af_sub(af_softmax(z, -1), y), ls); /* analytic, fp16-stable: no log */
        root = z;
    } else {
        int axes[2] = { 0, 1 };
        root = met[0] = af_reduce_mean(af_square(af_sub(z, y)), 2, axes, 0);
        seed = af_add(af_sub(root, root), ls); /* dL/dloss = scale, folded into the constant */
    }
    af_status st = seed ? af_backward_from(seed, root, t->np, w, grads, t->np, w) : AF_ERR_INVALID;
    t->g->vouching--;
    return st ? graph_error(t, "building the backward pass") : AF_OK;
}

/* ------------------------------------------------------------------ host and device */

static af_status build_host_device(af_trainer *t) {
    int nm = t->o.objective == AF_OBJ_CE ? 2 : 1;
    af_tensor *in[3 + TR_MAXP], *out[2 + TR_MAXP], *met[2], *grads[TR_MAXP];
    in[0] = batch_input(t, "x", t->o.batch);
    in[1] = af_input(t->g, "target", io_dtype(t), AF_SHAPE(t->o.batch, t->net.out_dim));
    in[2] = scalar_input(t, "loss_scale", t->o.objective == AF_OBJ_MSE);
    for (int i = 0; i < t->np; i++) in[3 + i] = t->p[i];
    af_status st = build_step(t, in[0], in[1], in[2], t->p, met, grads);
    if (st) return st;
    for (int k = 0; k < nm; k++) out[k] = met[k];
    if (!engine_target(t)) {
        for (int i = 0; i < t->np; i++) out[nm + i] = grads[i];
        t->fb = tr_compile(t, 3 + t->np, in, nm + t->np, out);
        return t->fb ? AF_OK : ir_fail(AF_ERR_INVALID, "trainer: %s", af_error_message());
    }
    t->fwd = tr_compile(t, 3 + t->np, in, nm, out);
    if (!t->fwd) return ir_fail(AF_ERR_INVALID, "trainer: forward program: %s", af_error_message());
    for (int i = 0; i < t->np; i++) {
        t->bwd[i] = tr_compile(t, 3 + t->np, in, 1, &grads[i]);
        if (!t->bwd[i]) return ir_fail(AF_ERR_INVALID, "trainer: backward program of param '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    }
    return AF_OK;
}

/* (w, m, v, g, lr_t[, decay]) -> stack(w', m', v') for Adam, (w, g, lr_t[, decay]) -> w' for SGD. */
static af_status build_update_program(af_trainer *t, int i) {
    af_graph *g = t->g;
    af_dtype dt = io_dtype(t);
    af_shape f = t->flat[i];
    bool adam = t->o.optimizer == AF_OPT_ADAM, decay = t->o.weight_decay != 0.0f;
    af_tensor *in[8], *out;
    int n = 0;
    af_tensor *w = in[n++] = af_input(g, "w", dt, f);
    af_tensor *m = adam ? (in[n++] = af_input(g, "m", dt, f)) : NULL;
    af_tensor *v = adam ? (in[n++] = af_input(g, "v", dt, f)) : NULL;
    af_tensor *gr = in[n++] = af_input(g, "grad", dt, f);
    af_tensor *lr = in[n++] = af_input(g, "lr_t", dt, AF_SHAPE(1, 1));
    af_tensor *gm = adam ? (in[n++] = af_input(g, "grad_mult", dt, AF_SHAPE(1, 1))) : NULL;
    af_tensor *dc = decay ? (in[n++] = af_input(g, "decay", dt, AF_SHAPE(1, 1))) : NULL;
    g->vouching++;
    if (adam) {
        nn_adam_cfg c = { t->o.beta1, t->o.beta2, t->eps_engine };
        af_tensor *w2, *m2, *v2;
        nn_adam_update(&c, w, m, v, af_mul(gr, gm), lr, dc, &w2, &m2, &v2);
        out = nn_stack3(w2, m2, v2);
    } else {
        out = nn_sgd_update(w, gr, lr, dc);
    }
    g->vouching--;
    if (!out) return graph_error(t, "building an update program");
    t->upd[i] = tr_compile(t, n, in, 1, &out);
    if (!t->upd[i]) return ir_fail(AF_ERR_INVALID, "trainer: update program of '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    if (adam && !(t->upd_out[i] = malloc((size_t)(3 * t->count[i]) * sizeof(float))))
        return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    return AF_OK;
}

af_status tr_device_update(af_trainer *t, int i, int64_t step) {
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    float lr = tr_lr_t(t, step), decay = 1.0f - tr_lr_at(&t->o, step) * t->o.weight_decay, gm = tr_grad_mult(t);
    int64_t n = t->count[i];
    af_buffer in[8];
    int k = 0;
    in[k++] = AF_BUF_F32(t->master[i], n);
    if (adam) { in[k++] = AF_BUF_F32(t->m[i], n); in[k++] = AF_BUF_F32(t->v[i], n); }
    in[k++] = AF_BUF_F32(t->grad[i], n);
    in[k++] = AF_BUF_F32(&lr, 1);
    if (adam) in[k++] = AF_BUF_F32(&gm, 1);
    if (t->o.weight_decay != 0.0f) in[k++] = AF_BUF_F32(&decay, 1);
    af_buffer out = adam ? AF_BUF_F32(t->upd_out[i], 3 * n) : AF_BUF_F32(t->grad[i], n);
    af_status st = tr_run(t, t->upd[i], in, &out);
    if (st) return st;
    /* Split the stacked rows back on the host: an array move, not tensor math. */
    if (adam) {
        memcpy(t->master[i], t->upd_out[i], (size_t)n * sizeof(float));
        memcpy(t->m[i], t->upd_out[i] + n, (size_t)n * sizeof(float));
        memcpy(t->v[i], t->upd_out[i] + 2 * n, (size_t)n * sizeof(float));
    } else {
        memcpy(t->master[i], t->grad[i], (size_t)n * sizeof(float));
    }
    return AF_OK;
}

/* ------------------------------------------------------------------ resident and unrolled */

/* A weight after an update keeps what conv2d needs to know about its param. */
static void carry_param_facts(af_tensor *to, const af_tensor *param) {
    if (!to) return;
    to->flags |= param->flags & IR_TF_CONV;
    to->a.kernel[0] = param->a.kernel[0];
    to->a.kernel[1] = param->a.kernel[1];
    to->a.groups = param->a.groups;
}

static af_status build_resident(af_trainer *t) {
    int k = t->k, np = t->np, nm = t->o.objective == AF_OBJ_CE ? 2 : 1;
    bool adam = t->o.optimizer == AF_OPT_ADAM, decay = t->o.weight_decay != 0.0f;
    af_graph *g = t->g;
    af_dtype dt = io_dtype(t);
    af_tensor **in = calloc(TR_MAXIO, sizeof *in), **out = calloc(TR_MAXIO, sizeof *out);
    if (!in || !out) { free(in); free(out); return ir_fail(AF_ERR_NOMEM, "trainer: out of memory"); }
    int ni = 0, no = 0;
    af_tensor *xs[TR_MAXK], *ys[TR_MAXK], *lr[TR_MAXK], *dc[TR_MAXK] = { 0 };
    char name[32];
    for (int s = 0; s < k; s++) { snprintf(name, sizeof name, "x%d", s); in[ni++] = xs[s] = batch_input(t, name, t->o.batch); }
    for (int s = 0; s < k; s++) {
        snprintf(name, sizeof name, "target%d", s);
        in[ni++] = ys[s] = af_input(g, name, dt, AF_SHAPE(t->o.batch, t->net.out_dim));
    }
    af_tensor *ls = in[ni++] = scalar_input(t, "loss_scale", t->o.objective == AF_OBJ_MSE);
    for (int s = 0; s < k; s++) { snprintf(name, sizeof name, "lr_t%d", s); in[ni++] = lr[s] = scalar_input(t, name, false); }
    af_tensor *gm = in[ni++] = scalar_input(t, "grad_mult", false);
    if (decay)
        for (int s = 0; s < k; s++) { snprintf(name, sizeof name, "decay%d", s); in[ni++] = dc[s] = scalar_input(t, name, false); }
    af_tensor *w[TR_MAXP], *m[TR_MAXP], *v[TR_MAXP];
    int first_state = ni;
    for (int i = 0; i < np; i++) { t->state_in[i] = ni; in[ni++] = w[i] = t->p[i]; }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "m%d", i); in[ni++] = m[i] = af_input(g, name, dt, t->flat[i]); }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "v%d", i); in[ni++] = v[i] = af_input(g, name, dt, t->flat[i]); }
    af_tensor *oks[TR_MAXK];
    af_status st = AF_OK;
    for (int s = 0; s < k && !st; s++) {
        af_tensor *met[2], *grads[TR_MAXP], *g2[TR_MAXP];
        if ((st = build_step(t, xs[s], ys[s], ls, w, met, grads))) break;
        for (int j = 0; j < nm; j++) out[no++] = met[j];
        g->vouching++;
        for (int i = 0; i < np; i++) g2[i] = af_reshape(grads[i], t->flat[i]);
        af_tensor *ok = oks[s] = nn_all_finite(np, g2);
        nn_adam_cfg c = { t->o.beta1, t->o.beta2, t->eps_engine };
        for (int i = 0; i < np; i++) {
            af_tensor *w2d = af_reshape(w[i], t->flat[i]), *wn, *mn = NULL, *vn = NULL;
            if (adam) nn_adam_update(&c, w2d, m[i], v[i], af_mul(g2[i], gm), lr[s], dc[s], &wn, &mn, &vn);
            else wn = nn_sgd_update(w2d, g2[i], lr[s], dc[s]);
            /* A non-finite step leaves every state tensor as it was. */
            w[i] = af_reshape(af_select(ok, wn, w2d), t->p[i]->shape);
            carry_param_facts(w[i], t->p[i]);
            if (adam) { m[i] = af_select(ok, mn, m[i]); v[i] = af_select(ok, vn, v[i]); }
        }
        g->vouching--;
        if (g->error) st = graph_error(t, "building the update");
    }
    int first_state_out = no + k;
    for (int s = 0; s < k && !st; s++) out[no++] = oks[s];
    for (int i = 0; i < np && !st; i++) out[no++] = w[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = m[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = v[i];
    if (!st && !(t->res = tr_compile(t, ni, in, no, out))) st = ir_fail(AF_ERR_INVALID, "trainer: step program: %s", af_error_message());
    t->nstate = ni - first_state;
    /* Seed the state: masters from the params, zero moments. */
    for (int j = 0; !st && j < t->nstate; j++) {
        int pi = j % np;
        st = af_model_bind_state(t->res, first_state + j, first_state_out + j, j < np ? t->master[pi] : j < 2 * np ? t->m[pi] : t->v[pi]);
    }
    free(in);
    free(out);
    return st;
}

af_status tr_build_programs(af_trainer *t) {
    af_status st;
    if (t->o.plan == AF_PLAN_RESIDENT || t->o.plan == AF_PLAN_UNROLLED) return build_resident(t);
    if ((st = build_host_device(t))) return st;
    for (int i = 0; t->o.plan == AF_PLAN_DEVICE && i < t->np; i++)
        if ((st = build_update_program(t, i))) return st;
    return AF_OK;
}

af_status tr_build_eval_graph(af_trainer *t) {
    af_tensor **in = t->eval_in, *w[TR_MAXP];
    in[0] = batch_input(t, "eval_x", t->o.eval_batch);
    /* Its own weight inputs, fed the current masters: it never shares ports with training. */
    for (int i = 0; i < t->np; i++) {
        char name[32];
        snprintf(name, sizeof name, "eval_w%d", i);
        in[1 + i] = w[i] = af_input(t->g, name, io_dtype(t), t->p[i]->shape);
        carry_param_facts(w[i], t->p[i]);
    }
    t->eval_z = t->net.forward(t->net.ctx, in[0], w);
    return t->eval_z ? AF_OK : graph_error(t, "building the evaluation program");
}

af_status tr_build_eval(af_trainer *t) {
    int64_t eb = t->o.eval_batch, xs = af_shape_count(t->net.sample);
    t->eval = tr_compile(t, 1 + t->np, t->eval_in, 1, &t->eval_z);
    t->eval_x = malloc((size_t)(eb * xs) * sizeof(float));
    t->eval_out = malloc((size_t)(eb * t->net.out_dim) * sizeof(float));
    if (!t->eval || !t->eval_x || !t->eval_out) return ir_fail(AF_ERR_INVALID, "trainer: evaluation program: %s", af_error_message());
    return AF_OK;
}

void tr_guard(af_trainer *t) {
    /* Warns (never caps) when an A13-class conv weight gradient could saturate. */
    if (engine_target(t)) ane_guard_conv_loss_scale(t->o.compile.family, t->np, t->p, t->scale);
}
