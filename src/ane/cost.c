/* The cost model (cost.h). Time per step = dispatches * dispatch_us + engine flops /
 * throughput + bytes moved / bandwidth: the three terms ANEForge calibrated on M1 and
 * M5. A14 and A15 are not published; they sit on the geometric path between the two. */
#include "ane/cost.h"

#include <math.h>

/* compile_k_us: A13 so that the seed's MNIST CNN (af_net_cnn's layout) at a full batch
 * N = 1000 takes 2 minutes (its largest tensor, conv2's patches [N, 16, 9, 196], holds
 * 28.2M elements) and N = 128 about 2 s; A16 so that the same compiles in about 3 s;
 * A14 and A15 on the geometric path between them. */
static const ane_calibration table[] = {
    { AF_FAMILY_A13, 3.25, 9.0, 220.0, 1, 1.5e5 },    /* M1 (ANEForge cost model) */
    { AF_FAMILY_A14, 4.55, 16.65, 174.6, 0, 4.4e4 },  /* (M5 / M1)^(1/3) per generation */
    { AF_FAMILY_A15, 6.36, 30.81, 138.6, 0, 1.29e4 }, /* (M5 / M1)^(2/3) */
    { AF_FAMILY_A16, 8.9, 57.0, 110.0, 1, 3.8e3 },    /* M5 (ANEForge) */
};

const ane_calibration *ane_calibration_of(af_family_id fam) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].id == fam) return &table[i];
    return NULL;
}

/* The row for fam after resolving AF_FAMILY_DEFAULT, or NULL. */
static const ane_calibration *resolved(af_family_id fam) {
    af_family_id f;
    return af_family_resolve(fam, &f) == AF_OK ? ane_calibration_of(f) : NULL;
}

double af_ane_estimate_us(af_family_id fam, const af_stats *s) {
    const ane_calibration *c = s ? resolved(fam) : NULL;
    if (!c) return 0.0;
    return (double)s->dispatches * c->dispatch_us + (double)s->engine_flops / (c->tflops * 1e6) +
           (double)(s->bytes_in + s->bytes_out) / (c->gbps * 1e3);
}

int64_t ane_program_largest_tensor(const compile_plan *m, const af_tensor **which) {
    int64_t best = 0;
    const af_tensor *w = NULL;
    for (int s = 0; s < m->nsched; s++) {
        const af_tensor *t = m->sched[s];
        int64_t n = af_shape_count(t->shape);
        if (t->op != IR_OP_RESHAPE && n > best) best = n, w = t;
    }
    if (which) *which = w;
    return best;
}

double ane_compile_estimate_us(af_family_id fam, const compile_plan *m) {
    const ane_calibration *c = m ? resolved(fam) : NULL;
    if (!c) return 0.0;
    double mel = (double)ane_program_largest_tensor(m, NULL) / 1e6;
    return AF_ANE_COMPILE_BASE_US + c->compile_k_us * mel * mel;
}
