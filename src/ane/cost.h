/* The on-device cost model: published per-family calibrations of throughput, host <->
 * engine bandwidth and per-dispatch overhead, and a flop estimate per node. */
#ifndef AF_ANE_COST_H
#define AF_ANE_COST_H
#include "ir/ir.h"

typedef struct {
    af_family_id id;
    double tflops;       /* effective fp16 TFLOP/s */
    double gbps;         /* host <-> engine GB/s */
    double dispatch_us;  /* fixed cost of one program execution */
    int calibrated;      /* 1: measured (ANEForge); 0: interpolated between M1 and M5 */
} af_ane_calibration;

/* The row for a concrete family, or NULL. */
const af_ane_calibration *af_ane_calibration_of(af_family_id fam);
#endif
