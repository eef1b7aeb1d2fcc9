#include "support/milrun.h"
#include "support/check.h"

void test_mil_run(const mil_module *m, const float *const *in, float **out) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *model = af_compile(m->g, m->nin, m->in, m->nout, m->out, &o);
    CHECK(model != NULL, "compile: %s", af_error_message());
    if (!model) return;
    af_buffer bi[4], bo[4];
    CHECK(m->nin <= 4 && m->nout <= 4, "at most 4 inputs and outputs");
    for (int i = 0; i < m->nin && i < 4; i++) bi[i] = AF_BUF_F32((float *)in[i], af_shape_count(m->in[i]->shape));
    for (int i = 0; i < m->nout && i < 4; i++) bo[i] = AF_BUF_F32(out[i], af_shape_count(m->out[i]->shape));
    if (m->nin <= 4 && m->nout <= 4) CHECK(af_run(model, bi, bo) == AF_OK, "run: %s", af_error_message());
    af_model_free(model);
}
