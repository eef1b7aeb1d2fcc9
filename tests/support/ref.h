/* An independent reference evaluator for the op corpus: every op written from its
 * mathematical definition with plain loops over multi-indices, in double. It reads only
 * the node's op, shapes and attributes, never the library's kernels, so a kernel bug
 * cannot hide behind shared code. Slow by design; fine for test-sized tensors. */
#ifndef AF_TEST_REF_H
#define AF_TEST_REF_H
#include "ir/ir.h"

/* Evaluates node t: in[k] holds count(t->src[k]->shape) values of source k, out
 * receives count(t->shape) values. Returns 0, or -1 for an op it does not know. */
int ref_eval(const af_tensor *t, const double *const *in, double *out);
/* The bridge ops (support/ref_bridge_ops.c), called by ref_eval. */
int ref_eval_bridge(const af_tensor *t, const double *const *in, double *out);
/* The bridge ops' part of it (ref_bridge.c). */
int ref_bridge_eval(const af_tensor *t, const double *const *in, double *out);

#endif
