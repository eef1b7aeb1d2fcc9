/* What the MIL layer tells `aneforge ops`: how each op-table row lowers to MIL (the op
 * table's mil column, ops.def) and which of Core ML's ops the reader maps. */
#include "mil/opinfo.h"
#include "mil/mil_ast.h"
#include "ir/ir.h"

#include <stddef.h>
#include <string.h>

const char *mil_op_lowering(int op) { return op >= 0 && op < IR_OP_COUNT ? ir_ops[op].mil : NULL; }

/* Whether the reader maps it is the mapper's word (mil_op_supported); const is read by
 * the parser itself. */
const char *mil_coreml_op(int i, bool *read) {
    const char *name = NULL;
    for (int k = 0; mil_coreml_ops[k] && !name; k++)
        if (k == i) name = mil_coreml_ops[k];
    if (name && read) *read = mil_op_supported(name) || !strcmp(name, "const");
    return name;
}
