/* The `resident` plan for af_net_llama: the whole step (embedding, layers, classifier,
 * cross-entropy, backward, Adam) in one program whose parameters and moments are
 * outputs bound onto their inputs, built so every tensor fits the engine's limits
 * whatever the vocabulary:
 *   - token ids and targets arrive as (id / 64, id % 64), each exact in an fp16 port
 *     (whole numbers up to 2048), and become one-hot rows on the engine by two equality
 *     tests against baked tables, so a 32000-token vocabulary needs no gather, no
 *     scatter and no [tokens, vocab] one-hot input;
 *   - the embedding (and an untied classifier) is state of shape [blocks, V / blocks, D]
 *     (the same bytes as [V, D]) with each block within the family's W/H limit; the
 *     embedding is the sum of one-hot block @ table block, the logits come per block;
 *   - the cross-entropy's log-sum-exp runs over the blocks with the max held as a detach
 *     point and the exponentials summed by a matmul against ones (the engine's wide
 *     accumulator), not an fp16 running sum over 16000 terms.
 *   - the state is one tensor per kind of parameter, [3, members, ...]: w, m and r of
 *     every layer's wq (say) stacked, so the program binds 7 + 11 or 12 inputs whatever
 *     the depth (the runtime binds at most 64 per program).
 * The layers are af_llama's own (nn_llama_layers); Adam is the other resident plans'
 * (nn/optim.h). Predictions go through a second program with the same forward, fed the
 * groups' state. The generic resident plan (plan_resident.c) hands over to this one when
 * the net declares a llama config (af_net.llama_config) and the state stays resident. */
#include "engine/family.h"
#include "aneforge_llama.h"
#include "grad/grad.h"
#include "nn/llama_graph.h"
#include "nn/optim.h"
#include "train/plan_llama_resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MAXG: the groups (embedding, 9 per-layer kinds, final norm, classifier) whatever the
 * depth; MAXBLK: vocabulary blocks, each an output of the prediction program (the
 * runtime binds at most 64). */
enum { ID_BASE = 64, MAXG = 12, MAXBLK = 64 };

/* Params first, first + stride, ... (n of them), each stored as `ms`. */
typedef struct {
    int first, stride, n;
    af_shape ms;
    int64_t count; /* of one member */
} lr_group;

typedef struct {
    af_llama_config c;
    int B, T, nblk, vblk, ng, planes; /* planes: 3 (w, m, r) with Adam, 1 with SGD */
    lr_group grp[MAXG];
    int state_in0;                    /* the step program's first group input */
    af_model *eval;
    af_tensor *eval_in[2 + MAXG], *eval_out[MAXBLK];
    int eval_nout;
    float *hi, *lo, *yhi, *ylo, *eval_buf, *scratch; /* scratch: one group's state */
    af_tensor **tmp;                  /* while building: per-param tensors */
    af_model *res;                    /* the step program */
    int state_out0;                   /* its first group output */
} tr_lres;

static void lres_free(af_trainer *t) {
    tr_lres *r = t->ps;
    if (!r) return;
    af_model_free(r->res);
    af_model_free(r->eval);
    free(r->hi);
    free(r->lo);
    free(r->yhi);
    free(r->ylo);
    free(r->eval_buf);
    free(r->scratch);
    free(r->tmp);
    free(r);
}

static bool is_table(const tr_lres *r, int i) { return i == 0 || (!r->c.shared_classifier && i == 2 + 9 * r->c.n_layers); }

/* Engine-legal shape of param i: the vocabulary tables as [blocks, rows, D], the rest
 * as the [rows, cols] view the updates broadcast over (norms [1, D]). */
static af_shape member_shape(const af_trainer *t, const tr_lres *r, int i) {
    return is_table(r, i) ? AF_SHAPE(r->nblk, r->vblk, r->c.dim) : t->flat[i];
}

/* [lead..., shape...] */
static af_shape prepend(af_shape s, int64_t a, int64_t b) {
    af_shape o = { 0 };
    if (a > 0) o.dim[o.rank++] = a;
    o.dim[o.rank++] = b;
    for (int k = 0; k < s.rank; k++) o.dim[o.rank++] = s.dim[k];
    return o;
}

/* The groups: the embedding, each per-layer kind over the layers, the final norm, an
 * untied classifier. */
static void make_groups(const af_trainer *t, tr_lres *r) {
    int L = r->c.n_layers;
    r->ng = 0;
    r->grp[r->ng++] = (lr_group){ 0, 1, 1, { 0 }, 0 };
    for (int k = 0; k < 9; k++) r->grp[r->ng++] = (lr_group){ 1 + k * L, 1, L, { 0 }, 0 };
    r->grp[r->ng++] = (lr_group){ 1 + 9 * L, 1, 1, { 0 }, 0 };
    if (!r->c.shared_classifier) r->grp[r->ng++] = (lr_group){ 2 + 9 * L, 1, 1, { 0 }, 0 };
    for (int g = 0; g < r->ng; g++) {
        r->grp[g].ms = member_shape(t, r, r->grp[g].first);
        r->grp[g].count = af_shape_count(r->grp[g].ms);
    }
}

/* The state of group g: [planes, n, ms...] (SGD: [n, ms...]). */
static af_shape group_shape(const tr_lres *r, int g) {
    return prepend(r->grp[g].ms, r->planes > 1 ? r->planes : 0, r->grp[g].n);
}

/* Plane k (0 w, 1 m, 2 r) of a group state, as [n, ms...]. */
static af_tensor *plane(const tr_lres *r, int g, af_tensor *st, int k) {
    if (r->planes == 1) return st;
    af_shape gs = group_shape(r, g);
    int64_t begin[AF_MAX_RANK] = { k }, size[AF_MAX_RANK];
    for (int d = 0; d < gs.rank; d++) size[d] = d ? gs.dim[d] : 1;
    return af_reshape(af_slice(st, begin, size), prepend(r->grp[g].ms, 0, r->grp[g].n));
}

/* Member j of a plane [n, ms...], as af_llama reads it (tables stay blocked [blocks,
 * rows, D]: only block() reads them; the rest in the param's own shape). */
static af_tensor *member(const af_trainer *t, const tr_lres *r, int g, af_tensor *pl, int j) {
    const lr_group *G = &r->grp[g];
    af_shape ps = prepend(G->ms, 0, G->n);
    int64_t begin[AF_MAX_RANK] = { j }, size[AF_MAX_RANK];
    for (int d = 0; d < ps.rank; d++) size[d] = d ? ps.dim[d] : 1;
    int i = G->first + j * G->stride;
    af_tensor *x = G->n == 1 ? pl : af_slice(pl, begin, size);
    return af_reshape(x, is_table(r, i) ? G->ms : t->p[i]->shape);
}

/* 1 ([1,1]) when every element of every tensor is finite: sum(x - x) over all axes of
 * each is 0, or nan once an inf or nan is in; no reshape, so no tensor grows past the
 * engine's limits (nn_all_finite flattens to 2-D first). */
static af_tensor *all_finite(int n, af_tensor *const *xs) {
    af_tensor *s = NULL;
    for (int i = 0; i < n; i++) {
        int axes[AF_MAX_RANK];
        for (int d = 0; d < xs[i]->shape.rank; d++) axes[d] = d;
        af_tensor *z = af_reshape(af_reduce_sum(af_sub(xs[i], xs[i]), xs[i]->shape.rank, axes, 0), AF_SHAPE(1, 1));
        s = s ? af_add(s, z) : z;
    }
    return af_equal(s, s);
}

/* Group g's host state (masters, then m, then v) into buf as [planes][n][count], and back. */
static void gather(const af_trainer *t, const tr_lres *r, int g, float *buf) {
    const lr_group *G = &r->grp[g];
    for (int k = 0; k < r->planes; k++)
        for (int j = 0; j < G->n; j++) {
            int i = G->first + j * G->stride;
            const float *src = k == 0 ? t->master[i] : k == 1 ? t->m[i] : t->v[i];
            memcpy(buf + ((int64_t)k * G->n + j) * G->count, src, sizeof(float) * (size_t)G->count);
        }
}

static void scatter(af_trainer *t, const tr_lres *r, int g, const float *buf) {
    const lr_group *G = &r->grp[g];
    for (int k = 0; k < r->planes; k++)
        for (int j = 0; j < G->n; j++) {
            int i = G->first + j * G->stride;
            float *dst = k == 0 ? t->master[i] : k == 1 ? t->m[i] : t->v[i];
            memcpy(dst, buf + ((int64_t)k * G->n + j) * G->count, sizeof(float) * (size_t)G->count);
        }
}

/* The group holding param i and its place in it. */
static int group_of(const tr_lres *r, int i, int *j) {
    for (int g = 0; g < r->ng; g++) {
        const lr_group *G = &r->grp[g];
        if (i >= G->first && i < G->first + G->n * G->stride && (i - G->first) % G->stride == 0) {
            *j = (i - G->first) / G->stride;
            return g;
        }
    }
    return -1;
}

static af_status lres_read_param(af_trainer *t, int i, float *dst) {
    tr_lres *r = t->ps;
    int j, g = group_of(r, i, &j);
    if (g < 0) return ir_fail(AF_ERR_INVALID, "af_trainer_read_param: param %d", i);
    af_status st = af_model_read_state(r->res, r->state_in0 + g, r->scratch);
    if (!st) memcpy(dst, r->scratch + (int64_t)j * r->grp[g].count, sizeof(float) * (size_t)r->grp[g].count);
    return st;
}

static af_status lres_sync(af_trainer *t, bool read) {
    tr_lres *r = t->ps;
    for (int g = 0; g < r->ng; g++) {
        af_status st;
        if (read) {
            if ((st = af_model_read_state(r->res, r->state_in0 + g, r->scratch))) return st;
            scatter(t, r, g, r->scratch);
        } else {
            gather(t, r, g, r->scratch);
            if ((st = af_model_write_state(r->res, r->state_in0 + g, r->scratch))) return st;
        }
    }
    return AF_OK;
}

/* Blocks dividing V evenly, each within the family's W/H limit. */
static af_status choose_blocks(const af_trainer *t, tr_lres *r) {
    int64_t lim = r->c.vocab_size;
    if (t->engine) {
        const ane_family_info *fi = ane_family_info_of(t->o.compile.family); /* resolved by af_trainer_new */
        if (fi && fi->max_spatial < lim) lim = fi->max_spatial;
    }
    int V = r->c.vocab_size;
    for (int n = (int)((V + lim - 1) / lim); n <= V; n++)
        if (V % n == 0) {
            r->nblk = n;
            r->vblk = V / n;
            return r->vblk <= lim ? AF_OK : AF_ERR_INVALID;
        }
    return AF_ERR_INVALID;
}

/* (v / 64) or (v % 64) for the rows of block b, as a [1, vblk] constant. */
static af_tensor *id_table(af_graph *g, const tr_lres *r, int b, bool high) {
    float *v = malloc(sizeof(float) * (size_t)r->vblk);
    if (!v) return NULL;
    for (int j = 0; j < r->vblk; j++) {
        int id = b * r->vblk + j;
        v[j] = (float)(high ? id / ID_BASE : id % ID_BASE);
    }
    af_tensor *k = af_const(g, high ? "ids_high" : "ids_low", AF_SHAPE(1, r->vblk), v);
    free(v);
    return k;
}

/* One-hot rows [N, vblk] of ids (hi, lo) [N, 1] for block b. */
static af_tensor *one_hot(af_graph *g, const tr_lres *r, af_tensor *hi, af_tensor *lo, int b) {
    return af_mul(af_equal(hi, id_table(g, r, b, true)), af_equal(lo, id_table(g, r, b, false)));
}

/* Block b of a table state [blocks, vblk, D] (or [V, D]) as [vblk, D]. */
static af_tensor *block(const tr_lres *r, af_tensor *table, int b) {
    if (r->nblk == 1) return af_reshape(table, AF_SHAPE(r->vblk, r->c.dim));
    int64_t begin[3] = { b, 0, 0 }, size[3] = { 1, r->vblk, r->c.dim };
    return af_reshape(af_slice(table, begin, size), AF_SHAPE(r->vblk, r->c.dim));
}

/* Embedding, layers, final norm and the logits per block (into logits[nblk]). */
static af_tensor *lres_forward(af_graph *g, const tr_lres *r, af_tensor *hi, af_tensor *lo, af_tensor *const *w, int64_t B,
                          af_tensor **logits) {
    int L = r->c.n_layers;
    af_tensor *x = NULL;
    for (int b = 0; b < r->nblk; b++) {
        af_tensor *e = af_matmul(one_hot(g, r, hi, lo, b), block(r, w[0], b), 0, 0);
        x = x ? af_add(x, e) : e;
    }
    x = af_rms_norm(nn_llama_layers(&r->c, x, w, B, r->T), w[1 + 9 * L], 1e-5f);
    af_tensor *cls = r->c.shared_classifier ? w[0] : w[2 + 9 * L];
    for (int b = 0; b < r->nblk; b++) logits[b] = af_matmul(x, block(r, cls, b), 0, 1);
    return x;
}

/* Mean cross-entropy [1, 1] over the N rows; *m gets the per-row max (a detach point). */
static af_tensor *cross_entropy(af_graph *g, const tr_lres *r, af_tensor *const *logits, af_tensor *yhi, af_tensor *ylo,
                                af_tensor **m) {
    int ax = 1, both[2] = { 0, 1 };
    af_tensor *mx = NULL, *s = NULL, *tgt = NULL;
    for (int b = 0; b < r->nblk; b++) {
        af_tensor *mb = af_reduce_max(logits[b], 1, &ax, 1);
        mx = mx ? af_maximum(mx, mb) : mb;
    }
    float *ones = malloc(sizeof(float) * (size_t)r->vblk);
    if (!ones) return NULL;
    for (int j = 0; j < r->vblk; j++) ones[j] = 1.0f;
    af_tensor *col = af_const(g, "ones", AF_SHAPE(r->vblk, 1), ones);
    free(ones);
    for (int b = 0; b < r->nblk; b++) {
        af_tensor *sb = af_matmul(af_exp(af_sub(logits[b], mx)), col, 0, 0);
        af_tensor *tb = af_reduce_sum(af_mul(logits[b], one_hot(g, r, yhi, ylo, b)), 1, &ax, 1);
        s = s ? af_add(s, sb) : sb;
        tgt = tgt ? af_add(tgt, tb) : tb;
    }
    *m = mx;
    return af_reduce_mean(af_sub(af_add(af_log(s), mx), tgt), 2, both, 1);
}

static af_status lres_build(af_trainer *t) {
    const af_llama_config *cfg = t->net.llama_config;
    tr_lres *r = calloc(1, sizeof *r);
    if (!r) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    t->ps = r;
    r->c = *cfg;
    r->B = t->o.batch;
    r->T = (int)t->net.sample.dim[0];
    if (choose_blocks(t, r))
        return ir_fail(AF_ERR_INVALID, "trainer (resident plan): a vocabulary of %d splits into no equal blocks within the "
                                       "engine's W/H limit; use a vocabulary size with a divisor in range, or the pipeline plan",
                       r->c.vocab_size);
    if (r->c.vocab_size > ID_BASE * 2048)
        return ir_fail(AF_ERR_INVALID, "trainer (resident plan): vocabulary %d is over %d, the ids fed as two fp16 digits",
                       r->c.vocab_size, ID_BASE * 2048);
    r->planes = t->o.optimizer == AF_OPT_ADAM ? 3 : 1;
    make_groups(t, r);
    int64_t N = (int64_t)r->B * r->T;
    if (!(r->hi = malloc(sizeof(float) * (size_t)N)) || !(r->lo = malloc(sizeof(float) * (size_t)N)) ||
        !(r->yhi = malloc(sizeof(float) * (size_t)N)) || !(r->ylo = malloc(sizeof(float) * (size_t)N)))
        return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    af_graph *g = t->g;
    af_dtype dt = tr_io_dtype(t);
    bool adam = t->o.optimizer == AF_OPT_ADAM;
    int np = t->np, ni = 0, no = 0;
    af_tensor *in[8 + MAXG], *out[2 + MAXG];
    af_tensor *hi = in[ni++] = af_input(g, "ids_hi", dt, AF_SHAPE(N, 1)), *lo = in[ni++] = af_input(g, "ids_lo", dt, AF_SHAPE(N, 1));
    af_tensor *yhi = in[ni++] = af_input(g, "target_hi", dt, AF_SHAPE(N, 1)), *ylo = in[ni++] = af_input(g, "target_lo", dt, AF_SHAPE(N, 1));
    af_tensor *ls = in[ni++] = af_input(g, "loss_scale", dt, AF_SHAPE(1, 1)), *lr = in[ni++] = af_input(g, "lr_t", dt, AF_SHAPE(1, 1));
    af_tensor *q = tr_rescales_moments(t) ? (in[ni++] = af_input(g, "moment_rescale", dt, AF_SHAPE(1, 1))) : NULL;
    af_tensor *eps = adam ? (in[ni++] = af_input(g, "eps", dt, AF_SHAPE(1, 1))) : NULL;
    af_tensor *dc = t->o.weight_decay != 0.0f ? (in[ni++] = af_input(g, "decay", dt, AF_SHAPE(1, 1))) : NULL;
    af_tensor *st_in[MAXG], *logits[MAXBLK];
    if (r->nblk > MAXBLK)
        return ir_fail(AF_ERR_INVALID, "trainer (resident plan): the vocabulary of %d splits into %d blocks (at most %d); use "
                                       "a vocabulary with a larger divisor within the W/H limit, or the pipeline plan",
                       r->c.vocab_size, r->nblk, MAXBLK);
    /* Per-param scratch (lres_free releases it if building fails): the weights read
     * from the state, their gradients, the backward's stop points, one group's
     * gradients, the prediction program's weights. */
    if (!(r->tmp = calloc(5 * (size_t)np + 1, sizeof *r->tmp))) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    af_tensor **wv = r->tmp, **grads = wv + np, **stop = grads + np, **gs = stop + np + 1, **ew = gs + np;
    char name[32];
    r->state_in0 = ni;
    for (int g2 = 0; g2 < r->ng; g2++) {
        snprintf(name, sizeof name, "state%d", g2);
        in[ni++] = st_in[g2] = af_input(g, name, dt, group_shape(r, g2));
    }
    g->vouching++;
    for (int g2 = 0; g2 < r->ng; g2++)
        for (int j = 0; j < r->grp[g2].n; j++) wv[r->grp[g2].first + j] = member(t, r, g2, plane(r, g2, st_in[g2], 0), j);
    lres_forward(g, r, hi, lo, wv, r->B, logits);
    af_tensor *mx = NULL, *loss = cross_entropy(g, r, logits, yhi, ylo, &mx);
    for (int i = 0; i < np; i++) stop[i] = wv[i];
    stop[np] = mx;
    af_backward_opts bo = { 0.0f, np + 1, stop };
    af_status st = loss ? af_backward_from(ls, loss, np, wv, grads, &bo) : AF_ERR_INVALID;
    /* Adam over each group at once: its gradients stacked like its state. */
    af_tensor *news[MAXG][3], *all[3 * MAXG];
    int nall = 0;
    nn_adam_cfg ac = { t->o.beta1, t->o.beta2 };
    for (int g2 = 0; !st && g2 < r->ng; g2++) {
        const lr_group *G = &r->grp[g2];
        for (int j = 0; j < G->n; j++) gs[j] = af_reshape(grads[G->first + j], prepend(G->ms, 0, 1));
        af_tensor *gr = G->n == 1 ? gs[0] : af_concat(G->n, gs, 0);
        af_tensor *w = plane(r, g2, st_in[g2], 0);
        if (adam) {
            af_tensor *m = plane(r, g2, st_in[g2], 1), *v = plane(r, g2, st_in[g2], 2);
            nn_adam_update(&ac, w, q ? af_mul(m, q) : m, q ? af_mul(v, q) : v, gr, lr, eps, dc, &news[g2][0], &news[g2][1], &news[g2][2]);
        } else {
            news[g2][0] = nn_sgd_update(w, gr, lr, dc);
        }
        for (int k = 0; k < r->planes; k++) all[nall++] = news[g2][k];
    }
    af_tensor *ok = st ? NULL : all_finite(nall, all);
    out[no++] = loss;
    out[no++] = ok;
    r->state_out0 = no;
    for (int g2 = 0; !st && g2 < r->ng; g2++) {
        af_tensor *planes[3];
        af_shape one = prepend(prepend(r->grp[g2].ms, 0, r->grp[g2].n), 0, 1);
        for (int k = 0; k < r->planes; k++) {
            af_tensor *kept = af_select(ok, news[g2][k], plane(r, g2, st_in[g2], k));
            planes[k] = r->planes > 1 ? af_reshape(kept, one) : kept;
        }
        out[no++] = r->planes > 1 ? af_concat(r->planes, planes, 0) : planes[0];
    }
    g->vouching--;
    if (st || g->error) return ir_fail(AF_ERR_INVALID, "trainer (resident plan): building the step: %s", g->error ? g->error : af_error_message());
    if (!(r->res = tr_compile(t, ni, in, no, out))) return ir_fail(AF_ERR_INVALID, "trainer (resident plan): step program: %s", af_error_message());
    int64_t biggest = 0;
    for (int g2 = 0; g2 < r->ng; g2++) biggest = biggest > af_shape_count(group_shape(r, g2)) ? biggest : af_shape_count(group_shape(r, g2));
    if (!(r->scratch = malloc(sizeof(float) * (size_t)biggest))) return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    for (int g2 = 0; g2 < r->ng && !st; g2++) {
        gather(t, r, g2, r->scratch);
        st = af_model_bind_state(r->res, r->state_in0 + g2, r->state_out0 + g2, r->scratch);
    }
    if (st) return st;
    /* The prediction program: the same forward on eval_batch windows, its own weight inputs. */
    int64_t NE = (int64_t)t->o.eval_batch * r->T;
    r->eval_in[0] = af_input(g, "eval_ids_hi", dt, AF_SHAPE(NE, 1));
    r->eval_in[1] = af_input(g, "eval_ids_lo", dt, AF_SHAPE(NE, 1));
    for (int g2 = 0; g2 < r->ng; g2++) {
        snprintf(name, sizeof name, "eval_state%d", g2);
        r->eval_in[2 + g2] = af_input(g, name, dt, group_shape(r, g2));
        for (int j = 0; j < r->grp[g2].n; j++) ew[r->grp[g2].first + j] = member(t, r, g2, plane(r, g2, r->eval_in[2 + g2], 0), j);
    }
    lres_forward(g, r, r->eval_in[0], r->eval_in[1], ew, t->o.eval_batch, r->eval_out);
    r->eval_nout = r->nblk;
    if (g->error) return ir_fail(AF_ERR_INVALID, "trainer (resident plan): building the prediction program: %s", g->error);
    if (!(r->eval_buf = malloc(sizeof(float) * (size_t)(NE * r->c.vocab_size))))
        return ir_fail(AF_ERR_NOMEM, "trainer: out of memory");
    free(r->tmp);
    r->tmp = NULL;
    return AF_OK;
}

/* ids x (floats) -> the two fp16-exact digits. */
static af_status split_ids(const float *x, int64_t n, int V, float *hi, float *lo, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (!(x[i] >= 0 && x[i] < (float)V)) return ir_fail(AF_ERR_INVALID, "trainer (resident plan): %s id %g at %lld is outside the vocab of %d", what, (double)x[i], (long long)i, V);
        int id = (int)x[i];
        hi[i] = (float)(id / ID_BASE);
        lo[i] = (float)(id % ID_BASE);
    }
    return AF_OK;
}

/* One step: x token ids [B, T], y one-hot next tokens [B, T * V]; *loss the program's
 * mean cross-entropy, *ok whether the update was taken (all new state finite). */
static af_status lres_run_step(af_trainer *t, const float *x, const float *y, float *loss, bool *ok) {
    tr_lres *r = t->ps;
    int V = r->c.vocab_size;
    int64_t N = (int64_t)r->B * r->T;
    af_status st = split_ids(x, N, V, r->hi, r->lo, "token");
    if (st) return st;
    for (int64_t i = 0; i < N; i++) { /* the target's position in its one-hot row */
        int arg = -1;
        for (int v = 0; v < V && arg < 0; v++)
            if (y[i * V + v] > 0.5f) arg = v;
        if (arg < 0) return ir_fail(AF_ERR_INVALID, "trainer (resident plan): target row %lld is not one-hot", (long long)i);
        r->yhi[i] = (float)(arg / ID_BASE);
        r->ylo[i] = (float)(arg % ID_BASE);
    }
    float ls = t->scale, lr = tr_lr_t(t, t->step), q = tr_moment_rescale(t), eps = tr_eps_units(t);
    float decay = 1.0f - tr_lr_at(&t->o, t->step) * t->o.weight_decay, okf = 0;
    af_buffer in[16 + MAXG] = { 0 }, out[2 + MAXG] = { 0 };
    int n = 0;
    in[n++] = AF_BUF_F32(r->hi, N);
    in[n++] = AF_BUF_F32(r->lo, N);
    in[n++] = AF_BUF_F32(r->yhi, N);
    in[n++] = AF_BUF_F32(r->ylo, N);
    in[n++] = AF_BUF_F32(&ls, 1);
    in[n++] = AF_BUF_F32(&lr, 1);
    if (tr_rescales_moments(t)) in[n++] = AF_BUF_F32(&q, 1);
    if (t->o.optimizer == AF_OPT_ADAM) in[n++] = AF_BUF_F32(&eps, 1);
    if (t->o.weight_decay != 0.0f) in[n++] = AF_BUF_F32(&decay, 1);
    out[0] = AF_BUF_F32(loss, 1);
    out[1] = AF_BUF_F32(&okf, 1);
    if ((st = tr_run(t, r->res, in, out))) return st;
    t->host_flops += N * V; /* finding the targets in their one-hot rows */
    *ok = okf == 1.0f;
    return AF_OK;
}

static af_status lres_predict(af_trainer *t, int64_t n, const float *x, float *out) {
    tr_lres *r = t->ps;
    int V = r->c.vocab_size, T = r->T, eb = t->o.eval_batch;
    af_status st;
    if (!r->eval && !(r->eval = tr_compile(t, 2 + r->ng, r->eval_in, r->eval_nout, r->eval_out)))
        return ir_fail(AF_ERR_INVALID, "trainer (resident plan): prediction program: %s", af_error_message());
    int64_t NE = (int64_t)eb * T;
    float *hi = malloc(sizeof(float) * (size_t)NE), *lo = malloc(sizeof(float) * (size_t)NE), *states[MAXG] = { 0 };
    af_buffer in[2 + MAXG], o[MAXBLK];
    st = hi && lo ? AF_OK : AF_ERR_NOMEM;
    for (int g = 0; !st && g < r->ng; g++) { /* the current state, read back from the step program */
        int64_t cnt = af_shape_count(group_shape(r, g));
        if (!(states[g] = malloc(sizeof(float) * (size_t)cnt))) st = AF_ERR_NOMEM;
        else st = af_model_read_state(r->res, r->state_in0 + g, states[g]);
        in[2 + g] = AF_BUF_F32(states[g], cnt);
    }
    for (int b = 0; b < r->nblk; b++) o[b] = AF_BUF_F32(r->eval_buf + (int64_t)b * NE * r->vblk, NE * r->vblk);
    for (int64_t b0 = 0; b0 < n && !st; b0 += eb) {
        int m = (int)(n - b0 < eb ? n - b0 : eb);
        for (int64_t i = 0; i < NE; i++) {
            float id = i < (int64_t)m * T ? x[b0 * T + i] : 0.0f; /* pad the last chunk with token 0 */
            if (!(id >= 0 && id < (float)V)) { st = ir_fail(AF_ERR_INVALID, "af_trainer_predict: token id %g is outside the vocab of %d", (double)id, V); break; }
            hi[i] = (float)((int)id / ID_BASE);
            lo[i] = (float)((int)id % ID_BASE);
        }
        in[0] = AF_BUF_F32(hi, NE);
        in[1] = AF_BUF_F32(lo, NE);
        if (!st) st = tr_run(t, r->eval, in, o);
        for (int64_t i = 0; !st && i < (int64_t)m * T; i++)
            for (int v = 0; v < V; v++)
                out[(b0 * T + i) * V + v] = r->eval_buf[((int64_t)(v / r->vblk) * NE + i) * r->vblk + v % r->vblk];
    }
    free(hi);
    free(lo);
    for (int g = 0; g < r->ng; g++) free(states[g]);
    return st == AF_ERR_NOMEM ? ir_fail(st, "af_trainer_predict: out of memory") : st;
}

/* The step: one dispatch, the program's loss. */
static af_status lres_step(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    float loss = 0, ran_at = t->scale;
    bool ok = false;
    af_status st = lres_run_step(t, x, y, &loss, &ok);
    if (st) return st;
    info->loss = loss;
    info->loss_scale = ran_at;
    info->skipped_now = !ok;
    tr_after_step(t, ok, ran_at, loss);
    info->lr = tr_lr_at(&t->o, t->step > 0 ? t->step - 1 : 0);
    return AF_OK;
}

const tr_plan tr_plan_llama_resident = {
    .name = "resident",
    .id = AF_PLAN_RESIDENT,
    .caps = 0,
    .build = lres_build,
    .step = lres_step,
    .predict = lres_predict,
    .read_param = lres_read_param,
    .sync_state = lres_sync,
    .free = lres_free,
};
