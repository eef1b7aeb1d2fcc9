/* The step's graph (step_graph.h). The loss, accuracy, seed and backward nodes are the
 * library's own vouched kernels; only the user's forward is subject to the engine's
 * precision heuristic. */
#include "grad/grad.h"
#include "train/step_graph.h"

af_status tr_graph_error(af_trainer *t, const char *what) {
    return ir_fail(AF_ERR_INVALID, "trainer (%s plan): %s: %s", t->plan->name, what,
                   t->g->error ? t->g->error : af_error_message());
}

af_tensor *tr_batch_input(af_trainer *t, const char *name, int64_t b) {
    af_shape s = t->net.sample;
    if (s.rank + 1 > AF_MAX_RANK) return NULL;
    for (int i = s.rank; i > 0; i--) s.dim[i] = s.dim[i - 1];
    s.dim[0] = b;
    s.rank++;
    return af_input(t->g, name, tr_io_dtype(t), s);
}

af_tensor *tr_scalar_input(af_trainer *t, const char *name) { return af_input(t->g, name, tr_io_dtype(t), AF_SHAPE(1, 1)); }

/* The seeds of CE and MSE are analytic at z, so a loss value that overflows fp16 (a large
 * regression error squared) cannot poison the gradients; ls is the fed seed factor
 * (tr_seed_scale). */
af_status tr_build_step(af_trainer *t, af_tensor *x, af_tensor *y, af_tensor *ls, af_tensor *const *w,
                        af_tensor **met, af_tensor **z_out, af_tensor **grads) {
    af_tensor *z = *z_out = t->net.forward(t->net.ctx, x, w);
    if (!z) return tr_graph_error(t, "the forward function failed");
    if (z->shape.rank != 2 || z->shape.dim[0] != x->shape.dim[0] || z->shape.dim[1] != t->net.out_dim) {
        char s[100];
        ir_shape_str(z->shape, s, sizeof s);
        return ir_fail(AF_ERR_SHAPE, "trainer: the forward output is %s but must be [%lld, %lld] (batch, out_dim)", s,
                       (long long)x->shape.dim[0], (long long)t->net.out_dim);
    }
    af_tensor *seed = NULL, *root = z;
    if (t->o.objective == AF_OBJ_CUSTOM) { /* the user's loss is user code: not vouched */
        af_loss *l = t->net.loss(t->net.ctx, z, y);
        if (!l) return tr_graph_error(t, "the net's loss function failed");
        met[0] = af_loss_value(l);
        root = af_loss_root(l);
        t->g->vouching++;
        if (l->kind == AF_LOSS_CE) {
            float rows = (float)(af_shape_count(root->shape) / root->shape.dim[root->shape.rank - 1]);
            af_tensor *k = af_muls(ls, 1.0f / rows);
            if (root->g->cpu_only && root->shape.rank == 2) /* softmax - y, scaled, in one pass per row */
                seed = ir_softmax_xent_grad(root, l->target, af_reshape(k, AF_SHAPE(1, 1)), true);
            else
                seed = af_mul(af_sub(af_softmax(root, -1), l->target), k);
        } else {
            seed = af_reshape(ls, root->shape); /* dL/dloss = the loss scale */
        }
    } else {
        t->g->vouching++;
        if (t->o.objective == AF_OBJ_CE) {
            af_loss *l = af_softmax_cross_entropy(z, y);
            met[0] = af_loss_value(l);
            int ax = 1, both[2] = { 0, 1 };
            af_tensor *hit = af_equal(af_reduce_sum(af_mul(z, y), 1, &ax, 1), af_reduce_max(z, 1, &ax, 1));
            met[1] = af_reduce_sum(hit, 2, both, 0);
            seed = af_mul(af_sub(af_softmax(z, -1), y), ls); /* analytic, fp16-stable: no log */
        } else {
            int axes[2] = { 0, 1 };
            af_tensor *d = af_sub(z, y);
            met[0] = af_reduce_mean(af_square(d), 2, axes, 0);
            seed = af_mul(d, ls); /* d mean(d^2) / dz = 2 d / count, folded into ls */
        }
    }
    af_status st = seed ? af_backward_from(seed, root, t->np, w, grads, NULL) : AF_ERR_INVALID;
    t->g->vouching--;
    return st ? tr_graph_error(t, "building the backward pass") : AF_OK;
}
