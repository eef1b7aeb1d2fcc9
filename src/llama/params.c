/* The trainable model's parameters <-> llama2.c's weight array: af_llama's params are
 * llama2.c's tensors one per layer, in its order, so a model file initialises training
 * and trained values export with af_llama_save. Here (above src/nn) because it reads
 * the weight layout of src/llama. */
#include "ir/ir.h"
#include "aneforge_llama.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Param i in af_llama's order: which tensor and layer. */
static void param_slot(const af_llama_config *c, int i, af_llama_tensor *t, int *layer) {
    int L = c->n_layers;
    if (i == 0) { *t = AF_LLAMA_TOKEN_EMBEDDING; *layer = 0; }
    else if (i <= 9 * L) { *t = (af_llama_tensor)(AF_LLAMA_RMS_ATT + (i - 1) / L); *layer = (i - 1) % L; }
    else if (i == 9 * L + 1) { *t = AF_LLAMA_RMS_FINAL; *layer = 0; }
    else { *t = AF_LLAMA_CLASSIFIER; *layer = 0; }
}

af_status af_llama_param_at(const af_llama_config *c, int i, int64_t *offset, af_shape *shape, const char **name) {
    char why[256];
    if (!c || llama_config_problem(c, why, sizeof why))
        return ir_fail(AF_ERR_INVALID, "af_llama_param_at: %s", c ? why : "config is NULL");
    int n = af_llama_param_count(c);
    if (i < 0 || i >= n) return ir_fail(AF_ERR_INVALID, "af_llama_param_at: param %d (the model has %d)", i, n);
    af_llama_tensor t;
    int layer, rows, cols;
    param_slot(c, i, &t, &layer);
    af_status st = af_llama_tensor_at(c, t, layer, offset, &rows, &cols);
    if (st != AF_OK) return st;
    bool norm = t == AF_LLAMA_RMS_ATT || t == AF_LLAMA_RMS_FFN || t == AF_LLAMA_RMS_FINAL;
    if (shape) *shape = norm ? AF_SHAPE((int64_t)rows * cols) : AF_SHAPE(rows, cols);
    if (name) *name = af_llama_tensor_name(t);
    return AF_OK;
}

int af_llama_params_new(af_graph *g, const af_llama_weights *w, af_tensor **params, int max) {
    if (!g || !w || !params) { ir_fail(AF_ERR_INVALID, "af_llama_params_new: graph, weights and params must not be NULL"); return -1; }
    int n = af_llama_param_count(&w->cfg);
    if (n < 0 || n > max) {
        ir_fail(AF_ERR_INVALID, "af_llama_params_new: room for %d params, the model needs %d", max, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int64_t off;
        af_shape s;
        const char *name;
        af_llama_tensor t;
        int layer;
        if (af_llama_param_at(&w->cfg, i, &off, &s, &name) != AF_OK) return -1;
        param_slot(&w->cfg, i, &t, &layer);
        char full[64];
        if (t >= AF_LLAMA_RMS_ATT && t <= AF_LLAMA_W3) snprintf(full, sizeof full, "layers.%d.%s", layer, name);
        else snprintf(full, sizeof full, "%s", name);
        if (!(params[i] = af_parameter(g, full, s, w->data + off))) return -1;
    }
    return n;
}

af_status af_llama_weights_set_param(af_llama_weights *w, int i, const float *values) {
    if (!w || !values) return ir_fail(AF_ERR_INVALID, "af_llama_weights_set_param: weights and values must not be NULL");
    int64_t off;
    af_shape s;
    af_status st = af_llama_param_at(&w->cfg, i, &off, &s, NULL);
    if (st != AF_OK) return st;
    memcpy(w->data + off, values, (size_t)af_shape_count(s) * sizeof(float));
    return AF_OK;
}

af_status af_llama_weights_from_params(af_llama_weights *w, af_tensor *const *params, int n) {
    if (!w || !params) return ir_fail(AF_ERR_INVALID, "af_llama_weights_from_params: weights and params must not be NULL");
    int need = af_llama_param_count(&w->cfg);
    if (n != need) return ir_fail(AF_ERR_INVALID, "af_llama_weights_from_params: %d params, the model has %d", n, need);
    for (int i = 0; i < n; i++) {
        int64_t off;
        af_shape s;
        if (af_llama_param_at(&w->cfg, i, &off, &s, NULL) != AF_OK) return AF_ERR_INVALID;
        float *v = params[i] ? af_tensor_value(params[i]) : NULL;
        af_shape ps = params[i] ? af_tensor_shape(params[i]) : (af_shape){ 0 };
        if (!v || af_shape_count(ps) != af_shape_count(s))
            return ir_fail(AF_ERR_INVALID, "af_llama_weights_from_params: param %d is not a parameter of the config's shape", i);
        memcpy(w->data + off, v, (size_t)af_shape_count(s) * sizeof(float));
    }
    return AF_OK;
}
