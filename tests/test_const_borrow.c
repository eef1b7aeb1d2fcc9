/* Borrowed constants (ir_const_borrow): a constant whose values are the caller's memory.
 * The graph holds the caller's pointer (no copy), an fp32 CPU program reads it in place
 * (no baked copy: a change to the caller's array after af_compile shows in the next run,
 * where an ordinary constant keeps its compiled values), an fp16 program still copies and
 * rounds, results equal an ordinary constant's bit for bit and a naive double loop, and
 * freeing the graph leaves the caller's memory alone. The Hugging Face layer borrows a
 * LoRA model's frozen weights: af_net_hf_borrow's trainer reads the model's arrays. */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "hf/hf.h"
#include "ir/ir.h"
#include "support/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { M = 5, K = 7, N = 3 };

static uint64_t rng = 0x1234567u;
static float draw(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

/* y = x W^T + b (W [N, K] a constant, b a constant) compiled at precision p */
static af_model *linear_model(float *w, const float *b, bool borrow, af_precision p, af_graph **gout, af_tensor **wt) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(M, K));
    *wt = borrow ? ir_const_borrow(g, "w", AF_SHAPE(N, K), w) : af_const(g, "w", AF_SHAPE(N, K), w);
    af_tensor *y = af_add(af_matmul(x, *wt, 0, 1), af_const(g, "b", AF_SHAPE(N), b));
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = p, .threads = 1 };
    af_model *m = y ? af_compile(g, 1, &x, 1, &y, &o) : NULL;
    *gout = g;
    return m;
}

static void run(af_model *m, const float *x, float *y) {
    af_buffer in = AF_BUF_F32(x, M * K), out = AF_BUF_F32(y, M * N);
    CHECK(af_run(m, &in, &out) == AF_OK, "run: %s", af_error_message());
}

static double max_err(const float *x, const float *w, const float *b, const float *y) {
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = b[j];
            for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[j * K + k];
            double e = acc - y[i * N + j];
            worst = e > worst ? e : -e > worst ? -e : worst;
        }
    return worst;
}

static void test_in_place(void) {
    float *w = malloc(sizeof(float) * N * K), wcopy[N * K], b[N], x[M * K], yb[M * N], yc[M * N];
    for (int i = 0; i < N * K; i++) w[i] = wcopy[i] = draw();
    for (int i = 0; i < N; i++) b[i] = draw();
    for (int i = 0; i < M * K; i++) x[i] = draw();
    af_graph *gb, *gc;
    af_tensor *tb, *tc;
    af_model *mb = linear_model(w, b, true, AF_PRECISION_FP32, &gb, &tb);
    af_model *mc = linear_model(wcopy, b, false, AF_PRECISION_FP32, &gc, &tc);
    CHECK(mb && mc, "compile: %s", af_error_message());
    if (!mb || !mc) return;
    CHECK(af_tensor_value(tb) == w && af_tensor_value(tc) != wcopy, "the graph holds the caller's pointer, not a copy");
    run(mb, x, yb);
    run(mc, x, yc);
    CHECK(!memcmp(yb, yc, sizeof yb), "borrowed and copied constants give the same bits");
    CHECK(max_err(x, w, b, yb) < 1e-5, "against a double loop: %g", max_err(x, w, b, yb));
    /* Change the caller's array after compiling: the borrowed program reads it in place. */
    for (int i = 0; i < N * K; i++) w[i] = wcopy[i] = 2 * w[i] + 0.25f;
    run(mb, x, yb);
    run(mc, x, yc);
    CHECK(max_err(x, w, b, yb) < 1e-5, "the borrowed program read the new values in place: %g", max_err(x, w, b, yb));
    CHECK(max_err(x, wcopy, b, yc) > 0.1, "an ordinary constant keeps its compiled (baked) values");
    /* fp16 storage rounds every constant, so that program copies even a borrowed one. */
    af_graph *gh;
    af_tensor *th;
    af_model *mh = linear_model(w, b, true, AF_PRECISION_FP16, &gh, &th);
    CHECK(mh != NULL, "fp16 compile: %s", af_error_message());
    if (mh) {
        float before[M * N], after[M * N];
        run(mh, x, before);
        for (int i = 0; i < N * K; i++) w[i] += 1;
        run(mh, x, after);
        CHECK(!memcmp(before, after, sizeof before), "the fp16 program holds its own rounded copy");
        af_model_free(mh);
    }
    af_graph_free(gh);
    af_model_free(mb);
    af_model_free(mc);
    af_graph_free(gb); /* must not free w: it is the caller's */
    af_graph_free(gc);
    w[0] = 1; /* still ours (ASan would flag a use after free) */
    free(w);
    af_graph *g = af_graph_new();
    CHECK(!ir_const_borrow(g, "w", AF_SHAPE(2), NULL) && strstr(af_graph_error(g), "ir_const_borrow 'w': data is NULL"),
          "NULL data: %s", af_graph_error(g));
    af_graph_free(g);
}

static af_hf_model *tiny_lora(void) {
    const char *json = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 16, \"hidden_size\": 16, "
                       "\"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                       "\"num_key_value_heads\": 1, \"max_position_embeddings\": 8}";
    hf_config c;
    if (hf_config_parse(json, strlen(json), "config.json", &c) != AF_OK) return NULL;
    af_hf_model *m = hf_model_alloc(&c);
    if (!m) return NULL;
    rng = 42;
    for (int i = 0; i < m->n; i++) {
        int64_t n = m->slot[i].shape[0] * (m->slot[i].rank == 2 ? m->slot[i].shape[1] : 1);
        for (int64_t k = 0; k < n; k++) m->w[i][k] = m->slot[i].rank == 1 ? 1 + 0.1f * draw() : 0.3f * draw();
    }
    if (af_hf_lora_add(m, 2, 4, "q,v,down", 3) != AF_OK) { af_hf_free(m); return NULL; }
    for (int i = 0; i < m->na; i++) /* B nonzero, so the adapters change the logits */
        for (int64_t k = 0; k < m->aslot[i].shape[0] * m->aslot[i].shape[1]; k++) m->a[i][k] += 0.05f * draw();
    return m;
}

/* The borrowed forward's base constants are the model's own arrays; the copying one's are not. */
static void test_hf_graph(void) {
    af_hf_model *m = tiny_lora();
    if (!m) { CHECK(0, "model: %s", af_error_message()); return; }
    for (int borrow = 0; borrow < 2; borrow++) {
        af_graph *g = af_graph_new();
        af_tensor *p[64], *x = af_input(g, "x", AF_F32, AF_SHAPE(1, 8));
        CHECK(af_hf_params_new(g, m, p, 64) == m->na, "params: %s", af_error_message());
        CHECK(hf_model_forward(m, x, p, borrow) != NULL, "forward: %s", af_graph_error(g));
        int same = 0, flagged = 0;
        for (int k = 0; k < g->n; k++)
            for (int i = 0; i < m->n; i++)
                if (g->t[k]->op == IR_OP_CONST && g->t[k]->data == m->w[i]) {
                    same++;
                    flagged += !!(g->t[k]->flags & IR_TF_BORROWED);
                }
        CHECK(same == (borrow ? m->n : 0) && flagged == same, "borrow %d: %d of %d base constants are the model's arrays",
              borrow, same, m->n);
        af_graph_free(g);
    }
    af_hf_free(m);
}

/* af_net_hf_borrow's trainer reads the model's arrays in place: changing them after
 * af_trainer_new gives exactly the losses of a copying trainer made on the changed model. */
static void test_hf_trainer(void) {
    af_hf_model *m = tiny_lora();
    if (!m) { CHECK(0, "model: %s", af_error_message()); return; }
    const int T = 8, V = 16, B = 2;
    float xs[16], ys[16 * 16] = { 0 }, loss[2][3];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            xs[b * T + i] = (float)((5 * i + 3 * b) % V);
            ys[(b * T + i) * V + (5 * (i + 1) + 3 * b) % V] = 1;
        }
    for (int borrow = 1; borrow >= 0; borrow--) {
        af_train_opts o = af_train_defaults();
        o.objective = AF_OBJ_CUSTOM;
        o.batch = B;
        o.lr = 0.05f;
        o.compile.target = AF_TARGET_CPU;
        af_net net = borrow ? af_net_hf_borrow(m, T) : af_net_hf(m, T);
        af_trainer *t = af_trainer_new(&net, &o);
        af_net_free(&net);
        CHECK(t != NULL, "trainer (borrow %d): %s", borrow, af_error_message());
        if (borrow) /* after the trainer compiled its programs: the borrowed one must see this */
            for (int i = 0; i < m->n; i++)
                if (m->slot[i].rank == 2)
                    for (int64_t k = 0; k < m->slot[i].shape[0] * m->slot[i].shape[1]; k++) m->w[i][k] *= 0.5f;
        for (int s = 0; t && s < 3; s++) {
            af_step_info info;
            CHECK(af_trainer_step(t, xs, ys, &info) == AF_OK, "step: %s", af_error_message());
            loss[borrow][s] = info.loss;
        }
        af_trainer_free(t);
    }
    CHECK(!memcmp(loss[0], loss[1], sizeof loss[0]), "borrowed trainer on the changed weights: %g %g %g, copying: %g %g %g",
          loss[1][0], loss[1][1], loss[1][2], loss[0][0], loss[0][1], loss[0][2]);
    af_hf_free(m);
}

int main(void) {
    test_in_place();
    test_hf_graph();
    test_hf_trainer();
    return check_finish("test_const_borrow");
}
