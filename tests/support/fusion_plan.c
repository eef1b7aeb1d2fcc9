/* The fusion tests' plan (fusion_plan.h). */
#include "support/fusion_plan.h"
#include "compile/plan.h"
#include "support/check.h"

#include <stdlib.h>

cpu_fusion *test_fusion_plan(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int *nsched,
                             int *absorbed) {
    compile_plan p;
    char msg[256];
    *nsched = 0;
    *absorbed = -1;
    if (plan_build(&p, g, nin, in, nout, out, msg, sizeof msg) != AF_OK) {
        CHECK(0, "plan_build: %s", msg);
        return NULL;
    }
    cpu_fusion *f = calloc((size_t)p.nsched + 1, sizeof *f);
    CHECK(f != NULL, "fusion plan: out of memory");
    if (f) {
        *absorbed = cpu_fuse_plan(&p, f);
        *nsched = p.nsched;
    }
    plan_free(&p);
    return f;
}
