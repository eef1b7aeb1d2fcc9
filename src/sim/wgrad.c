/* The A13/A14 crop-DMA ceiling of a conv weight gradient (seed 000, "A13 width-slice
 * saturation"). af_conv2d's weight gradient is one matmul of the im2col patch matrix
 * against the loss-scaled output gradient dy. On the engine, the rows of that product
 * whose patches come from a width-offset window (u, v with v > 0) run dy through a
 * last-axis crop, and the crop's Q.4 x16 DMA turns |dy| > 4094 into +-inf. Rows of
 * v = 0 windows (and every row of a kW = 1 conv) take a clean route, as does the input
 * gradient (the patch index sits on axis 2, so its concat's backward slices no width).
 * ane-sim finds that matmul by the shape of its operand (below) and recomputes the
 * affected entries with dy saturated. */
#include "sim/wgrad.h"
#include "sim/quirks.h"

#include <math.h>
#include <stdlib.h>

/* Whether a window comes through a slice at a nonzero begin on its last axis. */
static bool width_offset_window(const af_tensor *t) {
    for (;;) {
        if (t->op == IR_OP_SLICE_BY_SIZE && t->a.ints[t->src[0]->shape.rank - 1] != 0) return true;
        if (t->op != IR_OP_SLICE_BY_SIZE && t->op != IR_OP_RESHAPE) return false;
        t = t->src[0];
    }
}

/* The concat of windows behind operand x of an im2col patch matrix: x reshapes a
 * concat along the axis before the last (the patch index) into rows, keeping the last
 * axis, so row r of x (counted over all leading axes) is window r mod period. NULL
 * when x is not such a matrix or none of its windows is width-offset. */
static const af_tensor *patch_concat(const af_tensor *x) {
    if (x->op != IR_OP_RESHAPE || x->shape.rank < 2) return NULL;
    const af_tensor *c = x->src[0];
    int r = c->shape.rank;
    if (c->op != IR_OP_CONCAT || r < 3 || c->a.axis != r - 2 || c->shape.dim[r - 1] != x->shape.dim[x->shape.rank - 1])
        return NULL;
    for (int k = 0; k < c->nsrc; k++)
        if (width_offset_window(c->src[k])) return c;
    return NULL;
}

int ane_wgrad_operand(const af_tensor *t) {
    if (t->op != IR_OP_MATMUL) return -1;
    /* The patch rows must survive into the product (a weight gradient), not be
     * contracted away (the forward conv). */
    if (!t->a.ta && patch_concat(t->src[0])) return 0;
    if (t->a.tb && patch_concat(t->src[1])) return 1;
    return -1;
}

/* Marks which of the period windows are width-offset. */
static void offset_windows(const af_tensor *c, bool *off) {
    int64_t at = 0;
    int axis = c->a.axis;
    for (int k = 0; k < c->nsrc; k++) {
        bool o = width_offset_window(c->src[k]);
        for (int64_t i = 0; i < c->src[k]->shape.dim[axis]; i++) off[at++] = o;
    }
}

static int64_t batch_count(af_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.rank - 2; i++) n *= s.dim[i];
    return n;
}

void ane_wgrad_crop(const af_tensor *t, float *out, const float *const *ins) {
    int k = ane_wgrad_operand(t);
    if (k < 0 || t->src[0]->shape.rank < 2 || t->src[1]->shape.rank < 2) return;
    const af_tensor *c = patch_concat(t->src[k]);
    int64_t period = c->shape.dim[c->shape.rank - 2];
    bool *off = malloc((size_t)period * sizeof *off);
    if (!off) return;
    offset_windows(c, off);
    af_shape ps = t->src[k]->shape, ds = t->src[1 - k]->shape, os = t->shape;
    int64_t rows = ps.dim[ps.rank - 2], depth = ps.dim[ps.rank - 1];    /* patches [.., R, L] */
    int64_t chans = af_shape_count(ds) / batch_count(ds) / depth;      /* dy [.., C, L] or [.., L, C] */
    int64_t nb = batch_count(os), pb = batch_count(ps), db = batch_count(ds);
    int64_t ocols = os.dim[os.rank - 1];
    const float *pv = ins[k], *dv = ins[1 - k];
    /* dy is [.., C, L] when it is contracted on its last axis: operand 1 with tb, or
     * operand 0 without ta; otherwise [.., L, C]. */
    bool dy_cl = k == 0 ? t->a.tb : !t->a.ta;
    for (int64_t b = 0; b < nb; b++) {
        const float *p = pv + (pb == 1 ? 0 : b) * rows * depth, *d = dv + (db == 1 ? 0 : b) * chans * depth;
        float *o = out + b * rows * chans;
        for (int64_t ch = 0; ch < chans; ch++) {
            bool hot = false;
            for (int64_t l = 0; l < depth && !hot; l++) hot = fabsf(dy_cl ? d[ch * depth + l] : d[l * chans + ch]) > AF_ANE_CROP_MAX;
            if (!hot) continue;
            for (int64_t r = 0; r < rows; r++) {
                if (!off[((pb == 1 ? 0 : b) * rows + r) % period]) continue;
                double acc = 0;
                for (int64_t l = 0; l < depth; l++) {
                    float v = dy_cl ? d[ch * depth + l] : d[l * chans + ch];
                    if (v > AF_ANE_CROP_MAX) v = INFINITY;
                    else if (v < -AF_ANE_CROP_MAX) v = -INFINITY;
                    acc += (double)p[r * depth + l] * v;
                }
                /* The product is [.., R, C] with the patches first, [.., C, R] after. */
                o[k == 0 ? r * ocols + ch : ch * ocols + r] = (float)acc;
            }
        }
    }
    free(off);
}
