/* GEMM micro-kernels: c[MR x NR] (+)= a-sliver x b-sliver over kc steps, where the
 * a-sliver holds MR values per k (k-major) and the b-sliver NR values per k. One per
 * instruction set; gemm.c packs the operands and picks one by the CPU's features. */
#ifndef AF_CPU_GEMM_UKERNEL_H
#define AF_CPU_GEMM_UKERNEL_H
#include <stdbool.h>
#include <stdint.h>

/* accumulate: 0 stores the product into c, 1 adds it to c. c has row stride ldc; only
 * its first m rows and n columns are touched (an edge tile: m <= MR, n <= NR). */
typedef void (*gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate,
                                int m, int n);
/* Dot products for C = A B^T with few rows and a long K (a weight gradient summed over
 * a batch): acc[i * dnr + j] += sum_k a[i * lda + k] * b[j * ldb + k] for a dmr x dnr
 * block, both operands read in place along k, no packing. */
typedef void (*gemm_dot_fn)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *acc);
/* The transposing pack: rows (<= w) rows of kc values, row i at src + i * ld, into
 * dst[k * w + i], zero-filling rows [rows, w). Packing op(A) untransposed and op(B)
 * transposed is this, and a scalar loop doing it costs more than the product for the
 * small GEMMs of a training step (a linear layer's [out, in] weight, conv weight
 * gradients). NULL: gemm.c's portable loop. */
typedef void (*gemm_pack_t_fn)(const float *src, int64_t ld, int rows, int64_t kc, int w, float *dst);

typedef struct {
    const char *name; /* "avx512", "avx2", ... : what `bench ops` and --version report */
    int mr, nr;       /* register tile */
    int kc;           /* k block: the kc x nr b-sliver stays in L1 */
    int mc;           /* m block (a multiple of mr): the mc x kc a-block stays in L2 */
    bool simd;        /* hand-written for a vector ISA (false: the portable fallback) */
    gemm_ukernel_fn fn;
    int dmr, dnr;     /* the dot kernel's block */
    gemm_dot_fn dot;
    gemm_pack_t_fn pack_t; /* NULL: portable */
    /* The loop order around the kernel (gemm_block). false: one A sliver stays in L1
     * while the B panel's slivers (kc x nc, sized to half the L2) stream past it. true
     * (BLIS's order): one B sliver stays in L1 while the A block's slivers stream from
     * L2, and the N block is NC_MAX, so op(A) is packed once per K block instead of once
     * per N block; for the AVX2 kernel, whose 6-row A sliver made that packing a tenth
     * of a product (Zen 3, 512 KiB L2: 160-column panels). */
    bool b_in_l1;
} gemm_ukernel;

/* Each returns false when the CPU (or the compiler) lacks the instruction set. */
bool gemm_ukernel_avx512(gemm_ukernel *k);
bool gemm_ukernel_avx2(gemm_ukernel *k);
bool gemm_ukernel_neon(gemm_ukernel *k);
void gemm_ukernel_portable(gemm_ukernel *k); /* always available */
#endif
