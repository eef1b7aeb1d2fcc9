/* RMSNorm's gradient as autograd writes it (grad/vjp_reduce.c) is about ten passes over
 * [rows, D]; the planner finds three chains in it and runs each as one pass:
 *   CPU_FUSE_RMS_DX:  dx = (g*gam - xhat * mean_D(g*gam*xhat)) * r    (at the dx node)
 *                     [+ resid: the add that sums dx with the residual path's gradient,
 *                      its result written by the dx node (cpu_fusion.tail)]
 *   CPU_FUSE_SQ_MEAN: mean_D(x*x)                                     (at the reduce_mean)
 *   CPU_FUSE_MUL_SUM: sum over rows of a*b, one sum per column         (at the reduce_sum)
 * When xhat = x * r feeds only the dx and dgamma chains, it is absorbed too and both
 * recompute it from x and r (cpu_fusion.scaled).
 * Each fused node reads the chain's inputs (cpu_fusion.xr) instead of its sources; the
 * nodes between get no buffer and do not run. The rounding is the nodes': each product
 * in fp32, the sums in double as the reductions do, so results agree to the last bits. */
#ifndef AF_CPU_FUSE_NORM_H
#define AF_CPU_FUSE_NORM_H
#include "cpu/fuse.h"
#include "cpu/pool.h"

enum { CPU_FUSE_RMS_DX = 1, CPU_FUSE_SQ_MEAN, CPU_FUSE_MUL_SUM };

/* Marks the chains in f; reads[id]: how many sources name tensor id, is_out: requested,
 * pos[id]: schedule index. Returns how many nodes were absorbed. */
int cpu_fuse_norm_grad(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos);

/* How many tensor ids of f->xr the fused kernel reads. */
static inline int cpu_fuse_nreads(const cpu_fusion *f) {
    return f->kind == CPU_FUSE_RMS_DX ? 4 + (f->xr[4] >= 0) : f->kind == CPU_FUSE_MUL_SUM ? 2 + f->scaled
                                                                                      : f->kind == CPU_FUSE_SQ_MEAN;
}

/* g, xhat, dx, resid: [rows, d]; gam: [d]; r: [rows]. resid (NULL: none) is added to dx;
 * scaled: xhat holds x, and xhat = x r is recomputed. */
void cpu_rms_dx(cpu_pool *pool, const float *g, const float *gam, const float *xhat, const float *r, bool scaled,
                const float *resid, float *dx, int64_t rows, int64_t d);
/* out[i] = mean_j x[i, j]^2 over [rows, d]. */
void cpu_sq_mean(cpu_pool *pool, const float *x, float *out, int64_t rows, int64_t d);
/* out[j] = sum_i a[i, j] * b[i, j] over [rows, d], b[i, j] times r[i] first when r is given. */
void cpu_mul_colsum(cpu_pool *pool, const float *a, const float *b, const float *r, float *out, int64_t rows,
                    int64_t d);
#endif
