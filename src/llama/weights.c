/* The weights container: a config and one float array in run.c's order. */
#include "llama/llama.h"
#include "aneforge_llama.h"
#include "ir/ir.h"

#include <stdlib.h>

af_llama_weights *af_llama_weights_new(const af_llama_config *c) {
    if (af_llama_config_check(c) != AF_OK) return NULL;
    int64_t n = af_llama_weight_count(c);
    if ((uint64_t)n > SIZE_MAX / sizeof(float)) {
        ir_fail(AF_ERR_NOMEM, "llama weights: %lld floats do not fit in memory", (long long)n);
        return NULL;
    }
    af_llama_weights *w = calloc(1, sizeof *w);
    float *data = calloc((size_t)n, sizeof(float));
    if (!w || !data) {
        free(w);
        free(data);
        ir_fail(AF_ERR_NOMEM, "llama weights: cannot allocate %lld floats (%.1f MB)", (long long)n, n * 4e-6);
        return NULL;
    }
    w->cfg = *c;
    w->count = n;
    w->data = data;
    return w;
}

void af_llama_weights_free(af_llama_weights *w) {
    if (!w) return;
    free(w->data);
    free(w);
}

const af_llama_config *af_llama_weights_config(const af_llama_weights *w) { return w ? &w->cfg : NULL; }

float *af_llama_weights_data(af_llama_weights *w) { return w ? w->data : NULL; }
