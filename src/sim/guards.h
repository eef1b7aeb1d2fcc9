/* Guards from seed 000: warnings about numerics the engine gets wrong that the library
 * can see coming. They warn; they never change what the caller asked for. */
#ifndef AF_ANE_GUARDS_H
#define AF_ANE_GUARDS_H
#include "compile/plan.h"

/* The largest loss scale at which a conv weight gradient is known to survive the
 * A13 crop-DMA saturation (|v| > 4094 -> inf): a synthetic 0.5*sum(y^2) repro breaks
 * at 512, while real normalized CNNs train alike at 128..65536. */
#define AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX 256.0f

/* Warns through the log (once per process) when fam (resolved if AF_FAMILY_DEFAULT) has the
 * crop-DMA saturation (A13 per seed 000, A14 which ane-formats.md says shares it),
 * some param is a conv weight with kernel width > 1 (IR_TF_CONV, a.kernel[1] > 1: the
 * width-offset rows of its gradient see the loss-scaled dy through the crop; ane-sim
 * models it in wgrad.c) and loss_scale exceeds AF_ANE_A13_CONV_WGRAD_LOSS_SCALE_MAX.
 * Returns 1 when the warning applies (printed now or earlier), else 0. Never caps
 * loss_scale. The trainer asks when it is created and whenever a dynamic loss scale
 * grows. */
int ane_guard_conv_loss_scale(af_family_id fam, int nparams, af_tensor *const *params, float loss_scale);
/* How many times the conv guard has printed (0 or 1 per process). */
int ane_guard_warnings(void);
/* The near-equal subtraction check on sub node t, whose sources are ins: reports on
 * the log and returns true when at least a quarter of its elements cancel (the caller
 * then stops checking that node). */
bool ane_precision_check(const af_tensor *t, const float *const *ins);

/* Called on each ane-sim compile (a program-cache miss): when m's family is one whose
 * compiler is reported to take minutes or hang on large batches (A13, seed 000) and
 * ane_compile_estimate_us (cost.h) reaches AF_ANE_COMPILE_WARN_US, counts it, warns
 * through the log (once per process) and returns 1; else 0. Never refuses the compile. */
int ane_guard_compile_time(const compile_plan *m, af_family_id family);
/* How many compiled programs the compile-time guard has applied to in this process. */
int64_t ane_compile_time_flags(void);
#endif
