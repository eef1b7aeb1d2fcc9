/* Segmentation around bridge ops: a graph mixing ordinary ops and three bridge ops
 * (sdpa, flatten, broadcast) compiles on ane-sim as 7 segments (4 fused regions between
 * the 3 bridges), runs in one dispatch per segment, accounts the bytes handed between
 * segments, and gives the whole-graph CPU result within fp16 tolerance; on the CPU it
 * is one program. Also: an op that changes the batch is a valid boundary, model outputs
 * inside a region, and the refusals (resident state, a bridge outside its limits). */
#include "aneforge.h"
#include "ir/ir.h"
#include "support/bridge_mix.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static void run(af_model *m, const float *x, float *y0, float *y1) {
    af_buffer in = AF_BUF_F32(x, 96), out[2] = {AF_BUF_F32(y0, 288), AF_BUF_F32(y1, 96)};
    CHECK(af_run(m, &in, out) == AF_OK, "af_run: %s", af_error_message());
}

static void test_mixed_graph(void) {
    bridge_mix g = bridge_mix_build();
    CHECK(!af_graph_error(g.g), "build: %s", af_graph_error(g.g));
    float x[96], cpu0[288], cpu1[96], sim0[288], sim1[96];
    test_rng r = {7};
    test_fill_uniform(&r, x, 96, -1, 1);
    af_compile_opts oc = {.target = AF_TARGET_CPU, .threads = 1}, os = {.target = AF_TARGET_ANE_SIM, .threads = 1};
    af_model *mc = af_compile(g.g, 1, &g.x, 2, g.out, &oc);
    af_model *ms = af_compile(g.g, 1, &g.x, 2, g.out, &os);
    CHECK(mc && ms, "compile: %s", af_error_message());
    if (!mc || !ms) goto done;
    run(mc, x, cpu0, cpu1);
    run(ms, x, sim0, sim1);
    run(ms, x, sim0, sim1); /* twice: the accounting is per run */
    double worst = 0;
    for (int i = 0; i < 288; i++) worst = fmax(worst, fabs(sim0[i] - cpu0[i]));
    for (int i = 0; i < 96; i++) worst = fmax(worst, fabs(sim1[i] - cpu1[i]) / 4); /* |a| up to ~2 */
    CHECK(worst < 4e-3, "ane-sim segments vs whole-graph CPU: worst difference %g (fp16 tolerance 4e-3)", worst);
    af_stats sc, ss;
    af_model_stats(mc, &sc);
    af_model_stats(ms, &ss);
    CHECK(sc.segments == 1 && sc.segment_bytes == 0, "CPU: one program, got %lld segments", (long long)sc.segments);
    CHECK(ss.segments == 7, "ane-sim: 4 fused regions and 3 bridges, got %lld segments", (long long)ss.segments);
    CHECK(ss.dispatches == 2 * 7, "ane-sim: one dispatch per segment per run, got %lld", (long long)ss.dispatches);
    /* handed over per run, in fp16: q, k, v (3 x 96) and the mask (36) to sdpa; sdpa's 96 to the next region
     * (x comes from the caller); the reshaped 96 to flatten; 96 back; the reshaped 96 to
     * broadcast; its 288 to the last region. */
    int64_t per_run = 2 * (3 * 96 + 36 + 96 + 96 + 96 + 96 + 288);
    CHECK(ss.segment_bytes == 2 * per_run, "segment bytes %lld, want %lld", (long long)ss.segment_bytes, (long long)(2 * per_run));
    CHECK(af_model_arena_bytes(ms) > 0, "memory of a segmented model");
    /* resident state needs one program */
    CHECK(af_model_bind_state(ms, 0, 1, NULL) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "segments"),
          "bind_state on a segmented model: %s", af_error_message());
done:
    af_model_free(mc);
    af_model_free(ms);
    af_graph_free(g.g);
}

/* A region boundary where the batch changes: [4, 3] -> input_view takes 5 values ->
 * broadcast to [2, 5] (batch 1 -> 2) -> exp. Each region compiles on its own shapes. */
static void test_batch_change(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 3));
    af_tensor *v = af_reshape(af_input_view(af_muls(x, 0.5f), 3, 5), AF_SHAPE(1, 5));
    af_tensor *y = af_exp(af_broadcast(v, 0, 2));
    float xv[12], want[10], got[10];
    for (int i = 0; i < 12; i++) xv[i] = (float)i / 8;
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 5; j++) want[b * 5 + j] = expf(0.5f * xv[3 + j]);
    af_compile_opts os = {.target = AF_TARGET_ANE_SIM, .threads = 1};
    af_model *m = af_compile(g, 1, &x, 1, &y, &os);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (m) {
        af_buffer in = AF_BUF_F32(xv, 12), out = AF_BUF_F32(got, 10);
        CHECK(af_run(m, &in, &out) == AF_OK, "run: %s", af_error_message());
        for (int i = 0; i < 10; i++) CHECK(fabsf(got[i] - want[i]) < 2e-3f * want[i], "[%d] %g vs %g", i, got[i], want[i]);
        af_stats s;
        af_model_stats(m, &s);
        CHECK(s.segments == 5, "muls | input_view | reshape | broadcast | exp: 5 segments, got %lld", (long long)s.segments);
    }
    af_model_free(m);
    af_graph_free(g);
}

/* A hand-made sdpa node outside the native bounds is refused on the engine by its
 * describe (the gate), while af_sdpa builds the decomposed attention there instead. */
static void test_sdpa_bounds(void) {
    af_graph *g = af_graph_new();
    af_tensor *q = af_input(g, "q", AF_F16, AF_SHAPE(1, 1, 512, 4)), *k = af_input(g, "k", AF_F16, AF_SHAPE(1, 1, 512, 4));
    af_tensor *v = af_input(g, "v", AF_F16, AF_SHAPE(1, 1, 512, 4));
    af_tensor *y = af_sdpa(q, k, v, NULL, 0);
    CHECK(y && y->op != IR_OP_SDPA, "min(Sq, Skv) = 512: af_sdpa falls back to ordinary ops");
    af_tensor *src[3] = {q, k, v};
    ir_attrs a = {.scalar = 0.5f};
    af_tensor *raw = ir_build(IR_OP_SDPA, 3, src, &a);
    af_tensor *in[3] = {q, k, v};
    af_compile_opts os = {.target = AF_TARGET_ANE_SIM, .threads = 1}, oc = {.target = AF_TARGET_CPU, .threads = 1};
    af_model *m = af_compile(g, 3, in, 1, &raw, &os);
    CHECK(!m && strstr(af_error_message(), "reliable range"), "a raw sdpa node at 512: %s", af_error_message());
    af_model_free(m);
    m = af_compile(g, 3, in, 1, &raw, &oc);
    CHECK(m != NULL, "the CPU runs it as a kernel: %s", af_error_message());
    af_model_free(m);
    /* dropout at rate 0.1 is refused by the builder */
    af_tensor *d = af_dropout(q, 0.1f);
    CHECK(!d && strstr(af_graph_error(g), "rate 0"), "dropout 0.1: %s", af_graph_error(g));
    af_graph_free(g);
}

/* A trainer whose forward holds a bridge op (dropout at rate 0 before a linear layer):
 * on ane-sim its host plan's programs are cut, and the step's accounting carries the
 * bytes handed between segments; on the CPU nothing is cut. */
static int lin_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx;
    if (max < 1) return -1;
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)(i % 5) / 10.0f - 0.2f;
    p[0] = af_parameter(g, "w", AF_SHAPE(4, 3), w);
    return 1;
}
static af_tensor *lin_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    return af_matmul(af_dropout(x, 0), w[0], 0, 0);
}

static void test_trainer_accounting(void) {
    af_net net = {.make_params = lin_params, .forward = lin_forward, .sample = AF_SHAPE(4), .out_dim = 3};
    float x[8 * 4], y[8 * 3];
    for (int i = 0; i < 32; i++) x[i] = (float)((i * 7) % 9) / 9.0f;
    for (int i = 0; i < 24; i++) y[i] = (float)((i * 5) % 4) / 4.0f;
    for (int t = 0; t < 2; t++) {
        af_train_opts o = af_train_defaults();
        o.objective = AF_OBJ_MSE;
        o.plan = AF_PLAN_HOST;
        o.batch = 8;
        o.lr = 0.05f;
        o.compile.threads = 1;
        o.compile.target = t ? AF_TARGET_ANE_SIM : AF_TARGET_CPU;
        af_trainer *tr = af_trainer_new(&net, &o);
        CHECK(tr != NULL, "trainer: %s", af_error_message());
        if (!tr) continue;
        af_step_info info;
        CHECK(af_trainer_step(tr, x, y, &info) == AF_OK, "step: %s", af_error_message());
        CHECK(t ? info.stats.segment_bytes > 0 : info.stats.segment_bytes == 0, "%s: %lld segment bytes in a step",
              t ? "ane-sim" : "cpu", (long long)info.stats.segment_bytes);
        af_stats total;
        af_trainer_stats(tr, &total);
        CHECK(total.segment_bytes == info.stats.segment_bytes, "trainer totals carry the segment bytes");
        af_trainer_free(tr);
    }
}

int main(void) {
    test_trainer_accounting();
    test_mixed_graph();
    test_batch_change();
    test_sdpa_bounds();
    return check_finish("test_segments");
}
