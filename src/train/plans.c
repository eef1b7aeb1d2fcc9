/* Building the programs of each training plan (seed 000):
 *   host/device  forward + backward; on engine targets a metrics program and one backward
 *                program per param (a single program concatenating every gradient trips
 *                the wide-row wall); on the CPU one fused program;
 *   device       plus one update program per param, Adam's outputs stacked on axis 0;
 *   resident     the whole step in one program, state outputs aliased onto their inputs;
 *   unrolled     K resident steps in one program, each step's weights a stop frontier.
 * The loss, accuracy, seed, backward and update nodes are the library's own vouched
 * kernels; only the user's forward is subject to the engine's precision heuristic. */
#include "sim/guards.h"
#include "grad/grad.h"
#include "nn/optim.h"
#include "llama/llama.h"
#include "train/llama_pipeline.h"
#include "train/llama_resident.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool engine_target(const af_trainer *t) { return t->o.compile.target != AF_TARGET_CPU; }
static af_dtype io_dtype(const af_trainer *t) { return engine_target(t) ? AF_F16 : AF_F32; }

af_model *tr_compile(af_trainer *t, int nin, af_tensor *const *in, int nout, af_tensor *const *out) {
    double t0 = tr_now_s();
    af_model *m = af_compile(t->g, nin, in, nout, out, &t->o.compile);
    t->phase_s[TR_PHASE_COMPILE] += tr_now_s() - t0;
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

/* A fed per-step scalar, [1,1] so it broadcasts over the [rows, cols] update views. */
static af_tensor *scalar_input(af_trainer *t, const char *name) { return af_input(t->g, name, io_dtype(t), AF_SHAPE(1, 1)); }

/* Forward, metrics, seed and backward for one step with weights w. *z is the forward
 * output; met[0] the in-graph mean loss, met[1] (cross-entropy) the number of rows whose
 * target class has the largest output. The seeds of CE and MSE are analytic at z, so a
 * loss value that overflows fp16 (a large regression error squared) cannot poison the
 * gradients; ls is the fed seed factor (see seed_scale in trainer.c). */
static af_status build_step(af_trainer *t, af_tensor *x, af_tensor *y, af_tensor *ls, af_tensor *const *w,
                            af_tensor **met, af_tensor **z_out, af_tensor **grads) {
    af_tensor *z = *z_out = t->net.forward(t->net.ctx, x, w);
    if (!z) return graph_error(t, "the forward function failed");
    if (z->shape.rank != 2 || z->shape.dim[0] != x->shape.dim[0] || z->shape.dim[1] != t->net.out_dim) {
        char s[100];
        ir_shape_str(z->shape, s, sizeof s);
        return ir_fail(AF_ERR_SHAPE, "trainer: the forward output is %s but must be [%lld, %lld] (batch, out_dim)", s,
                       (long long)x->shape.dim[0], (long long)t->net.out_dim);
    }
    af_tensor *seed = NULL, *root = z;
    if (t->o.objective == AF_OBJ_CUSTOM) { /* the user's loss is user code: not vouched */
        af_loss *l = t->net.loss(t->net.ctx, z, y);
        if (!l) return graph_error(t, "the net's loss function failed");
        met[0] = af_loss_value(l);
        root = af_loss_root(l);
        t->g->vouching++;
        if (l->kind == AF_LOSS_CE) {
            float rows = (float)(af_shape_count(root->shape) / root->shape.dim[root->shape.rank - 1]);
            seed = af_mul(af_sub(af_softmax(root, -1), l->target), af_muls(ls, 1.0f / rows));
        } else {
            seed = af_reshape(ls, root->shape); /* dL/dloss = the loss scale */
        }
    } else {
        t->g->vouching++;
        if (t->o.objective == AF_OBJ_CE) {
            af_loss *l = af_softmax_cross_entropy(z, y);
            met[0] = af_loss_value(l);
            int ax = 1, both[2] = { 0, 1 };
            af_tensor *hit = af_equal(af_reduce_sum(af_mul(z, y), 1, &ax, 1), af_reduce_max(z, 1, &ax, 1));
            met[1] = af_reduce_sum(hit, 2, both, 0);
            seed = af_mul(af_sub(af_softmax(z, -1), y), ls); /* analytic, fp16-stable: no log */
        } else {
            int axes[2] = { 0, 1 };
            af_tensor *d = af_sub(z, y);
            met[0] = af_reduce_mean(af_square(d), 2, axes, 0);
            seed = af_mul(d, ls); /* d mean(d^2) / dz = 2 d / count, folded into ls */
        }
    }
    af_status st = seed ? af_backward_from(seed, root, t->np, w, grads, NULL) : AF_ERR_INVALID;
    t->g->vouching--;
    return st ? graph_error(t, "building the backward pass") : AF_OK;
}

/* ------------------------------------------------------------------ host and device */

/* n tensor pointers, zeroed (freed by the caller), or NULL with the error set. */
static af_tensor **tensors(int n) {
    af_tensor **v = calloc((size_t)n, sizeof *v);
    if (!v) ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    return v;
}

/* in [3 + np], out [1 + np], grads [np]: scratch. */
static af_status host_device_programs(af_trainer *t, af_tensor **in, af_tensor **out, af_tensor **grads) {
    af_tensor *met[2], *z;
    in[0] = batch_input(t, "x", t->o.batch);
    in[1] = af_input(t->g, "target", io_dtype(t), AF_SHAPE(t->o.batch, t->net.out_dim));
    in[2] = scalar_input(t, "loss_scale");
    for (int i = 0; i < t->np; i++) in[3 + i] = t->p[i];
    af_status st = build_step(t, in[0], in[1], in[2], t->p, met, &z, grads);
    if (st) return st;
    /* The logits reach the host, which computes loss and accuracy in fp32; a custom
     * loss is only known to the graph, so its value is the output. */
    out[0] = t->o.objective == AF_OBJ_CUSTOM ? met[0] : z;
    if (!engine_target(t)) {
        for (int i = 0; i < t->np; i++) out[1 + i] = grads[i];
        t->fb = tr_compile(t, 3 + t->np, in, 1 + t->np, out);
        return t->fb ? AF_OK : ir_fail(AF_ERR_INVALID, "trainer: %s", af_error_message());
    }
    t->fwd = tr_compile(t, 3 + t->np, in, 1, out);
    if (!t->fwd)
        return ir_fail(AF_ERR_INVALID, "trainer: forward program: %s%s", af_error_message(),
                       llama_net_weights(&t->net) ? " (a llama: the pipeline or resident plan binds the same few ports at any depth)" : "");
    for (int i = 0; i < t->np; i++) {
        t->bwd[i] = tr_compile(t, 3 + t->np, in, 1, &grads[i]);
        if (!t->bwd[i]) return ir_fail(AF_ERR_INVALID, "trainer: backward program of param '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    }
    return AF_OK;
}

static af_status build_host_device(af_trainer *t) {
    af_tensor **in = tensors(3 + t->np), **out = tensors(1 + t->np), **grads = tensors(t->np);
    af_status st = in && out && grads ? host_device_programs(t, in, out, grads) : AF_ERR_NOMEM;
    free(in);
    free(out);
    free(grads);
    return st;
}

/* Adam: (w, m, r, g, lr_t[, moment_rescale], eps[, decay]) -> stack(w', m', r');
 * SGD: (w, g, lr_t[, decay]) -> w'. */
static af_status build_update_program(af_trainer *t, int i) {
    af_graph *g = t->g;
    af_dtype dt = io_dtype(t);
    af_shape f = t->flat[i];
    bool adam = t->o.optimizer == AF_OPT_ADAM, decay = t->o.weight_decay != 0.0f;
    af_tensor *in[8], *out;
    int n = 0;
    af_tensor *w = in[n++] = af_input(g, "w", dt, f);
    af_tensor *m = adam ? (in[n++] = af_input(g, "m", dt, f)) : NULL;
    af_tensor *r = adam ? (in[n++] = af_input(g, "r", dt, f)) : NULL;
    af_tensor *gr = in[n++] = af_input(g, "grad", dt, f);
    af_tensor *lr = in[n++] = scalar_input(t, "lr_t");
    af_tensor *q = tr_rescales_moments(t) ? (in[n++] = scalar_input(t, "moment_rescale")) : NULL;
    af_tensor *eps = adam ? (in[n++] = scalar_input(t, "eps")) : NULL;
    af_tensor *dc = decay ? (in[n++] = scalar_input(t, "decay")) : NULL;
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
    if (!out) return graph_error(t, "building an update program");
    t->upd[i] = tr_compile(t, n, in, 1, &out);
    if (!t->upd[i]) return ir_fail(AF_ERR_INVALID, "trainer: update program of '%s': %s", af_tensor_name(t->p[i]), af_error_message());
    return AF_OK;
}

af_status tr_device_update(af_trainer *t, int i, int64_t step, bool *ok) {
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
    af_buffer out = AF_BUF_F32(t->upd_out[i], (adam ? 3 : 1) * n);
    af_status st = tr_run(t, t->upd[i], in, &out);
    if (st) return st;
    *ok = *ok && tr_finite(t->upd_out[i], (adam ? 3 : 1) * n);
    return AF_OK;
}

/* Splits the stacked rows back on the host: an array move, not tensor math. */
void tr_device_commit(af_trainer *t) {
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    for (int i = 0; i < t->np; i++) {
        size_t bytes = (size_t)t->count[i] * sizeof(float);
        memcpy(t->master[i], t->upd_out[i], bytes);
        if (adam) {
            memcpy(t->m[i], t->upd_out[i] + t->count[i], bytes);
            memcpy(t->v[i], t->upd_out[i] + 2 * t->count[i], bytes);
        }
    }
}

/* ------------------------------------------------------------------ resident and unrolled */

/* The inputs of a resident program, in feeding order (step_resident feeds the same).
 * Unrolled, lr_t and decay arrive as [1, K] tables indexed by the steps taken so far in
 * the block: a skipped step must not advance Adam's bias correction or the schedule. */
typedef struct {
    af_tensor *x[TR_MAXK], *y[TR_MAXK], *ls, *lr, *q, *eps, *dc, *iota;
} step_inputs;

static void add_step_inputs(af_trainer *t, step_inputs *si, af_tensor **in, int *ni) {
    int k = t->k;
    char name[32];
    for (int s = 0; s < k; s++) { snprintf(name, sizeof name, "x%d", s); in[(*ni)++] = si->x[s] = batch_input(t, name, t->o.batch); }
    for (int s = 0; s < k; s++) {
        snprintf(name, sizeof name, "target%d", s);
        in[(*ni)++] = si->y[s] = af_input(t->g, name, io_dtype(t), AF_SHAPE(t->o.batch, t->net.out_dim));
    }
    in[(*ni)++] = si->ls = scalar_input(t, "loss_scale");
    in[(*ni)++] = si->lr = af_input(t->g, "lr_t", io_dtype(t), AF_SHAPE(1, k));
    if (tr_rescales_moments(t)) in[(*ni)++] = si->q = scalar_input(t, "moment_rescale");
    if (t->o.optimizer == AF_OPT_ADAM) in[(*ni)++] = si->eps = scalar_input(t, "eps");
    if (t->o.weight_decay != 0.0f) in[(*ni)++] = si->dc = af_input(t->g, "decay", io_dtype(t), AF_SHAPE(1, k));
    if (k > 1) {
        float idx[TR_MAXK];
        for (int s = 0; s < k; s++) idx[s] = (float)s;
        si->iota = af_const(t->g, "step_index", AF_SHAPE(1, k), idx);
    }
}

/* Entry `taken` ([1,1]) of a [1, K] table: a one-hot mask and a sum, exact in fp16. */
static af_tensor *table_at(af_tensor *table, af_tensor *iota, af_tensor *taken) {
    if (!table || !iota) return table;
    int ax = 1;
    return af_reduce_sum(af_mul(table, af_equal(iota, taken)), 1, &ax, 1);
}

/* One step's update of every param (w, m, r advance in place) behind the finite gate:
 * when any new weight or moment is inf or nan (an overflowing gradient makes m' so),
 * every state tensor keeps its old value. *q is the moment rescale still to apply (NULL
 * with a static loss scale): once a step is taken the moments are in the current
 * scale's units and it becomes 1. */
static af_tensor *gated_update(af_trainer *t, af_tensor *lr, af_tensor *dc, const step_inputs *si, af_tensor **q,
                               af_tensor *const *grads, af_tensor **w, af_tensor **m, af_tensor **r) {
    int np = t->np;
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    af_tensor **wn = tensors(np), **mn = tensors(np), **rn = tensors(np), **w2d = tensors(np), **all = tensors(3 * np);
    af_tensor *ok = NULL;
    int nall = 0;
    nn_adam_cfg c = { t->o.beta1, t->o.beta2 };
    if (!wn || !mn || !rn || !w2d || !all) np = 0; /* out of memory: ok stays NULL */
    for (int i = 0; i < np; i++) {
        af_tensor *g2 = af_reshape(grads[i], t->flat[i]);
        w2d[i] = af_reshape(w[i], t->flat[i]);
        if (adam) nn_adam_update(&c, w2d[i], *q ? af_mul(m[i], *q) : m[i], *q ? af_mul(r[i], *q) : r[i], g2, lr, si->eps, dc, &wn[i], &mn[i], &rn[i]);
        else wn[i] = nn_sgd_update(w2d[i], g2, lr, dc);
        all[nall++] = wn[i];
        if (adam) { all[nall++] = mn[i]; all[nall++] = rn[i]; }
    }
    if (np) ok = nn_all_finite(nall, all);
    for (int i = 0; i < np; i++) {
        af_tensor *old = w[i];
        w[i] = af_reshape(af_select(ok, wn[i], w2d[i]), t->p[i]->shape);
        nn_carry_param_facts(w[i], old);
        if (adam) { m[i] = af_select(ok, mn[i], m[i]); r[i] = af_select(ok, rn[i], r[i]); }
    }
    if (*q && ok) *q = af_select(ok, ok, *q);
    free(wn);
    free(mn);
    free(rn);
    free(w2d);
    free(all);
    return ok;
}

static af_status build_resident(af_trainer *t) {
    int k = t->k, np = t->np, nm = tr_num_metrics(t);
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    af_graph *g = t->g;
    af_dtype dt = io_dtype(t);
    int nio = 3 * k + 16 + 3 * np; /* the program's inputs or outputs at most */
    af_tensor **in = tensors(nio), **out = tensors(nio), **w = tensors(np), **m = tensors(np), **r = tensors(np);
    af_tensor **grads = tensors(np);
    if (!in || !out || !w || !m || !r || !grads) {
        free(in), free(out), free(w), free(m), free(r), free(grads);
        return AF_ERR_NOMEM;
    }
    int ni = 0, no = 0;
    step_inputs si = { 0 };
    add_step_inputs(t, &si, in, &ni);
    af_tensor *q = si.q;
    char name[32];
    int first_state = ni;
    for (int i = 0; i < np; i++) { t->state_in[i] = ni; in[ni++] = w[i] = t->p[i]; }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "m%d", i); in[ni++] = m[i] = af_input(g, name, dt, t->flat[i]); }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "r%d", i); in[ni++] = r[i] = af_input(g, name, dt, t->flat[i]); }
    af_tensor *oks[TR_MAXK], *taken = si.iota ? af_const_fill(g, AF_SHAPE(1, 1), 0.0f) : NULL;
    af_status st = AF_OK;
    for (int s = 0; s < k && !st; s++) {
        af_tensor *met[2], *z;
        if ((st = build_step(t, si.x[s], si.y[s], si.ls, w, met, &z, grads))) break;
        for (int j = 0; j < nm; j++) out[no++] = met[j];
        g->vouching++;
        af_tensor *lr = table_at(si.lr, si.iota, taken), *dc = table_at(si.dc, si.iota, taken);
        if (!(oks[s] = gated_update(t, lr, dc, &si, &q, grads, w, m, r))) st = graph_error(t, "building the update");
        if (si.iota) taken = af_add(taken, oks[s]);
        g->vouching--;
        if (g->error) st = graph_error(t, "building the update");
    }
    t->state_out0 = no + k;
    for (int s = 0; s < k && !st; s++) out[no++] = oks[s];
    for (int i = 0; i < np && !st; i++) out[no++] = w[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = m[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = r[i];
    if (!st && !(t->res = tr_compile(t, ni, in, no, out))) st = ir_fail(AF_ERR_INVALID, "trainer: step program: %s", af_error_message());
    t->nstate = ni - first_state;
    /* Resident: seed the state (masters from the params, zero moments) and alias each
     * new value onto its input. Shuttled: the host feeds and reads it every block. */
    t->state_bound = !t->o.shuttle_state;
    for (int j = 0; !st && j < t->nstate; j++) {
        int pi = j % np;
        if (t->state_bound)
            st = af_model_bind_state(t->res, first_state + j, t->state_out0 + j, j < np ? t->master[pi] : j < 2 * np ? t->m[pi] : t->v[pi]);
    }
    free(in), free(out), free(w), free(m), free(r), free(grads);
    return st;
}

/* Host buffers a plan needs besides the state: the step's logits, the device plan's and
 * shuttled plan's update outputs, the host plan's spare state. */
static af_status alloc_buffers(af_trainer *t) {
    bool adam = t->o.optimizer == AF_OPT_ADAM, shuttled = t->o.plan >= AF_PLAN_RESIDENT && t->o.shuttle_state;
    bool ok = true;
    if (t->o.plan <= AF_PLAN_DEVICE && !t->pipe) ok = (t->logits = malloc((size_t)t->y_count * sizeof(float))) != NULL;
    for (int i = 0; ok && i < t->np; i++) {
        size_t n = (size_t)t->count[i];
        if (t->o.plan == AF_PLAN_DEVICE || shuttled) ok = (t->upd_out[i] = malloc((adam ? 3 : 1) * n * sizeof(float))) != NULL;
        for (int k = 0; ok && tr_host_moments(t) && k < (adam ? 3 : 1); k++) ok = (t->next[i][k] = malloc(n * sizeof(float))) != NULL;
    }
    return ok ? AF_OK : ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
}

af_status tr_build_programs(af_trainer *t) {
    af_status st;
    if ((st = alloc_buffers(t))) return st;
    if (t->o.plan == AF_PLAN_PIPELINE) return tr_pipe_build(t);
    if (t->o.plan == AF_PLAN_RESIDENT && !t->o.shuttle_state && llama_net_weights(&t->net)) return tr_lres_build(t);
    if (t->o.plan == AF_PLAN_RESIDENT || t->o.plan == AF_PLAN_UNROLLED) return build_resident(t);
    if ((st = build_host_device(t))) return st;
    for (int i = 0; t->o.plan == AF_PLAN_DEVICE && i < t->np; i++)
        if ((st = build_update_program(t, i))) return st;
    return AF_OK;
}

af_status tr_build_eval_graph(af_trainer *t) {
    af_tensor **in = t->eval_in, **w;
    if (t->pipe || t->lres) return AF_OK; /* they predict through their own forward programs */
    if (!(w = tensors(t->np))) return AF_ERR_NOMEM;
    in[0] = batch_input(t, "eval_x", t->o.eval_batch);
    /* Its own weight inputs, fed the current masters: it never shares ports with training. */
    for (int i = 0; i < t->np; i++) {
        char name[32];
        snprintf(name, sizeof name, "eval_w%d", i);
        in[1 + i] = w[i] = af_input(t->g, name, io_dtype(t), t->p[i]->shape);
        nn_carry_param_facts(w[i], t->p[i]);
    }
    t->eval_z = t->net.forward(t->net.ctx, in[0], w);
    free(w);
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
