/* The bf16 weight cache (gemm_bf16.h, issue 28): the forward's x W^T keeps W's other
 * packing, the input gradient's dy W takes it instead of packing W again, and a weight
 * changed between steps (runs) is packed again. Each product against a double loop over
 * bf16-rounded operands; the cache's use counted through cpu_bf16_stats. The executor
 * case fails if a run does not make the kept packings stale (dy W would use the old W).
 * Also direct packing of transposed operands over several blocks and the pool split.
 * Skipped (77) on a CPU with neither AMX-BF16 nor AVX512-BF16. */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "cpu/pool.h"
#include "support/bf16_ref.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static test_rng rng = {2828};


static int64_t reused(void) {
    int64_t r;
    cpu_bf16_stats(NULL, &r);
    return r;
}

/* Transposed operands packed in place, sizes over several 16 x 16 blocks and edges. */
static void check_transposed(cpu_bf16_path path, cpu_pool *pool) {
    static const int64_t sizes[][3] = {{70, 130, 200}, {129, 33, 97}, {16, 16, 32}, {48, 200, 17}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1;
            float *A = malloc(sizeof(float) * (size_t)((ta ? K : M) * lda)), *B = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb));
            float *C = malloc(sizeof(float) * (size_t)(M * N));
            test_fill_uniform(&rng, A, (ta ? K : M) * lda, -1, 1);
            test_fill_uniform(&rng, B, (tb ? N : K) * ldb, -1, 1);
            CHECK(cpu_sgemm_bf16_t(s % 2 ? pool : NULL, path, ta, tb, M, N, K, A, lda, B, ldb, C, N), "refused");
            char what[64];
            snprintf(what, sizeof what, "%s ta %d tb %d", cpu_bf16_path_name(path), ta, tb);
            bf16_ref_check_product(what, C, N, ta, tb, M, N, K, A, lda, B, ldb);
            free(A), free(B), free(C);
        }
}

/* The GEMM with a cache: forward x W^T keeps W's packing, dy W takes it, a new step drops it. */
static void check_gemm_cache(cpu_bf16_path path, cpu_pool *pool) {
    int64_t M = 45, N = 70, K = 100; /* W [N, K]: the forward's B transposed, the gradient's B as stored [K' = N, N' = K] */
    float *x = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K), *dy = malloc(sizeof(float) * M * N);
    float *y = malloc(sizeof(float) * M * N), *dx = malloc(sizeof(float) * M * K);
    test_fill_uniform(&rng, x, M * K, -1, 1);
    test_fill_uniform(&rng, W, N * K, -1, 1);
    test_fill_uniform(&rng, dy, M * N, -1, 1);
    cpu_bf16_cache *cache = cpu_bf16_cache_new();
    static const int key; /* stands for the tensor */
    CHECK(cpu_sgemm_bf16_c(pool, path, 0, 1, M, N, K, x, K, W, K, y, N, cache, &key, true), "forward refused");
    bf16_ref_check_product("cache: forward x W^T", y, N, 0, 1, M, N, K, x, K, W, K);
    int64_t r0 = reused();
    CHECK(cpu_sgemm_bf16_c(pool, path, 0, 0, M, K, N, dy, N, W, K, dx, K, cache, &key, false), "gradient refused");
    CHECK(reused() == r0 + 1, "dy W did not take the kept packing (%lld reuses)", (long long)(reused() - r0));
    bf16_ref_check_product("cache: dy W from the kept packing", dx, K, 0, 0, M, K, N, dy, N, W, K);
    /* another key, or another leading dimension, is not the kept packing */
    static const int other;
    CHECK(cpu_sgemm_bf16_c(pool, path, 0, 0, M, K, N, dy, N, W, K, dx, K, cache, &other, false), "refused");
    CHECK(reused() == r0 + 1, "a packing taken under another tensor's key");
    /* the same tensor read from another buffer is not the kept packing */
    float *W2 = malloc(sizeof(float) * N * K);
    for (int64_t i = 0; i < N * K; i++) W2[i] = W[i];
    CHECK(cpu_sgemm_bf16_c(pool, path, 0, 0, M, K, N, dy, N, W2, K, dx, K, cache, &key, false), "refused");
    CHECK(reused() == r0 + 1, "a packing taken for another buffer");
    /* a weight fed from a new buffer each step keeps one entry, not one per buffer */
    size_t bytes = cpu_bf16_cache_bytes(cache);
    CHECK(bytes >= (size_t)(N * K * 2), "kept packing of %lld bytes", (long long)bytes);
    for (int step = 0; step < 4; step++) {
        cpu_bf16_cache_step(cache);
        CHECK(cpu_sgemm_bf16_c(pool, path, 0, 1, M, N, K, x, K, step % 2 ? W : W2, K, y, N, cache, &key, true), "refused");
        CHECK(cpu_sgemm_bf16_c(pool, path, 0, 0, M, K, N, dy, N, step % 2 ? W : W2, K, dx, K, cache, &key, false), "refused");
    }
    CHECK(cpu_bf16_cache_bytes(cache) == bytes, "the cache grew from %lld to %lld bytes over new buffers",
          (long long)bytes, (long long)cpu_bf16_cache_bytes(cache));
    CHECK(reused() == r0 + 5, "alternating buffers: %lld reuses, 5 expected", (long long)(reused() - r0));
    free(W2);
    r0 = reused() - 1;
    /* the optimizer writes W; the new step must pack it again */
    for (int64_t i = 0; i < N * K; i++) W[i] = -2 * W[i] + 0.25f;
    cpu_bf16_cache_step(cache);
    CHECK(cpu_sgemm_bf16_c(pool, path, 0, 0, M, K, N, dy, N, W, K, dx, K, cache, &key, false), "refused");
    CHECK(reused() == r0 + 1, "a packing of the previous step taken");
    bf16_ref_check_product("cache: dy W after the weight changed", dx, K, 0, 0, M, K, N, dy, N, W, K);
    cpu_bf16_cache_free(cache);
    free(x), free(W), free(dy), free(y), free(dx);
}

/* Through the executor: y = x W^T and dx = dy W in one bf16 program, run twice with W
 * changed in place between the runs, as the host optimizer does with its masters. */
static void check_executor(void) {
    int64_t M = 64, N = 96, K = 80;
    af_graph *g = af_graph_new();
    af_tensor *tx = af_input(g, "x", AF_F32, AF_SHAPE(M, K)), *tw = af_input(g, "w", AF_F32, AF_SHAPE(N, K));
    af_tensor *tdy = af_input(g, "dy", AF_F32, AF_SHAPE(M, N));
    af_tensor *in[3] = { tx, tw, tdy }, *out[2] = { af_matmul(tx, tw, 0, 1), af_matmul(tdy, tw, 0, 0) };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_BF16, .threads = 2 };
    af_model *m = af_compile(g, 3, in, 2, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    float *x = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K), *dy = malloc(sizeof(float) * M * N);
    float *y = malloc(sizeof(float) * M * N), *dx = malloc(sizeof(float) * M * K);
    test_fill_uniform(&rng, x, M * K, -1, 1);
    test_fill_uniform(&rng, W, N * K, -1, 1);
    test_fill_uniform(&rng, dy, M * N, -1, 1);
    af_buffer bi[3] = { AF_BUF_F32(x, M * K), AF_BUF_F32(W, N * K), AF_BUF_F32(dy, M * N) };
    af_buffer bo[2] = { AF_BUF_F32(y, M * N), AF_BUF_F32(dx, M * K) };
    for (int step = 0; m && step < 3; step++) {
        if (step) /* the optimizer's update, in place between the runs */
            for (int64_t i = 0; i < N * K; i++) W[i] = W[i] * (step == 1 ? -1.5f : 0.5f) + 0.125f * (float)(i % 7);
        int64_t r0 = reused();
        CHECK(af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
        CHECK(reused() == r0 + 1, "step %d: dy W did not take the forward's packing (%lld reuses)", step,
              (long long)(reused() - r0));
        char what[64];
        snprintf(what, sizeof what, "executor step %d: y = x W^T", step);
        bf16_ref_check_product(what, y, N, 0, 1, M, N, K, x, K, W, K);
        snprintf(what, sizeof what, "executor step %d: dx = dy W (stale packing?)", step);
        bf16_ref_check_product(what, dx, K, 0, 0, M, K, N, dy, N, W, K);
    }
    af_model_free(m);
    af_graph_free(g);
    free(x), free(W), free(dy), free(y), free(dx);
}

int main(void) {
    cpu_bf16_path best = cpu_gemm_bf16_best();
    if (best == CPU_BF16_NONE) {
        fprintf(stderr, "bf16_cache: this CPU has neither AMX-BF16 nor AVX512-BF16: skipped\n");
        return 77;
    }
    cpu_pool *pool = cpu_pool_new(3);
    cpu_bf16_path paths[2];
    for (int p = 0, n = bf16_ref_paths(paths); p < n; p++) {
        check_transposed(paths[p], pool);
        check_gemm_cache(paths[p], pool);
        check_gemm_cache(paths[p], NULL);
    }
    cpu_pool_free(pool);
    check_executor();
    return check_finish("bf16_cache");
}
