/* What af_compile and af_run need from the Neural Engine target layer. Declared here
 * so compile/ and cpu/ need not include src/ane (a layer above them); src/ane/
 * (family.c, sim_rules.c, sim_budget.c, guards.c, cost.c) implements it. */
#ifndef AF_COMPILE_TARGET_H
#define AF_COMPILE_TARGET_H
#include "aneforge.h"
#include <stddef.h>
#include <stdint.h>

/* Per-node ane-sim numerics, applied by the executor after the CPU kernel and before
 * the fp16 rounding (af_model.quirk holds one byte per schedule index). */
enum {
    AF_QUIRK_ACC_SAT = 1u << 0,   /* matmul/conv: the wide accumulator becomes +-inf beyond AF_ANE_ACC_MAX */
    AF_QUIRK_CROP_SAT = 1u << 1,  /* A13/A14 crop DMA (last-axis begin != 0): +-inf beyond AF_ANE_CROP_MAX */
    AF_QUIRK_PRECISION = 1u << 2, /* user sub: run the near-equal precision check (cleared once reported) */
    AF_QUIRK_WGRAD_CROP = 1u << 3, /* A13/A14 conv weight gradient: width-offset rows see dy through the crop DMA */
};
#define AF_ANE_ACC_MAX 32752.0f   /* 65504 / 2, measured on M2 Pro and M5 */
#define AF_ANE_CROP_MAX 4094.0f   /* 65504 / 16: the Q.4 x16 crop-DMA range */

/* Family resolution is public: af_family_resolve in aneforge.h. */

/* Checks the scheduled program of m (in, out, sched, family) against the family's
 * compiler walls and limits. On failure writes a message naming the wall and its
 * remedy to msg and returns the status. */
af_status af_sim_validate(const af_model *m, char *msg, size_t n);
/* Sets m->quirk for the family's numerics. */
af_status af_sim_set_quirks(af_model *m);

/* The program cache and compile budget (process-wide, thread-safe). acquire registers
 * m's program (a compile on a miss, a hit otherwise) and loads it; it fails when a miss
 * would exceed the compile budget. use reloads the program if it was evicted and marks
 * it most recently used; release drops m's hold. */
af_status af_sim_program_acquire(af_model *m, char *msg, size_t n);
void      af_sim_program_use(af_model *m);
void      af_sim_program_release(af_model *m);

/* Compiles for ane-sim through MIL: emits the subgraph to MIL text and weights, parses
 * them into a graph the returned model owns, and compiles that (opts->via_mil ignored). */
af_model *af_sim_compile_via_mil(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                                 const af_compile_opts *opts);

/* Floating-point operations one run of m performs (2*M*N*K for matmul and conv,
 * the element count for other compute ops, 0 for pure data movement). */
int64_t af_program_flops(const af_model *m);

/* Recomputes the width-offset rows of the conv weight-gradient matmul at schedule
 * entry s of m (sources ins) with its loss-scaled dy saturated past AF_ANE_CROP_MAX. */
void af_sim_wgrad_crop(const af_model *m, int s, const float *const *ins);
/* The near-equal subtraction check on schedule entry s of m, whose sources are ins. */
void af_sim_precision_check(af_model *m, int s, const float *const *ins);
#endif
