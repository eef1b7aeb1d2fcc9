/* Softmax cross-entropy (softmax_xent) and its gradient on the CPU, a row at a time.
 *
 * The chain of ordinary ops the loss was built from (reduce_max, sub, exp, reduce_sum,
 * log, add, mul, reduce_sum twice, and softmax, sub, mul for the gradient) makes about
 * ten passes over [rows, vocab] and as many arrays; here the forward reads a row's
 * logits twice (its max, then exp and the target terms) and its targets once, and the
 * gradient writes softmax into its result and corrects it in place, so a row of a
 * 151,936-entry vocabulary stays in the core's cache between the passes.
 *
 * Forward, per row: m = max z, loss = sum(y (m - z)) + log(sum exp(z - m)) sum(y). Written
 * as m - z the target's term has no cancellation however large the logits, and exp never
 * sees a positive argument. Sums go in blocks of XENT_BLOCK floats (a SIMD reduction each)
 * added in double, so their error does not grow with the vocabulary.
 * Gradient: (exp(z - m) / s * k - y) dy with k = sum(y) (mode 0, the exact gradient) or
 * 1 (mode 1, the trainer's seed softmax - y, the chain's bits when the sums agree). */
#include "ir/op_cases.h"
#include "cpu/kernels.h"
#include "cpu/vmath.h"

#include <math.h>

#define XENT_BLOCK 512

CPU_VECTOR_CLONES static float row_max(const float *z, int64_t n) {
    float mx = -INFINITY;
#if !defined(__clang__) /* clang 14 cannot vectorise this reduction and warns that it did not */
#pragma omp simd reduction(max : mx)
#endif
    for (int64_t k = 0; k < n; k++) mx = z[k] > mx ? z[k] : mx;
    return mx;
}

/* sum exp(z - m) over one block, storing each term in e when e is not NULL. */
CPU_VECTOR_CLONES static float block_exp(const float *z, float *e, int64_t n, float m) {
    float s = 0.0f;
    if (e) {
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < n; k++) {
            float v = cpu_vexpf(z[k] - m);
            e[k] = v;
            s += v;
        }
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < n; k++) s += cpu_vexpf(z[k] - m);
    }
    return s;
}

/* sum y (m - z) and sum y over one block. */
CPU_VECTOR_CLONES static void block_target(const float *z, const float *y, int64_t n, float m, float *dot, float *ys) {
    float d = 0.0f, t = 0.0f;
#pragma omp simd reduction(+ : d, t)
    for (int64_t k = 0; k < n; k++) {
        d += y[k] * (m - z[k]);
        t += y[k];
    }
    *dot = d;
    *ys = t;
}

CPU_VECTOR_CLONES static void grad_fix(float *o, const float *y, int64_t n, float k, float g) {
    for (int64_t j = 0; j < n; j++) {
        float p = o[j] * k;
        o[j] = (p - y[j]) * g;
    }
}

typedef struct {
    const cpu_call *c;
    int64_t n;
} xent_ctx;

static void xent_rows(void *ctx, int64_t r0, int64_t r1) {
    const xent_ctx *x = ctx;
    const cpu_call *c = x->c;
    int64_t n = x->n;
    bool grad = c->t->op == IR_OP_SOFTMAX_XENT_GRAD;
    for (int64_t r = r0; r < r1; r++) {
        const float *z = c->in[0] + r * n, *y = c->in[1] + r * n;
        float *o = grad ? c->out + r * n : NULL;
        float m = row_max(z, n);
        double s = 0.0, dot = 0.0, ys = 0.0;
        for (int64_t b = 0; b < n; b += XENT_BLOCK) {
            int64_t len = n - b < XENT_BLOCK ? n - b : XENT_BLOCK;
            s += block_exp(z + b, o ? o + b : NULL, len, m);
            if (grad && c->t->a.mode == 1) continue; /* the sum of targets is taken as 1 */
            float d, t;
            block_target(z + b, y + b, len, m, &d, &t);
            dot += d;
            ys += t;
        }
        if (!grad) {
            c->out[r] = (float)(dot + log(s) * ys);
            continue;
        }
        const float *dy = c->in[2];
        float inv = (float)(1.0 / s), k = c->t->a.mode == 1 ? inv : (float)(ys / s);
        grad_fix(o, y, n, k, dy[c->t->src[2]->shape.dim[0] == 1 ? 0 : r]);
    }
}

void cpu_k_xent(const cpu_call *c) {
    af_shape z = c->t->src[0]->shape;
    xent_ctx x = { c, z.dim[1] };
    if (z.dim[0] == 0) return;
    if (x.n == 0) { /* no classes: no loss, and the gradient has no elements */
        if (c->t->op == IR_OP_SOFTMAX_XENT)
            for (int64_t r = 0; r < z.dim[0]; r++) c->out[r] = 0.0f;
        return;
    }
    cpu_pool_for(c->pool, z.dim[0], 1 + 16384 / (x.n + 1), xent_rows, &x);
}
