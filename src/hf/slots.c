/* The fixed order and Hugging Face names of a model's tensors: what the loader, the
 * graph and the writer walk in step. */
#include "hf/hf.h"

#include <stdio.h>

static void put(hf_slot *s, int *n, int64_t rows, int64_t cols, const char *fmt, int layer) {
    if (s) {
        hf_slot *t = &s[*n];
        snprintf(t->name, sizeof t->name, fmt, layer);
        t->rank = cols ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols;
    }
    (*n)++;
}

int hf_slots(const hf_config *c, hf_slot *s) {
    int n = 0;
    int64_t D = c->hidden, qd = (int64_t)c->heads * c->head_dim, kvd = (int64_t)c->kv_heads * c->head_dim;
    put(s, &n, c->vocab, D, "model.embed_tokens.weight", 0);
    for (int l = 0; l < c->layers; l++) {
        put(s, &n, D, 0, "model.layers.%d.input_layernorm.weight", l);
        put(s, &n, qd, D, "model.layers.%d.self_attn.q_proj.weight", l);
        if (c->qkv_bias) put(s, &n, qd, 0, "model.layers.%d.self_attn.q_proj.bias", l);
        put(s, &n, kvd, D, "model.layers.%d.self_attn.k_proj.weight", l);
        if (c->qkv_bias) put(s, &n, kvd, 0, "model.layers.%d.self_attn.k_proj.bias", l);
        put(s, &n, kvd, D, "model.layers.%d.self_attn.v_proj.weight", l);
        if (c->qkv_bias) put(s, &n, kvd, 0, "model.layers.%d.self_attn.v_proj.bias", l);
        if (c->qk_norm) {
            put(s, &n, c->head_dim, 0, "model.layers.%d.self_attn.q_norm.weight", l);
            put(s, &n, c->head_dim, 0, "model.layers.%d.self_attn.k_norm.weight", l);
        }
        put(s, &n, D, qd, "model.layers.%d.self_attn.o_proj.weight", l);
        if (c->o_bias) put(s, &n, D, 0, "model.layers.%d.self_attn.o_proj.bias", l);
        put(s, &n, D, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        put(s, &n, c->inter, D, "model.layers.%d.mlp.gate_proj.weight", l);
        put(s, &n, c->inter, D, "model.layers.%d.mlp.up_proj.weight", l);
        put(s, &n, D, c->inter, "model.layers.%d.mlp.down_proj.weight", l);
    }
    put(s, &n, D, 0, "model.norm.weight", 0);
    if (!c->tie) put(s, &n, c->vocab, D, "lm_head.weight", 0);
    return n;
}

int hf_slot_count(const hf_config *c) { return hf_slots(c, NULL); }
