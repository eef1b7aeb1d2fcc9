/* Optimizer updates as graph ops (see optim.h for the second-moment representation),
 * and the public af_adam_step built on them. */
#include "nn/optim.h"

#include <math.h>

af_shape nn_flat2d(af_shape s) {
    int64_t cols = s.rank ? s.dim[s.rank - 1] : 1;
    return AF_SHAPE(af_shape_count(s) / cols, cols);
}

/* fp16's smallest normal: keeps 1/s finite in fp16 (1/2^-14 = 16384) when r and g are
 * both (near) zero; any s >= max(r, |g|) gives the same r' in exact arithmetic. */
#define RMS_FLOOR 6.103515625e-05f

af_tensor *nn_rms_update(float beta2, af_tensor *r, af_tensor *g) {
    af_tensor *s = af_adds(af_maximum(r, af_abs(g)), RMS_FLOOR);
    af_tensor *inv = af_inverse(s);
    af_tensor *rs = af_mul(r, inv), *gs = af_mul(g, inv);
    af_tensor *q = af_add(af_muls(af_square(rs), beta2), af_muls(af_square(gs), 1.0f - beta2));
    return af_mul(s, af_sqrt(q));
}

void nn_adam_update(const nn_adam_cfg *c, af_tensor *w, af_tensor *m, af_tensor *r, af_tensor *g, af_tensor *lr_t,
                    af_tensor *eps, af_tensor *decay, af_tensor **w2, af_tensor **m2, af_tensor **r2) {
    *m2 = af_add(af_muls(m, c->beta1), af_muls(g, 1.0f - c->beta1));
    *r2 = nn_rms_update(c->beta2, r, g);
    af_tensor *step = af_mul(lr_t, af_div(*m2, af_add(*r2, eps)));
    *w2 = af_sub(decay ? af_mul(w, decay) : w, step);
}

af_tensor *nn_sgd_update(af_tensor *w, af_tensor *g, af_tensor *lr_t, af_tensor *decay) {
    return af_sub(decay ? af_mul(w, decay) : w, af_mul(lr_t, g));
}

af_tensor *nn_all_finite(int n, af_tensor *const *xs) {
    af_tensor *s = NULL;
    int both[2] = { 0, 1 };
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return NULL;
        af_tensor *x2 = xs[i]->shape.rank == 2 ? xs[i] : af_reshape(xs[i], nn_flat2d(xs[i]->shape));
        af_tensor *z = af_reduce_sum(af_sub(x2, x2), 2, both, 1);
        s = s ? af_add(s, z) : z;
    }
    return af_equal(s, s);
}

af_tensor *nn_stack3(af_tensor *w, af_tensor *m, af_tensor *v) {
    af_tensor *parts[3] = { w, m, v };
    return af_concat(3, parts, 0);
}

void nn_carry_param_facts(af_tensor *to, const af_tensor *param) {
    if (!to || !param) return;
    to->flags |= param->flags & IR_TF_CONV;
    to->a.kernel[0] = param->a.kernel[0];
    to->a.kernel[1] = param->a.kernel[1];
    to->a.groups = param->a.groups;
}

/* ------------------------------------------------------------------ public API */

float af_adam_lr_t(float lr, float beta1, float beta2, int64_t t) {
    if (t < 1) t = 1;
    return (float)(lr * sqrt(1.0 - pow(beta2, (double)t)) / (1.0 - pow(beta1, (double)t)));
}

/* A one-element tensor reshaped to all-ones dims of `like`'s rank, so broadcasting it
 * keeps like's shape (a [1,1] against a [4] would give [1,4]). */
static af_tensor *scalar_like(af_tensor *s, const af_tensor *like) {
    af_shape ones = { .rank = like->shape.rank };
    for (int i = 0; i < ones.rank; i++) ones.dim[i] = 1;
    return ir_shape_eq(s->shape, ones) ? s : af_reshape(s, ones);
}

static af_status check_step_args(int n, af_tensor *const *w, af_tensor *const *grad, af_tensor *const *m,
                                 af_tensor *const *r, af_tensor *lr_t, af_tensor *decay, const af_adam_opts *o) {
    if (n < 1 || !w || !grad || !m || !r || !lr_t || !o)
        return ir_fail(AF_ERR_INVALID, "af_adam_step: pass n >= 1 and the w, grad, m, r arrays, lr_t and opts");
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0 && isfinite(o->eps)))
        return ir_fail(AF_ERR_INVALID, "af_adam_step: needs 0 <= beta1, beta2 < 1 and a finite eps > 0 (got %g, %g, %g)",
                       (double)o->beta1, (double)o->beta2, (double)o->eps);
    af_graph *g = lr_t->g;
    if (g->error) return ir_fail(AF_ERR_INVALID, "af_adam_step: the graph has an error: %s", g->error);
    if (af_shape_count(lr_t->shape) != 1 || (decay && (decay->g != g || af_shape_count(decay->shape) != 1)))
        return ir_fail(AF_ERR_SHAPE, "af_adam_step: lr_t and decay must be one-element tensors of the same graph");
    for (int i = 0; i < n; i++) {
        af_tensor *t[4] = { w[i], grad[i], m[i], r[i] };
        for (int k = 0; k < 4; k++) {
            if (!t[k] || t[k]->g != g)
                return ir_fail(AF_ERR_INVALID, "af_adam_step: tensor %d of param %d is NULL or from another graph", k, i);
            if (!ir_shape_eq(t[k]->shape, w[i]->shape)) {
                char a[100], b[100];
                ir_shape_str(w[i]->shape, a, sizeof a);
                ir_shape_str(t[k]->shape, b, sizeof b);
                return ir_fail(AF_ERR_SHAPE, "af_adam_step: param %d is %s but its %s is %s; w, grad, m and r must match", i, a,
                               k == 1 ? "grad" : k == 2 ? "m" : "r", b);
            }
        }
    }
    return AF_OK;
}

af_status af_adam_step(int n, af_tensor *const *w, af_tensor *const *grad, af_tensor *const *m, af_tensor *const *r,
                       af_tensor *lr_t, af_tensor *decay, const af_adam_opts *opts, af_tensor **w_new, af_tensor **m_new,
                       af_tensor **r_new) {
    if (!w_new || !m_new || !r_new) return ir_fail(AF_ERR_INVALID, "af_adam_step: the output arrays are NULL");
    for (int i = 0; i < n; i++) w_new[i] = m_new[i] = r_new[i] = NULL;
    af_status st = check_step_args(n, w, grad, m, r, lr_t, decay, opts);
    if (st) return st;
    af_graph *g = lr_t->g;
    nn_adam_cfg c = { opts->beta1, opts->beta2 };
    af_tensor *eps = af_const_fill(g, AF_SHAPE(1), opts->eps);
    g->vouching++; /* the library's own update kernel (see the precision check) */
    for (int i = 0; i < n; i++) {
        nn_adam_update(&c, w[i], m[i], r[i], grad[i], scalar_like(lr_t, w[i]), scalar_like(eps, w[i]),
                       decay ? scalar_like(decay, w[i]) : NULL, &w_new[i], &m_new[i], &r_new[i]);
        nn_carry_param_facts(w_new[i], w[i]);
    }
    g->vouching--;
    if (g->error) {
        for (int i = 0; i < n; i++) w_new[i] = m_new[i] = r_new[i] = NULL;
        return ir_fail(AF_ERR_INVALID, "af_adam_step: %s", g->error);
    }
    return AF_OK;
}
