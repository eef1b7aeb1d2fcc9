/* A Hugging Face model as an af_net for the trainer: token ids in, next-token cross
 * entropy out, as af_net_llama. One allocation (af_net_free frees ctx): the config, the
 * slot table and a copy of the initial weights (af_net_hf_borrow: of the adapters only;
 * the base weights are the model's own arrays, which the graph's constants and the CPU
 * programs read in place: one copy of a 0.5B model's frozen weights in the process). */
#include "hf/hf.h"

#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    af_hf_model m;   /* m.slot and m.w point into the same block (m.w: the caller's arrays when borrowing) */
    int seq;
    bool borrow;     /* the graph's base constants read the caller's arrays in place */
} hf_net;

static int make_params(void *ctx, af_graph *g, af_tensor **params, int max) {
    return af_hf_params_new(g, &((hf_net *)ctx)->m, params, max);
}

static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    hf_net *n = ctx;
    af_tensor *logits = hf_model_forward(&n->m, x, w, n->borrow);
    return logits ? af_reshape(logits, AF_SHAPE(af_tensor_shape(x).dim[0], -1)) : NULL;
}

static af_loss *loss(void *ctx, af_tensor *out, af_tensor *target) {
    int64_t v = ((hf_net *)ctx)->m.c.vocab;
    return af_softmax_cross_entropy(af_reshape(out, AF_SHAPE(-1, v)), af_reshape(target, AF_SHAPE(-1, v)));
}

static size_t count_of(const hf_slot *s) { return (size_t)(s->shape[0] * (s->rank == 2 ? s->shape[1] : 1)); }

static af_net make(const af_hf_model *m, int seq, bool borrow) {
    af_net net = { 0 };
    if (!m) { ir_fail(AF_ERR_INVALID, "af_net_hf: model is NULL"); return net; }
    if (seq <= 0 || seq > m->c.max_pos) {
        ir_fail(AF_ERR_INVALID, "af_net_hf: seq %d must be in 1..%d (max_position_embeddings)", seq, m->c.max_pos);
        return net;
    }
    size_t floats = 0;
    for (int i = 0; i < m->n && !borrow; i++) floats += count_of(&m->slot[i]);
    for (int i = 0; i < m->na; i++) floats += count_of(&m->aslot[i]);
    size_t head = sizeof(hf_net) + (size_t)(m->n + m->na) * (sizeof(hf_slot) + sizeof(float *));
    head = (head + 15) & ~(size_t)15;
    hf_net *n = malloc(head + floats * sizeof(float));
    if (!n) { ir_fail(AF_ERR_NOMEM, "af_net_hf: out of memory for %zu weights", floats); return net; }
    n->m = *m;
    n->seq = seq;
    n->borrow = borrow;
    n->m.slot = (hf_slot *)(n + 1);
    n->m.aslot = n->m.slot + m->n;
    n->m.w = (float **)(n->m.aslot + m->na);
    n->m.a = n->m.w + m->n;
    memcpy(n->m.slot, m->slot, sizeof(hf_slot) * (size_t)m->n);
    if (m->na) memcpy(n->m.aslot, m->aslot, sizeof(hf_slot) * (size_t)m->na);
    float *at = (float *)((char *)n + head);
    for (int i = 0; i < m->n + m->na; i++) {
        bool base = i < m->n;
        const hf_slot *sl = base ? &m->slot[i] : &m->aslot[i - m->n];
        float **dst = base ? &n->m.w[i] : &n->m.a[i - m->n];
        if (base && borrow) { *dst = m->w[i]; continue; } /* only read, by the graph's borrowed constants */
        *dst = at;
        memcpy(at, base ? m->w[i] : m->a[i - m->n], count_of(sl) * sizeof(float));
        at += count_of(sl);
    }
    net.ctx = n;
    net.make_params = make_params;
    net.forward = forward;
    net.loss = loss;
    net.sample = AF_SHAPE(seq);
    net.out_dim = (int64_t)seq * m->c.vocab;
    return net;
}

af_net af_net_hf(const af_hf_model *m, int seq) { return make(m, seq, false); }
af_net af_net_hf_borrow(const af_hf_model *m, int seq) { return make(m, seq, true); }
