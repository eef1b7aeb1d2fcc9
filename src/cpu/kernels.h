/* CPU kernels: one function per op-table row, all computing in fp32. The executor
 * rounds results to fp16 afterwards in fp16-storage mode. */
#ifndef AF_CPU_KERNELS_H
#define AF_CPU_KERNELS_H
#include "ir/ir.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

typedef struct {
    const af_tensor *t;      /* the node: op, attributes, shapes */
    const float *const *in;  /* t->nsrc source buffers */
    float *out;
    cpu_pool *pool;
    float *scratch;          /* cpu_scratch_floats(t, threads) floats, or NULL when that is 0 */
    int fp16_accum;          /* reduce_sum accumulates in fp16 (ane-sim families) */
    int fp16;                /* fp16-storage numerics: scalar attributes are fp16 too */
    const cpu_epilogue *ep;  /* a fused bias/ReLU (fuse.h) for matmul_w, matmul, conv; else NULL */
    const float *relu_x;     /* pool gradients: a fused ReLU gradient, dx kept where x > x - x; else NULL */
    int bf16;                /* a cpu_bf16_path: matmul and conv GEMMs in bf16 with fp32 sums; 0 = fp32 */
    struct cpu_bf16_cache *bf16_cache; /* the run's kept weight packings (gemm_bf16.h), or NULL */
} cpu_call;

typedef void (*cpu_kernel_fn)(const cpu_call *c);

extern const cpu_kernel_fn cpu_kernels[IR_OP_COUNT];
/* Scratch memory a node's kernel needs (im2col columns and the like). */
/* Scratch a node's kernel needs when it may split work over `threads` threads. */
int64_t cpu_scratch_floats(const af_tensor *t, int threads);

/* Family entry points used by the table. */
void cpu_k_binary(const cpu_call *c);
void cpu_k_select(const cpu_call *c);
void cpu_k_scalar(const cpu_call *c);
void cpu_k_unary(const cpu_call *c);
void cpu_k_cast(const cpu_call *c);
void cpu_k_matmul_w(const cpu_call *c);
void cpu_k_matmul(const cpu_call *c);
void cpu_k_reduce(const cpu_call *c);
void cpu_k_softmax(const cpu_call *c);
void cpu_k_transpose(const cpu_call *c);
void cpu_k_copy(const cpu_call *c);      /* reshape */
void cpu_k_slice(const cpu_call *c);     /* slice_by_size and split */
void cpu_k_concat(const cpu_call *c);
void cpu_k_sdpa(const cpu_call *c);       /* k_sdpa.c */
void cpu_k_attention(const cpu_call *c);  /* k_attention.c: causal_attention(_grad), rope, swiglu(_grad), sdpa */
void cpu_k_xent(const cpu_call *c);       /* k_xent.c: softmax_xent(_grad) */
/* Softmax of one contiguous row of n floats into y (y may be x), vectorised. */
void cpu_softmax_row(const float *x, float *y, int64_t n);
/* Scratch floats of causal_attention(_grad) on `threads` threads. */
int64_t cpu_attention_scratch(const af_tensor *t, int threads);
void cpu_k_structural(const cpu_call *c); /* flatten, dropout, broadcast, input_view */
void cpu_k_embedding(const cpu_call *c);      /* gather rows by id */
void cpu_k_embedding_grad(const cpu_call *c); /* scatter-add rows by id */
void cpu_k_norm(const cpu_call *c);
void cpu_k_pool_grad(const cpu_call *c);
void cpu_k_pool(const cpu_call *c);
void cpu_k_conv(const cpu_call *c);
void cpu_k_conv_transpose(const cpu_call *c);
void cpu_k_conv_weight_grad(const cpu_call *c);
int64_t cpu_conv_scratch(const af_tensor *t);
/* Bridge ops (seed 004): one entry per kind, dispatching on the op. */
void cpu_k_rank(const cpu_call *c);       /* k_rank.c */
void cpu_k_rearrange(const cpu_call *c);  /* k_rearrange.c */
void cpu_k_geometry(const cpu_call *c);   /* k_geometry.c */
void cpu_k_bnorm(const cpu_call *c);      /* k_lrn.c: lrn, minmax_norm, scaled_elementwise */
void cpu_k_einsum(const cpu_call *c);     /* k_geometry.c: the native nchw,nwhu->nchu */
/* Scratch floats a bridge op's kernel needs (sort keys, point distances), else 0. */
int64_t cpu_bridge_scratch(const af_tensor *t);
/* The first index dynamic_slice reads: start rounded half up, clamped to [0, extent - size]. */
int64_t cpu_dynamic_slice_start(float start, int64_t extent, int64_t size);
int64_t cpu_matmul_scratch(const af_tensor *t);
/* out = x > z ? g : z with z = x - x, elementwise over n: a ReLU's gradient as autograd
 * writes it (select(greater(x, sub(x, x)), g, sub(x, x))), in one pass. */
void cpu_relu_grad(cpu_pool *pool, const float *x, const float *g, float *out, int64_t n);
/* out = (x + add) * mul elementwise over n: adds then muls (an input normalisation) in one pass. */
void cpu_add_mul(cpu_pool *pool, const float *x, float add, float mul, float *out, int64_t n);
/* The GEMM of matmul and conv kernels: cpu_sgemm_ep (alpha 1), or on c->bf16's path
 * bf16-rounded operands with fp32 accumulation, then beta * C and the epilogue in fp32.
 * Falls back to fp32 when the bf16 GEMM cannot run (out of memory for its packing). */
void cpu_kgemm(const cpu_call *c, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const cpu_epilogue *ep);
/* Whether cpu_k_matmul runs t as one GEMM over its whole output (so an epilogue fits). */
bool cpu_matmul_is_one_gemm(const af_tensor *t);
#endif
