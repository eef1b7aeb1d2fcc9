/* The double reference of the bridge ops (structural and attention), from their
 * definitions: sdpa as softmax(q k^T * scale + mask) v with the textbook softmax (no
 * max subtraction: doubles do not overflow here), broadcast by index arithmetic. */
#include "support/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void sdpa(const af_tensor *t, const double *const *in, double *out) {
    af_shape q = t->src[0]->shape, v = t->src[2]->shape;
    int64_t BH = q.dim[0] * q.dim[1], Sq = q.dim[2], D = q.dim[3], Skv = v.dim[2], Dv = v.dim[3];
    double scale = t->a.scalar;
    double *w = malloc((size_t)Skv * sizeof *w);
    for (int64_t b = 0; b < BH; b++)
        for (int64_t i = 0; i < Sq; i++) {
            double z = 0;
            for (int64_t j = 0; j < Skv; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += in[0][(b * Sq + i) * D + d] * in[1][(b * Skv + j) * D + d];
                s = s * scale + (t->nsrc > 3 ? in[3][i * Skv + j] : 0.0);
                z += (w[j] = exp(s));
            }
            for (int64_t e = 0; e < Dv; e++) {
                double y = 0;
                for (int64_t j = 0; j < Skv; j++) y += w[j] / z * in[2][(b * Skv + j) * Dv + e];
                out[(b * Sq + i) * Dv + e] = y;
            }
        }
    free(w);
}

int ref_bridge_eval(const af_tensor *t, const double *const *in, double *out) {
    int64_t n = af_shape_count(t->shape);
    switch (t->op) {
    case IR_OP_SDPA: sdpa(t, in, out); return 0;
    case IR_OP_FLATTEN:
    case IR_OP_DROPOUT: memcpy(out, in[0], (size_t)n * sizeof *out); return 0;
    case IR_OP_INPUT_VIEW: memcpy(out, in[0] + t->a.ints[0], (size_t)n * sizeof *out); return 0;
    case IR_OP_BROADCAST: { /* out[.., i, ..] = x[.., 0, ..] along the axis */
        int64_t after = 1;
        for (int d = t->a.axis + 1; d < t->shape.rank; d++) after *= t->shape.dim[d];
        int64_t size = t->shape.dim[t->a.axis];
        for (int64_t f = 0; f < n; f++) out[f] = in[0][(f / (after * size)) * after + f % after];
        return 0;
    }
    default: return -1;
    }
}
