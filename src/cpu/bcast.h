/* Broadcast iteration: operands are aligned to the output shape with stride 0 on
 * broadcast axes, and adjacent axes that are contiguous for every operand are merged,
 * so most broadcasts become a few long rows. */
#ifndef AF_CPU_BCAST_H
#define AF_CPU_BCAST_H
#include "ir/ir.h"

#define CPU_BCAST_MAX_OPS 3
typedef struct {
    int rank;                                   /* >= 1 after merging */
    int nops;
    int64_t dim[AF_MAX_RANK];
    int64_t st[CPU_BCAST_MAX_OPS][AF_MAX_RANK]; /* element strides per operand */
} cpu_bcast;

void cpu_bcast_init(cpu_bcast *b, af_shape out, int nops, const af_shape *ins);
/* Offsets of each operand at the start of row `row` (rows = product of all but the last dim). */
void cpu_bcast_row(const cpu_bcast *b, int64_t row, int64_t *off);
int64_t cpu_bcast_rows(const cpu_bcast *b);
#endif
