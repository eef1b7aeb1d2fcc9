/* af_hf_gen (src/hf/gen.c), the KV-cache generator, against the graph of af_hf_forward
 * compiled for the CPU (an independent implementation from public ops): the logits of
 * every position of a sequence fed one token at a time equal the graph's for the whole
 * sequence, for Qwen3 (q/k norms, biases, head_dim apart from hidden / heads, separate
 * lm_head), Qwen2 (tied), Llama 3 (rope_scaling llama3, grouped KV heads) and Qwen3 with
 * LoRA adapters on all seven projections; past max_position_embeddings it refuses. */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "hf/hf.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static af_hf_model *model_from(const char *json, uint64_t seed) {
    hf_config c;
    if (hf_config_parse(json, strlen(json), "config.json", &c) != AF_OK) return NULL;
    af_hf_model *m = hf_model_alloc(&c);
    test_rng r = { seed };
    for (int i = 0; m && i < m->n; i++) {
        int64_t n = m->slot[i].shape[0] * (m->slot[i].rank == 2 ? m->slot[i].shape[1] : 1);
        bool norm = strstr(m->slot[i].name, "norm") != NULL;
        for (int64_t k = 0; k < n; k++) m->w[i][k] = (float)((norm ? 1 : 0) + 0.3 * test_normal(&r));
    }
    return m;
}

/* The graph's logits [T, vocab] for ids[0..T). */
static float *graph_logits(const af_hf_model *m, const int32_t *ids, int T) {
    int np = af_hf_param_count(m), V = af_hf_vocab_size(m);
    af_graph *g = af_graph_new();
    af_tensor **in = calloc((size_t)np + 1, sizeof *in);
    af_buffer *bin = calloc((size_t)np + 1, sizeof *bin);
    float *x = malloc(sizeof(float) * (size_t)T), *out = malloc(sizeof(float) * (size_t)T * V);
    af_graph_set_target(g, AF_TARGET_CPU);
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(1, T));
    af_model *model = NULL;
    if (af_hf_params_new(g, m, in + 1, np) == np) {
        af_tensor *logits = af_hf_forward(m, in[0], in + 1);
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32 };
        model = logits ? af_compile(g, np + 1, in, 1, &logits, &o) : NULL;
    }
    for (int t = 0; t < T; t++) x[t] = (float)ids[t];
    bin[0] = AF_BUF_F32(x, T);
    for (int i = 1; i <= np && model; i++) bin[i] = AF_BUF_F32(af_tensor_value(in[i]), af_shape_count(af_tensor_shape(in[i])));
    af_buffer bout = AF_BUF_F32(out, (int64_t)T * V);
    bool ok = model && af_run(model, bin, &bout) == AF_OK;
    CHECK(ok, "graph forward: %s", af_error_message());
    af_model_free(model);
    af_graph_free(g);
    free(in);
    free(bin);
    free(x);
    if (!ok) { free(out); return NULL; }
    return out;
}

static void compare(const char *what, const af_hf_model *m, int T, int threads) {
    int V = af_hf_vocab_size(m);
    int32_t ids[128];
    for (int t = 0; t < T; t++) ids[t] = (int32_t)((t * 7 + 3) % V);
    float *want = graph_logits(m, ids, T);
    af_hf_gen *g = af_hf_gen_new(m, threads);
    CHECK(g != NULL, "%s: gen_new: %s", what, af_error_message());
    if (!want || !g) { free(want); af_hf_gen_free(g); return; }
    CHECK(af_hf_gen_logits(g) == NULL, "%s: no logits before a feed", what);
    double worst = 0, scale = 0;
    for (int t = 0; t < T; t++) {
        CHECK(af_hf_gen_feed(g, ids[t]) == AF_OK, "%s: feed %d: %s", what, t, af_error_message());
        const float *got = af_hf_gen_logits(g);
        for (int v = 0; got && v < V; v++) {
            double w = want[(size_t)t * V + v];
            worst = fmax(worst, fabs(got[v] - w));
            scale = fmax(scale, fabs(w));
        }
    }
    CHECK(worst <= 2e-5 * fmax(1, scale), "%s: logits differ by %g (largest %g)", what, worst, scale);
    free(want);
    af_hf_gen_free(g);
}

int main(void) {
    af_hf_model *q3 = model_from("{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 40, \"hidden_size\": 16, "
                                 "\"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 2, \"head_dim\": 6, \"tie_word_embeddings\": false, "
                                 "\"attention_bias\": true, \"max_position_embeddings\": 80, \"rope_theta\": 1000000}", 1);
    af_hf_model *q2 = model_from("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 30, \"hidden_size\": 16, "
                                 "\"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 4, \"tie_word_embeddings\": true, \"max_position_embeddings\": 80}", 2);
    af_hf_model *l3 = model_from("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 50, \"hidden_size\": 32, "
                                 "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 1, \"tie_word_embeddings\": false, \"max_position_embeddings\": 80, "
                                 "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                                 "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8}}", 3);
    CHECK(q3 && q2 && l3, "configs: %s", af_error_message());
    if (!q3 || !q2 || !l3) return check_finish("hf_gen");
    compare("qwen3", q3, 40, 1);
    compare("qwen3, 70", q3, 70, 1);
    compare("qwen3, 3 threads", q3, 40, 3); /* past 64 positions: the cache and the table grow */
    compare("qwen2", q2, 20, 1);
    compare("llama3", l3, 30, 2);
    /* LoRA: B drawn non-zero so the adapters change the logits */
    CHECK(af_hf_lora_add(q3, 3, 6.0f, "all", 5) == AF_OK, "lora_add: %s", af_error_message());
    test_rng r = { 9 };
    for (int i = 0; i < q3->na; i++) {
        int64_t n = q3->aslot[i].shape[0] * q3->aslot[i].shape[1];
        for (int64_t k = 0; k < n; k++) q3->a[i][k] = (float)(0.2 * test_normal(&r));
    }
    compare("qwen3 + LoRA", q3, 24, 1);
    /* full at max_position_embeddings */
    af_hf_gen *g = af_hf_gen_new(q2, 1);
    af_status st = AF_OK;
    for (int t = 0; t < 80 && st == AF_OK; t++) st = af_hf_gen_feed(g, 1);
    CHECK(st == AF_OK, "80 positions: %s", af_error_message());
    CHECK(af_hf_gen_feed(g, 1) == AF_ERR_INVALID && strstr(af_error_message(), "max_position_embeddings"),
          "the 81st refused: %s", af_error_message());
    CHECK(af_hf_gen_feed(g, 30) == AF_ERR_INVALID && strstr(af_error_message(), "outside the vocab"), "id 30: %s",
          af_error_message());
    af_hf_gen_free(g);
    af_hf_free(q3);
    af_hf_free(q2);
    af_hf_free(l3);
    return check_finish("hf_gen");
}
