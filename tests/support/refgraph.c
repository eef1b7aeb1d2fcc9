#include "support/refgraph.h"
#include "support/ref.h"

#include <stdlib.h>
#include <string.h>

int refgraph_eval(af_graph *g, double *const *leaf_vals, int nout, af_tensor *const *out, double **outs) {
    int n = g->n, rc = 0;
    bool *need = calloc((size_t)n, sizeof *need);
    double **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < nout; i++) need[out[i]->id] = true;
    for (int id = n - 1; id >= 0; id--)
        if (need[id])
            for (int k = 0; k < g->t[id]->nsrc; k++) need[g->t[id]->src[k]->id] = true;
    for (int id = 0; id < n && rc == 0; id++) {
        if (!need[id]) continue;
        af_tensor *t = g->t[id];
        int64_t cnt = af_shape_count(t->shape);
        v[id] = malloc((size_t)(cnt + 1) * sizeof(double));
        if (t->nsrc == 0) {
            if (leaf_vals && leaf_vals[id]) memcpy(v[id], leaf_vals[id], (size_t)cnt * sizeof(double));
            else if (t->data) for (int64_t i = 0; i < cnt; i++) v[id][i] = t->data[i];
            else rc = -1;
            continue;
        }
        const double *ins[64];
        for (int k = 0; k < t->nsrc && k < 64; k++) ins[k] = v[t->src[k]->id];
        rc = ref_eval(t, ins, v[id]);
    }
    for (int i = 0; i < nout && rc == 0; i++)
        memcpy(outs[i], v[out[i]->id], (size_t)af_shape_count(out[i]->shape) * sizeof(double));
    for (int id = 0; id < n; id++) free(v[id]);
    free(v);
    free(need);
    return rc;
}
