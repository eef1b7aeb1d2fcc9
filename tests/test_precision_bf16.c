/* AF_PRECISION_BF16 on the CPU: matmul and conv nodes (forward and the input-gradient
 * conv_transpose) against a double reference over bf16-rounded operands, so only fp32
 * accumulation may differ; training runs (MLP, CNN, tiny llama) whose loss stays within
 * 1% of fp32's; engine targets and unknown precisions refused by name. On a CPU with
 * neither AMX-BF16 nor AVX512-BF16 it checks that the CPU target refuses bf16 too,
 * naming the instructions and the fix, then reports itself skipped (77). */
#include "aneforge.h"
#include "aneforge_llama.h"
#include "cpu/gemm_bf16.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static test_rng rng = {28};

static double bf(float x) { return cpu_bf16_to_float(cpu_bf16_round(x)); }

static af_compile_opts opts(af_precision p) {
    af_compile_opts o = { .precision = p, .threads = 2 };
    return o;
}

/* Runs one node y = f(a, b) compiled with precision p. */
static void run_node(af_tensor *(*build)(af_tensor *, af_tensor *), af_shape sa, af_shape sb, const float *a,
                     const float *b, float *y, int64_t ny, af_precision p) {
    af_graph *g = af_graph_new();
    af_tensor *ta = af_input(g, "a", AF_F32, sa), *tb = af_input(g, "b", AF_F32, sb);
    af_tensor *in[2] = { ta, tb }, *out = build(ta, tb);
    af_compile_opts o = opts(p);
    af_model *m = af_compile(g, 2, in, 1, &out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (m) {
        af_buffer bi[2] = { AF_BUF_F32(a, af_shape_count(sa)), AF_BUF_F32(b, af_shape_count(sb)) }, bo = AF_BUF_F32(y, ny);
        CHECK(af_run(m, bi, &bo) == AF_OK, "run: %s", af_error_message());
    }
    af_model_free(m);
    af_graph_free(g);
}

static af_tensor *mm_nt(af_tensor *a, af_tensor *b) { return af_matmul(a, b, 0, 1); }
static af_tensor *mm_tn(af_tensor *a, af_tensor *b) { return af_matmul(a, b, 1, 0); }
static af_tensor *mm_batched(af_tensor *a, af_tensor *b) { return af_matmul(a, b, 0, 0); }

/* a [batch, M, K] (or [batch, K, M] when ta), b [batch|1, K, N] (or N, K when tb). */
static void check_matmul(const char *what, af_tensor *(*build)(af_tensor *, af_tensor *), int ta, int tb, int64_t batch,
                         int64_t bb, int64_t M, int64_t N, int64_t K) {
    af_shape sa = ta ? AF_SHAPE(batch, K, M) : AF_SHAPE(batch, M, K), sb = tb ? AF_SHAPE(bb, N, K) : AF_SHAPE(bb, K, N);
    int64_t na = batch * M * K, nb = bb * K * N, ny = batch * M * N;
    float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb), *y = malloc(sizeof(float) * ny);
    test_fill_uniform(&rng, a, na, -1, 1);
    test_fill_uniform(&rng, b, nb, -1, 1);
    run_node(build, sa, sb, a, b, y, ny, AF_PRECISION_BF16);
    double worst = 0, worst_fp32 = 0;
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, s32 = 0;
                for (int64_t k = 0; k < K; k++) {
                    float av = a[z * M * K + (ta ? k * M + i : i * K + k)];
                    float bv = b[(bb > 1 ? z : 0) * K * N + (tb ? j * K + k : k * N + j)];
                    s += bf(av) * bf(bv);
                    s32 += (double)av * bv;
                }
                double d = fabs(y[(z * M + i) * N + j] - s);
                worst = d > worst ? d : worst;
                worst_fp32 = fabs(s32 - s) > worst_fp32 ? fabs(s32 - s) : worst_fp32;
            }
    /* fp32 sums of K products of size <= 1: K * 2^-24 each way; the fp32 result lies
     * ~2^-8 * sqrt(K) away, so the bound tells the two apart. */
    CHECK(worst <= 4e-6 * K, "%s: bf16 node off the bf16-operand reference by %g", what, worst);
    CHECK(worst_fp32 > 20 * 4e-6 * K, "%s: the case cannot tell bf16 from fp32 (%g)", what, worst_fp32);
    free(a), free(b), free(y);
}

static af_tensor *conv_3x3(af_tensor *x, af_tensor *w) { return af_conv(x, w, NULL, (int[2]){ 1, 1 }, NULL, 1); }
static af_tensor *convt_3x3(af_tensor *x, af_tensor *w) { return af_conv_transpose(x, w, (int[2]){ 2, 2 }, (int[2]){ 1, 1 }, NULL); }

static void check_conv(void) {
    enum { N = 2, CI = 5, H = 7, W = 6, CO = 9 };
    static float x[N * CI * H * W], w[CO * CI * 9], y[N * CO * H * W];
    test_fill_uniform(&rng, x, N * CI * H * W, -1, 1);
    test_fill_uniform(&rng, w, CO * CI * 9, -1, 1);
    run_node(conv_3x3, AF_SHAPE(N, CI, H, W), AF_SHAPE(CO, CI, 3, 3), x, w, y, N * CO * H * W, AF_PRECISION_BF16);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < CO; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    double s = 0;
                    for (int c = 0; c < CI; c++)
                        for (int u = 0; u < 3; u++)
                            for (int v = 0; v < 3; v++) {
                                int r = i + u - 1, q = j + v - 1;
                                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                                s += bf(x[((n * CI + c) * H + r) * W + q]) * bf(w[((o * CI + c) * 3 + u) * 3 + v]);
                            }
                    double d = fabs(y[((n * CO + o) * H + i) * W + j] - s);
                    worst = d > worst ? d : worst;
                }
    CHECK(worst <= 4e-6 * CI * 9, "conv: off the bf16-operand reference by %g", worst);

    /* conv_transpose (a conv's input gradient): x [N, CO, H, W], w [CO, CI, 3, 3], stride 2, pad 1. */
    enum { HO = (H - 1) * 2 - 2 + 3, WO = (W - 1) * 2 - 2 + 3 };
    static float g[N * CO * H * W], dx[N * CI * HO * WO];
    static double ref[N * CI * HO * WO];
    test_fill_uniform(&rng, g, N * CO * H * W, -1, 1);
    test_fill_uniform(&rng, w, CO * CI * 9, -1, 1);
    run_node(convt_3x3, AF_SHAPE(N, CO, H, W), AF_SHAPE(CO, CI, 3, 3), g, w, dx, N * CI * HO * WO, AF_PRECISION_BF16);
    memset(ref, 0, sizeof ref);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < CO; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++)
                    for (int c = 0; c < CI; c++)
                        for (int u = 0; u < 3; u++)
                            for (int v = 0; v < 3; v++) {
                                int r = i * 2 - 1 + u, q = j * 2 - 1 + v;
                                if (r < 0 || r >= HO || q < 0 || q >= WO) continue;
                                ref[((n * CI + c) * HO + r) * WO + q] +=
                                    bf(g[((n * CO + o) * H + i) * W + j]) * bf(w[((o * CI + c) * 3 + u) * 3 + v]);
                            }
    worst = 0;
    for (int i = 0; i < N * CI * HO * WO; i++) worst = fabs(dx[i] - ref[i]) > worst ? fabs(dx[i] - ref[i]) : worst;
    CHECK(worst <= 4e-6 * CO * 9, "conv_transpose: off the bf16-operand reference by %g", worst);
}

/* Mean loss of the last 10 of `steps` steps on a seeded synthetic set: classes are
 * noisy prototypes, so the loss falls and both precisions see the same batches. */
static double train_loss(af_net net, af_precision p, int steps, int64_t dim, int classes, int batch) {
    af_train_opts o = af_train_defaults();
    o.batch = batch;
    o.lr = 0.003f;
    o.compile = opts(p);
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "trainer: %s", af_error_message());
    if (!t) return NAN;
    test_rng r = {5};
    float *proto = malloc(sizeof(float) * classes * dim), *x = malloc(sizeof(float) * batch * dim);
    float *y = calloc((size_t)batch * classes, sizeof(float));
    test_fill_uniform(&r, proto, (long)classes * dim, 0, 1);
    double sum = 0;
    af_step_info info;
    for (int s = 0; s < steps; s++) {
        memset(y, 0, sizeof(float) * batch * classes);
        for (int b = 0; b < batch; b++) {
            int c = (int)(test_uniform(&r) * classes);
            y[b * classes + c] = 1;
            for (int64_t d = 0; d < dim; d++) x[b * dim + d] = proto[c * dim + d] + 0.8f * (float)test_normal(&r);
        }
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step: %s", af_error_message());
        if (s >= steps - 10) sum += info.loss;
    }
    af_trainer_free(t);
    free(proto), free(x), free(y);
    return sum / 10;
}

static double llama_loss(af_precision p, int steps) {
    af_llama_config c;
    CHECK(af_llama_preset("tiny", 64, &c) == AF_OK, "preset: %s", af_error_message());
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return NAN;
    test_rng r = {11}; /* the same start for both precisions */
    test_fill_uniform(&r, af_llama_weights_data(w), (long)af_llama_weight_count(&c), -0.1, 0.1);
    const int seq = 16, batch = 4;
    af_net net = af_net_llama(w, seq);
    af_train_opts o = af_train_defaults();
    o.batch = batch;
    o.lr = 0.003f;
    o.compile = opts(p);
    o.objective = AF_OBJ_CUSTOM;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t != NULL, "llama trainer: %s", af_error_message());
    double sum = 0;
    if (t) {
        /* A token pattern the model can learn: next = (3 * cur + 1) mod 64; targets one-hot. */
        static float x[4 * 16], y[4 * 16 * 64];
        af_step_info info;
        for (int s = 0; s < steps; s++) {
            memset(y, 0, sizeof y);
            for (int b = 0; b < batch; b++) {
                int tok = (s * 7 + b * 13) % 64;
                for (int i = 0; i < seq; i++) {
                    x[b * seq + i] = (float)tok;
                    tok = (3 * tok + 1) % 64;
                    y[(b * seq + i) * 64 + tok] = 1;
                }
            }
            CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "llama step: %s", af_error_message());
            if (s >= steps - 5) sum += info.loss;
        }
        af_trainer_free(t);
    }
    af_net_free(&net);
    af_llama_weights_free(w);
    return sum / 5;
}

static void check_training(void) {
    af_net mlp = af_net_mlp(AF_SHAPE(64), 32, 10, 3);
    double f32 = train_loss(mlp, AF_PRECISION_FP32, 60, 64, 10, 32), b16 = train_loss(mlp, AF_PRECISION_BF16, 60, 64, 10, 32);
    af_net_free(&mlp);
    CHECK(fabs(b16 - f32) <= 0.01 * f32 && b16 != f32, "mlp: bf16 loss %.6f vs fp32 %.6f (within 1%%, not identical)", b16, f32);
    af_net cnn = af_net_cnn(AF_SHAPE(1, 8, 8), 10, 3);
    f32 = train_loss(cnn, AF_PRECISION_FP32, 30, 64, 10, 16), b16 = train_loss(cnn, AF_PRECISION_BF16, 30, 64, 10, 16);
    af_net_free(&cnn);
    CHECK(fabs(b16 - f32) <= 0.01 * f32 && b16 != f32, "cnn: bf16 loss %.6f vs fp32 %.6f (within 1%%, not identical)", b16, f32);
    f32 = llama_loss(AF_PRECISION_FP32, 30), b16 = llama_loss(AF_PRECISION_BF16, 30);
    CHECK(fabs(b16 - f32) <= 0.01 * f32 && b16 != f32, "llama: bf16 loss %.6f vs fp32 %.6f (within 1%%, not identical)", b16, f32);
    printf("loss fp32 vs bf16 checked (llama %.5f vs %.5f)\n", f32, b16);
}

static void check_refusals(void) {
    af_graph *g = af_graph_new();
    af_tensor *a = af_input(g, "a", AF_F32, AF_SHAPE(4, 4)), *y = af_matmul(a, a, 0, 0);
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .precision = AF_PRECISION_BF16 };
    af_model *m = af_compile(g, 1, &a, 1, &y, &o);
    CHECK(!m && strstr(af_error_message(), "precision bf16 runs on the CPU target only"), "ane-sim bf16: %s", af_error_message());
    af_model_free(m);
    o = (af_compile_opts){ .precision = (af_precision)9 };
    m = af_compile(g, 1, &a, 1, &y, &o);
    CHECK(!m && strstr(af_error_message(), "precision 9 is unknown"), "precision 9: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* Without the instructions: af_compile refuses, naming what is missing and the fix; the
 * trainers compile through it, so they refuse as well. */
static void check_no_instructions(void) {
    af_graph *g = af_graph_new();
    af_tensor *a = af_input(g, "a", AF_F32, AF_SHAPE(4, 4)), *y = af_matmul(a, a, 0, 0);
    af_compile_opts o = opts(AF_PRECISION_BF16);
    af_model *m = af_compile(g, 1, &a, 1, &y, &o);
    const char *e = af_error_message();
    CHECK(!m, "bf16 without the instructions: compiled");
    CHECK(strstr(e, "needs AMX-BF16 or AVX512-BF16") && strstr(e, "AF_PRECISION_FP32"), "refusal: '%s'", e);
    af_model_free(m);
    o = opts(AF_PRECISION_FP32);
    m = af_compile(g, 1, &a, 1, &y, &o);
    CHECK(m != NULL, "fp32 on the same CPU: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

int main(void) {
    check_refusals();
    if (cpu_gemm_bf16_best() == CPU_BF16_NONE) {
        check_no_instructions();
        int rc = check_finish("precision_bf16");
        if (rc) return rc;
        printf("SKIP: this CPU has neither AMX-BF16 nor AVX512-BF16; the bf16 numerics are untested here\n");
        return 77;
    }
    check_matmul("matmul x @ w^T", mm_nt, 0, 1, 3, 1, 17, 33, 70);
    check_matmul("matmul a^T @ b", mm_tn, 1, 0, 1, 1, 40, 21, 65);
    check_matmul("batched matmul", mm_batched, 0, 0, 4, 4, 9, 12, 47);
    check_matmul("shared right operand", mm_batched, 0, 0, 5, 1, 6, 19, 80);
    check_conv();
    check_training();
    return check_finish("precision_bf16");
}
