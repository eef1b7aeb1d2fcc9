/* The CPU executor: runs a compile_plan with one preplanned arena (no allocation during
 * a run). The cpu backend is a thin wrapper over it; other backends that compute on
 * the host (ane-sim) build on it and observe nodes through the after_node hook. */
#ifndef AF_CPU_EXEC_H
#define AF_CPU_EXEC_H
#include "compile/plan.h"
#include "cpu/pool.h"

#include <stdbool.h>

/* Called after the kernel of schedule entry s wrote out (count(t->shape) floats) and
 * before fp16 rounding; ins are the node's source values. */
typedef void (*cpu_node_hook)(void *ctx, int s, const af_tensor *t, float *out, const float *const *ins);

typedef struct {
    bool fp16;                 /* fp16 storage: every stored value rounded to fp16 */
    bool fp16_accum;           /* reduce_sum accumulates in fp16 */
    int threads;               /* >= 1 */
    int bf16;                  /* a cpu_bf16_path (gemm_bf16.h): matmul/conv GEMMs in bf16, fp32 sums; 0 = fp32 */
    bool fuse;                 /* run bias/ReLU chains inside GEMM epilogues (fuse.h); fp32 without hooks only */
    cpu_node_hook after_node;  /* NULL: none */
    const unsigned char *hook_at; /* per schedule index: nonzero calls after_node there (NULL: every node) */
    void *hook_ctx;
} cpu_exec_opts;

typedef struct cpu_exec cpu_exec;

af_status cpu_exec_new(const compile_plan *p, const cpu_exec_opts *o, cpu_exec **out, char *msg, size_t n);
af_status cpu_exec_run(cpu_exec *e, const af_buffer *in, af_buffer *out);
af_status cpu_exec_bind_state(cpu_exec *e, int in_index, int out_index);
af_status cpu_exec_write_state(cpu_exec *e, int in_index, const float *src);
af_status cpu_exec_read_state(const cpu_exec *e, int in_index, float *dst);
size_t    cpu_exec_memory_bytes(const cpu_exec *e);
/* From the next run on, outputs whose every final value a GEMM epilogue sees (a matmul's
 * or matmul_w's result, its fused add's: a weight's gradient) get a bound on their
 * largest |x| at no extra pass: cpu_exec_output_bound gives it after a run, INFINITY when
 * an inf or nan is inside, false for the other outputs (the caller reads those). */
af_status cpu_exec_track_bounds(cpu_exec *e);
bool      cpu_exec_output_bound(const cpu_exec *e, int out_index, float *bound);
void      cpu_exec_free(cpu_exec *e);
#endif
