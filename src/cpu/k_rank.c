/* CPU kernels of the rank bridge ops: sort, top_k, arg_min_max, global_arg_min_max.
 * Indices are written as float whole numbers; ties keep the lower index first. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct { float key; int32_t idx; } keyed; /* two floats of scratch (cpu_bridge_scratch) */

/* Ascending by key, then by index: a total order, so qsort gives a stable sort. NaN
 * keys go last. */
static int cmp_asc(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    bool na = a->key != a->key, nb = b->key != b->key;
    if (na != nb) return na ? 1 : -1;
    if (!na && a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}
static int cmp_desc(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    bool na = a->key != a->key, nb = b->key != b->key;
    if (na != nb) return na ? 1 : -1;
    if (!na && a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* sort and top_k on x [..., C, W]: the first k of the key lane's order. */
static void sort_rows(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape xs = t->src[0]->shape;
    int64_t C = xs.dim[xs.rank - 2], W = xs.dim[xs.rank - 1], outer = af_shape_count(xs) / (C * W);
    int64_t k = t->op == IR_OP_TOPK ? t->a.ints[3] : W, lane = t->a.ints[0];
    bool desc = t->a.ints[1] != 0, indices = t->a.ints[2] != 0;
    keyed *order = (keyed *)c->scratch;
    for (int64_t b = 0; b < outer; b++) {
        const float *x = c->in[0] + b * C * W;
        for (int64_t w = 0; w < W; w++) order[w] = (keyed){ x[lane * W + w], (int32_t)w };
        qsort(order, (size_t)W, sizeof *order, desc ? cmp_desc : cmp_asc);
        if (indices) {
            for (int64_t j = 0; j < k; j++) c->out[b * k + j] = (float)order[j].idx;
            continue;
        }
        float *y = c->out + b * C * k;
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t j = 0; j < k; j++) y[ch * k + j] = x[ch * W + order[j].idx];
    }
}

static bool better(float v, float best, bool max) { return max ? v > best : v < best; }

/* The index of the first extreme among n values spaced `stride` apart. */
static int64_t arg_extreme(const float *x, int64_t n, int64_t stride, bool max) {
    int64_t bi = 0;
    for (int64_t i = 1; i < n; i++)
        if (better(x[i * stride], x[bi * stride], max)) bi = i;
    return bi;
}

static void arg_min_max(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int r = xs.rank;
    int64_t C = xs.dim[r - 3], HW = xs.dim[r - 2] * xs.dim[r - 1], outer = af_shape_count(xs) / (C * HW);
    bool channel = c->t->a.ints[0] != 0, max = c->t->a.ints[1] != 0;
    for (int64_t b = 0; b < outer; b++) {
        const float *x = c->in[0] + b * C * HW;
        if (channel)
            for (int64_t p = 0; p < HW; p++) c->out[b * HW + p] = (float)arg_extreme(x + p, C, HW, max);
        else
            for (int64_t ch = 0; ch < C; ch++) c->out[b * C + ch] = (float)arg_extreme(x + ch * HW, HW, 1, max);
    }
}

static void global_arg_min_max(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int ax = c->t->a.axis;
    int64_t n = xs.dim[ax], inner = 1, outer = 1;
    for (int i = ax + 1; i < xs.rank; i++) inner *= xs.dim[i];
    for (int i = 0; i < ax; i++) outer *= xs.dim[i];
    bool max = c->t->a.ints[1] != 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            c->out[o * inner + i] = (float)arg_extreme(c->in[0] + o * n * inner + i, n, inner, max);
}

void cpu_k_rank(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_ARGMINMAX: arg_min_max(c); break;
    case IR_OP_GLOBAL_ARGMINMAX: global_arg_min_max(c); break;
    case IR_OP_SORT: case IR_OP_TOPK: sort_rows(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, RANK, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
