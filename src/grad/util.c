/* Helpers shared by the VJP rules. */
#include "grad/grad.h"

af_tensor *grad_zeros_like(af_tensor *t) { return af_sub(t, t); }

af_tensor *grad_const_like(af_tensor *t, float c) { return af_adds(af_sub(t, t), c); }

af_tensor *grad_zeros(af_graph *g, af_shape s) { return af_const_fill(g, s, 0.0f); }

af_tensor *grad_unbroadcast(af_tensor *g, af_shape s) {
    if (!g) return NULL;
    af_shape gs = g->shape;
    if (ir_shape_eq(gs, s)) return g;
    int axes[AF_MAX_RANK], n = 0, lead = gs.rank - s.rank;
    for (int i = 0; i < gs.rank; i++) {
        int j = i - lead;
        if (j < 0 || (s.dim[j] == 1 && gs.dim[i] != 1)) axes[n++] = i;
    }
    af_tensor *r = n ? af_reduce_sum(g, n, axes, 1) : g;
    return ir_shape_eq(r ? r->shape : s, s) ? r : af_reshape(r, s);
}

af_tensor *grad_along_axis(af_tensor *x, int rank, int axis) {
    if (!x) return NULL;
    af_shape s = { .rank = rank };
    for (int i = 0; i < rank; i++) s.dim[i] = i == axis ? af_shape_count(x->shape) : 1;
    return ir_shape_eq(s, x->shape) ? x : af_reshape(x, s);
}
