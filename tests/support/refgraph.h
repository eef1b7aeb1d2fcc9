/* Evaluates a whole graph in double with the reference evaluator: the independent
 * yardstick for gradient checks (finite differences and analytic VJP graphs). */
#ifndef AF_TEST_REFGRAPH_H
#define AF_TEST_REFGRAPH_H
#include "ir/ir.h"

/* Leaves take their values from `leaf_vals[id]` when non-NULL, else from t->data
 * (constants and parameters). outs[i] receives count(out[i]) doubles (caller-owned).
 * Returns 0, or -1 when a needed leaf has no value or an op is unknown. */
int refgraph_eval(af_graph *g, double *const *leaf_vals, int nout, af_tensor *const *out, double **outs);
#endif
