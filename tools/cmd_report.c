/* aneforge report: training logs (train --log JSON lines) as one self-contained HTML
 * page: loss, accuracy or perplexity, learning rate and throughput curves with several
 * runs overlaid, time per step by phase, a table of each run's configuration and final
 * figures, and the latest samples. Inline SVG and CSS only: no script, no network. */
#include "cli.h"
#include "cli_args.h"
#include "cli_out.h"
#include "dash_plot.h"
#include "report_svg.h"
#include "aneforge.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 32

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge report run.jsonl [[--name NAME] more.jsonl ...] -o|--out report.html [--title TEXT]\n\n"
            "Writes one HTML file (inline SVG, no scripts, nothing fetched) with the curves of\n"
            "every log overlaid, a table of each run's configuration and final figures, and the\n"
            "samples. A run is named after its file unless --name NAME comes before it. Each log\n"
            "must be a regular file of at most 1 GiB; lines over 1 MiB are skipped (unreadable).\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge report", fmt, a); }

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}.chart{margin:0;background:#fff;border:1px solid #ddd;padding:6px}"
    "figcaption{font-size:12px;max-width:660px}.key{margin-right:14px;white-space:nowrap}.key svg{vertical-align:middle;margin-right:4px}"
    "svg text{font:12px system-ui,sans-serif;fill:#333}svg .title{font-weight:600;font-size:14px}"
    "svg .ylabel{text-anchor:end}svg .xlabel{text-anchor:middle}svg .axislabel{text-anchor:middle;fill:#555}"
    "svg .grid{stroke:#eee}svg .axis,svg .xtick,svg .ytick{stroke:#888}"
    "table{border-collapse:collapse;background:#fff;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}"
    "th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}.swatch{display:inline-block;width:10px;height:10px;margin-right:6px}"
    "pre{background:#fff;border:1px solid #ddd;padding:8px;white-space:pre-wrap;max-width:1100px}";

/* A number from the latest record that has it (step, eval, end, header order given). */
static double pick(const jl_line *const *recs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (recs[i]->n && jl_has_num(recs[i], key)) return jl_num(recs[i], key, NAN);
    return NAN;
}

static void cell_num(FILE *f, double v, const char *fmt) {
    fputs("<td>", f);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("&ndash;", f);
    fputs("</td>", f);
}

static void cell_str(FILE *f, const char *s) {
    fputs("<td>", f);
    if (s && *s) html_escape(f, s);
    else fputs("&ndash;", f);
    fputs("</td>", f);
}

static double last_of(const dash_series *s) { return s->n ? s->y[s->n - 1] : NAN; }

static void table(FILE *f, dash_run *runs, int n) {
    fputs("<h2>Runs</h2>\n<table><tr><th>run</th><th>model</th><th>data</th><th>plan</th><th>target</th><th>precision</th>"
          "<th>optimizer</th><th>batch</th><th>lr</th><th>steps</th><th>train loss</th><th>val loss</th><th>accuracy</th>"
          "<th>val ppl</th><th>throughput /s</th><th>ms/step</th><th>est. ms/step M1</th><th>est. ms/step M5</th>"
          "<th>dispatches/step</th><th>compiles</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        dash_run *r = &runs[i];
        const jl_line *h = &r->header, *recs[] = { &r->step, &r->eval, &r->end, &r->header };
        char target[96];
        const char *fam = jl_str(h, "family");
        snprintf(target, sizeof target, "%s%s%s", jl_str(h, "target") ? jl_str(h, "target") : "", fam && *fam ? ":" : "",
                 fam && *fam ? fam : "");
        fprintf(f, "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>", report_color(i));
        html_escape(f, r->name);
        if (jl_num(h, "resumed", 0) == 1) fputs(" (resumed)", f); /* its curves join the earlier part's */
        fputs("</td>", f);
        cell_str(f, jl_str(h, "model"));
        cell_str(f, jl_str(h, "data"));
        cell_str(f, jl_str(h, "plan"));
        cell_str(f, target);
        cell_str(f, jl_str(h, "precision"));
        cell_str(f, jl_str(h, "optimizer"));
        cell_num(f, jl_num(h, "batch", NAN), "%.0f");
        cell_num(f, jl_num(h, "lr", NAN), "%g");
        cell_num(f, pick(recs, 1, "step"), "%.0f");
        cell_num(f, last_of(&r->s[DS_LOSS]), "%.4f");
        cell_num(f, last_of(&r->s[DS_VAL_LOSS]), "%.4f");
        double acc = last_of(&r->s[DS_VAL_ACC]);
        fputs("<td>", f);
        if (isfinite(acc)) fprintf(f, "%.2f%%", 100 * acc);
        else fputs("&ndash;", f);
        fputs("</td>", f);
        cell_num(f, last_of(&r->s[DS_VAL_PPL]), "%.2f");
        cell_num(f, last_of(&r->s[DS_SPEED]), r->tokens ? "%.0f tokens" : "%.0f samples");
        cell_num(f, pick(recs, 1, "ms_step"), "%.3f");
        cell_num(f, pick(recs, 1, "est_ms_m1"), "%.3f");
        cell_num(f, pick(recs, 1, "est_ms_m5"), "%.3f");
        double steps = pick(recs, 1, "step"), disp = pick(recs, 1, "dispatches");
        cell_num(f, steps > 0 ? disp / steps : NAN, "%.2f");
        const jl_line *end_first[] = { &r->end, &r->step };
        double used = pick(end_first, 2, "compiles"), limit = jl_num(h, "compile_limit", NAN);
        fputs("<td>", f);
        if (isfinite(used) && isfinite(limit)) fprintf(f, "%.0f of %.0f", used, limit);
        else if (isfinite(used)) fprintf(f, "%.0f", used);
        else fputs("&ndash;", f);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Mean ms per step by phase over a run's step lines, as one stacked bar per run. */
static void phase_chart(FILE *f, dash_run *runs, int n) {
    static const char *const keys[] = { "ms_data", "ms_fwd_bwd", "ms_optimizer", "ms_compile", "ms_transfer_est" };
    static const char *const names[] = { "data", "forward+backward", "optimizer", "compile", "transfers (est.)" };
    static const char *const colors[] = { "#8c564b", "#1f77b4", "#ff7f0e", "#d62728", "#9467bd" };
    double max = 0;
    for (int i = 0; i < n; i++) {
        double t = 0;
        for (int k = 0; k < 5; k++) t += fmax(0, jl_num(&runs[i].step, keys[k], 0));
        max = fmax(max, t);
    }
    if (!(max > 0)) return;
    double lo = 0, ticks[16];
    int nt = dash_ticks(&lo, &max, 6, ticks);
    const int W = 660, ML = 160, MR = 20, row = 26, H = 40 + n * row + 40;
    double pw = W - ML - MR;
    fprintf(f, "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" data-title=\"ms per step by phase\">"
               "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/><text class=\"title\" x=\"%d\" y=\"20\">ms per step by phase "
               "(latest interval)</text>\n", W, H, W, H, ML);
    for (int t = 0; t < nt; t++) {
        double x = ML + ticks[t] / max * pw;
        char lab[32];
        dash_fmt(lab, 10, ticks[t]);
        fprintf(f, "<line class=\"grid\" x1=\"%.2f\" x2=\"%.2f\" y1=\"30\" y2=\"%d\"/><text class=\"xlabel\" x=\"%.2f\" y=\"%d\">%s</text>\n",
                x, x, 34 + n * row, x, 50 + n * row, lab);
    }
    fprintf(f, "<text class=\"axislabel\" x=\"%.2f\" y=\"%d\">ms</text>\n", ML + pw / 2, H - 6);
    for (int i = 0; i < n; i++) {
        double x = ML, y = 36 + i * row;
        fprintf(f, "<text class=\"ylabel\" x=\"%d\" y=\"%.1f\">", ML - 8, y + 14);
        html_escape(f, runs[i].name);
        fputs("</text>", f);
        for (int k = 0; k < 5; k++) {
            double v = fmax(0, jl_num(&runs[i].step, keys[k], 0)), w = v / max * pw;
            if (w <= 0) continue;
            fprintf(f, "<rect class=\"phase\" data-phase=\"%s\" data-ms=\"%.4f\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"18\" fill=\"%s\"/>",
                    names[k], v, x, y, w, colors[k]);
            x += w;
        }
        fputs("\n", f);
    }
    fputs("</svg><figcaption>", f);
    for (int k = 0; k < 5; k++)
        fprintf(f, "<span class=\"key\"><span class=\"swatch\" style=\"background:%s\"></span>%s</span>", colors[k], names[k]);
    fputs("</figcaption></figure>\n", f);
}

/* One chart of series a (solid) and b (dashed, may be DS_COUNT for none) of every run. */
static void chart(FILE *f, dash_run *runs, int n, const char *title, const char *ylabel, dash_series_id a, dash_series_id b) {
    chart_line lines[2 * MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        lines[m++] = (chart_line){ &runs[i].s[a], runs[i].name, dash_series_names[a], report_color(i), false };
        if (b != DS_COUNT) lines[m++] = (chart_line){ &runs[i].s[b], runs[i].name, dash_series_names[b], report_color(i), true };
    }
    svg_chart(f, title, ylabel, lines, m);
}

static void write_report(FILE *f, dash_run *runs, int n, const char *title) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
    html_escape(f, title);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>", css);
    html_escape(f, title);
    fputs("</h1>\n<p>", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s<span class=\"swatch\" style=\"background:%s\"></span>", i ? ", " : "", report_color(i));
        html_escape(f, runs[i].name);
        fprintf(f, " (%lld lines%s)", (long long)runs[i].lines, runs[i].bad_lines ? ", some unreadable" : "");
    }
    fputs("</p>\n<h2>Curves</h2><div class=\"charts\">\n", f);
    bool tokens = false, samples = false;
    for (int i = 0; i < n; i++) tokens |= runs[i].tokens, samples |= !runs[i].tokens && runs[i].s[DS_SPEED].n;
    chart(f, runs, n, "Loss (solid: train, dashed: validation/test)", "loss", DS_LOSS, DS_VAL_LOSS);
    chart(f, runs, n, "Accuracy (solid: train batch, dashed: test)", "accuracy", DS_ACC, DS_VAL_ACC);
    chart(f, runs, n, "Perplexity (solid: train, dashed: validation)", "perplexity", DS_PPL, DS_VAL_PPL);
    chart(f, runs, n, "Learning rate", "lr", DS_LR, DS_COUNT);
    chart(f, runs, n, "Throughput", tokens && samples ? "samples or tokens / s" : tokens ? "tokens / s" : "samples / s", DS_SPEED,
          DS_COUNT);
    phase_chart(f, runs, n);
    fputs("</div>\n", f);
    table(f, runs, n);
    bool any = false;
    for (int i = 0; i < n; i++) any |= runs[i].sample[0] != 0;
    if (any) {
        fputs("<h2>Samples</h2>\n", f);
        for (int i = 0; i < n; i++) {
            if (!runs[i].sample[0]) continue;
            fputs("<h3>", f);
            html_escape(f, runs[i].name);
            fprintf(f, " (step %.0f)</h3><pre class=\"sample\">", runs[i].sample_step);
            html_escape(f, runs[i].sample);
            fputs("</pre>\n", f);
        }
    }
    fputs("</body></html>\n", f); /* write errors: checked by cli_file_commit */
}

int cmd_report(int argc, char **argv) {
    const char *out = NULL, *title = "aneforge training report", *name = NULL;
    static dash_run runs[MAX_RUNS];
    int n = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); goto done; }
        if (k[0] != '-') {
            if (n == MAX_RUNS) { rc = bad("at most 32 logs, not more ('%s')", k); break; }
            dash_run_init(&runs[n], name ? name : cli_base_name(k));
            name = NULL;
            if (dash_run_load(&runs[n++], k)) {
                fprintf(stderr, "aneforge report: %s\n", af_error_message());
                rc = 1;
            }
            continue;
        }
        if (!v) { rc = bad("%s", cli_missing_value_message(usage, k)); break; }
        i++;
        if (!strcmp(k, "-o") || !strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--name")) name = v;
        else if (!strcmp(k, "--title")) title = v;
        else rc = bad("unknown option '%s'", k);
    }
    if (!rc && !n) rc = bad("%s", "name at least one log (written by 'aneforge train ... --log FILE')");
    if (!rc && !out) rc = bad("%s", "-o report.html is required");
    if (!rc) {
        /* Whole or not at all: a failed write leaves no half page (nor an older one cut). */
        cli_file o;
        if (cli_file_open(&o, out, "aneforge report")) rc = 1;
        else {
            write_report(o.f, runs, n, title);
            if (cli_file_commit(&o)) rc = 1;
            else fprintf(stderr, "report: %d run%s -> %s\n", n, n == 1 ? "" : "s", out);
        }
    }
done:
    for (int i = 0; i < n; i++) dash_run_free(&runs[i]);
    return rc;
}
