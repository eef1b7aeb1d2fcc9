/* RMSNorm's backward over channel-first activations, the llama pipeline's host work
 * (seed 002 runs it on the CPU, vectorised). */
#ifndef AF_CPU_NORM_BWD_H
#define AF_CPU_NORM_BWD_H
#include "cpu/pool.h"
#include <stdint.h>

/* x, dy, out, resid: [B, C, S] (channel-first); w, dw: [C]; scratch: 2 * B * S floats.
 * Per (b, s), with r = (mean_c x^2 + eps)^-1/2 and g = dy * w:
 *   out = resid + r g - x r^3 (sum_c g x) / C   (resid may be NULL; it may be out)
 *   dw[c] += sum over (b, s) of dy x r.
 * Every loop runs along S (unit stride), statistics in double; split over the pool
 * (NULL: inline). */
void cpu_rms_norm_bwd_cf(cpu_pool *pool, int64_t B, int64_t C, int64_t S, float eps, const float *x, const float *dy,
                         const float *w, const float *resid, float *out, float *dw, float *scratch);
#endif
