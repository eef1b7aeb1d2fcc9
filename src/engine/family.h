/* Neural Engine families: their documented limits and numerics, target-spec parsing
 * ("ane-sim:m1", ANEFORGE_TARGET) and hardware detection. Sources: seed 000 and
 * ane-formats.md §4.4 and §6. */
#ifndef AF_ANE_FAMILY_H
#define AF_ANE_FAMILY_H
#include "aneforge.h"
#include <stdint.h>

typedef struct {
    af_family_id id;
    const char *name;        /* "A13" */
    const char *chips;       /* "M1" */
    int64_t max_spatial;     /* W, H and matmul K: 16384 before A16, 65536 from A16 */
    int64_t max_axis;        /* channels and every other axis */
    int max_rank;            /* NCHW plus depth */
    int max_kernel_w;        /* conv kernel width: 13 on A13, 15 later */
    int crop_dma_saturates;  /* slice with a last-axis begin != 0 saturates past 4094, and so do
                              * conv weight gradients (A13 per seed 000, A14 per ane-formats.md) */
    int compile_hangs_on_large_batch; /* large-batch programs compile for minutes or hang (A13, seed 000) */
} ane_family_info;

/* The row for a concrete family, or NULL (AF_FAMILY_DEFAULT and unknown values). */
const ane_family_info *ane_family_info_of(af_family_id fam);
/* "m1".."m5" or "a13".."a16", case-insensitive. */
af_status ane_family_parse(const char *s, af_family_id *out);
/* The family of the machine we run on (Apple Silicon), or AF_FAMILY_DEFAULT elsewhere. */
af_family_id ane_family_detect(void);
#endif
