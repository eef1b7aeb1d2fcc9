/* What a llama2.c-architecture training step costs on each chip under three plans,
 * counted from the config and calibrated on maderix/ANE's published measurements
 * (../shared/reference/maderix-ane.md section 5):
 *   baked     maderix's static pipeline: six kernels per layer with the weights baked
 *             in, 72 compiles and an exec() restart every 10 accumulation steps; the
 *             classifier, loss, dW, RMSNorm backward and Adam on the host
 *   pipeline  the same kernels compiled once with weights as inputs (ANEForge's
 *             `pipeline` plan; the final norm and the blocked classifier on the engine)
 *   resident  everything on the engine, Adam included, parameters and moments resident,
 *             one program per step (ANEForge's `resident` plan, seed 000)
 * Per step: dispatches x per-dispatch overhead + engine FLOPs / the chip's effective
 * kernel rate + host FLOPs / its host rate + bytes / host<->engine bandwidth, plus
 * compiles amortised over the steps between them. */
#ifndef AF_ANE_COST_LLAMA_H
#define AF_ANE_COST_LLAMA_H
#include "aneforge.h"
#include "aneforge_llama.h"
#include "aneforge_llama.h"

#include <stdbool.h>

typedef enum { ANE_LLAMA_BAKED, ANE_LLAMA_PIPELINE, ANE_LLAMA_RESIDENT, ANE_LLAMA_NPLANS } ane_llama_plan;

/* The chip table, counts and cost are the public types (aneforge_llama.h). */
typedef af_llama_chip ane_llama_chip;
typedef af_llama_counts ane_llama_counts;
typedef af_llama_cost ane_llama_cost;

int ane_llama_chip_count(void);
const ane_llama_chip *ane_llama_chip_at(int i);
const char *ane_llama_plan_name(ane_llama_plan p); /* "baked", "pipeline", "resident" */
/* The counts of one step under plan p on family fam (its W/H limit sets the classifier's
 * blocks). layers_only: a bare stack of layers (seed 002's first single-layer benchmark),
 * without embedding, final norm or classifier. */
void ane_llama_count(const af_llama_config *c, int seq, int batch, ane_llama_plan p, bool layers_only, af_family_id fam,
                     ane_llama_counts *out);
/* The estimate for chip i; run_steps amortises the one-time compiles of the pipeline and
 * resident plans. Fails for a bad config or chip. */
af_status ane_llama_estimate(const af_llama_config *c, int seq, int batch, ane_llama_plan p, bool layers_only, int chip,
                             int64_t run_steps, ane_llama_cost *out);
/* The chip's fitted rates (TFLOP/s in engine kernels and on the host). */
void ane_llama_rates(int chip, double *engine_tflops, double *host_tflops);
#endif
