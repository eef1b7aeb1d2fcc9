/* Per-op facts the MIL layer contributes to `aneforge ops`. */
#ifndef AF_MIL_OPINFO_H
#define AF_MIL_OPINFO_H
/* The MIL op(s) op lowers to ("add", "matmul", "decomposed: mul,reduce_mean,..."), or NULL. */
const char *mil_op_lowering(int op);
/* The i-th op of Core ML's MIL op set (iOS 15..18), NULL past the end; *read says
 * whether the MIL reader (`aneforge mil run`) maps it. */
#include <stdbool.h>
const char *mil_coreml_op(int i, bool *read);
#endif
