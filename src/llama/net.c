/* af_llama as an af_net for the trainer: token ids in, next-token cross-entropy out. */
#include "ir/ir.h"
#include "aneforge_llama.h"
#include "llama.h"

#include <stdlib.h>
#include <string.h>

/* One allocation, so af_net_free releases it: the initial weights' data follow it. */
typedef struct {
    af_llama_weights init; /* a copy of the initial values; init.data points at data */
    int seq;
    float data[];
} llama_net;

static int make_params(void *ctx, af_graph *g, af_tensor **params, int max) {
    return af_llama_params_new(g, &((llama_net *)ctx)->init, params, max);
}

/* x [B, seq] token ids -> logits flattened to [B, seq * vocab] (the trainer's [B, out_dim]). */
static af_tensor *forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    llama_net *n = ctx;
    af_tensor *logits = af_llama(&n->init.cfg, x, w);
    return logits ? af_reshape(logits, AF_SHAPE(af_tensor_shape(x).dim[0], -1)) : NULL;
}

/* Mean cross-entropy per token: the output and the one-hot targets as [B * seq, vocab]. */
static af_loss *loss(void *ctx, af_tensor *out, af_tensor *target) {
    int64_t v = ((llama_net *)ctx)->init.cfg.vocab_size;
    return af_softmax_cross_entropy(af_reshape(out, AF_SHAPE(-1, v)), af_reshape(target, AF_SHAPE(-1, v)));
}

af_net af_net_llama(const af_llama_weights *init, int seq) {
    af_net net = { 0 };
    if (!init) { ir_fail(AF_ERR_INVALID, "af_net_llama: init weights are NULL"); return net; }
    if (seq <= 0 || seq > init->cfg.seq_len) {
        ir_fail(AF_ERR_INVALID, "af_net_llama: seq %d must be in 1..%d (the config's seq_len)", seq, init->cfg.seq_len);
        return net;
    }
    llama_net *n = malloc(sizeof *n + (size_t)init->count * sizeof(float));
    if (!n) {
        ir_fail(AF_ERR_NOMEM, "af_net_llama: out of memory for %lld weights", (long long)init->count);
        return net;
    }
    n->init = *init;
    n->init.data = n->data;
    n->seq = seq;
    memcpy(n->data, init->data, (size_t)init->count * sizeof(float));
    net.ctx = n;
    net.make_params = make_params;
    net.forward = forward;
    net.loss = loss;
    net.sample = AF_SHAPE(seq);
    net.out_dim = (int64_t)seq * init->cfg.vocab_size;
    net.llama_config = &n->init.cfg; /* what the llama plans build from */
    return net;
}
