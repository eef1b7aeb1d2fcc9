/* im2col from graph ops (seed 000): static slice_by_size + concat, the patch index on
 * axis 2 rather than the last axis, zero padding by a zero-border concat. Used by
 * af_conv2d's forward and by the weight gradient of a native conv. */
#include "grad/grad.h"

#include <stdlib.h>

/* Zero borders of n entries on both sides of axis 2, by concatenating baked zeros. */
static af_tensor *pad_axis2(af_tensor *t, int n) {
    if (!t) return NULL;
    af_shape s = t->shape;
    s.dim[2] = n;
    af_tensor *z = grad_zeros(t->g, s), *parts[3] = { z, t, z };
    return af_concat(3, parts, 2);
}

/* Zero borders of ph rows and pw columns on the last two axes. The columns are padded
 * on axis 2 between two transposes: the backward of a concat on the width axis would
 * slice the loss-scaled gradient at a width offset, which the A13/A14 crop DMA
 * saturates past 4094; on axis 2 (as for the patch index) it never does. */
static af_tensor *zero_pad(af_tensor *x, int ph, int pw) {
    af_tensor *t = x;
    if (pw > 0) {
        int perm[4] = { 0, 1, 3, 2 };
        t = af_transpose(pad_axis2(af_transpose(t, perm), pw), perm);
    }
    if (ph > 0) t = pad_axis2(t, ph);
    return t;
}

/* The kh*kw shifted windows of x [A, B, H, W] (padded), each [A, B, Ho, Wo], in order
 * u*kw + v. Slicing the width first and the height second lets a backward pass sum each
 * column's height-padded gradients before padding the width once. */
static af_tensor **windows(af_tensor *x, int kh, int kw, int ph, int pw) {
    af_tensor *xp = zero_pad(x, ph, pw);
    af_tensor **parts = xp ? malloc(sizeof *parts * (size_t)(kh * kw)) : NULL;
    if (!parts) { ir_graph_fail(x->g, "im2col: out of memory"); return NULL; }
    int64_t a = x->shape.dim[0], b = x->shape.dim[1], hp = xp->shape.dim[2], wp = xp->shape.dim[3];
    int64_t ho = hp - kh + 1, wo = wp - kw + 1;
    for (int v = 0; v < kw; v++) {
        int64_t bw[4] = { 0, 0, 0, v }, sw[4] = { a, b, hp, wo };
        af_tensor *col = kw > 1 ? af_slice(xp, bw, sw) : xp;
        for (int u = 0; u < kh; u++) {
            int64_t bh[4] = { 0, 0, u, 0 }, sh[4] = { a, b, ho, wo };
            parts[u * kw + v] = kh > 1 ? af_slice(col, bh, sh) : col;
        }
    }
    return parts;
}

af_tensor *grad_im2col(af_tensor *x, int kh, int kw, int ph, int pw) {
    af_tensor **parts = windows(x, kh, kw, ph, pw);
    if (!parts || !parts[0]) { free(parts); return NULL; }
    int64_t n = x->shape.dim[0], cin = x->shape.dim[1], l = af_shape_count(parts[0]->shape) / (n * cin);
    for (int i = 0; i < kh * kw; i++) parts[i] = af_reshape(parts[i], AF_SHAPE(n, cin, 1, l));
    af_tensor *patches = af_concat(kh * kw, parts, 2); /* [N, Cin, kh*kw, L]: the patch index on axis 2 */
    free(parts);
    return af_reshape(patches, AF_SHAPE(n, cin * kh * kw, l)); /* row ci*(kh*kw) + u*kw + v */
}

af_tensor *grad_im2col_wide(af_tensor *x, int kh, int kw, int ph, int pw) {
    int perm[4] = { 1, 0, 2, 3 };
    af_tensor *xt = af_transpose(x, perm); /* [Cin, N, H, W]: the batch joins the columns */
    af_tensor **parts = xt ? windows(xt, kh, kw, ph, pw) : NULL;
    if (!parts || !parts[0]) { free(parts); return NULL; }
    int64_t cin = xt->shape.dim[0], cols = af_shape_count(parts[0]->shape) / cin;
    for (int i = 0; i < kh * kw; i++) parts[i] = af_reshape(parts[i], AF_SHAPE(cin, 1, cols));
    af_tensor *patches = af_concat(kh * kw, parts, 1); /* [Cin, kh*kw, N*L] */
    free(parts);
    return af_reshape(patches, AF_SHAPE(cin * kh * kw, cols));
}
