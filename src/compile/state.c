/* Resident state: inputs whose value lives in the model between runs, refreshed from
 * an output at the end of every run (the engine's output-to-input buffer aliasing). */
#include "compile/model.h"
#include "ir/fp16.h"

#include <stdlib.h>
#include <string.h>

static af_status check_input(const af_model *m, int in_index, const char *fn) {
    if (!m) return af_fail(AF_ERR_INVALID, "%s: model is NULL", fn);
    if (in_index < 0 || in_index >= m->nin)
        return af_fail(AF_ERR_INVALID, "%s: input index %d is out of range (the model has %d inputs)", fn, in_index, m->nin);
    return AF_OK;
}

af_status af_model_bind_state(af_model *m, int in_index, int out_index, const float *init) {
    af_status st = check_input(m, in_index, "af_model_bind_state");
    if (st) return st;
    if (out_index < 0 || out_index >= m->nout)
        return af_fail(AF_ERR_INVALID, "af_model_bind_state: output index %d is out of range (the model has %d outputs)", out_index, m->nout);
    af_tensor *in = m->in[in_index], *out = m->out[out_index];
    if (!af_shape_eq(in->shape, out->shape)) {
        char a[100], b[100];
        af_shape_str(in->shape, a, sizeof a);
        af_shape_str(out->shape, b, sizeof b);
        return af_fail(AF_ERR_SHAPE, "af_model_bind_state: input '%s' %s and output %d %s differ in shape", af_tensor_name(in), a, out_index, b);
    }
    if (!m->state_out) {
        m->state_out = malloc(sizeof *m->state_out * (size_t)(m->nin + 1));
        if (!m->state_out) return af_fail(AF_ERR_NOMEM, "af_model_bind_state: out of memory");
        for (int i = 0; i < m->nin; i++) m->state_out[i] = -1;
    }
    m->state_out[in_index] = out_index;
    return init ? af_model_write_state(m, in_index, init) : AF_OK;
}

af_status af_model_write_state(af_model *m, int in_index, const float *src) {
    af_status st = check_input(m, in_index, "af_model_write_state");
    if (st) return st;
    if (!src) return af_fail(AF_ERR_INVALID, "af_model_write_state: src is NULL");
    af_tensor *t = m->in[in_index];
    float *slot = m->arena + m->offset[t->id];
    int64_t n = af_shape_count(t->shape);
    memcpy(slot, src, (size_t)n * sizeof(float));
    if (m->fp16 || t->dtype == AF_F16) af_round_f16_array(slot, n); /* the engine holds fp16 */
    return AF_OK;
}

af_status af_model_read_state(const af_model *m, int in_index, float *dst) {
    af_status st = check_input(m, in_index, "af_model_read_state");
    if (st) return st;
    if (!dst) return af_fail(AF_ERR_INVALID, "af_model_read_state: dst is NULL");
    af_tensor *t = m->in[in_index];
    memcpy(dst, m->arena + m->offset[t->id], (size_t)af_shape_count(t->shape) * sizeof(float));
    return AF_OK;
}
