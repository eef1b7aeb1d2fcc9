/* Finds head -> [add a bias, or a tensor of its shape] -> [relu] chains, ReLU gradients
 * and adds -> muls pairs the executor can run as one kernel. */
#include "cpu/fuse.h"
#include "cpu/fuse_embed.h"
#include "cpu/fuse_swiglu.h"
#include "cpu/kernels.h"

#include <stdlib.h>

/* Whether t's values feed exactly one node, once, and are not requested. */
static bool single_reader(const int *reads, const bool *is_out, const af_tensor *t) {
    return reads[t->id] == 1 && !is_out[t->id] && t->dtype == AF_F32;
}

/* A bias along the head's output channel: the last axis for a matmul ([N], [1, N], ...),
 * axis 1 of [B, C, H, W] for a conv ([C, 1, 1], [1, C, 1, 1]). */
static bool bias_fits(const af_tensor *head, const af_tensor *b) {
    af_shape o = head->shape, s = b->shape;
    int ch = head->op == IR_OP_CONV ? 1 : o.rank - 1;
    int64_t c = o.dim[ch];
    if (af_shape_count(s) != c || s.rank > o.rank) return false;
    int at = ch - (o.rank - s.rank); /* the bias axis that lines up with the channel */
    return at >= 0 && s.dim[at] == c;
}

static bool is_pool_grad(const af_tensor *t) {
    return (t->op == IR_OP_AVG_POOL_GRAD || t->op == IR_OP_MAX_POOL_GRAD) && t->dtype == AF_F32;
}

static bool head_kind(const af_tensor *t) {
    if (t->op == IR_OP_MATMUL_W) return true;
    if (t->op == IR_OP_CONV) return t->shape.rank == 4;
    if (t->op == IR_OP_MATMUL) return cpu_matmul_is_one_gemm(t);
    return false;
}

/* Whether t's values are in its own buffer while later nodes run: not a value a fused
 * chain keeps inside its kernel (a chain's result is its tail's, which has a buffer). */
static bool has_values(const compile_plan *p, const cpu_fusion *f, const int *pos, const af_tensor *t) {
    int at = pos[t->id];
    if (at < 0 || !f[at].absorbed) return true;
    for (int s = 0; s < p->nsched; s++)
        if (f[s].tail == at || f[s].acc_into == at) return true;
    return false;
}

int cpu_fuse_plan(const compile_plan *p, cpu_fusion *f) {
    int n = p->ntensors, absorbed = 0;
    int *reads = calloc((size_t)n + 1, sizeof *reads), *pos = malloc(((size_t)n + 1) * sizeof *pos);
    bool *is_out = calloc((size_t)n + 1, sizeof *is_out);
    for (int s = 0; s < p->nsched; s++) f[s] = (cpu_fusion){ -1, -1, false, false, -1, -1, false, 0, { 0 }, false, -1, -1 };
    if (!reads || !pos || !is_out) goto done; /* no fusion: still correct */
    for (int id = 0; id < n; id++) pos[id] = -1;
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *t = p->sched[s];
        pos[t->id] = s;
        for (int k = 0; k < t->nsrc; k++) reads[t->src[k]->id]++;
    }
    for (int i = 0; i < p->nout; i++) is_out[p->out[i]->id] = true;
    absorbed += cpu_fuse_norm_grad(p, f, reads, is_out, pos);
    absorbed += cpu_fuse_swiglu_pairs(p, f, pos);
    absorbed += cpu_fuse_embed_acc(p, f, reads, is_out, pos);
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *h = p->sched[s], *cur = h;
        if (f[s].absorbed || !head_kind(h) || h->dtype != AF_F32) continue;
        int tail = -1, bias = -1, added = -1, chain[2], nchain = 0;
        bool relu = false;
        if (single_reader(reads, is_out, cur)) {
            int at = p->last_read[cur->id];
            const af_tensor *r = p->sched[at];
            const af_tensor *b = r->op == IR_OP_ADD && !f[at].absorbed ? r->src[r->src[0] == cur ? 1 : 0] : NULL;
            /* the other operand must exist when the head runs: a leaf, or computed before it */
            bool ready = b && b != cur && ir_shape_eq(r->shape, cur->shape) && pos[b->id] < s;
            if (ready && bias_fits(h, b)) {
                bias = b->id;
            } else if (ready && h->op != IR_OP_CONV && b->dtype == AF_F32 && ir_shape_eq(b->shape, cur->shape) &&
                       has_values(p, f, pos, b)) {
                added = b->id; /* x W^T + r, or a gradient's second path added to its first */
            }
            if (bias >= 0 || added >= 0) {
                chain[nchain++] = tail = at;
                cur = r;
            }
        }
        if (single_reader(reads, is_out, cur)) {
            int at = p->last_read[cur->id];
            if (p->sched[at]->op == IR_OP_RELU) {
                relu = true;
                chain[nchain++] = tail = at;
            }
        }
        if (tail < 0) continue;
        f[s] = (cpu_fusion){ tail, bias, relu, false, -1, -1, false, 0, { 0 }, false, -1, added };
        for (int j = 0; j < nchain; j++) f[chain[j]].absorbed = true;
        absorbed += nchain;
    }
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *t = p->sched[s];
        if (t->op != IR_OP_SELECT || f[s].absorbed || f[s].tail >= 0) continue;
        const af_tensor *c = t->src[0], *g = t->src[1], *z = t->src[2];
        if (c->op != IR_OP_GREATER || c->src[1] != z || z->op != IR_OP_SUB) continue;
        const af_tensor *x = c->src[0];
        if (z->src[0] != x || z->src[1] != x || g == z || g == c) continue;
        /* c and z feed nothing else (z: the compare and the select), same shapes, fp32 */
        if (reads[c->id] != 1 || reads[z->id] != 2 || is_out[c->id] || is_out[z->id] || pos[c->id] < 0 ||
            pos[z->id] < 0 || f[pos[c->id]].absorbed || f[pos[z->id]].absorbed || f[pos[c->id]].tail >= 0 ||
            f[pos[z->id]].tail >= 0)
            continue;
        if (!ir_shape_eq(x->shape, t->shape) || !ir_shape_eq(g->shape, t->shape) || x->dtype != AF_F32 ||
            g->dtype != AF_F32 || t->dtype != AF_F32 || c->dtype != AF_F32 || z->dtype != AF_F32)
            continue;
        f[pos[c->id]].absorbed = f[pos[z->id]].absorbed = true;
        absorbed += 2;
        int gs = pos[g->id];
        if (gs >= 0 && is_pool_grad(g) && single_reader(reads, is_out, g) && !f[gs].absorbed && f[gs].tail < 0 &&
            x != g) { /* the pool gradient writes the masked values itself */
            f[gs].tail = s;
            f[gs].mask_x = x->id;
            f[s].absorbed = true;
            absorbed++;
        } else {
            f[s].relu_grad_x = x->id;
        }
    }
    for (int s = 0; s < p->nsched; s++) {
        const af_tensor *t = p->sched[s];
        if (t->op != IR_OP_ADDS || t->dtype != AF_F32 || f[s].absorbed || f[s].tail >= 0 || !single_reader(reads, is_out, t))
            continue;
        int at = p->last_read[t->id];
        const af_tensor *m = p->sched[at];
        if (m->op != IR_OP_MULS || m->dtype != AF_F32 || f[at].absorbed || f[at].tail >= 0 || f[at].relu_grad_x >= 0)
            continue;
        f[s].tail = at;
        f[s].add_mul = true;
        f[at].absorbed = true;
        absorbed++;
    }
done:
    free(reads);
    free(pos);
    free(is_out);
    return absorbed;
}
