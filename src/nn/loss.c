/* Loss handles: what af_backward seeds from. */
#include "grad/grad.h"

#include <stdlib.h>

static af_loss *new_loss(af_graph *g, nn_loss_kind kind, af_tensor *root, af_tensor *target) {
    af_loss *l = ir_graph_own(g, calloc(1, sizeof *l));
    if (!l) { ir_graph_fail(g, "loss: out of memory"); return NULL; }
    *l = (af_loss){ .g = g, .kind = kind, .root = root, .target = target, .value = kind == AF_LOSS_SCALAR ? root : NULL };
    return l;
}

af_loss *af_loss_scalar(af_tensor *scalar) {
    if (!scalar) { ir_fail(AF_ERR_INVALID, "af_loss_scalar: tensor is NULL (an earlier builder failed?)"); return NULL; }
    if (scalar->g->error) return NULL;
    if (af_shape_count(scalar->shape) != 1) {
        char s[100];
        ir_shape_str(scalar->shape, s, sizeof s);
        ir_graph_fail(scalar->g, "af_loss_scalar: the loss has shape %s but must hold one element; reduce it with af_reduce_sum or af_reduce_mean", s);
        return NULL;
    }
    return new_loss(scalar->g, AF_LOSS_SCALAR, scalar, NULL);
}

af_loss *af_softmax_cross_entropy(af_tensor *logits, af_tensor *onehot) {
    if (!logits || !onehot) { ir_fail(AF_ERR_INVALID, "af_softmax_cross_entropy: logits or targets are NULL"); return NULL; }
    af_graph *g = logits->g;
    if (g->error) return NULL;
    if (onehot->g != g) { ir_graph_fail(g, "af_softmax_cross_entropy: logits and targets come from different graphs"); return NULL; }
    if (logits->shape.rank != 2 || !ir_shape_eq(logits->shape, onehot->shape)) {
        char a[100], b[100];
        ir_shape_str(logits->shape, a, sizeof a);
        ir_shape_str(onehot->shape, b, sizeof b);
        ir_graph_fail(g, "af_softmax_cross_entropy: logits %s and one-hot targets %s must both be [N, C]", a, b);
        return NULL;
    }
    return new_loss(g, AF_LOSS_CE, logits, onehot);
}

af_loss *af_mse(af_tensor *pred, af_tensor *target) {
    af_tensor *d = af_sub(pred, target);
    if (!d) return NULL;
    if (!ir_shape_eq(d->shape, pred->shape)) {
        ir_graph_fail(pred->g, "af_mse: target broadcasts to a larger shape than pred; give both the same shape");
        return NULL;
    }
    int axes[AF_MAX_RANK];
    for (int i = 0; i < d->shape.rank; i++) axes[i] = i;
    af_tensor *v = d->shape.rank ? af_reduce_mean(af_square(d), d->shape.rank, axes, 0) : af_square(d);
    return v ? af_loss_scalar(v) : NULL;
}

af_tensor *af_loss_root(af_loss *l) { return l ? l->root : NULL; }

af_tensor *af_loss_value(af_loss *l) {
    if (!l) return NULL;
    if (!l->value && l->kind == AF_LOSS_CE) {
        /* mean over rows of logsumexp(z) - sum(y z), stable through the row max */
        af_tensor *z = l->root;
        int ax = 1, both[2] = { 0, 1 };
        if (z->g->cpu_only) { /* one native node: a pass or two per row, not ten */
            l->value = af_muls(af_reduce_sum(ir_softmax_xent(z, l->target), 2, both, 0), 1.0f / (float)z->shape.dim[0]);
            return l->value;
        }
        af_tensor *mx = af_reduce_max(z, 1, &ax, 1);
        af_tensor *lse = af_add(af_log(af_reduce_sum(af_exp(af_sub(z, mx)), 1, &ax, 1)), mx);
        af_tensor *per = af_sub(af_mul(lse, af_reduce_sum(l->target, 1, &ax, 1)), af_reduce_sum(af_mul(l->target, z), 1, &ax, 1));
        l->value = af_muls(af_reduce_sum(per, 2, both, 0), 1.0f / (float)z->shape.dim[0]);
    }
    return l->value;
}
