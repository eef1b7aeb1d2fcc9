/* The on-device cost model: published per-family calibrations of throughput, host <->
 * engine bandwidth and per-dispatch overhead, and a flop estimate per node. */
#ifndef AF_ANE_COST_H
#define AF_ANE_COST_H
#include "compile/plan.h"

typedef struct {
    af_family_id id;
    double tflops;       /* effective fp16 TFLOP/s */
    double gbps;         /* host <-> engine GB/s */
    double dispatch_us;  /* fixed cost of one program execution */
    int calibrated;      /* 1: measured (ANEForge); 0: interpolated between M1 and M5 */
    double compile_k_us; /* compile-time growth: us per (million elements of the largest tensor)^2 */
} ane_calibration;

/* Compiling a program costs a fixed compile + load (Path A, about 38 ms: ane-formats.md
 * section 4) plus a tiling term that grows with the largest tensor the program
 * materialises, which the batch scales (seed 000: im2col's [N, Cin*kH*kW, Hout*Wout];
 * on A13 a full batch N ~ 1000 over 28x28 takes minutes or hangs, M5 compiles it
 * fine, N <= 128 is the advice). The term is quadratic so that both hold; its
 * constants are fitted to that qualitative report, not measured. */
#define AF_ANE_COMPILE_BASE_US 38000.0
/* Estimated compile time above which the compiler is reported to take minutes or hang. */
#define AF_ANE_COMPILE_WARN_US 60e6

/* The row for a concrete family, or NULL. */
const ane_calibration *ane_calibration_of(af_family_id fam);
/* The largest tensor m's schedule materialises (reshapes are views): its element
 * count, and the node in *which when which is not NULL. */
int64_t ane_program_largest_tensor(const compile_plan *m, const af_tensor **which);
/* Estimated microseconds to compile m's program for fam (resolved if
 * AF_FAMILY_DEFAULT): AF_ANE_COMPILE_BASE_US + compile_k_us * (largest / 1e6)^2. */
double ane_compile_estimate_us(af_family_id fam, const compile_plan *m);
#endif
