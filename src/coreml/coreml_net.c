/* af_coreml_export_net: a model given as code, with its trained weights baked in. */
#include "coreml/coreml.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_MAX_PARAMS 4096

af_status af_coreml_export_net(const af_net *net, int batch, const float *const *weights, const af_coreml_opts *o,
                               const char *path) {
    if (!net || !net->make_params || !net->forward) return ir_fail(AF_ERR_INVALID, "af_coreml_export_net: net or its functions are NULL");
    if (batch < 1) return ir_fail(AF_ERR_INVALID, "af_coreml_export_net: batch %d must be at least 1", batch);
    if (net->sample.rank < 1 || net->sample.rank >= AF_MAX_RANK)
        return ir_fail(AF_ERR_INVALID, "af_coreml_export_net: the net's sample shape has rank %d (want 1..%d)", net->sample.rank, AF_MAX_RANK - 1);
    af_graph *g = af_graph_new();
    af_tensor **params = calloc(NET_MAX_PARAMS, sizeof *params), **w = calloc(NET_MAX_PARAMS, sizeof *w);
    af_status st = AF_OK;
    if (!g || !params || !w) st = ir_fail(AF_ERR_NOMEM, "af_coreml_export_net: out of memory");
    int n = st ? -1 : net->make_params(net->ctx, g, params, NET_MAX_PARAMS);
    if (!st && n < 0) st = ir_fail(AF_ERR_INVALID, "af_coreml_export_net: the net's make_params failed: %s", af_error_message());
    for (int i = 0; !st && i < n; i++) {
        w[i] = params[i];
        if (!weights) continue;
        if (!weights[i]) { st = ir_fail(AF_ERR_INVALID, "af_coreml_export_net: weights[%d] is NULL", i); break; }
        /* the trained values become the parameters' masters, which the emitter bakes
         * (a conv weight must stay an af_conv_param, so no fresh constant) */
        if (!params[i]->data) { st = ir_fail(AF_ERR_INVALID, "af_coreml_export_net: param %d holds no values", i); break; }
        memcpy(params[i]->data, weights[i], sizeof(float) * (size_t)af_shape_count(params[i]->shape));
    }
    af_shape xs = { .rank = net->sample.rank + 1 };
    xs.dim[0] = batch;
    for (int i = 0; i < net->sample.rank; i++) xs.dim[i + 1] = net->sample.dim[i];
    af_tensor *x = st ? NULL : af_input(g, "input", AF_F16, xs);
    af_tensor *y = x ? net->forward(net->ctx, x, w) : NULL;
    /* a classifier's classify op takes probabilities: a softmax over the logits */
    if (y && o && o->nclasses > 0) y = af_softmax(y, y->shape.rank - 1);
    if (!st && (!y || g->error)) st = ir_fail(AF_ERR_INVALID, "af_coreml_export_net: building the forward failed: %s", g->error ? g->error : af_error_message());
    /* With the forward built, the parameters are frozen into constants: a package holds
     * weights, not trainable inputs (the emitter bakes constants only). */
    for (int i = 0; !st && i < n; i++) {
        params[i]->op = IR_OP_CONST;
        params[i]->flags &= ~(unsigned)IR_TF_PARAM;
    }
    if (!st) {
        char *name = ir_strdup("output"); /* the output feature's name */
        if (!name) st = ir_fail(AF_ERR_NOMEM, "af_coreml_export_net: out of memory");
        else {
            free(y->name);
            y->name = name;
            st = af_coreml_export(g, 1, &x, 1, &y, o, path);
        }
    }
    free(params);
    free(w);
    af_graph_free(g);
    return st;
}
