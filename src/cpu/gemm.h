/* Row-major single-precision GEMM: C = alpha * op(A) @ op(B) + beta * C, where op
 * transposes when ta/tb is set. op(A) is [M,K], op(B) is [K,N], C is [M,N].
 * Uses BLAS (OpenBLAS, Accelerate) when built with AF_HAVE_BLAS, else a portable
 * blocked kernel parallelised over the pool. */
#ifndef AF_CPU_GEMM_H
#define AF_CPU_GEMM_H
#include <stdint.h>
#include "cpu/pool.h"

void cpu_sgemm(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc);
/* The portable kernel, always compiled (tests compare it with BLAS). */
void cpu_sgemm_portable(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc);
/* Tells the BLAS library how many threads to use (no-op without BLAS). */
void cpu_blas_set_threads(int n);
int  cpu_have_blas(void);
#endif
