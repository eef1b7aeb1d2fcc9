#include "nn/optim.h"

af_shape nn_flat2d(af_shape s) {
    int64_t cols = s.rank ? s.dim[s.rank - 1] : 1;
    return AF_SHAPE(af_shape_count(s) / cols, cols);
}

void nn_adam_update(const nn_adam_cfg *c, af_tensor *w, af_tensor *m, af_tensor *v, af_tensor *g, af_tensor *lr_t,
                    af_tensor *decay, af_tensor **w2, af_tensor **m2, af_tensor **v2) {
    *m2 = af_add(af_muls(m, c->beta1), af_muls(g, 1.0f - c->beta1));
    *v2 = af_add(af_muls(v, c->beta2), af_muls(af_square(g), 1.0f - c->beta2));
    af_tensor *step = af_mul(lr_t, af_div(*m2, af_adds(af_sqrt(*v2), c->eps)));
    *w2 = af_sub(decay ? af_mul(w, decay) : w, step);
}

af_tensor *nn_sgd_update(af_tensor *w, af_tensor *g, af_tensor *lr_t, af_tensor *decay) {
    return af_sub(decay ? af_mul(w, decay) : w, af_mul(lr_t, g));
}

af_tensor *nn_all_finite(int n, af_tensor *const *grads2d) {
    af_tensor *s = NULL;
    int both[2] = { 0, 1 };
    for (int i = 0; i < n; i++) {
        af_tensor *z = af_reduce_sum(af_sub(grads2d[i], grads2d[i]), 2, both, 1);
        s = s ? af_add(s, z) : z;
    }
    return af_equal(s, s);
}

af_tensor *nn_stack3(af_tensor *w, af_tensor *m, af_tensor *v) {
    af_tensor *parts[3] = { w, m, v };
    return af_concat(3, parts, 0);
}
