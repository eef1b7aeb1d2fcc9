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

af_status af_coreml_fp16_inputs(af_graph *g, int nin, af_tensor *const *in) {
    if (!g || nin < 0 || (nin && !in)) return ir_fail(AF_ERR_INVALID, "af_coreml_fp16_inputs: graph or inputs is NULL");
    for (int i = 0; i < nin; i++) {
        if (!in[i] || in[i]->op != IR_OP_INPUT || in[i]->g != g)
            return ir_fail(AF_ERR_INVALID, "af_coreml_fp16_inputs: in[%d] is not an input of the graph", i);
        if (in[i]->dtype != AF_F32 || (in[i]->flags & (IR_TF_PARAM | IR_TF_EXACT))) continue;
        /* coremltools' fp16 programs cast each fp32 input first; then the cast simply
         * becomes fp16 -> fp16. Anything else computes in fp32 and must stay so. */
        for (int k = 0; k < g->n; k++)
            for (int j = 0; j < g->t[k]->nsrc; j++)
                if (g->t[k]->src[j] == in[i] && g->t[k]->op != IR_OP_CAST)
                    return ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_fp16_inputs: input '%s' feeds %s in fp32 (a model converted with "
                                   "fp32 compute precision); convert it with compute_precision=ct.precision.FLOAT16 to run it "
                                   "on the engine targets", in[i]->name ? in[i]->name : "?", ir_ops[g->t[k]->op].name);
    }
    for (int i = 0; i < nin; i++)
        if (in[i]->dtype == AF_F32 && !(in[i]->flags & (IR_TF_PARAM | IR_TF_EXACT))) in[i]->dtype = AF_F16;
    return AF_OK;
}
