/* The CPU backend's machine facts, GEMM and thread pool as public calls (aneforge.h). */
#include "aneforge.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "ir/ir.h"

void af_cpu_info_get(af_cpu_info *out) {
    if (!out) return;
    const gemm_ukernel *uk = cpu_gemm_ukernel();
    *out = (af_cpu_info){ .model = cpu_model_name(), .features = cpu_features_string(), .cores = cpu_num_cores(),
                          .gemm_path = cpu_gemm_path(), .gemm_kernel = uk->name, .gemm_mr = uk->mr, .gemm_nr = uk->nr,
                          .blas = cpu_blas_name(), .blas_available = cpu_have_blas() };
}

af_thread_pool *af_thread_pool_new(int threads) { return (af_thread_pool *)(void *)cpu_pool_new(threads); }
void af_thread_pool_free(af_thread_pool *p) { cpu_pool_free((cpu_pool *)(void *)p); }

void af_thread_pool_for(af_thread_pool *p, int64_t n, int64_t min_chunk, af_range_fn fn, void *ctx) {
    if (fn) cpu_pool_for((cpu_pool *)(void *)p, n, min_chunk, fn, ctx);
}

af_status af_sgemm(af_gemm_impl impl, af_thread_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!A || !B || !C || M < 0 || N < 0 || K < 0)
        return ir_fail(AF_ERR_INVALID, "af_sgemm: A, B and C must not be NULL and M, N, K must be >= 0");
    cpu_pool *pool = (cpu_pool *)(void *)p;
    if (impl == AF_GEMM_BLAS) {
        if (!cpu_sgemm_blas(pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
            return ir_fail(AF_ERR_UNSUPPORTED, "af_sgemm: no BLAS in this build, or %lldx%lldx%lld exceeds its ints",
                           (long long)M, (long long)N, (long long)K);
        return AF_OK;
    }
    if (impl != AF_GEMM_KERNEL) return ir_fail(AF_ERR_INVALID, "af_sgemm: impl %d is not AF_GEMM_KERNEL or AF_GEMM_BLAS", (int)impl);
    cpu_sgemm_with(cpu_gemm_ukernel(), pool, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
    return AF_OK;
}

void af_blas_set_threads(int threads) { cpu_blas_set_threads(threads); }
