/* The engine's compiler walls and per-family numerics, as the engine backends enforce
 * them: ane_rules_validate checks a plan against a family's walls and limits;
 * ane_rules_quirks says which nodes' numerics differ on the family (the ane-sim backend
 * applies them after the CPU kernel, before fp16 rounding). */
#ifndef AF_ANE_SIM_RULES_H
#define AF_ANE_SIM_RULES_H
#include "compile/plan.h"

#include <stddef.h>

/* The widest single row a reshape may produce and feed to a concat: the verified 2-D
 * envelope. The seed saw a [1, 100352] row (784 x 128) segfault the compiler. */
#define AF_SIM_WIDE_ROW_MAX 16384

/* Per-node engine numerics (one byte per schedule index). */
enum {
    AF_QUIRK_ACC_SAT = 1u << 0,   /* matmul/conv: the wide accumulator becomes +-inf beyond AF_ANE_ACC_MAX */
    AF_QUIRK_CROP_SAT = 1u << 1,  /* A13/A14 crop DMA (last-axis begin != 0): +-inf beyond AF_ANE_CROP_MAX */
    AF_QUIRK_PRECISION = 1u << 2, /* user sub: run the near-equal precision check (cleared once reported) */
    AF_QUIRK_WGRAD_CROP = 1u << 3, /* A13/A14 conv weight gradient: width-offset rows see dy through the crop DMA */
};
#define AF_ANE_ACC_MAX 32752.0f   /* 65504 / 2, measured on M2 Pro and M5 */
#define AF_ANE_CROP_MAX 4094.0f   /* 65504 / 16: the Q.4 x16 crop-DMA range */

/* Why an engine cannot run node t (the ane and ane-sim backends' `unsupported`): a
 * CPU-only kernel has no engine form. NULL when it can. */
const char *ane_node_unsupported(const af_tensor *t);

/* Checks the plan m against the family's compiler walls and limits. On failure writes a
 * message naming the wall and its remedy to msg and returns the status. */
af_status ane_rules_validate(const compile_plan *m, af_family_id family, char *msg, size_t n);
/* The AF_QUIRK_* bits of each schedule entry for the family (malloc'd, nsched + 1
 * bytes), or NULL when out of memory. check_precision: mark user subs for the check. */
unsigned char *ane_rules_quirks(const compile_plan *m, af_family_id family, bool check_precision);
#endif
