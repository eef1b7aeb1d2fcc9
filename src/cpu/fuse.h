/* Epilogue fusion in the CPU executor: a GEMM-backed node (matmul_w, a single-GEMM
 * matmul, conv) followed by a bias add and/or a ReLU that nothing else reads runs as
 * one kernel that adds the bias and clamps each tile while it is still in cache; the
 * absorbed nodes get no buffer and do not run. Only in fp32 without node hooks, so
 * ane-sim's per-op fp16 rounding is never skipped. */
#ifndef AF_CPU_FUSE_H
#define AF_CPU_FUSE_H
#include "compile/plan.h"

typedef struct {
    int tail;    /* schedule index of the last absorbed node, or -1: not a fused head */
    int bias_id; /* tensor id of the bias, or -1 */
    bool relu;
    bool absorbed; /* this node runs inside an earlier head */
} cpu_fusion;

/* Fills f[0..nsched) and returns how many nodes were absorbed. */
int cpu_fuse_plan(const compile_plan *p, cpu_fusion *f);
#endif
