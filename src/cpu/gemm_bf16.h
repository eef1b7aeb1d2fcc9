/* Mixed-precision GEMM for the bf16 path (issue 28): C = A @ B with A [M,K] and B [K,N]
 * row-major fp32, each operand rounded to bf16 (nearest even) as it is packed, the
 * products accumulated in fp32. Two kernels: AMX tiles (tdpbf16ps: Sapphire Rapids and
 * later) and AVX512-BF16 dot products (vdpbf16ps: Zen 4/5, Cooper Lake); elsewhere the
 * path is refused and callers stay in fp32. */
#ifndef AF_CPU_GEMM_BF16_H
#define AF_CPU_GEMM_BF16_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cpu/pool.h"

typedef enum { CPU_BF16_NONE, CPU_BF16_AVX512, CPU_BF16_AMX } cpu_bf16_path;

/* The fastest bf16 kernel this CPU (and OS: Linux hands out AMX state on request) runs. */
cpu_bf16_path cpu_gemm_bf16_best(void);
/* "amx", "avx512bf16" or "none". */
const char *cpu_bf16_path_name(cpu_bf16_path path);
/* fp32 -> bf16, rounding to nearest even (NaN stays NaN), as vcvtne2ps2bf16 does. */
uint16_t cpu_bf16_round(float x);
float cpu_bf16_to_float(uint16_t h);
/* C = A @ B on the given path (CPU_BF16_NONE: the best). False, C untouched, when the
 * CPU lacks the path or memory for the packed operands runs out. */
bool cpu_sgemm_bf16(cpu_pool *p, cpu_bf16_path path, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc);
/* The same with op(A) [M,K] and op(B) [K,N] transposed when ta/tb is set (A stored
 * [K,M], B stored [N,K]), as cpu_sgemm takes them. */
bool cpu_sgemm_bf16_t(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc);

/* Packings kept within a step. A weight W [N, K] is read twice per training step, in the
 * forward (x W^T: B transposed) and in the input gradient (dy W: B as stored), each in its
 * own packed layout (pairs along K, then along N). The forward's packing pass also writes
 * the second layout into the cache, and the gradient's product takes it from there, so W
 * is read and rounded once per step. A step is one executor run: inputs, weights among
 * them, change only between runs (the optimizer writes them there), so
 * cpu_bf16_cache_step, called at the start of each run, makes every kept packing stale. */
typedef struct cpu_bf16_cache cpu_bf16_cache;
cpu_bf16_cache *cpu_bf16_cache_new(void); /* NULL when out of memory */
void cpu_bf16_cache_free(cpu_bf16_cache *c);
void cpu_bf16_cache_step(cpu_bf16_cache *c);
size_t cpu_bf16_cache_bytes(const cpu_bf16_cache *c); /* the kept packings' buffers */
/* cpu_sgemm_bf16_t with the cache: `key` names the tensor B is (NULL: no caching). When
 * tb is clear, a packing of B kept this step under key (same B, K, N, ldb, path) replaces
 * packing it. When tb is set and keep_other, B's untransposed packing is kept under key. */
bool cpu_sgemm_bf16_c(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                      cpu_bf16_cache *cache, const void *key, bool keep_other);
/* Activations packed once per step. An activation read by several products in the same
 * layout (x by wq, wk and wv; the norm's output by w1 and w3; x again as B of their
 * weight gradients) is packed by the first and taken by the others. Keys are the tensors
 * (the producing nodes), not the buffers: the arena hands a dead tensor's buffer to
 * another within the same step, and a pointer alone would then find the old packing. An
 * entry also holds its role, transposition, shape, stride, path and data pointer.
 * keep_a / keep_b: a later product of this step reads that tensor in the same layout, so
 * the packing is written into the cache instead of the per-thread buffer. */
typedef struct {
    const void *a_key, *b_key; /* the tensors A and B are, or NULL: not cached */
    bool keep_a, keep_b;
    bool keep_other;           /* B transposed: also keep its untransposed packing (a weight's) */
    /* NULL, or where the largest |C| bit pattern is max'ed (as cpu_epilogue's absmax),
     * taken by the kernel from each block of C it has just stored, still in L1 */
    _Atomic uint32_t *absmax;
} cpu_bf16_keys;
bool cpu_sgemm_bf16_k(cpu_pool *p, cpu_bf16_path path, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                      cpu_bf16_cache *cache, const cpu_bf16_keys *keys);
/* One operand packed for several products that each take a leading block of it (the
 * attention's k and v, packed once per head instead of once per block of query rows).
 * cpu_bf16_pack_b packs op(B) [K, N] (B stored [N, K] when tb) into dst, of
 * cpu_bf16_packed_size(K, N) uint16; cpu_sgemm_bf16_pb then computes C = op(A) B' with B'
 * the leading K x N block of such a packing of a bK x bN op(B). K must be bK or a multiple
 * of 32 (the packing's rows past K hold data, not padding). With tb and `other` (else
 * NULL), the same pass over B also writes into `other` the packing of B as stored, op(B)
 * = B [N, K], as cpu_bf16_pack_b with tb clear would (of the same size): a head's k is
 * read once for k^T and k. False when it cannot run. */
size_t cpu_bf16_packed_size(int64_t K, int64_t N);
bool cpu_bf16_pack_b(cpu_pool *p, cpu_bf16_path path, int tb, int64_t K, int64_t N, const float *B, int64_t ldb,
                     uint16_t *dst, uint16_t *other);
bool cpu_sgemm_bf16_pb(cpu_pool *p, cpu_bf16_path path, int ta, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const uint16_t *bp, int64_t bK, int64_t bN, float *C, int64_t ldc);
/* Process-wide counts, for tests and benchmarks: B operands packed, and taken from a cache. */
void cpu_bf16_stats(int64_t *packed_b, int64_t *reused_b);
/* The same for A operands. */
void cpu_bf16_stats_a(int64_t *packed_a, int64_t *reused_a);
/* Process-wide wall time, in ns, that products run over a pool (the matmul nodes) spent
 * packing their operands and in the kernel: the calling thread's clock around each phase,
 * which waits for the pool's share. Products run without a pool (the attention's, one
 * per thread) are not counted. For benchmarks: bench_llama_profile prints them. */
void cpu_bf16_stats_time(int64_t *pack_ns, int64_t *kernel_ns);
#endif
