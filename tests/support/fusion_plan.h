/* The CPU executor's fusion plan for a graph's outputs, for the fusion tests. */
#ifndef AF_TEST_FUSION_PLAN_H
#define AF_TEST_FUSION_PLAN_H
#include "aneforge.h"
#include "cpu/fuse.h"

/* plan_build, then cpu_fuse_plan: the fusion array (*nsched entries; free() it) and the
 * number of nodes absorbed in *absorbed. NULL when the plan cannot be built or the array
 * allocated (a failed CHECK says which); *nsched and *absorbed are then 0 and -1. */
cpu_fusion *test_fusion_plan(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int *nsched,
                             int *absorbed);
#endif
