/* The `resident` and `unrolled` plans (seed 000): the whole step in one program, K steps
 * (unrolled, each step's weights a stop frontier) or one (resident), the state outputs
 * aliased onto their inputs; with shuttle_state the host feeds the state in and reads it
 * back around every block instead. On a llama (af_net.llama_config) the resident plan
 * hands over to its llama variant (plan_llama_resident.c). */
#include "engine/family.h"
#include "nn/optim.h"
#include "train/plan_llama_resident.h"
#include "train/step_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    af_model *res;   /* the step program */
    int *state_in;   /* [np]: input index holding param i (m, v follow np and 2 np later) */
    int state_out0;  /* output index of param 0's new value (same layout) */
    int nstate;      /* state inputs (params, then m, then v) */
    bool bound;      /* res holds params and moments as resident state */
    float **upd_out; /* shuttled: [np] w', m', r' read back */
} resident_plan;

/* The inputs of a resident program, in feeding order (resident_step feeds the same).
 * Unrolled, lr_t and decay arrive as [1, K] tables indexed by the steps taken so far in
 * the block: a skipped step must not advance Adam's bias correction or the schedule. */
typedef struct {
    af_tensor *x[TR_MAXK], *y[TR_MAXK], *ls, *lr, *q, *eps, *dc, *iota;
} step_inputs;

static void add_step_inputs(af_trainer *t, step_inputs *si, af_tensor **in, int *ni) {
    int k = t->k;
    char name[32];
    for (int s = 0; s < k; s++) { snprintf(name, sizeof name, "x%d", s); in[(*ni)++] = si->x[s] = tr_batch_input(t, name, t->o.batch); }
    for (int s = 0; s < k; s++) {
        snprintf(name, sizeof name, "target%d", s);
        in[(*ni)++] = si->y[s] = af_input(t->g, name, tr_io_dtype(t), AF_SHAPE(t->o.batch, t->net.out_dim));
    }
    in[(*ni)++] = si->ls = tr_scalar_input(t, "loss_scale");
    in[(*ni)++] = si->lr = af_input(t->g, "lr_t", tr_io_dtype(t), AF_SHAPE(1, k));
    if (tr_rescales_moments(t)) in[(*ni)++] = si->q = tr_scalar_input(t, "moment_rescale");
    if (t->o.optimizer == AF_OPT_ADAM) in[(*ni)++] = si->eps = tr_scalar_input(t, "eps");
    if (t->o.weight_decay != 0.0f) in[(*ni)++] = si->dc = af_input(t->g, "decay", tr_io_dtype(t), AF_SHAPE(1, k));
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
    af_tensor **wn = tr_zalloc((size_t)np, sizeof *wn), **mn = tr_zalloc((size_t)np, sizeof *mn), **rn = tr_zalloc((size_t)np, sizeof *rn);
    af_tensor **w2d = tr_zalloc((size_t)np, sizeof *w2d), **all = tr_zalloc(3 * (size_t)np, sizeof *all);
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

static af_status build_program(af_trainer *t, resident_plan *rp) {
    int k = t->k, np = t->np, nm = tr_num_metrics(t);
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    af_graph *g = t->g;
    af_dtype dt = tr_io_dtype(t);
    int nio = 3 * k + 16 + 3 * np; /* the program's inputs or outputs at most */
    af_tensor **in = tr_zalloc((size_t)nio, sizeof *in), **out = tr_zalloc((size_t)nio, sizeof *out);
    af_tensor **w = tr_zalloc((size_t)np, sizeof *w), **m = tr_zalloc((size_t)np, sizeof *m), **r = tr_zalloc((size_t)np, sizeof *r);
    af_tensor **grads = tr_zalloc((size_t)np, sizeof *grads);
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
    for (int i = 0; i < np; i++) { rp->state_in[i] = ni; in[ni++] = w[i] = t->p[i]; }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "m%d", i); in[ni++] = m[i] = af_input(g, name, dt, t->flat[i]); }
    for (int i = 0; adam && i < np; i++) { snprintf(name, sizeof name, "r%d", i); in[ni++] = r[i] = af_input(g, name, dt, t->flat[i]); }
    af_tensor *oks[TR_MAXK], *taken = si.iota ? af_const_fill(g, AF_SHAPE(1, 1), 0.0f) : NULL;
    af_status st = AF_OK;
    for (int s = 0; s < k && !st; s++) {
        af_tensor *met[2], *z;
        if ((st = tr_build_step(t, si.x[s], si.y[s], si.ls, w, met, &z, grads))) break;
        for (int j = 0; j < nm; j++) out[no++] = met[j];
        g->vouching++;
        af_tensor *lr = table_at(si.lr, si.iota, taken), *dc = table_at(si.dc, si.iota, taken);
        if (!(oks[s] = gated_update(t, lr, dc, &si, &q, grads, w, m, r))) st = tr_graph_error(t, "building the update");
        if (si.iota) taken = af_add(taken, oks[s]);
        g->vouching--;
        if (g->error) st = tr_graph_error(t, "building the update");
    }
    rp->state_out0 = no + k;
    for (int s = 0; s < k && !st; s++) out[no++] = oks[s];
    for (int i = 0; i < np && !st; i++) out[no++] = w[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = m[i];
    for (int i = 0; adam && i < np && !st; i++) out[no++] = r[i];
    if (!st && !(rp->res = tr_compile(t, ni, in, no, out))) {
        /* past the family's input-count wall, the wall's own remedy (concat inputs) is not
         * the user's: the way out is a plan that keeps the state inside its programs */
        const ane_family_info *fi = t->engine ? ane_family_info_of(t->o.compile.family) : NULL; /* resolved by af_trainer_new */
        st = ir_fail(AF_ERR_INVALID, "trainer: step program: %s%s", af_error_message(),
                     fi && ni > fi->max_inputs
                         ? "; this plan binds each parameter, moment and batch window as its own input: on an engine "
                           "target choose --plan resident (a llama) or pipeline, which keep them inside the programs"
                         : "");
    }
    rp->nstate = ni - first_state;
    /* Resident: seed the state (masters from the params, zero moments) and alias each
     * new value onto its input. Shuttled: the host feeds and reads it every block. */
    rp->bound = !t->o.shuttle_state;
    for (int j = 0; !st && j < rp->nstate; j++) {
        int pi = j % np;
        if (rp->bound)
            st = af_model_bind_state(rp->res, first_state + j, rp->state_out0 + j, j < np ? t->master[pi] : j < 2 * np ? t->m[pi] : t->v[pi]);
    }
    free(in), free(out), free(w), free(m), free(r), free(grads);
    return st;
}

static af_status resident_build(af_trainer *t) {
    if (t->o.plan == AF_PLAN_RESIDENT && t->net.llama_config && !t->o.shuttle_state) { /* the llama variant */
        t->plan = &tr_plan_llama_resident;
        return t->plan->build(t);
    }
    resident_plan *rp = tr_zalloc(1, sizeof *rp);
    if (!(t->ps = rp)) return AF_ERR_NOMEM;
    if (!(rp->state_in = tr_zalloc((size_t)t->np, sizeof *rp->state_in))) return AF_ERR_NOMEM;
    if (t->o.shuttle_state) {
        int rows = t->o.optimizer == AF_OPT_ADAM ? 3 : 1;
        if (!(rp->upd_out = tr_zalloc((size_t)t->np, sizeof *rp->upd_out))) return AF_ERR_NOMEM;
        for (int i = 0; i < t->np; i++)
            if (!(rp->upd_out[i] = malloc((size_t)rows * (size_t)t->count[i] * sizeof(float)))) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    }
    return build_program(t, rp);
}

/* A resident (or shuttled) block of K steps: one dispatch. */
static af_status resident_step(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    resident_plan *rp = t->ps;
    int k = t->k, nm = tr_num_metrics(t);
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    af_buffer *in = t->feed_in, *out = t->feed_out;
    memset(in, 0, sizeof *in * (size_t)t->nfeed);
    memset(out, 0, sizeof *out * (size_t)t->nfeed);
    float ls = tr_seed_scale(t), q = tr_moment_rescale(t), eps = tr_eps_units(t), ls_block = t->scale;
    float lr[TR_MAXK], decay[TR_MAXK], metrics[TR_MAXK][2], ok[TR_MAXK];
    int n = 0;
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(x + (size_t)s * t->x_count, t->x_count);
    for (int s = 0; s < k; s++) in[n++] = AF_BUF_F32(y + (size_t)s * t->y_count, t->y_count);
    in[n++] = AF_BUF_F32(&ls, 1);
    /* Entry j: the lr and decay of the block's step after j taken ones (the program
     * picks the entry by the steps it has taken, so skips do not shift them). */
    for (int s = 0; s < k; s++) {
        lr[s] = tr_lr_t(t, t->step + s);
        decay[s] = 1.0f - tr_lr_at(&t->o, t->step + s) * t->o.weight_decay;
    }
    in[n++] = AF_BUF_F32(lr, k);
    if (tr_rescales_moments(t)) in[n++] = AF_BUF_F32(&q, 1);
    if (adam) in[n++] = AF_BUF_F32(&eps, 1);
    if (t->o.weight_decay != 0.0f) in[n++] = AF_BUF_F32(decay, k);
    int m = 0;
    for (int s = 0; s < k; s++)
        for (int j = 0; j < nm; j++) out[m++] = AF_BUF_F32(&metrics[s][j], 1);
    for (int s = 0; s < k; s++) out[m++] = AF_BUF_F32(&ok[s], 1);
    /* Resident state inputs are ignored and their outputs not delivered; shuttled state
     * is fed from the host copies and read back aside. */
    int per_param = adam ? 3 : 1;
    for (int j = 0; !rp->bound && j < per_param * t->np; j++) {
        int i = j % t->np, kind = j / t->np;
        float *host = kind == 0 ? t->master[i] : kind == 1 ? t->m[i] : t->v[i];
        in[rp->state_in[0] + j] = AF_BUF_F32(host, t->count[i]);
        out[rp->state_out0 + j] = AF_BUF_F32(rp->upd_out[i] + kind * t->count[i], t->count[i]);
    }
    double t0 = tr_now_s();
    af_status st = tr_run(t, rp->res, in, out);
    t->phase_s[TR_PHASE_FWD_BWD] += tr_now_s() - t0;
    if (st) return st;
    for (int j = 0; !rp->bound && j < per_param * t->np; j++) { /* an array move, not tensor math */
        int i = j % t->np, kind = j / t->np;
        float *host = kind == 0 ? t->master[i] : kind == 1 ? t->m[i] : t->v[i];
        memcpy(host, rp->upd_out[i] + kind * t->count[i], (size_t)t->count[i] * sizeof(float));
    }
    info->loss = 0;
    info->accuracy = 0;
    info->skipped_now = 0;
    info->loss_scale = t->scale;
    for (int s = 0; s < k; s++) {
        info->loss += metrics[s][0] / k;
        if (nm > 1) info->accuracy += metrics[s][1] / (float)t->o.batch / k;
        info->skipped_now += ok[s] != 1.0f;
        tr_after_step(t, ok[s] == 1.0f, ls_block, metrics[s][0]);
    }
    info->lr = tr_lr_at(&t->o, t->step > 0 ? t->step - 1 : 0); /* the last step taken */
    return AF_OK;
}

static af_status resident_read_param(af_trainer *t, int i, float *dst) {
    resident_plan *rp = t->ps;
    if (rp->bound) return af_model_read_state(rp->res, rp->state_in[i], dst);
    if (dst != t->master[i]) memcpy(dst, t->master[i], (size_t)t->count[i] * sizeof(float));
    return AF_OK;
}

/* Moves params and Adam moments between the host copies and resident state: read
 * brings the host up to date, write seeds the program (after a checkpoint load). */
static af_status resident_sync(af_trainer *t, bool read) {
    resident_plan *rp = t->ps;
    if (!rp->bound) return AF_OK;
    int per_param = t->o.optimizer == AF_OPT_ADAM ? 3 : 1; /* w, then m and v */
    for (int i = 0; i < t->np; i++) {
        float *host[3] = { t->master[i], t->m[i], t->v[i] };
        for (int k = 0; k < per_param; k++) {
            int port = rp->state_in[i] + k * t->np;
            af_status st = read ? af_model_read_state(rp->res, port, host[k]) : af_model_write_state(rp->res, port, host[k]);
            if (st) return st;
        }
    }
    return AF_OK;
}

static void resident_free(af_trainer *t) {
    resident_plan *rp = t->ps;
    if (!rp) return;
    af_model_free(rp->res);
    for (int i = 0; rp->upd_out && i < t->np; i++) free(rp->upd_out[i]);
    free(rp->upd_out);
    free(rp->state_in);
    free(rp);
}

const tr_plan tr_plan_resident = {
    .name = "resident",
    .id = AF_PLAN_RESIDENT,
    .caps = TR_SHUTTLES,
    .build = resident_build,
    .step = resident_step,
    .read_param = resident_read_param,
    .sync_state = resident_sync,
    .free = resident_free,
};

const tr_plan tr_plan_unrolled = {
    .name = "unrolled",
    .id = AF_PLAN_UNROLLED,
    .caps = TR_UNROLLS | TR_SHUTTLES,
    .build = resident_build,
    .step = resident_step,
    .read_param = resident_read_param,
    .sync_state = resident_sync,
    .free = resident_free,
};
