/* CPU kernels of the normalization bridge ops: the engine's cross-channel LRN,
 * minmax_norm and scaled_elementwise. In fp16 numerics the parameters the net.plist
 * unit stores as fp16 bit patterns (LRN's alpha times C, minmax's epsilon, the scale)
 * are rounded as the engine stores them. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"
#include "ir/fp16.h"

#include <math.h>

static void lrn(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int r = xs.rank;
    int64_t C = xs.dim[r - 3], HW = xs.dim[r - 2] * xs.dim[r - 1], outer = af_shape_count(xs) / (C * HW);
    double alpha = c->t->a.scalar, beta = c->t->a.beta, k = c->t->a.eps;
    if (c->fp16) alpha = (double)af_round_f16((float)(alpha * (double)C)) / (double)C;
    for (int64_t o = 0; o < outer; o++) {
        const float *x = c->in[0] + o * C * HW;
        float *y = c->out + o * C * HW;
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t lo, hi;
            ir_lrn_window(ch, C, &lo, &hi);
            for (int64_t p = 0; p < HW; p++) {
                double s = 0;
                for (int64_t j = lo; j < hi; j++) s += (double)x[j * HW + p] * x[j * HW + p];
                y[ch * HW + p] = (float)(x[ch * HW + p] / pow(k + alpha * s, beta));
            }
        }
    }
}

static void minmax_norm(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int ax = c->t->a.axis;
    int64_t n = xs.dim[ax], inner = 1, outer = 1;
    for (int i = ax + 1; i < xs.rank; i++) inner *= xs.dim[i];
    for (int i = 0; i < ax; i++) outer *= xs.dim[i];
    float eps = c->fp16 ? af_round_f16(c->t->a.eps) : c->t->a.eps;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *x = c->in[0] + o * n * inner + i;
            float *y = c->out + o * n * inner + i;
            float mn = x[0], mx = x[0];
            for (int64_t j = 1; j < n; j++) {
                if (x[j * inner] < mn) mn = x[j * inner];
                if (x[j * inner] > mx) mx = x[j * inner];
            }
            for (int64_t j = 0; j < n; j++) y[j * inner] = (x[j * inner] - mn) / (mx - mn + eps);
        }
}

static void scaled_elementwise(const cpu_call *c) {
    float s = c->fp16 ? af_round_f16(c->t->a.scalar) : c->t->a.scalar;
    const float *x = c->in[0], *z = c->in[1];
    int mode = c->t->a.mode;
    for (int64_t i = 0, n = af_shape_count(c->t->shape); i < n; i++) {
        float v = mode == 0 ? x[i] + z[i] : mode == 3 ? (x[i] < z[i] ? x[i] : z[i]) : (x[i] > z[i] ? x[i] : z[i]);
        c->out[i] = s * v;
    }
}

void cpu_k_bnorm(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_LRN: lrn(c); break;
    case IR_OP_MINMAX_NORM: minmax_norm(c); break;
    case IR_OP_SCALED_ELEMENTWISE: scaled_elementwise(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BNORM, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}
