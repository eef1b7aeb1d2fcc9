#include "train_sample.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <stdio.h>
#include <string.h>

static void append(char *out, size_t cap, size_t *n, const char *s, size_t len) {
    if (*n + len + 1 > cap) len = cap > *n + 1 ? cap - *n - 1 : 0;
    memcpy(out + *n, s, len);
    *n += len;
    out[*n] = 0;
}

int train_llama_sample(const af_llama_weights *w, const af_tokenizer *tok, int steps, uint64_t seed, char *out, size_t cap) {
    if (!cap) return -1;
    out[0] = 0;
    const af_llama_config *c = af_llama_weights_config(w);
    if (steps > c->seq_len) steps = c->seq_len;
    af_llama_gen *g = af_llama_gen_new(w, 1);
    af_llama_sampler *s = af_llama_sampler_new(c->vocab_size, 0.8f, 0.9f, seed ? seed : 1);
    int rc = g && s ? 0 : -1;
    size_t n = 0;
    for (int pos = 0, token = 1; !rc && pos < steps; pos++) {
        int next = af_llama_gen_feed(g, token) ? -1 : af_llama_sample(s, af_llama_gen_logits(g));
        if (next < 0) { rc = -1; break; }
        if (next == 1) break; /* BOS delimits sequences */
        if (tok) {
            size_t len = 0;
            const char *piece = af_tokenizer_decode_piece(tok, token, next, &len);
            if (piece) append(out, cap, &n, piece, len);
        } else {
            char id[16];
            int len = snprintf(id, sizeof id, pos ? " %d" : "%d", next);
            append(out, cap, &n, id, (size_t)len);
        }
        token = next;
    }
    af_llama_sampler_free(s);
    af_llama_gen_free(g);
    return rc;
}
