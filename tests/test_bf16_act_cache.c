/* Activations packed once per step (gemm_bf16.h, issue 28): a tensor read by several bf16
 * products in the same layout (x by wq, wk and wv; x again as B of their weight
 * gradients) is packed by the first and taken by the others, keyed by the tensor and not
 * its buffer. Each product against a double loop over bf16-rounded operands; the cache's
 * use counted through cpu_bf16_stats(_a). The stale cases: a buffer rewritten for another
 * tensor within the same step (the arena reusing a dead tensor's slot) must be packed
 * again, as must the same tensor in the next step. Also the forward x W^T of a llama-sized
 * weight (N, K >= 256) keeping W's packing for dy W.
 * Skipped (77) on a CPU with neither AMX-BF16 nor AVX512-BF16. */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "cpu/pool.h"
#include "support/bf16_ref.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static test_rng rng = {2929};


static int64_t reused_a(void) {
    int64_t r;
    cpu_bf16_stats_a(NULL, &r);
    return r;
}

static int64_t reused_b(void) {
    int64_t r;
    cpu_bf16_stats(NULL, &r);
    return r;
}

static float *filled(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    test_fill_uniform(&rng, x, n, -1, 1);
    return x;
}

/* The GEMM with keys: x as A of three products, then as B of two, then its buffer
 * rewritten for another tensor. */
static void check_gemm(cpu_bf16_path path, cpu_pool *pool) {
    int64_t M = 70, N = 90, K = 100;
    float *x = filled(M * K), *w1 = filled(N * K), *w2 = filled(N * K), *w3 = filled(N * K), *dy = filled(M * N);
    float *y = malloc(sizeof(float) * M * N), *g = malloc(sizeof(float) * N * K);
    cpu_bf16_cache *cache = cpu_bf16_cache_new();
    static const int tx, ty; /* stand for two tensors */
    float *w[3] = { w1, w2, w3 };
    int64_t a0 = reused_a();
    for (int i = 0; i < 3; i++) {
        cpu_bf16_keys k = { &tx, NULL, i < 2, false, false, NULL };
        CHECK(cpu_sgemm_bf16_k(pool, path, 0, 1, M, N, K, x, K, w[i], K, y, N, cache, &k), "refused");
        bf16_ref_check_product("x W_i^T, x kept", y, N, 0, 1, M, N, K, x, K, w[i], K);
    }
    CHECK(reused_a() == a0 + 2, "x packed %lld times for 3 products, once expected", (long long)(3 - (reused_a() - a0)));
    /* x as B untransposed (the weight gradients dy^T x) */
    int64_t b0 = reused_b();
    for (int i = 0; i < 2; i++) {
        cpu_bf16_keys k = { NULL, &tx, false, i == 0, false, NULL };
        CHECK(cpu_sgemm_bf16_k(pool, path, 1, 0, N, K, M, dy, N, x, K, g, K, cache, &k), "refused");
        bf16_ref_check_product("dy^T x, x kept", g, K, 1, 0, N, K, M, dy, N, x, K);
    }
    CHECK(reused_b() == b0 + 1, "x as B: %lld reuses, 1 expected", (long long)(reused_b() - b0));
    /* another layout of the same tensor is not the kept packing */
    cpu_bf16_keys kt = { &tx, NULL, false, false, false, NULL };
    CHECK(cpu_sgemm_bf16_k(pool, path, 1, 0, K, N, M, x, K, dy, N, g, N, cache, &kt), "refused");
    CHECK(reused_a() == a0 + 2, "x^T as A took x's packing");
    bf16_ref_check_product("x^T dy", g, N, 1, 0, K, N, M, x, K, dy, N);
    /* the buffer rewritten within the step for another tensor: not x's packing */
    for (int64_t i = 0; i < M * K; i++) x[i] = 0.5f - 3 * x[i];
    cpu_bf16_keys k2 = { &ty, NULL, false, false, false, NULL };
    CHECK(cpu_sgemm_bf16_k(pool, path, 0, 1, M, N, K, x, K, w1, K, y, N, cache, &k2), "refused");
    CHECK(reused_a() == a0 + 2, "another tensor in x's buffer took x's packing");
    bf16_ref_check_product("another tensor in x's buffer (stale packing?)", y, N, 0, 1, M, N, K, x, K, w1, K);
    /* the same tensor in the next step is packed again */
    cpu_bf16_cache_step(cache);
    cpu_bf16_keys k1 = { &tx, NULL, false, false, false, NULL };
    CHECK(cpu_sgemm_bf16_k(pool, path, 0, 1, M, N, K, x, K, w2, K, y, N, cache, &k1), "refused");
    CHECK(reused_a() == a0 + 2, "a packing of the previous step taken");
    bf16_ref_check_product("x in the next step", y, N, 0, 1, M, N, K, x, K, w2, K);
    cpu_bf16_cache_free(cache);
    free(x), free(w1), free(w2), free(w3), free(dy), free(y), free(g);
}

/* Through the executor, llama-sized (the forward's x W^T with N, K >= 256): a = x + 0.5
 * read by three x W_i^T and by two dy_j^T a, dx = dy W1, then b = xb - 0.25 (which may
 * take a's arena slot) times W1^T. Run twice with the inputs changed between the runs. */
static void check_executor(void) {
    int64_t M = 64, N = 256, K = 256;
    af_graph *g = af_graph_new();
    af_tensor *tx = af_input(g, "x", AF_F32, AF_SHAPE(M, K)), *txb = af_input(g, "xb", AF_F32, AF_SHAPE(M, K));
    af_tensor *tw[3], *tdy = af_input(g, "dy", AF_F32, AF_SHAPE(M, N));
    for (int i = 0; i < 3; i++) tw[i] = af_input(g, i == 0 ? "w1" : i == 1 ? "w2" : "w3", AF_F32, AF_SHAPE(N, K));
    af_tensor *ta = af_adds(tx, 0.5f), *tdy2 = af_muls(tdy, 2.0f);
    af_tensor *out[7];
    for (int i = 0; i < 3; i++) out[i] = af_matmul(ta, tw[i], 0, 1);
    out[3] = af_matmul(tdy, ta, 1, 0);
    out[4] = af_matmul(tdy2, ta, 1, 0);
    out[5] = af_matmul(tdy, tw[0], 0, 0);
    out[6] = af_matmul(af_adds(txb, -0.25f), tw[0], 0, 1);
    af_tensor *in[6] = { tx, txb, tdy, tw[0], tw[1], tw[2] };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_BF16, .threads = 2 };
    af_model *m = af_compile(g, 6, in, 7, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    float *x = filled(M * K), *xb = filled(M * K), *dy = filled(M * N), *w[3] = { filled(N * K), filled(N * K), filled(N * K) };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * M * K), *dy2 = malloc(sizeof(float) * M * N);
    float *y[7];
    int64_t ylen[7] = { M * N, M * N, M * N, N * K, N * K, M * K, M * N };
    for (int i = 0; i < 7; i++) y[i] = malloc(sizeof(float) * (size_t)ylen[i]);
    af_buffer bi[6] = { AF_BUF_F32(x, M * K), AF_BUF_F32(xb, M * K), AF_BUF_F32(dy, M * N),
                        AF_BUF_F32(w[0], N * K), AF_BUF_F32(w[1], N * K), AF_BUF_F32(w[2], N * K) };
    af_buffer bo[7];
    for (int i = 0; i < 7; i++) bo[i] = (af_buffer)AF_BUF_F32(y[i], ylen[i]);
    for (int step = 0; m && step < 2; step++) {
        if (step) /* new activations and weights between the runs */
            for (int64_t i = 0; i < M * K; i++) x[i] = -2 * x[i] + 0.125f, w[0][i] *= -1.5f;
        int64_t a0 = reused_a(), b0 = reused_b();
        CHECK(af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
        CHECK(reused_a() - a0 == 2, "step %d: a taken %lld times by x W_i^T, 2 expected", step, (long long)(reused_a() - a0));
        CHECK(reused_b() - b0 == 3, "step %d: %lld right operands taken (a by dy2^T a, W1 by dy W1 and b W1^T), 3 expected", step,
              (long long)(reused_b() - b0));
        for (int64_t i = 0; i < M * K; i++) a[i] = x[i] + 0.5f, b[i] = xb[i] + -0.25f;
        for (int64_t i = 0; i < M * N; i++) dy2[i] = dy[i] * 2.0f;
        char what[80];
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "step %d: a W%d^T", step, i + 1);
            bf16_ref_check_product(what, y[i], N, 0, 1, M, N, K, a, K, w[i], K);
        }
        snprintf(what, sizeof what, "step %d: dy^T a", step);
        bf16_ref_check_product(what, y[3], K, 1, 0, N, K, M, dy, N, a, K);
        snprintf(what, sizeof what, "step %d: dy2^T a", step);
        bf16_ref_check_product(what, y[4], K, 1, 0, N, K, M, dy2, N, a, K);
        snprintf(what, sizeof what, "step %d: dy W1", step);
        bf16_ref_check_product(what, y[5], K, 0, 0, M, K, N, dy, N, w[0], K);
        snprintf(what, sizeof what, "step %d: b W1^T (a's packing taken?)", step);
        bf16_ref_check_product(what, y[6], N, 0, 1, M, N, K, b, K, w[0], K);
    }
    af_model_free(m);
    af_graph_free(g);
    for (int i = 0; i < 7; i++) free(y[i]);
    free(x), free(xb), free(dy), free(w[0]), free(w[1]), free(w[2]), free(a), free(b), free(dy2);
}

int main(void) {
    if (cpu_gemm_bf16_best() == CPU_BF16_NONE) {
        fprintf(stderr, "bf16_act_cache: this CPU has neither AMX-BF16 nor AVX512-BF16: skipped\n");
        return 77;
    }
    cpu_pool *pool = cpu_pool_new(3);
    cpu_bf16_path paths[2];
    for (int p = 0, n = bf16_ref_paths(paths); p < n; p++) {
        check_gemm(paths[p], pool);
        check_gemm(paths[p], NULL);
    }
    cpu_pool_free(pool);
    check_executor();
    return check_finish("bf16_act_cache");
}
