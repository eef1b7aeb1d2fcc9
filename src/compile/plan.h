/* The target-neutral half of compiling: which nodes a request needs, in what order
 * they run, and when each value is last read. Every backend starts from a plan; none
 * of this knows about memory layouts, engines or kernels. */
#ifndef AF_COMPILE_PLAN_H
#define AF_COMPILE_PLAN_H
#include "ir/ir.h"

typedef struct {
    af_graph *g;
    int nin, nout;
    af_tensor **in, **out;  /* as requested */
    int nsched;
    af_tensor **sched;      /* the non-leaf nodes the outputs need, in execution order */
    bool *need;             /* per tensor id below ntensors: the outputs depend on it */
    int *last_read;         /* per tensor id: schedule index of its last reader, or -1 */
    int ntensors;           /* graph size when planned: later nodes are not part of it */
    int64_t flops;          /* floating-point operations of one run */
} compile_plan;

/* Checks the request (outputs and inputs of g, every needed leaf fed or constant) and
 * builds the plan. On failure returns the status with the reason in msg. */
af_status plan_build(compile_plan *p, af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                     char *msg, size_t n);
void plan_free(compile_plan *p);

/* Floating-point operations of one node: 2*M*N*K for matmul and conv, the larger of
 * input and output element counts for other compute ops, 0 for data movement. */
int64_t plan_node_flops(const af_tensor *t);
#endif
