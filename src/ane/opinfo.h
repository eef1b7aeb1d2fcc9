/* Per-op facts the Neural Engine layers contribute to `aneforge ops`. */
#ifndef AF_ANE_OPINFO_H
#define AF_ANE_OPINFO_H
/* Short text of the ane-sim target restrictions on op, or NULL when none. */
const char *ane_rules_op_restrictions(int op);
/* The MIL op(s) op lowers to ("add", "matmul", "decomposed: mul,reduce_mean,..."), or NULL. */
const char *mil_op_lowering(int op);
/* The i-th op of Core ML's MIL op set (iOS 15..18), NULL past the end; *read says
 * whether the MIL reader (`aneforge mil run`) maps it. */
#include <stdbool.h>
const char *mil_coreml_op(int i, bool *read);
#endif
