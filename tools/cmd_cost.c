/* aneforge cost llama: the cost model's estimate of an on-device training step
 * (src/ane/cost_llama.c) for each chip and plan, beside maderix/ANE's published figures. */
#include "cli.h"
#include "cli_args.h"
#include "aneforge.h"
#include "aneforge_llama.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge cost llama [--preset NAME | --layer] [--seq S] [--batch B] [--steps N] [--json]\n\n"
               "Estimates ms per training step on M1..M5 for three plans: baked (maderix's static pipeline:\n"
               "weights baked, 72 compiles every 10 steps), pipeline (the same kernels compiled once, weights\n"
               "as inputs) and resident (everything, Adam included, on the engine). The model is calibrated on\n"
               "maderix's published Stories110M measurements (printed beside the estimates).\n\n"
               "  --preset NAME   tiny, stories15m, stories42m or stories110m (vocab 32000; default stories110m, seq 256)\n"
               "  --layer         seed 002's single-layer benchmark: one dim-768 layer at seq 512 (published: 9.3 ms on M4)\n"
               "  --seq S         tokens per window; --batch B windows per step (default 1)\n"
               "  --steps N       run length over which the pipeline's and resident plan's one compile is spread (default 1000)\n"
               "  --json          one JSON line per chip and plan\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge cost llama", fmt, a); }

/* The published figure for this chip and setting: the static pipeline's Stories110M row
 * (seq 256, batch 1), or the single layer's 9.3 ms on M4 (seq 512); `which` 0 or 1. */
static bool published(const af_llama_chip *ch, int which, double *ms) {
    if (which == 1 && !strcmp(ch->chip, "M4")) { *ms = 9.3; return true; }
    if (which == 0 && ch->published) { *ms = ch->ms_step; return true; }
    return false;
}

static void print_row(const af_llama_chip *ch, const af_llama_cost *r, int which) {
    char pub[48] = "-";
    double ms;
    if (which == 1 && published(ch, 1, &ms)) snprintf(pub, sizeof pub, "%.1f", ms);
    else if (which == 0 && published(ch, 0, &ms)) snprintf(pub, sizeof pub, "%.1f (engine %.1f)", ms, ch->ane_ms);
    printf("%-9s %-20s %8.1f + %6.1f %10.1f %10.1f\n", ch->chip, pub, r[0].step_ms, r[0].compile_ms, r[1].total_ms, r[2].total_ms);
}

int cmd_cost(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "llama")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage(stdout); return 0; }
        usage(stderr);
        return 2;
    }
    const char *preset = "stories110m";
    bool layer = false, json = false;
    long seq = 0, batch = 1, steps = 1000;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 0; }
        if (!strcmp(k, "--layer")) { layer = true; continue; }
        if (!strcmp(k, "--json")) { json = true; continue; }
        if (!v) return bad("unknown option or missing value: '%s'", k);
        i++;
        if (!strcmp(k, "--preset")) preset = v;
        else if (!strcmp(k, "--seq")) { if (cli_parse_long(v, 1, 65536, &seq)) return bad("--seq wants an integer in 1..65536, not '%s'", v); }
        else if (!strcmp(k, "--batch")) { if (cli_parse_long(v, 1, 4096, &batch)) return bad("--batch wants an integer in 1..4096, not '%s'", v); }
        else if (!strcmp(k, "--steps")) { if (cli_parse_long(v, 1, 1000000000, &steps)) return bad("--steps wants a positive integer, not '%s'", v); }
        else return bad("unknown option '%s'", k);
    }
    af_llama_config c;
    if (af_llama_preset(layer ? "stories110m" : preset, 32000, &c)) return bad("--preset: %s", af_error_message());
    if (layer) c.n_layers = 1;
    if (!seq) seq = layer ? 512 : 256;
    /* Which published setting this is, if any: 0 Stories110M at seq 256, 1 the layer at 512. */
    int which = batch != 1 ? -1 : layer ? (seq == 512 ? 1 : -1) : !strcmp(preset, "stories110m") && seq == 256 ? 0 : -1;
    if (!json) {
        if (layer) printf("one llama layer, dim %d, hidden %d, seq %ld, batch %ld (seed 002's first benchmark)\n", c.dim, c.hidden_dim, seq, batch);
        else printf("%s: dim %d, %d layers, hidden %d, vocab %d, seq %ld, batch %ld\n", preset, c.dim, c.n_layers, c.hidden_dim,
                    c.vocab_size, seq, batch);
        printf("estimated ms/step on the engine; baked = step + compiles amortised (72 every 10 steps);\n"
               "pipeline and resident compile once (spread over %ld steps)\n\n", steps);
        printf("%-9s %-20s %17s %10s %10s\n", "chip", "published static", "baked", "pipeline", "resident");
    }
    for (int i = 0; i < af_llama_chip_count(); i++) {
        af_llama_cost r[AF_LLAMA_COST_NPLANS];
        for (int p = 0; p < AF_LLAMA_COST_NPLANS; p++)
            if (af_llama_cost_estimate(&c, (int)seq, (int)batch, (af_llama_cost_plan)p, layer, i, steps, &r[p])) {
                fprintf(stderr, "aneforge cost llama: %s\n", af_error_message());
                return 1;
            }
        const af_llama_chip *ch = af_llama_chip_at(i);
        if (!json) { print_row(ch, r, which); continue; }
        char pub[32] = "null";
        double ms;
        if (published(ch, which, &ms)) snprintf(pub, sizeof pub, "%.1f", ms);
        for (int p = 0; p < AF_LLAMA_COST_NPLANS; p++)
            printf("{\"chip\":\"%s\",\"plan\":\"%s\",\"step_ms\":%.3f,\"compile_ms\":%.3f,\"total_ms\":%.3f,\"engine_ms\":%.3f,"
                   "\"host_ms\":%.3f,\"io_ms\":%.3f,\"dispatch_ms\":%.3f,\"dispatches\":%.0f,\"engine_flops\":%.0f,\"host_flops\":%.0f,"
                   "\"bytes\":%.0f,\"programs\":%d,\"published_ms\":%s}\n",
                   ch->chip, af_llama_cost_plan_name((af_llama_cost_plan)p), r[p].step_ms, r[p].compile_ms, r[p].total_ms, r[p].engine_ms,
                   r[p].host_ms, r[p].io_ms, r[p].dispatch_ms, r[p].n.dispatches, r[p].n.engine_flops, r[p].n.host_flops, r[p].n.bytes,
                   r[p].n.programs, p == 0 ? pub : "null");
    }
    return 0;
}
