/* How each op-table row lowers to MIL, as `aneforge ops` shows it: the op table's mil
 * column (ops.def). */
#include "mil/opinfo.h"
#include "ir/ir.h"

#include <stddef.h>

const char *mil_op_lowering(int op) { return op >= 0 && op < IR_OP_COUNT ? ir_ops[op].mil : NULL; }
