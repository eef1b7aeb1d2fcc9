/* Fusion in the CPU executor. A GEMM-backed node (matmul_w, a single-GEMM matmul,
 * conv) followed by a bias add and/or a ReLU that nothing else reads runs as one kernel
 * that adds the bias and clamps each tile while it is still in cache. A ReLU's gradient
 * as autograd writes it, select(x > (x - x), g, x - x), runs as one pass over x and g,
 * or, when g is a pool gradient nothing else reads, inside that pool gradient's kernel.
 * A scalar add whose only reader is a scalar multiply, (x + a) * b (a model's input
 * normalisation), runs as one pass.
 * RMSNorm's gradient as autograd writes it runs as three passes (fuse_norm.h), swiglu's
 * two gradient nodes as one (fuse_swiglu.h), a tied embedding's gradient sum in place
 * (fuse_embed.h).
 * A single-GEMM matmul whose only reader adds it to a tensor of its shape computed
 * before it (a residual, or the sum of the products of a gradient's several paths) adds
 * that tensor in the same epilogue, instead of a pass that reads both and writes a third.
 * The absorbed nodes get no buffer and do not run. Only in fp32 without node hooks, so
 * ane-sim's per-op fp16 rounding is never skipped. */
#ifndef AF_CPU_FUSE_H
#define AF_CPU_FUSE_H
#include "compile/plan.h"

typedef struct {
    int tail;    /* schedule index of the last absorbed node, or -1: not a fused head */
    int bias_id; /* tensor id of the bias, or -1 */
    bool relu;
    bool absorbed; /* this node runs inside another */
    int relu_grad_x; /* a select that runs as a ReLU gradient: the tensor id of x, or -1 */
    int mask_x;      /* a pool gradient head whose tail is that ReLU gradient: x's id, or -1 */
    bool add_mul;    /* an adds head whose tail is a muls */
    int kind;        /* a CPU_FUSE_* of fuse_norm.h or fuse_swiglu.h, or 0 (zero-initialised by the literals above) */
    int xr[5];       /* with kind: the tensor ids the fused kernel reads instead of its sources */
    bool scaled;     /* with kind: an xhat = x r it reads is recomputed from x and r (fuse_norm.h) */
    int acc_into;    /* an embedding_grad adding its rows into this schedule index's buffer, or -1 (fuse_embed.h) */
    int add_id;      /* a matmul head's added tensor (the add's other operand, its shape), or -1 */
} cpu_fusion;

/* Fills f[0..nsched) and returns how many nodes were absorbed. */
int cpu_fuse_plan(const compile_plan *p, cpu_fusion *f);
#endif
