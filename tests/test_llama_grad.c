/* The whole llama model against PyTorch (tests/fixtures/llama_grad, made by its
 * make_fixture.py from a model.py-style nn.Module in float64 with autograd):
 *  1. the fixture's llama2.c version-1 file imports to the config it was written with;
 *  2. af_llama + af_softmax_cross_entropy on the CPU in fp32 give PyTorch's loss on the
 *     same token batch, and af_backward gives every parameter's gradient (the tied
 *     classifier's share included in the embedding's), to fp32 tolerance, with the
 *     embedding as the gather (graph told its target) and as the one-hot matmul;
 *  3. the host KV-cache forward (af_llama_gen, run.c's arithmetic) of the imported model
 *     gives PyTorch's loss too. */
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama_grad"
enum { MAXP = 64 };

typedef struct {
    float *d;
    int rank;
    int64_t dims[AF_MAX_RANK];
} npy;

static npy read_npy(const char *name) {
    char path[1024];
    npy a = { 0 };
    snprintf(path, sizeof path, "%s/%s.npy", FIXDIR, name);
    CHECK(af_npy_read(path, &a.d, &a.rank, a.dims) == AF_OK, "read %s: %s", path, af_error_message());
    return a;
}

/* Cosine similarity and max |got - ref| relative to max |ref|. */
static void compare(const float *got, const float *ref, int64_t n, double *cosine, double *rel) {
    double dot = 0, gg = 0, rr = 0, maxdiff = 0, maxref = 0;
    for (int64_t i = 0; i < n; i++) {
        dot += (double)got[i] * ref[i];
        gg += (double)got[i] * got[i];
        rr += (double)ref[i] * ref[i];
        maxdiff = fmax(maxdiff, fabs((double)got[i] - ref[i]));
        maxref = fmax(maxref, fabs((double)ref[i]));
    }
    *cosine = gg > 0 && rr > 0 ? dot / sqrt(gg * rr) : 0;
    *rel = maxref > 0 ? maxdiff / maxref : INFINITY;
}

/* Loss and gradients through the graph; each param's gradient compared with the slice of
 * the fixture's run.c-ordered gradient array at the param's offset. */
static void check_graph(const af_llama_weights *w, const float *tok, const float *onehot, int B, int T, float ref_loss,
                        const float *ref_grads, int told_cpu) {
    const af_llama_config *c = af_llama_weights_config(w);
    const int V = c->vocab_size;
    const char *how = told_cpu ? "gather embedding" : "one-hot embedding";
    af_graph *g = af_graph_new();
    if (told_cpu) af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *in[2 + MAXP], *out[1 + MAXP];
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T));
    in[1] = af_input(g, "target", AF_F32, AF_SHAPE(B * T, V));
    int n = af_llama_params_new(g, w, in + 2, MAXP);
    CHECK(n == af_llama_param_count(c), "params_new: %d (%s)", n, af_error_message());
    af_tensor *logits = af_llama(c, in[0], in + 2);
    af_loss *loss = logits ? af_softmax_cross_entropy(af_reshape(logits, AF_SHAPE(B * T, V)), in[1]) : NULL;
    CHECK(loss != NULL, "model: %s", af_graph_error(g));
    out[0] = loss ? af_loss_value(loss) : NULL;
    af_model *m = NULL;
    if (loss && af_backward(loss, n, in + 2, out + 1, NULL) == AF_OK) m = af_compile(g, 2 + n, in, 1 + n, out, NULL);
    CHECK(m != NULL, "backward/compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    af_buffer bin[2 + MAXP], bout[1 + MAXP];
    float lossv = NAN, *grads[MAXP];
    bin[0] = AF_BUF_F32((float *)tok, (int64_t)B * T);
    bin[1] = AF_BUF_F32((float *)onehot, (int64_t)B * T * V);
    bout[0] = AF_BUF_F32(&lossv, 1);
    for (int i = 0; i < n; i++) {
        int64_t cnt = af_shape_count(af_tensor_shape(in[2 + i]));
        grads[i] = malloc((size_t)cnt * sizeof(float));
        bin[2 + i] = AF_BUF_F32(af_tensor_value(in[2 + i]), cnt);
        bout[1 + i] = AF_BUF_F32(grads[i], cnt);
    }
    CHECK(af_run(m, bin, bout) == AF_OK, "run: %s", af_error_message());
    CHECK(fabs(lossv - ref_loss) <= 2e-6 * fabs(ref_loss), "%s: loss %.8f vs PyTorch's %.8f", how, lossv, ref_loss);
    double worst_cos = 1, worst_rel = 0;
    for (int i = 0; i < n; i++) {
        int64_t off;
        af_shape s;
        const char *name;
        CHECK(af_llama_param_at(c, i, &off, &s, &name) == AF_OK, "%s", af_error_message());
        double cosine, rel;
        compare(grads[i], ref_grads + off, af_shape_count(s), &cosine, &rel);
        CHECK(cosine >= 0.99999 && rel <= 1e-4, "%s: param %d (%s): gradient cosine %.7f, max diff %.3g of the largest",
              how, i, af_tensor_name(in[2 + i]), cosine, rel);
        worst_cos = fmin(worst_cos, cosine);
        worst_rel = fmax(worst_rel, rel);
        free(grads[i]);
    }
    if (getenv("AF_FIXTURES_VERBOSE"))
        printf("%s: loss %.8f (PyTorch %.8f), %d gradients: worst cosine %.8f, worst max diff %.3g\n", how, lossv, ref_loss, n,
               worst_cos, worst_rel);
    af_model_free(m);
    af_graph_free(g);
}

/* Mean next-token loss of the host KV-cache forward over each row, in double. */
static double host_loss(const af_llama_weights *w, const float *rows, int B, int stride, int T) {
    const int V = af_llama_weights_config(w)->vocab_size;
    af_llama_gen *gen = af_llama_gen_new(w, 1);
    CHECK(gen != NULL, "gen: %s", af_error_message());
    double sum = 0;
    for (int b = 0; gen && b < B; b++) {
        af_llama_gen_reset(gen);
        for (int t = 0; t < T; t++) {
            CHECK(af_llama_gen_feed(gen, (int)rows[b * stride + t]) == AF_OK, "feed: %s", af_error_message());
            const float *l = af_llama_gen_logits(gen);
            double mx = l[0], s = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, l[v]);
            for (int v = 0; v < V; v++) s += exp(l[v] - mx);
            sum += mx + log(s) - l[(int)rows[b * stride + t + 1]];
        }
    }
    af_llama_gen_free(gen);
    return sum / (B * T);
}

int main(void) {
    int version = -1;
    af_llama_weights *w = af_llama_load(FIXDIR "/model_v1.bin", &version);
    CHECK(w != NULL, "load: %s", af_error_message());
    npy tokens = read_npy("tokens"), loss = read_npy("loss"), grads = read_npy("grads");
    if (!w || !tokens.d || !loss.d || !grads.d) return check_finish("llama_grad");
    const af_llama_config *c = af_llama_weights_config(w);
    CHECK(version == 1, "the fixture is a version-1 file, read as %d", version);
    CHECK(c->dim == 24 && c->hidden_dim == 48 && c->n_layers == 2 && c->n_heads == 4 && c->n_kv_heads == 2 &&
              c->vocab_size == 40 && c->seq_len == 16 && c->shared_classifier,
          "config as the script wrote it");
    CHECK(tokens.rank == 2 && grads.rank == 1 && grads.dims[0] == af_llama_weight_count(c), "fixture shapes");
    const int B = (int)tokens.dims[0], T = (int)tokens.dims[1] - 1, V = c->vocab_size;
    float *tok = malloc(sizeof(float) * (size_t)(B * T)), *onehot = calloc((size_t)(B * T * V), sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = tokens.d[b * (T + 1) + t];
            onehot[((int64_t)b * T + t) * V + (int)tokens.d[b * (T + 1) + t + 1]] = 1.0f;
        }
    check_graph(w, tok, onehot, B, T, loss.d[0], grads.d, 1);
    check_graph(w, tok, onehot, B, T, loss.d[0], grads.d, 0);
    double hl = host_loss(w, tokens.d, B, T + 1, T);
    CHECK(fabs(hl - loss.d[0]) <= 2e-6 * fabs(loss.d[0]), "host forward's loss %.8f vs PyTorch's %.8f", hl, loss.d[0]);
    free(tok);
    free(onehot);
    free(tokens.d);
    free(loss.d);
    free(grads.d);
    af_llama_weights_free(w);
    return check_finish("llama_grad");
}
