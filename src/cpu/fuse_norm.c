/* Finds RMSNorm's gradient chains (fuse_norm.h). Each match checks every node's op,
 * shapes, dtype and readers, so a graph that only looks alike runs node by node. */
#include "cpu/fuse_norm.h"

/* t is an fp32 intermediate that nothing but the chain reads (n readers), not requested,
 * not already part of a fusion. */
static bool inner(const cpu_fusion *f, const int *reads, const bool *is_out, const int *pos, const af_tensor *t,
                  int n) {
    if (!t || t->dtype != AF_F32 || reads[t->id] != n || is_out[t->id] || pos[t->id] < 0) return false;
    const cpu_fusion *u = &f[pos[t->id]];
    return !u->absorbed && u->tail < 0 && u->kind == 0 && u->relu_grad_x < 0 && u->mask_x < 0;
}

static bool free_node(const cpu_fusion *f) { /* no part of a fusion yet */
    return !f->absorbed && f->tail < 0 && f->kind == 0 && f->relu_grad_x < 0 && f->mask_x < 0;
}

static int64_t last_dim(af_shape s) { return s.rank ? s.dim[s.rank - 1] : 1; }

/* s is x's shape with the last axis 1 (a keep_dims row statistic). */
static bool is_row_stat(af_shape s, af_shape x) {
    if (s.rank != x.rank || s.rank < 1 || s.dim[s.rank - 1] != 1) return false;
    for (int i = 0; i + 1 < s.rank; i++)
        if (s.dim[i] != x.dim[i]) return false;
    return true;
}

/* s is [1, ..., 1, d] of x's rank, or [d]: a per-column vector. */
static bool is_col_vec(af_shape s, af_shape x) {
    if (af_shape_count(s) != last_dim(x) || last_dim(s) != last_dim(x)) return false;
    return s.rank == 1 || s.rank == x.rank;
}

/* A reduction over the last axis only (mask bit rank-1), keeping dims. */
static bool reduces_last(const af_tensor *t) {
    int rank = t->src[0]->shape.rank;
    return rank >= 1 && (unsigned)t->a.ints[0] == (1u << (rank - 1)) && t->a.keep_dims;
}

/* A reduction over every axis but the last. */
static bool reduces_rows(const af_tensor *t) {
    int rank = t->src[0]->shape.rank;
    return rank >= 2 && (unsigned)t->a.ints[0] == (1u << (rank - 1)) - 1u;
}

static bool f32(const af_tensor *t) { return t->dtype == AF_F32; }

/* dx = mul(sub(dxhat, mul(xhat, reduce_mean(mul(dxhat, xhat)))), r), dxhat = mul(g, gam). */
static int match_rms_dx(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos,
                        int s) {
    const af_tensor *t = p->sched[s];
    if (t->op != IR_OP_MUL || !f32(t) || !free_node(&f[s])) return 0;
    const af_tensor *d = t->src[0], *r = t->src[1];
    if (d->op != IR_OP_SUB || !inner(f, reads, is_out, pos, d, 1) || !ir_shape_eq(d->shape, t->shape)) return 0;
    const af_tensor *dxhat = d->src[0], *proj = d->src[1];
    if (proj->op != IR_OP_MUL || !inner(f, reads, is_out, pos, proj, 1) || !ir_shape_eq(proj->shape, t->shape))
        return 0;
    const af_tensor *xhat = proj->src[0], *m = proj->src[1];
    if (m->op != IR_OP_REDUCE_MEAN || !inner(f, reads, is_out, pos, m, 1) || !reduces_last(m)) return 0;
    const af_tensor *pm = m->src[0];
    if (pm->op != IR_OP_MUL || !inner(f, reads, is_out, pos, pm, 1) || pm->src[0] != dxhat || pm->src[1] != xhat)
        return 0;
    if (dxhat->op != IR_OP_MUL || !inner(f, reads, is_out, pos, dxhat, 2) || !ir_shape_eq(dxhat->shape, t->shape))
        return 0;
    const af_tensor *g = dxhat->src[0], *gam = dxhat->src[1];
    if (!ir_shape_eq(g->shape, t->shape) || !ir_shape_eq(xhat->shape, t->shape) || !is_col_vec(gam->shape, t->shape) ||
        !is_row_stat(r->shape, t->shape) || !is_row_stat(m->shape, t->shape) || !f32(g) || !f32(gam) || !f32(xhat) ||
        !f32(r) || xhat == dxhat || g == dxhat)
        return 0;
    f[s].kind = CPU_FUSE_RMS_DX;
    f[s].xr[0] = g->id;
    f[s].xr[1] = gam->id;
    f[s].xr[2] = xhat->id;
    f[s].xr[3] = r->id;
    f[s].xr[4] = -1;
    const af_tensor *in[5] = { d, proj, m, pm, dxhat };
    for (int i = 0; i < 5; i++) f[pos[in[i]->id]].absorbed = true;
    /* dx's one reader adds the residual path's gradient, computed before dx: add it here */
    if (reads[t->id] != 1 || is_out[t->id]) return 5;
    int at = p->last_read[t->id];
    const af_tensor *a = p->sched[at];
    if (a->op != IR_OP_ADD) return 5; /* before reading src[1]: a one-source reader has none */
    const af_tensor *o = a->src[a->src[0] == t ? 1 : 0];
    if (!f32(a) || !free_node(&f[at]) || o == t || !ir_shape_eq(a->shape, t->shape) ||
        !ir_shape_eq(o->shape, t->shape) || !f32(o) || pos[o->id] >= s)
        return 5;
    f[s].xr[4] = o->id;
    f[s].tail = at;
    f[at].absorbed = true;
    return 6;
}

/* reduce_mean(square(x)) over the last axis. */
static int match_sq_mean(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos,
                         int s) {
    const af_tensor *t = p->sched[s];
    if (t->op != IR_OP_REDUCE_MEAN || !f32(t) || !free_node(&f[s]) || !reduces_last(t)) return 0;
    const af_tensor *sq = t->src[0];
    if (sq->op != IR_OP_SQUARE || !inner(f, reads, is_out, pos, sq, 1) || !f32(sq->src[0])) return 0;
    f[s].kind = CPU_FUSE_SQ_MEAN;
    f[s].xr[0] = sq->src[0]->id;
    f[pos[sq->id]].absorbed = true;
    return 1;
}

/* reduce_sum(mul(a, b)) over every axis but the last, a and b of one shape. */
static int match_mul_sum(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos,
                         int s) {
    const af_tensor *t = p->sched[s];
    if (t->op != IR_OP_REDUCE_SUM || !f32(t) || !free_node(&f[s]) || !reduces_rows(t)) return 0;
    const af_tensor *m = t->src[0];
    if (m->op != IR_OP_MUL || !inner(f, reads, is_out, pos, m, 1)) return 0;
    const af_tensor *a = m->src[0], *b = m->src[1];
    if (!ir_shape_eq(a->shape, m->shape) || !ir_shape_eq(b->shape, m->shape) || !f32(a) || !f32(b)) return 0;
    f[s].kind = CPU_FUSE_MUL_SUM;
    f[s].xr[0] = a->id;
    f[s].xr[1] = b->id;
    f[pos[m->id]].absorbed = true;
    return 1;
}

/* xhat = mul(x, r), read only by the dx chain at s (twice) and one column-sum chain: both
 * recompute it from x and r, and it is absorbed. */
static int match_xhat(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos,
                      int s) {
    if (f[s].kind != CPU_FUSE_RMS_DX) return 0;
    const af_tensor *xhat = p->g->t[f[s].xr[2]];
    if (xhat->op != IR_OP_MUL || xhat->src[1]->id != f[s].xr[3] || !inner(f, reads, is_out, pos, xhat, 3)) return 0;
    const af_tensor *x = xhat->src[0];
    if (!ir_shape_eq(x->shape, xhat->shape) || !f32(x) || x == xhat->src[1]) return 0;
    for (int s2 = 0; s2 < p->nsched; s2++) {
        cpu_fusion *u = &f[s2];
        if (u->kind != CPU_FUSE_MUL_SUM || u->scaled || (u->xr[0] != xhat->id && u->xr[1] != xhat->id) ||
            u->xr[0] == u->xr[1])
            continue;
        if (u->xr[0] == xhat->id) u->xr[0] = u->xr[1]; /* the other operand first, then x and r */
        u->xr[1] = x->id;
        u->xr[2] = f[s].xr[3];
        u->scaled = f[s].scaled = true;
        f[s].xr[2] = x->id;
        f[pos[xhat->id]].absorbed = true;
        return 1;
    }
    return 0;
}

int cpu_fuse_norm_grad(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos) {
    int absorbed = 0;
    for (int s = 0; s < p->nsched; s++) absorbed += match_rms_dx(p, f, reads, is_out, pos, s);
    for (int s = 0; s < p->nsched; s++) absorbed += match_sq_mean(p, f, reads, is_out, pos, s);
    for (int s = 0; s < p->nsched; s++) absorbed += match_mul_sum(p, f, reads, is_out, pos, s);
    for (int s = 0; s < p->nsched; s++) absorbed += match_xhat(p, f, reads, is_out, pos, s);
    return absorbed;
}
