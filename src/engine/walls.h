/* The engine's compiler walls, as both engine backends enforce them: ane_rules_validate
 * checks a plan against a family's walls and limits. The per-family numerics the
 * simulator applies are in src/sim/quirks.h. */
#ifndef AF_ENGINE_WALLS_H
#define AF_ENGINE_WALLS_H
#include "compile/plan.h"

#include <stddef.h>

/* The widest single row a reshape may produce and feed to a concat on the built-in
 * families (their wide_row_max): the verified 2-D envelope. The seed saw a [1, 100352]
 * row (784 x 128) segfault the compiler. */
#define AF_SIM_WIDE_ROW_MAX 16384

/* Why an engine cannot run node t (the ane and ane-sim backends' `unsupported`): a
 * CPU-only kernel has no engine form. NULL when it can. */
const char *ane_node_unsupported(const af_tensor *t);

/* Checks the plan m against the family's compiler walls and limits. On failure writes a
 * message naming the wall and its remedy to msg and returns the status. */
af_status ane_rules_validate(const compile_plan *m, af_family_id family, char *msg, size_t n);
/* Short text of the engine's restrictions on op for `aneforge ops`, or NULL when none. */
const char *ane_rules_op_restrictions(int op);
#endif
