/* The llama plans' cost model (cost_llama.h). Calibration: for each chip with a
 * published static-pipeline figure, the engine's effective rate is the baked plan's
 * engine FLOPs over the published engine milliseconds, and the host's rate is the baked
 * plan's host FLOPs over what remains of the published ms/step once the engine time, the
 * dispatches and the transfers (ANEForge's per-family overhead and bandwidth, cost.c)
 * are taken out. So the baked estimate reproduces the published Stories110M row by
 * construction; everything else (the single layer, the other plans, other models) is a
 * prediction from these rates. M2 has no published figure: its rates are the geometric
 * mean of M1's and M3's. */
#include "ane/cost_llama.h"
#include "aneforge_llama.h"
#include "ane/cost.h"
#include "ir/ir.h"

#include <math.h>

/* maderix-ane.md section 5 (issue #3, ANE_BENCHMARK_REPORT.md), midpoints of ranges. */
static const ane_llama_chip chips[] = {
    { "M1 Pro", AF_FAMILY_A13, 1, 155.5, 33.5, 8.2 },
    { "M2", AF_FAMILY_A14, 0, 0, 0, 0 },
    { "M3 Ultra", AF_FAMILY_A15, 1, 91.0, 10.0, 3.7 },
    { "M4", AF_FAMILY_A16, 1, 111.9, 10.1, 3.5 }, /* base M4 Mac mini */
    { "M4 Pro", AF_FAMILY_A16, 1, 71.0, 8.9, 3.5 },
    { "M5", AF_FAMILY_A16, 1, 110.5, 9.45, 3.3 },
};
enum { NCHIPS = sizeof chips / sizeof chips[0], BAKED_PROGRAMS = 72, BAKED_ACCUM = 10 };

int ane_llama_chip_count(void) { return NCHIPS; }
const ane_llama_chip *ane_llama_chip_at(int i) { return i >= 0 && i < NCHIPS ? &chips[i] : NULL; }

const char *ane_llama_plan_name(ane_llama_plan p) {
    static const char *const names[] = { "baked", "pipeline", "resident" };
    return (unsigned)p < ANE_LLAMA_NPLANS ? names[p] : "?";
}

/* Rows per classifier block within the family's W/H limit (plan_pipeline.c's rule). */
static int vocab_blocks(int V, af_family_id fam) { return fam == AF_FAMILY_A16 ? (V + 65535) / 65536 : (V + 16383) / 16384; }

void ane_llama_count(const af_llama_config *c, int seq, int batch, ane_llama_plan p, bool layers_only, af_family_id fam,
                     ane_llama_counts *out) {
    double D = c->dim, F = c->hidden_dim, L = c->n_layers, H = c->n_heads, V = layers_only ? 0 : c->vocab_size;
    double kvd = (double)c->n_kv_heads * (c->dim / c->n_heads), S = seq, B = batch, N = B * S;
    double lin = 2 * N * (2 * D * D + 2 * D * kvd + 3 * D * F); /* one layer's projections, one direction */
    double att_f = 4 * B * S * S * D, att_b = 10 * B * S * S * D, cls = 2 * N * D * V;
    double params = L * (2 * D * D + 2 * D * kvd + 3 * D * F + 2 * D) + (layers_only ? 0 : V * D + D);
    double norms = 10 * N * D * (2 * L + (layers_only ? 0 : 1)), ce = 6 * N * V, adam = 14 * params;
    /* fp16 activations crossing the six kernels' ports per token (llama_kernels.h's I/O). */
    double act = (D + 4 * D + 2 * kvd) + (D + 2 * D + 3 * F) + (2 * D + 4 * F) + (2 * D + 3 * kvd + 2 * H * S) +
                 (2 * H * S + 2 * D + 2 * kvd) + (2 * D + 3 * kvd + 2 * D);
    double weights = 2 * (2 * D * D + 2 * D * kvd + 3 * D * F) + 2 * D * D + 2 * D * kvd + 2 * D; /* fed per layer per step */
    int nblk = V > 0 ? vocab_blocks((int)V, fam) : 0;
    ane_llama_counts n = { 0 };
    n.engine_flops = L * (2 * lin + att_f + att_b);
    n.bytes = 2 * N * L * act;
    n.dispatches = 6 * L;
    switch (p) {
    case ANE_LLAMA_BAKED: /* classifier, loss, dW, norms backward on the host; Adam every 10 steps */
        n.host_flops = L * lin + 3 * cls + ce + norms + adam / BAKED_ACCUM + N * D;
        n.programs = 6 * c->n_layers; /* Stories110M: 72, maderix's batch */
        break;
    case ANE_LLAMA_PIPELINE: /* + the blocked classifier on the engine; weights fed every dispatch */
        n.engine_flops += 2 * cls;
        n.host_flops = L * lin + cls + ce + norms + adam + N * D;
        n.bytes += 2 * L * weights + (V > 0 ? 2 * (2 * N * V + 2 * V * D + 3 * N * D * nblk) : 0);
        n.dispatches += 2 * nblk;
        n.programs = 8;
        break;
    default: /* resident (plan_llama_resident.c): the whole step in one program, the embedding a
              * one-hot matmul both ways; only ids, targets and the loss cross */
        n.engine_flops += L * lin + 3 * cls + ce + norms + adam + (layers_only ? 0 : 4 * N * (double)c->vocab_size * D);
        n.host_flops = N * V; /* finding each target in its one-hot row */
        n.bytes = 4 * 2 * N + 2 * 2;
        n.dispatches = 1;
        n.programs = 1;
        break;
    }
    *out = n;
}

/* The rates fitted to chip i's published row (see the top of the file). */
static void fit(int i, double *eng, double *host) {
    static const af_llama_config s110 = { 768, 2048, 12, 12, 12, 32000, 1024, 1 };
    const ane_llama_chip *ch = &chips[i];
    const ane_calibration *cal = ane_calibration_of(ch->family);
    ane_llama_counts n;
    ane_llama_count(&s110, 256, 1, ANE_LLAMA_BAKED, false, ch->family, &n);
    double fixed_ms = n.dispatches * cal->dispatch_us / 1e3 + n.bytes / (cal->gbps * 1e6);
    *eng = n.engine_flops / (ch->ane_ms * 1e9);
    *host = n.host_flops / ((ch->ms_step - ch->ane_ms - fixed_ms) * 1e9);
}

void ane_llama_rates(int i, double *engine_tflops, double *host_tflops) {
    double e = 0, h = 0;
    if (i >= 0 && i < NCHIPS && chips[i].published) fit(i, &e, &h);
    else if (i >= 0 && i < NCHIPS) { /* M2: between M1 and M3 */
        double e1, h1, e3, h3;
        fit(0, &e1, &h1);
        fit(2, &e3, &h3);
        e = sqrt(e1 * e3);
        h = sqrt(h1 * h3);
    }
    if (engine_tflops) *engine_tflops = e;
    if (host_tflops) *host_tflops = h;
}

af_status ane_llama_estimate(const af_llama_config *c, int seq, int batch, ane_llama_plan p, bool layers_only, int chip,
                             int64_t run_steps, ane_llama_cost *out) {
    if (!c || !out || c->dim <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->dim % c->n_heads || c->n_layers <= 0 ||
        c->hidden_dim <= 0 || c->vocab_size <= 0 || seq <= 0 || batch <= 0 || (unsigned)p >= ANE_LLAMA_NPLANS || chip < 0 ||
        chip >= NCHIPS || run_steps < 1)
        return ir_fail(AF_ERR_INVALID, "ane_llama_estimate: bad config, seq, batch, plan, chip or run length");
    ane_llama_cost r = { 0 };
    ane_llama_count(c, seq, batch, p, layers_only, chips[chip].family, &r.n);
    double eng, host;
    ane_llama_rates(chip, &eng, &host);
    const ane_calibration *cal = ane_calibration_of(chips[chip].family);
    const ane_llama_chip *ch = &chips[chip];
    double compile_batch_s = ch->published ? ch->compile_s : sqrt(chips[0].compile_s * chips[2].compile_s);
    r.engine_ms = r.n.engine_flops / (eng * 1e9);
    r.host_ms = r.n.host_flops / (host * 1e9);
    r.io_ms = r.n.bytes / (cal->gbps * 1e6);
    r.dispatch_ms = r.n.dispatches * cal->dispatch_us / 1e3;
    r.step_ms = r.engine_ms + r.host_ms + r.io_ms + r.dispatch_ms;
    double per_program_ms = compile_batch_s * 1e3 / BAKED_PROGRAMS; /* the published batch is 72 programs */
    r.compile_ms = p == ANE_LLAMA_BAKED ? per_program_ms * r.n.programs / BAKED_ACCUM : per_program_ms * r.n.programs / (double)run_steps;
    r.total_ms = r.step_ms + r.compile_ms;
    *out = r;
    return AF_OK;
}

/* The public names (aneforge_llama.h). */
_Static_assert((int)AF_LLAMA_COST_BAKED == (int)ANE_LLAMA_BAKED && (int)AF_LLAMA_COST_PIPELINE == (int)ANE_LLAMA_PIPELINE &&
                   (int)AF_LLAMA_COST_RESIDENT == (int)ANE_LLAMA_RESIDENT && (int)AF_LLAMA_COST_NPLANS == (int)ANE_LLAMA_NPLANS,
               "the public plans are the model's");
int af_llama_chip_count(void) { return ane_llama_chip_count(); }
const af_llama_chip *af_llama_chip_at(int i) { return ane_llama_chip_at(i); }
const char *af_llama_cost_plan_name(af_llama_cost_plan p) { return ane_llama_plan_name((ane_llama_plan)p); }
af_status af_llama_cost_estimate(const af_llama_config *c, int seq, int batch, af_llama_cost_plan p, int layers_only, int chip,
                                 int64_t run_steps, af_llama_cost *out) {
    return ane_llama_estimate(c, seq, batch, (ane_llama_plan)p, layers_only != 0, chip, run_steps, out);
}
