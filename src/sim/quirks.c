/* Which nodes' numerics differ on the family: the wide accumulator's and the crop
 * DMA's saturation, the conv weight gradient's crop quirk, and the user subtractions
 * the precision check watches. */
#include "sim/quirks.h"
#include "engine/family.h"
#include "sim/wgrad.h"

#include <stdlib.h>

unsigned char *ane_rules_quirks(const compile_plan *m, af_family_id family, bool prec) {
    const ane_family_info *fi = ane_family_info_of(family);
    unsigned char *quirk = calloc((size_t)m->nsched + 1, 1);
    if (!fi || !quirk) { free(quirk); return NULL; }
    for (int s = 0; s < m->nsched; s++) {
        const af_tensor *t = m->sched[s];
        int last = t->src && t->nsrc ? t->src[0]->shape.rank - 1 : -1;
        unsigned q = 0;
        switch (t->op) {
        case IR_OP_MATMUL:
            q = AF_QUIRK_ACC_SAT;
            if (fi->crop_dma_saturates && ane_wgrad_operand(t) >= 0) q |= AF_QUIRK_WGRAD_CROP;
            break;
        case IR_OP_MATMUL_W: case IR_OP_CONV: case IR_OP_CONV_TRANSPOSE: q = AF_QUIRK_ACC_SAT; break;
        case IR_OP_SLICE_BY_SIZE:
            if (fi->crop_dma_saturates && last >= 0 && t->a.ints[last] != 0) q = AF_QUIRK_CROP_SAT;
            break;
        case IR_OP_SPLIT:
            if (fi->crop_dma_saturates && t->a.axis == last && t->a.ints[0] != 0) q = AF_QUIRK_CROP_SAT;
            break;
        case IR_OP_SUB:
            if (prec && !(t->flags & IR_TF_VOUCHED)) q = AF_QUIRK_PRECISION;
            break;
        default: break; /* every other op has none: a quirk is opt-in per op (test_sim_numerics) */
        }
        quirk[s] = (unsigned char)q;
    }
    return quirk;
}
