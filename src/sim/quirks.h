/* The family's numerics that differ from an fp16 CPU kernel, as ane-sim reproduces
 * them: ane_rules_quirks marks the nodes, the backend applies the marks after each
 * CPU kernel, before fp16 rounding (ane-formats.md section 6). */
#ifndef AF_SIM_QUIRKS_H
#define AF_SIM_QUIRKS_H
#include "compile/plan.h"

#include <stdbool.h>

/* Per-node engine numerics (one byte per schedule index). */
enum {
    AF_QUIRK_ACC_SAT = 1u << 0,   /* matmul/conv: the wide accumulator becomes +-inf beyond the family's matmul_overflow */
    AF_QUIRK_CROP_SAT = 1u << 1,  /* A13/A14 crop DMA (last-axis begin != 0): +-inf beyond AF_ANE_CROP_MAX */
    AF_QUIRK_PRECISION = 1u << 2, /* user sub: run the near-equal precision check (cleared once reported) */
    AF_QUIRK_WGRAD_CROP = 1u << 3, /* A13/A14 conv weight gradient: width-offset rows see dy through the crop DMA */
};
#define AF_ANE_ACC_MAX 32752.0f   /* 65504 / 2, measured on M2 Pro and M5: the built-in families' matmul_overflow */
#define AF_ANE_CROP_MAX 4094.0f   /* 65504 / 16: the Q.4 x16 crop-DMA range */

/* The AF_QUIRK_* bits of each schedule entry for the family (malloc'd, nsched + 1
 * bytes), or NULL when out of memory. check_precision: mark user subs for the check. */
unsigned char *ane_rules_quirks(const compile_plan *m, af_family_id family, bool check_precision);
#endif
