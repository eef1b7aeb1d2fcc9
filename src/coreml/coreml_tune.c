/* Fine-tuning an imported package: its constants become parameters (chosen by name
 * with a glob), are trained like any parameter, and are frozen back into constants for
 * export. */
#define _XOPEN_SOURCE 700
#include "coreml/coreml.h"
#include "ir/ir.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

int af_coreml_params(af_graph *g, const char *pattern, af_tensor **params, int max) {
    if (!g || (max > 0 && !params) || max < 0) { ir_fail(AF_ERR_INVALID, "af_coreml_params: graph or params is NULL"); return -1; }
    const char *pat = pattern && *pattern ? pattern : "*";
    int n = 0;
    char seen[300] = "";
    for (int i = 0; i < g->n; i++) {
        af_tensor *t = g->t[i];
        /* integer and bool values (shapes, axes, indices) are never weights */
        if (t->op != IR_OP_CONST || !t->data || (t->flags & IR_TF_EXACT) || !t->name || af_shape_count(t->shape) < 2) continue;
        size_t k = strlen(seen);
        if (k + strlen(t->name) + 3 < sizeof seen) snprintf(seen + k, sizeof seen - k, "%s%s", k ? ", " : "", t->name);
        if (fnmatch(pat, t->name, 0)) continue;
        if (n == max) { ir_fail(AF_ERR_INVALID, "af_coreml_params: more than %d constants match '%s'", max, pat); return -1; }
        t->op = IR_OP_INPUT; /* a parameter is an input with an fp32 master in data */
        t->dtype = AF_F32;
        t->flags |= IR_TF_PARAM;
        params[n++] = t;
    }
    if (!n) ir_fail(AF_ERR_INVALID, "af_coreml_params: no weight constant is named like '%s' (they are: %s)", pat, seen[0] ? seen : "none");
    return n ? n : -1;
}

af_status af_coreml_freeze(int n, af_tensor *const *params, const float *const *values) {
    if (n < 0 || (n && !params)) return ir_fail(AF_ERR_INVALID, "af_coreml_freeze: params is NULL");
    for (int i = 0; i < n; i++)
        if (!params[i] || !(params[i]->flags & IR_TF_PARAM) || !params[i]->data)
            return ir_fail(AF_ERR_INVALID, "af_coreml_freeze: params[%d] is not a parameter", i);
    for (int i = 0; i < n; i++) {
        if (values && values[i]) memcpy(params[i]->data, values[i], sizeof(float) * (size_t)af_shape_count(params[i]->shape));
        params[i]->op = IR_OP_CONST;
        params[i]->flags &= ~(unsigned)IR_TF_PARAM;
    }
    return AF_OK;
}
