/* The sdpa kernel: softmax(q k^T * scale + mask) v per batch and head, the softmax
 * stabilised by its row max (the engine layer's SubtractMax). fp32 arithmetic; in fp16
 * models the scale is the fp16 value the engine's constant holds. */
#include "cpu/kernels.h"
#include "ir/fp16.h"

#include <math.h>

void cpu_k_sdpa(const cpu_call *c) {
    const af_tensor *t = c->t;
    const af_shape qs = t->src[0]->shape, ks = t->src[1]->shape, vs = t->src[2]->shape;
    const int64_t B = qs.dim[0], H = qs.dim[1], Sq = qs.dim[2], D = qs.dim[3], Skv = ks.dim[2], Dv = vs.dim[3];
    const float *q = c->in[0], *k = c->in[1], *v = c->in[2], *mask = t->nsrc > 3 ? c->in[3] : NULL;
    float scale = t->a.scalar, *p = c->scratch; /* Skv weights */
    if (c->fp16) ir_round_f16_array(&scale, 1);
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float *qb = q + bh * Sq * D, *kb = k + bh * Skv * D, *vb = v + bh * Skv * Dv;
        float *yb = c->out + bh * Sq * Dv;
        for (int64_t i = 0; i < Sq; i++) {
            float mx = -INFINITY;
            for (int64_t j = 0; j < Skv; j++) {
                float s = 0;
                for (int64_t d = 0; d < D; d++) s += qb[i * D + d] * kb[j * D + d];
                s *= scale;
                if (mask) s += mask[i * Skv + j];
                p[j] = s;
                if (s > mx) mx = s;
            }
            float sum = 0;
            for (int64_t j = 0; j < Skv; j++) sum += (p[j] = expf(p[j] - mx));
            for (int64_t e = 0; e < Dv; e++) yb[i * Dv + e] = 0;
            for (int64_t j = 0; j < Skv; j++) {
                float w = p[j] / sum;
                for (int64_t e = 0; e < Dv; e++) yb[i * Dv + e] += w * vb[j * Dv + e];
            }
        }
    }
}
