/* The ane-sim restriction column of `aneforge ops`: what the engine's rules (enforced in
 * walls.c) mean for each op. Limits shared by every op, listed once under input:
 * rank <= 5, W and H <= 16384 before A16 (65536 from A16), any axis <= 65536. */
#include "engine/walls.h"
#include "ir/ir.h"
#include <stddef.h>

static const char *const text[IR_OP_COUNT] = {
    [IR_OP_INPUT] = "fp16 ports only (fp32 input rejected: declare AF_F16; params fed as fp16); rank<=5; W,H<=16384 (65536 on A16); any axis<=65536",
    [IR_OP_CONST] = "baked as fp16; any axis<=65536",
    [IR_OP_SUB] = "user sub of near-equal values flagged at run time (precision check; vouched kernels skip it)",
    [IR_OP_MUL] = "reduce_sum/mean output * zero const: reduce*0 fusion wall (use (t-t)+c)",
    [IR_OP_MULS] = "reduce_sum/mean output * 0: reduce*0 fusion wall (use (t-t)+c)",
    [IR_OP_MATMUL_W] = "K<=16384 (65536 on A16); accumulates wide, +-inf beyond +-32752",
    [IR_OP_MATMUL] = "K<=16384 (65536 on A16); accumulates wide, +-inf beyond +-32752; A13/A14 conv weight gradient: width-offset (v>0) rows see loss-scaled dy through the crop DMA (|dy|>4094 -> +-inf)",
    [IR_OP_REDUCE_SUM] = "accumulates in fp16 (use x @ ones for long sums); *0 of its output: fusion wall",
    [IR_OP_REDUCE_MEAN] = "*0 of its output: reduce*0 fusion wall",
    [IR_OP_RESHAPE] = "to one row wider than 16384 feeding concat: wide-row wall (stack on axis 0)",
    [IR_OP_SLICE_BY_SIZE] = "A13/A14: last-axis begin != 0 saturates |v|>4094 to +-inf (crop DMA)",
    [IR_OP_CONCAT] = "of a reshaped single wide row (>16384): wide-row wall",
    [IR_OP_SPLIT] = "A13/A14: parts at a last-axis offset != 0 saturate |v|>4094 to +-inf (crop DMA)",
    [IR_OP_CONV] = "weight must be const (else af_conv_param+af_conv2d); kW<=13 on A13, 15 later; +-inf beyond +-32752",
    [IR_OP_CONV_TRANSPOSE] = "weight must be const; stride 1 only; kW<=13 on A13, 15 later; +-inf beyond +-32752",
    [IR_OP_EMBEDDING] = "ids come through fp16 ports: a fed-id table above 2049 rows is rejected (fp16 id limit)",
    [IR_OP_EMBEDDING_GRAD] = "rejected: the engine has no scatter (use one_hot(ids)^T @ dy, or the host)",
    [IR_OP_CAST] = "fp16 compute only: an fp32 cast reaching an output is rejected",
    /* bridge ops: rank, rearrange, geometry, normalization, einsum (bridge_gates.c) */
    [IR_OP_SORT] = "a net.plist segment of its own; W<=2048 (fp16 indices)",
    [IR_OP_TOPK] = "a net.plist segment of its own; k=3 and k=4 rejected; W<=2048 (fp16 indices)",
    [IR_OP_ARGMINMAX] = "a net.plist segment of its own; indexed H*W or C<=2048 (fp16 indices)",
    [IR_OP_GLOBAL_ARGMINMAX] = "a net.plist segment of its own; axis W, H or C; its extent<=2048 (fp16 indices)",
    [IR_OP_PIXEL_SHUFFLE] = "a net.plist segment of its own; batch 1 only",
    [IR_OP_PIXEL_UNSHUFFLE] = "a net.plist segment of its own; batch 1 only",
    [IR_OP_CHANNEL_TO_SPACE] = "a net.plist segment of its own; batch 1 only",
    [IR_OP_SPACE_TO_CHANNEL] = "a net.plist segment of its own; batch 1 only",
    [IR_OP_SPACE_TO_BATCH] = "a net.plist segment of its own; batch 1 only",
    [IR_OP_BATCH_TO_SPACE] = "a net.plist segment of its own; batch 1 only (input batch = fy*fx)",
    [IR_OP_CROSS_PRODUCT] = "a net.plist segment of its own",
    [IR_OP_CROSS_CORRELATION] = "a net.plist segment of its own",
    [IR_OP_COST_VOLUME] = "a net.plist segment of its own",
    [IR_OP_FPS] = "a net.plist segment of its own; L2 only; k<=1024, N<=8192",
    [IR_OP_RADIUS_SEARCH] = "a net.plist segment of its own; membership written as uint8",
    [IR_OP_DYNAMIC_SLICE] = "a net.plist segment of its own; only size 2 along the last axis of extent 4",
    [IR_OP_LRN] = "a net.plist segment of its own; C<=15 (use local_response_norm beyond)",
    [IR_OP_MINMAX_NORM] = "a net.plist segment of its own; W or H only",
    [IR_OP_SCALED_ELEMENTWISE] = "a net.plist segment of its own; Add, Min, Max (Sub and Mult refused)",
    [IR_OP_EINSUM] = "the one on-engine verified equation nchw,nwhu->nchu (af_einsum decomposes the rest)",
};

const char *ane_rules_op_restrictions(int op) { return op >= 0 && op < IR_OP_COUNT ? text[op] : NULL; }
