/* Layout kernels: transpose, reshape, slice/split and concat. All are copies. */
#include "cpu/kernels.h"

#include <string.h>

void cpu_k_copy(const cpu_call *c) {
    memcpy(c->out, c->in[0], (size_t)af_shape_count(c->t->shape) * sizeof(float));
}

/* Copies an out-shaped block from x, where out element (i0..ir) reads
 * x[base + sum(i_d * st[d])]. The last axis is the inner loop. */
static void strided_copy(const float *x, int64_t base, const int64_t *st, af_shape os, float *out) {
    int r = os.rank;
    if (r == 0) { out[0] = x[base]; return; }
    /* Merge trailing axes that are contiguous in the source too (a slice that keeps
     * whole rows), so each copy moves a block rather than one short row. */
    int64_t dim[AF_MAX_RANK], sv[AF_MAX_RANK];
    int n = 0;
    for (int i = 0; i < r; i++) {
        if (n > 0 && sv[n - 1] == st[i] * os.dim[i]) {
            dim[n - 1] *= os.dim[i];
            sv[n - 1] = st[i];
            continue;
        }
        dim[n] = os.dim[i];
        sv[n++] = st[i];
    }
    int64_t idx[AF_MAX_RANK] = { 0 }, inner = dim[n - 1], sl = sv[n - 1];
    int64_t rows = af_shape_count(os) / inner, off = base;
    for (int64_t row = 0; row < rows; row++) {
        const float *src = x + off;
        float *dst = out + row * inner;
        if (sl == 1) memcpy(dst, src, (size_t)inner * sizeof *dst);
        else for (int64_t i = 0; i < inner; i++) dst[i] = src[i * sl];
        for (int d = n - 2; d >= 0; d--) {
            off += sv[d];
            if (++idx[d] < dim[d]) break;
            off -= sv[d] * dim[d];
            idx[d] = 0;
        }
    }
}

void cpu_k_transpose(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int64_t xst[AF_MAX_RANK], st[AF_MAX_RANK];
    af_strides(xs, xst);
    for (int i = 0; i < xs.rank; i++) st[i] = xst[c->t->a.ints[i]];
    strided_copy(c->in[0], 0, st, c->t->shape, c->out);
}

void cpu_k_slice(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape xs = t->src[0]->shape;
    int64_t st[AF_MAX_RANK], base = 0;
    af_strides(xs, st);
    if (t->op == AF_OP_SPLIT) base = t->a.ints[0] * st[t->a.axis];
    else for (int i = 0; i < xs.rank; i++) base += t->a.ints[i] * st[i];
    strided_copy(c->in[0], base, st, t->shape, c->out);
}

void cpu_k_concat(const cpu_call *c) {
    const af_tensor *t = c->t;
    int ax = t->a.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= t->shape.dim[i];
    for (int i = ax + 1; i < t->shape.rank; i++) inner *= t->shape.dim[i];
    int64_t row = t->shape.dim[ax] * inner, at = 0;
    for (int k = 0; k < t->nsrc; k++) {
        int64_t chunk = t->src[k]->shape.dim[ax] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(c->out + o * row + at, c->in[k] + o * chunk, (size_t)chunk * sizeof(float));
        at += chunk;
    }
}
