/* Layout kernels: transpose, reshape, slice/split and concat. All are copies. */
#include "cpu/kernels.h"

#include <string.h>

void cpu_k_copy(const cpu_call *c) {
    memcpy(c->out, c->in[0], (size_t)af_shape_count(c->t->shape) * sizeof(float));
}

/* A strided copy prepared once: out element (i0..ir) reads x[base + sum(i_d * st[d])],
 * with trailing axes that are contiguous in the source too merged (a slice that keeps
 * whole rows), so each copy moves a block rather than one short row. */
typedef struct {
    const float *x;
    float *out;
    int64_t base, inner, sl;
    int n;
    int64_t dim[AF_MAX_RANK], sv[AF_MAX_RANK];
} copy_plan;

static void copy_rows(void *p, int64_t r0, int64_t r1) {
    const copy_plan *c = p;
    int64_t idx[AF_MAX_RANK] = { 0 }, off = c->base, rest = r0;
    for (int d = c->n - 2; d >= 0; d--) { /* multi-index of the first row */
        idx[d] = rest % c->dim[d];
        rest /= c->dim[d];
        off += idx[d] * c->sv[d];
    }
    for (int64_t row = r0; row < r1; row++) {
        const float *src = c->x + off;
        float *dst = c->out + row * c->inner;
        if (c->sl == 1) memcpy(dst, src, (size_t)c->inner * sizeof *dst);
        else for (int64_t i = 0; i < c->inner; i++) dst[i] = src[i * c->sl];
        for (int d = c->n - 2; d >= 0; d--) {
            off += c->sv[d];
            if (++idx[d] < c->dim[d]) break;
            off -= c->sv[d] * c->dim[d];
            idx[d] = 0;
        }
    }
}

static void strided_copy(cpu_pool *pool, const float *x, int64_t base, const int64_t *st, af_shape os, float *out) {
    int r = os.rank;
    if (r == 0) { out[0] = x[base]; return; }
    copy_plan c = { .x = x, .out = out, .base = base };
    for (int i = 0; i < r; i++) {
        if (os.dim[i] == 1) continue; /* no stride to take: lets its neighbours merge (RoPE's [.., 24, 1] halves) */
        if (c.n > 0 && c.sv[c.n - 1] == st[i] * os.dim[i]) {
            c.dim[c.n - 1] *= os.dim[i];
            c.sv[c.n - 1] = st[i];
            continue;
        }
        c.dim[c.n] = os.dim[i];
        c.sv[c.n++] = st[i];
    }
    if (c.n == 0) { out[0] = x[base]; return; }
    c.inner = c.dim[c.n - 1];
    c.sl = c.sv[c.n - 1];
    int64_t rows = af_shape_count(os) / c.inner;
    cpu_pool_for(pool, rows, c.inner >= 32768 ? 1 : 32768 / c.inner + 1, copy_rows, &c);
}

void cpu_k_transpose(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int64_t xst[AF_MAX_RANK], st[AF_MAX_RANK];
    ir_strides(xs, xst);
    for (int i = 0; i < xs.rank; i++) st[i] = xst[c->t->a.ints[i]];
    strided_copy(c->pool, c->in[0], 0, st, c->t->shape, c->out);
}

void cpu_k_slice(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape xs = t->src[0]->shape;
    int64_t st[AF_MAX_RANK], base = 0;
    ir_strides(xs, st);
    if (t->op == IR_OP_SPLIT) base = t->a.ints[0] * st[t->a.axis];
    else for (int i = 0; i < xs.rank; i++) base += t->a.ints[i] * st[i];
    strided_copy(c->pool, c->in[0], base, st, t->shape, c->out);
}

typedef struct { const cpu_call *c; int64_t row, inner; int ax; } concat_ctx;

static void concat_rows(void *p, int64_t o0, int64_t o1) {
    const concat_ctx *x = p;
    const af_tensor *t = x->c->t;
    int64_t at = 0;
    for (int k = 0; k < t->nsrc; k++) {
        int64_t chunk = t->src[k]->shape.dim[x->ax] * x->inner;
        const float *src = x->c->in[k];
        float *dst = x->c->out + at;
        if (chunk == 1) /* interleaving (RoPE's pairs): a strided store, not a call per float */
            for (int64_t o = o0; o < o1; o++) dst[o * x->row] = src[o];
        else if (chunk < 16)
            for (int64_t o = o0; o < o1; o++)
                for (int64_t j = 0; j < chunk; j++) dst[o * x->row + j] = src[o * chunk + j];
        else
            for (int64_t o = o0; o < o1; o++) memcpy(dst + o * x->row, src + o * chunk, (size_t)chunk * sizeof(float));
        at += chunk;
    }
}

void cpu_k_concat(const cpu_call *c) {
    const af_tensor *t = c->t;
    concat_ctx x = { .c = c, .inner = 1, .ax = t->a.axis };
    int64_t outer = 1;
    for (int i = 0; i < x.ax; i++) outer *= t->shape.dim[i];
    for (int i = x.ax + 1; i < t->shape.rank; i++) x.inner *= t->shape.dim[i];
    x.row = t->shape.dim[x.ax] * x.inner;
    cpu_pool_for(c->pool, outer, x.row >= 32768 ? 1 : 32768 / x.row + 1, concat_rows, &x);
}
