/* The engine's compiler walls and per-family numerics, as ane-sim enforces them.
 * af_sim_validate and af_sim_set_quirks (compile/target.h) are the entry points. */
#ifndef AF_ANE_SIM_RULES_H
#define AF_ANE_SIM_RULES_H
#include "compile/target.h"

/* The widest single row a reshape may produce and feed to a concat: the verified 2-D
 * envelope. The seed saw a [1, 100352] row (784 x 128) segfault the compiler. */
#define AF_SIM_WIDE_ROW_MAX 16384
#endif
