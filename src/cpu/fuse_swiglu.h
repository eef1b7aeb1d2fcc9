/* swiglu's gradient is two nodes over the same a, b and dy (one per operand, autograd's
 * ir_swiglu_grad); the planner runs the pair as one pass that reads the three once and
 * computes sigmoid(a) once, writing both gradients: the earlier node runs it, kind
 * CPU_FUSE_SWIGLU_PAIR, with the other node's tensor id in xr[0]; the other is absorbed
 * (its buffer is made when the pair runs). Bit-identical to the two nodes. */
#ifndef AF_CPU_FUSE_SWIGLU_H
#define AF_CPU_FUSE_SWIGLU_H
#include "cpu/fuse_norm.h"

enum { CPU_FUSE_SWIGLU_PAIR = CPU_FUSE_MUL_SUM + 1 };

/* Marks the pairs in f (pos[id]: schedule index) and returns how many nodes were absorbed. */
int cpu_fuse_swiglu_pairs(const compile_plan *p, cpu_fusion *f, const int *pos);

/* da, db: the gradients for a and b of silu(a) * b, each [n]. */
void cpu_swiglu_grad_pair(cpu_pool *pool, const float *a, const float *b, const float *dy, float *da, float *db,
                          int64_t n);
#endif
