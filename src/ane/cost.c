/* The cost model (cost.h). Time per step = dispatches * dispatch_us + engine flops /
 * throughput + bytes moved / bandwidth: the three terms ANEForge calibrated on M1 and
 * M5. A14 and A15 are not published; they sit on the geometric path between the two. */
#include "ane/cost.h"

#include <math.h>

static const af_ane_calibration table[] = {
    { AF_FAMILY_A13, 3.25, 9.0, 220.0, 1 },   /* M1 (ANEForge cost model) */
    { AF_FAMILY_A14, 4.55, 16.65, 174.6, 0 },  /* (M5 / M1)^(1/3) per generation */
    { AF_FAMILY_A15, 6.36, 30.81, 138.6, 0 },  /* (M5 / M1)^(2/3) */
    { AF_FAMILY_A16, 8.9, 57.0, 110.0, 1 },   /* M5 (ANEForge) */
};

const af_ane_calibration *af_ane_calibration_of(af_family_id fam) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].id == fam) return &table[i];
    return NULL;
}

double af_ane_estimate_us(af_family_id fam, const af_stats *s) {
    af_family_id f;
    if (!s || af_family_resolve(fam, &f) != AF_OK) return 0.0;
    const af_ane_calibration *c = af_ane_calibration_of(f);
    if (!c) return 0.0;
    return (double)s->dispatches * c->dispatch_us + (double)s->engine_flops / (c->tflops * 1e6) +
           (double)(s->bytes_in + s->bytes_out) / (c->gbps * 1e3);
}
