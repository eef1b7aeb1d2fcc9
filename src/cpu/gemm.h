/* Row-major single-precision GEMM: C = epilogue(alpha * op(A) @ op(B) + beta * C), where
 * op transposes when ta/tb is set. op(A) is [M,K], op(B) is [K,N], C is [M,N].
 *
 * The kernel is chosen once from the CPU's own features (cpu_features.h): the project's
 * packed micro-kernels for AVX-512, AVX2+FMA or NEON. A BLAS library is used only where
 * it is the better choice: Accelerate on macOS; OpenBLAS when the kernels it picked from
 * the CPU's name use the widest vector ISA the CPU's features report (OpenBLAS 0.3.21
 * falls back to SSE3 on CPUs it cannot name, 2-3x slower than ours), or when none of our
 * SIMD kernels fits the CPU. Products with few outputs over a long K always take our
 * dot-product path. */
#ifndef AF_CPU_GEMM_H
#define AF_CPU_GEMM_H
#include <stdbool.h>
#include <stdint.h>
#include "cpu/absmax.h"
#include "cpu/gemm_ukernel.h"
#include "cpu/pool.h"

/* Applied to each finished element of C, after beta: c += bias (per column j, or per
 * row i when bias_rows), then c += add[i * ld_add + j] (a residual or a second product's
 * sum, fuse.c), then max(c, 0) when relu; then, when absmax is set, the largest |c| bit
 * pattern of those elements is max'ed into *absmax (cpu/absmax.h): the bound on a
 * gradient the host optimizer's screen then need not read (exec.c). */
typedef struct {
    const float *bias; /* NULL: none */
    bool bias_rows;
    bool relu;
    const float *add; /* NULL: none; never C itself */
    int64_t ld_add;
    _Atomic uint32_t *absmax; /* NULL: none */
} cpu_epilogue;

/* Whether ep does anything. */
static inline bool cpu_epilogue_any(const cpu_epilogue *ep) {
    return ep && (ep->bias || ep->relu || ep->add || ep->absmax);
}
/* ep on C[i0.., j0..] of size m x n (the element indices of the whole product). */
void cpu_apply_epilogue(const cpu_epilogue *ep, float *C, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n);
/* ep on the whole M x N of C, its rows split over the pool (after a product that had no
 * epilogue of its own: the bf16 GEMM, BLAS). */
void cpu_apply_epilogue_rows(cpu_pool *p, const cpu_epilogue *ep, float *C, int64_t ldc, int64_t M, int64_t N);

void cpu_sgemm(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc);
/* The same with an epilogue (ep may be NULL). */
void cpu_sgemm_ep(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                  float *C, int64_t ldc, const cpu_epilogue *ep);
/* Our packed GEMM with a given micro-kernel (tests run every kernel the CPU has). */
void cpu_sgemm_with(const gemm_ukernel *uk, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc, const cpu_epilogue *ep);
/* The linked BLAS called directly (split over the pool as cpu_sgemm would); false when
 * built without BLAS or when the sizes do not fit cblas's ints. For comparisons. */
bool cpu_sgemm_blas(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc);
/* An operand packed once for many products (attention packs each head's keys and values
 * once; every query block's products read a leading part): op(B) [K, N] (tb: B is stored
 * [N, K]) in the micro-kernel's slivers of nr columns, each holding all K rows. The
 * packing takes cpu_sgemm_packed_b_floats(K, N) floats. cpu_sgemm_pack_b returns false,
 * packing nothing, where cpu_sgemm hands products to BLAS (the caller multiplies by
 * cpu_sgemm instead). */
int64_t cpu_sgemm_packed_b_floats(int64_t K, int64_t N);
bool cpu_sgemm_pack_b(int tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *dst);
/* C[M, N] (+)= op(A)[M, K] @ rows [0, K) and columns [0, N) of Bp, packed by
 * cpu_sgemm_pack_b with Kp >= K rows; on this thread, rounded as cpu_sgemm rounds a
 * product that is not deep (gemm.c: K >= 1024 and twice the longer side, B as stored,
 * which cpu_sgemm sums in two halves). False when its packing space cannot be allocated
 * (nothing written). */
bool cpu_sgemm_pb(int ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *Bp,
                  int64_t Kp, bool accumulate, float *C, int64_t ldc);
/* The best of our micro-kernels on this CPU. */
const gemm_ukernel *cpu_gemm_ukernel(void);
/* What cpu_sgemm runs on this machine: "avx512", "avx2", "neon", "portable",
 * "accelerate" or "openblas" (with the core it picked, e.g. "openblas Cooperlake"). */
const char *cpu_gemm_path(void);
/* The linked BLAS ("openblas", "accelerate") or NULL. */
const char *cpu_blas_name(void);
/* Tells the BLAS library how many threads to use (no-op without BLAS). */
void cpu_blas_set_threads(int n);
int  cpu_have_blas(void);
/* The kernel set OpenBLAS chose from the CPU's name ("Cooperlake"), or NULL. */
const char *cpu_blas_core(void);
/* gemm_blas.c to gemm.c: whether cpu_sgemm hands its products to BLAS rather than to our
 * kernel uk (decided once), and what cpu_gemm_path says when it does. */
bool cpu_gemm_prefers_blas(const gemm_ukernel *uk);
const char *cpu_blas_path(void);
#endif
