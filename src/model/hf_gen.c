/* Generation with a Hugging Face model (aneforge_hf.h), here rather than in src/hf because
 * it compiles and runs a program (af_compile, this layer). The model's own forward graph
 * (af_hf_forward) over the tokens so far, read at the last position. There is no KV
 * cache (src/llama's generator has one, for llama2.c's layout only): the graph is
 * compiled for the CPU at a length that doubles as the sequence grows (16, 32, ...,
 * max_position_embeddings), later positions padded with token 0, which causal attention
 * keeps from reaching the positions read. */
#include "hf/hf.h"

#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

struct af_hf_gen {
    const af_hf_model *m;
    int threads, n, len;   /* tokens fed; the length compiled for */
    int32_t *ids;          /* room for max_pos */
    af_graph *g;
    af_model *model;
    int nin;
    af_tensor **in;        /* tokens, then the params */
    float *x, *logits, *next;
};

static void drop_model(af_hf_gen *g) {
    af_model_free(g->model);
    af_graph_free(g->g);
    free(g->in);
    free(g->x);
    free(g->logits);
    g->model = NULL, g->g = NULL, g->in = NULL, g->x = NULL, g->logits = NULL;
}

void af_hf_gen_free(af_hf_gen *g) {
    if (!g) return;
    drop_model(g);
    free(g->ids);
    free(g->next);
    free(g);
}

af_hf_gen *af_hf_gen_new(const af_hf_model *m, int threads) {
    if (!m) { ir_fail(AF_ERR_INVALID, "af_hf_gen_new: model is NULL"); return NULL; }
    af_hf_gen *g = calloc(1, sizeof *g);
    if (g) g->ids = malloc(sizeof *g->ids * (size_t)m->c.max_pos), g->next = malloc(sizeof *g->next * (size_t)m->c.vocab);
    if (!g || !g->ids || !g->next) { af_hf_gen_free(g); ir_fail(AF_ERR_NOMEM, "af_hf_gen_new: out of memory"); return NULL; }
    g->m = m;
    g->threads = threads > 0 ? threads : 0;
    return g;
}

/* The forward compiled for [1, len]: tokens and the model's params as inputs. */
static af_status build(af_hf_gen *g, int len) {
    drop_model(g);
    const af_hf_model *m = g->m;
    int np = af_hf_param_count(m);
    g->g = af_graph_new();
    g->in = calloc((size_t)np + 1, sizeof *g->in);
    g->x = calloc((size_t)len, sizeof *g->x);
    g->logits = malloc(sizeof *g->logits * (size_t)len * (size_t)m->c.vocab);
    if (!g->g || !g->in || !g->x || !g->logits) return ir_fail(AF_ERR_NOMEM, "af_hf_gen: out of memory for a window of %d", len);
    af_graph_set_target(g->g, AF_TARGET_CPU);
    g->in[0] = af_input(g->g, "tokens", AF_F32, AF_SHAPE(1, len));
    if (af_hf_params_new(g->g, m, g->in + 1, np) != np) return AF_ERR_INVALID;
    af_tensor *logits = af_hf_forward(m, g->in[0], g->in + 1);
    if (!logits) return ir_fail(AF_ERR_INVALID, "af_hf_gen: %s", af_graph_error(g->g) ? af_graph_error(g->g) : af_error_message());
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = g->threads };
    g->model = af_compile(g->g, np + 1, g->in, 1, &logits, &o);
    if (!g->model) return AF_ERR_INVALID;
    g->nin = np + 1;
    g->len = len;
    return AF_OK;
}

af_status af_hf_gen_feed(af_hf_gen *g, int32_t token) {
    if (!g) return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: generator is NULL");
    const hf_config *c = &g->m->c;
    if (token < 0 || token >= c->vocab) return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: token %d is outside the vocab of %d", token, c->vocab);
    if (g->n >= c->max_pos)
        return ir_fail(AF_ERR_INVALID, "af_hf_gen_feed: the sequence is full: %d tokens is the model's max_position_embeddings", c->max_pos);
    g->ids[g->n++] = token;
    if (g->n > g->len) {
        int len = 16;
        while (len < g->n) len *= 2;
        af_status st = build(g, len < c->max_pos ? len : c->max_pos);
        if (st) { g->n--; drop_model(g); g->len = 0; return st; }
    }
    for (int i = 0; i < g->len; i++) g->x[i] = i < g->n ? (float)g->ids[i] : 0.0f;
    af_buffer *bin = malloc(sizeof *bin * (size_t)g->nin);
    if (!bin) { g->n--; return ir_fail(AF_ERR_NOMEM, "af_hf_gen_feed: out of memory"); }
    bin[0] = AF_BUF_F32(g->x, g->len);
    for (int i = 1; i < g->nin; i++) bin[i] = AF_BUF_F32(af_tensor_value(g->in[i]), af_shape_count(af_tensor_shape(g->in[i])));
    af_buffer out = AF_BUF_F32(g->logits, (int64_t)g->len * c->vocab);
    af_status st = af_run(g->model, bin, &out);
    free(bin);
    if (st) { g->n--; return st; }
    memcpy(g->next, g->logits + (size_t)(g->n - 1) * (size_t)c->vocab, sizeof *g->next * (size_t)c->vocab);
    return AF_OK;
}

const float *af_hf_gen_logits(const af_hf_gen *g) { return g && g->n ? g->next : NULL; }
