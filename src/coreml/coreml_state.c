/* Core ML states in the model description (iOS 18 / macOS 15, specification version 9):
 * a function argument of type state<tensor<fp16, [...]>> is described by
 * ModelDescription.state(13), a FeatureDescription whose FeatureType is
 * stateType(8): StateFeatureType { arrayType(1): ArrayFeatureType }, not by an input. */
#include "coreml/coreml.h"

#include <stdio.h>

bool coreml_state_feature(pb_buf *desc, const char *name, const mil_type *t, char *why, size_t n) {
    if (t->dt != MIL_FP16 || t->kind != MIL_TY_TENSOR || !t->rank) {
        snprintf(why, n, "state %s is %s; Core ML states are fp16 tensors", name, mil_dtype_name(t->dt));
        return false;
    }
    pb_buf fd = { 0 }, ft = { 0 }, sft = { 0 }, at = { 0 }, shape = { 0 };
    pb_str(&fd, 1, name);
    for (int i = 0; i < t->rank; i++) pb_varint(&shape, (uint64_t)t->dim[i]);
    pb_msg(&at, 1, &shape);
    pb_uint(&at, 2, (uint64_t)coreml_array_dtype(t->dt));
    pb_msg(&sft, 1, &at);
    pb_msg(&ft, 8, &sft);
    pb_msg(&fd, 3, &ft);
    pb_msg(desc, 13, &fd);
    return true;
}

bool coreml_states_check(const mil_func *f, int ios, char *why, size_t n) {
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i].type.state && ios < 18) {
            snprintf(why, n, "argument %s is a state, which needs deployment target iOS 18 / macOS 15 (specification "
                     "version 9); this export targets iOS %d", f->params[i].name, ios);
            return false;
        }
    return true;
}
