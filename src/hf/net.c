/* A Hugging Face model as an af_net for the trainer: token ids in, next-token cross
 * entropy out, as af_net_llama. One allocation (af_net_free frees ctx): the config, the
 * slot table and a copy of the initial weights. */
#include "hf/hf.h"

#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    af_hf_model m;   /* m.slot and m.w point into the same block */
    int seq;
} hf_net;

static int make_params(void *ctx, af_graph *g, af_tensor **params, int max) {
    return af_hf_params_new(g, &((hf_net *)ctx)->m, params, max);
}

static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    af_tensor *logits = af_hf_forward(&((hf_net *)ctx)->m, x, w);
    return logits ? af_reshape(logits, AF_SHAPE(af_tensor_shape(x).dim[0], -1)) : NULL;
}

static af_loss *loss(void *ctx, af_tensor *out, af_tensor *target) {
    int64_t v = ((hf_net *)ctx)->m.c.vocab;
    return af_softmax_cross_entropy(af_reshape(out, AF_SHAPE(-1, v)), af_reshape(target, AF_SHAPE(-1, v)));
}

af_net af_net_hf(const af_hf_model *m, int seq) {
    af_net net = { 0 };
    if (!m) { ir_fail(AF_ERR_INVALID, "af_net_hf: model is NULL"); return net; }
    if (seq <= 0 || seq > m->c.max_pos) {
        ir_fail(AF_ERR_INVALID, "af_net_hf: seq %d must be in 1..%d (max_position_embeddings)", seq, m->c.max_pos);
        return net;
    }
    size_t floats = 0;
    for (int i = 0; i < m->n; i++) floats += (size_t)(m->slot[i].shape[0] * (m->slot[i].rank == 2 ? m->slot[i].shape[1] : 1));
    size_t head = sizeof(hf_net) + (size_t)m->n * (sizeof(hf_slot) + sizeof(float *));
    head = (head + 15) & ~(size_t)15;
    hf_net *n = malloc(head + floats * sizeof(float));
    if (!n) { ir_fail(AF_ERR_NOMEM, "af_net_hf: out of memory for %zu weights", floats); return net; }
    n->m = *m;
    n->seq = seq;
    n->m.slot = (hf_slot *)(n + 1);
    n->m.w = (float **)(n->m.slot + m->n);
    memcpy(n->m.slot, m->slot, sizeof(hf_slot) * (size_t)m->n);
    float *at = (float *)((char *)n + head);
    for (int i = 0; i < m->n; i++) {
        size_t c = (size_t)(m->slot[i].shape[0] * (m->slot[i].rank == 2 ? m->slot[i].shape[1] : 1));
        n->m.w[i] = at;
        memcpy(at, m->w[i], c * sizeof(float));
        at += c;
    }
    net.ctx = n;
    net.make_params = make_params;
    net.forward = forward;
    net.loss = loss;
    net.sample = AF_SHAPE(seq);
    net.out_dim = (int64_t)seq * m->c.vocab;
    return net;
}
