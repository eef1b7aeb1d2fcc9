/* The CPU executor's memory plan: one arena with buffer reuse by liveness, so a run
 * allocates nothing. Inputs and outputs keep their buffers for the whole run, in a
 * region of their own at the arena's start; intermediates are freed after their last
 * reader and reuse each other's space in the region after it. Kept apart, an output made
 * mid-run never takes a hole the intermediates would reuse, and the slots of inputs fed
 * in place and outputs written in place (a trainer's weights and gradients), which a run
 * never touches, never lie among pages it does (they cost address space, not memory). */
#include "cpu/mem_plan.h"
#include "cpu/fuse_embed.h"
#include "cpu/fuse_swiglu.h"
#include "cpu/kernels.h"

#include <stdlib.h>

typedef struct { int64_t off, size; } block;
typedef struct { block *b; int n, cap; int64_t top, peak; } allocator; /* peak: the arena size */

static int64_t round_up(int64_t size) { return (size + CPU_ALIGN_FLOATS - 1) / CPU_ALIGN_FLOATS * CPU_ALIGN_FLOATS; }

static int64_t alloc_take(allocator *a, int64_t size) {
    size = round_up(size);
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->b[i].size >= size && (best < 0 || a->b[i].size < a->b[best].size)) best = i;
    if (best < 0) {
        int64_t off = a->top;
        a->top += size;
        if (a->top > a->peak) a->peak = a->top; /* freeing the end lowers top, never the size needed */
        return off;
    }
    int64_t off = a->b[best].off;
    a->b[best].off += size;
    a->b[best].size -= size;
    if (a->b[best].size == 0) a->b[best] = a->b[--a->n];
    return off;
}

static bool alloc_give(allocator *a, int64_t off, int64_t size) {
    size = round_up(size);
    /* Merge with neighbours so freed space can serve larger buffers later. */
    for (int i = 0; i < a->n; i++) {
        if (a->b[i].off + a->b[i].size == off) { off = a->b[i].off; size += a->b[i].size; a->b[i--] = a->b[--a->n]; }
        else if (off + size == a->b[i].off) { size += a->b[i].size; a->b[i--] = a->b[--a->n]; }
    }
    if (off + size == a->top) { a->top = off; return true; }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        block *nb = realloc(a->b, (size_t)cap * sizeof *nb);
        if (!nb) return false;
        a->b = nb;
        a->cap = cap;
    }
    a->b[a->n++] = (block){ off, size };
    return true;
}

/* The k-th tensor node t reads: its sources, then a fused mask's x, then a fused chain's inputs. */
static int read_id(const af_tensor *t, int extra, const int *xr, int k) {
    if (k < t->nsrc) return t->src[k]->id;
    k -= t->nsrc;
    if (extra >= 0 && k-- == 0) return extra;
    return xr[k];
}

/* A slice of whole trailing axes, begin (b, 0, ...) and size (n, all, ...): a contiguous
 * run of its source (the attention gradient's dq, dk and dv out of their stack). */
static bool leading_block(const af_tensor *t) {
    af_shape s = t->src[0]->shape;
    if (t->op != IR_OP_SLICE_BY_SIZE || s.rank < 1 || t->shape.rank != s.rank) return false;
    for (int i = 1; i < s.rank; i++)
        if (t->a.ints[i] != 0 || t->a.sizes[i] != s.dim[i]) return false;
    return true;
}

bool cpu_is_alias(const af_tensor *t) {
    return (t->op == IR_OP_RESHAPE || leading_block(t)) && t->src[0]->op != IR_OP_CONST && t->dtype == t->src[0]->dtype;
}

int64_t cpu_alias_offset(const af_tensor *t) {
    if (t->op != IR_OP_SLICE_BY_SIZE) return 0;
    af_shape s = t->src[0]->shape;
    return s.dim[0] > 0 ? t->a.ints[0] * (af_shape_count(s) / s.dim[0]) : 0;
}

bool cpu_plan_memory(const compile_plan *p, const cpu_fusion *f, int threads, int64_t *offset, int64_t *arena_floats,
                     int64_t *scratch_floats) {
    af_graph *g = p->g;
    int n = p->ntensors;
    int *last = calloc((size_t)n + 1, sizeof *last), *root = malloc(((size_t)n + 1) * sizeof *root);
    bool *keep = calloc((size_t)n + 1, sizeof *keep);
    allocator al = { 0 };
    int64_t io = 0; /* the inputs' and outputs' region: never freed, so taken in order */
    bool ok = last && keep && root;
    *scratch_floats = 0;
    for (int id = 0; ok && id < n; id++) { root[id] = id; offset[id] = -1; }
    /* Uses and lifetimes belong to the buffer's owner: the root of a chain of aliases. */
    for (int s = 0; ok && s < p->nsched; s++) {
        af_tensor *t = p->sched[s];
        if (cpu_is_alias(t)) root[t->id] = root[t->src[0]->id];
        for (int k = 0; k < t->nsrc; k++) last[root[t->src[k]->id]] = s;
        if (f && f[s].relu_grad_x >= 0) last[root[f[s].relu_grad_x]] = s; /* read by the fused select */
    }
    for (int s = 0; ok && f && s < p->nsched; s++) /* a fused chain's inputs, read where its last node runs */
        for (int k = 0; f[s].kind && k < cpu_fuse_nreads(&f[s]); k++)
            if (last[root[f[s].xr[k]]] < s) last[root[f[s].xr[k]]] = s;
    for (int s = 0; ok && s < p->nsched; s++) { /* a pool gradient reads x for its mask, maybe before x's readers */
        if (f && f[s].mask_x >= 0 && last[root[f[s].mask_x]] < s) last[root[f[s].mask_x]] = s;
    }
    for (int i = 0; ok && i < p->nout; i++) keep[root[p->out[i]->id]] = true;
    for (int i = 0; ok && i < p->nin; i++) {
        keep[p->in[i]->id] = true;
        offset[p->in[i]->id] = io;
        io += round_up(af_shape_count(p->in[i]->shape));
    }
    for (int s = 0; ok && s < p->nsched; s++) {
        af_tensor *t = p->sched[s];
        af_tensor *made = f && f[s].tail >= 0 ? p->sched[f[s].tail] /* the chain's result, written by this node */
                        : !cpu_is_alias(t) && !(f && (f[s].absorbed || f[s].acc_into >= 0)) ? t : NULL;
        af_tensor *also = f && f[s].kind == CPU_FUSE_SWIGLU_PAIR ? g->t[f[s].xr[0]] : NULL; /* the pair's other */
        for (int k = 0; k < 2; k++, made = also) {
            if (made && keep[made->id]) { /* an output: the run-long region (offsets from the arena's start) */
                offset[made->id] = io;
                io += round_up(af_shape_count(made->shape));
            } else if (made) { /* an intermediate: after that region, moved there below */
                offset[made->id] = -2 - alloc_take(&al, af_shape_count(made->shape));
            }
        }
        int64_t sc = cpu_scratch_floats(t, threads);
        if (f && f[s].acc_into >= 0) { /* a tied embedding's scatter, summing its rows per row first */
            int64_t v = t->shape.dim[0];
            sc = cpu_embed_acc_scratch(af_shape_count(t->src[1]->shape), v > 0 ? af_shape_count(t->shape) / v : 0);
        }
        if (sc > AF_MAX_ELEMENTS) ok = false; /* 4 TiB of scratch (or an overflow): never allocatable */
        if (sc > *scratch_floats) *scratch_floats = sc;
        int extra = !f ? -1 : f[s].relu_grad_x >= 0 ? f[s].relu_grad_x : f[s].mask_x; /* x of a fused mask */
        int nx = f && f[s].kind ? cpu_fuse_nreads(&f[s]) : 0, nread = t->nsrc + (extra >= 0) + nx;
        for (int k = 0; k < nread && ok; k++) {
            af_tensor *src = g->t[root[read_id(t, extra, nx ? f[s].xr : NULL, k)]];
            bool dup = false; /* the same buffer twice must be freed once */
            for (int j = 0; j < k; j++) dup |= root[read_id(t, extra, nx ? f[s].xr : NULL, j)] == src->id;
            if (!dup && last[src->id] == s && !keep[src->id] && src->op != IR_OP_CONST && src->op != IR_OP_INPUT &&
                offset[src->id] <= -2) /* an intermediate (absorbed values have no buffer) */
                ok = alloc_give(&al, -2 - offset[src->id], af_shape_count(src->shape));
        }
    }
    for (int id = 0; ok && id < n; id++)
        if (offset[id] <= -2) offset[id] = io + (-2 - offset[id]);
    if (io > AF_MAX_ELEMENTS || al.peak > AF_MAX_ELEMENTS) ok = false; /* so (size_t)floats * 4 cannot wrap */
    *arena_floats = io + al.peak;
    free(al.b);
    free(last);
    free(keep);
    free(root);
    return ok;
}
