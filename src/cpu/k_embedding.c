/* Token-embedding kernels: a gather of table rows by id, and its gradient, a
 * scatter-add of rows into a [vocab, ...] table. Ids are whole numbers held in floats;
 * an id is truncated toward zero, and one outside [0, V) selects no row (zeros in the
 * gather, dropped in the scatter-add), so bad ids never read or write out of bounds. */
#include "cpu/kernels.h"

#include <string.h>

/* The row an id selects, or -1 when it names none. */
static int64_t row_of(float id, int64_t v) {
    if (!(id > -1.0f && id < (float)v)) return -1; /* also NaN */
    int64_t r = (int64_t)id;
    return r < v ? r : -1;
}

typedef struct { const float *table, *ids; float *out; int64_t v, row; } gather_ctx;

static void gather_range(void *p, int64_t i0, int64_t i1) {
    const gather_ctx *g = p;
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = row_of(g->ids[i], g->v);
        float *dst = g->out + i * g->row;
        if (r < 0) memset(dst, 0, (size_t)g->row * sizeof *dst);
        else memcpy(dst, g->table + r * g->row, (size_t)g->row * sizeof *dst);
    }
}

void cpu_k_embedding(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape ts = t->src[0]->shape;
    gather_ctx g = { .table = c->in[0], .ids = c->in[1], .out = c->out, .v = ts.dim[0],
                     .row = af_shape_count(ts) / ts.dim[0] };
    int64_t n = af_shape_count(t->src[1]->shape);
    cpu_pool_for(c->pool, n, g.row >= 4096 ? 1 : 4096 / g.row + 1, gather_range, &g);
}

/* Sums in id order, one pass: the same order on every run and thread count. */
void cpu_k_embedding_grad(const cpu_call *c) {
    const af_tensor *t = c->t;
    int64_t v = t->shape.dim[0], row = af_shape_count(t->shape) / v, n = af_shape_count(t->src[1]->shape);
    const float *dy = c->in[0], *ids = c->in[1];
    memset(c->out, 0, (size_t)(v * row) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row_of(ids[i], v);
        if (r < 0) continue;
        float *dst = c->out + r * row;
        const float *src = dy + i * row;
        for (int64_t k = 0; k < row; k++) dst[k] += src[k];
    }
}
