#include "dash_view.h"
#include "dash_plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fmt_bytes(char *b, size_t n, double v) {
    if (!isfinite(v)) snprintf(b, n, "-");
    else if (v >= 1 << 30) snprintf(b, n, "%.2f GB", v / (1 << 30));
    else if (v >= 1 << 20) snprintf(b, n, "%.2f MB", v / (1 << 20));
    else if (v >= 1 << 10) snprintf(b, n, "%.1f KB", v / (1 << 10));
    else snprintf(b, n, "%.0f B", v);
}

static void fmt_count(char *b, size_t n, double v) {
    if (!isfinite(v)) snprintf(b, n, "-");
    else if (fabs(v) >= 1e9) snprintf(b, n, "%.3gG", v / 1e9);
    else if (fabs(v) >= 1e6) snprintf(b, n, "%.3gM", v / 1e6);
    else if (fabs(v) >= 1e4) snprintf(b, n, "%.3gk", v / 1e3);
    else snprintf(b, n, "%.4g", v);
}

/* "label   value" rows inside a box. */
static void row(dash_screen *s, int x, int y, int w, const char *label, dash_color c, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    dash_put(s, x, y, w, C_DIM, false, label);
    dash_put(s, x + 14, y, w - 14, c, true, buf);
}

static double last(const dash_series *s) { return s->n ? s->y[s->n - 1] : NAN; }

int dash_view_tail_rows(int h) { return h >= 30 ? h / 4 : 5; }

static void title_bar(dash_screen *s, const dash_run *r, const dash_view_state *v) {
    const jl_line *h = &r->header;
    char t[400];
    const char *fam = jl_str(h, "family");
    int n = snprintf(t, sizeof t, " aneforge │ %s", r->name);
    if (h->n)
        snprintf(t + n, sizeof t - (size_t)n, " │ %s%s%s · plan %s · %s%s%s · %s · batch %.0f · %s", jl_str(h, "model") ? jl_str(h, "model") : "?",
                 jl_str(h, "data") ? " on " : "", jl_str(h, "data") ? jl_str(h, "data") : "", jl_str(h, "plan") ? jl_str(h, "plan") : "?",
                 jl_str(h, "target") ? jl_str(h, "target") : "?", fam && *fam ? ":" : "", fam && *fam ? fam : "",
                 jl_str(h, "precision") ? jl_str(h, "precision") : "?", jl_num(h, "batch", 0),
                 jl_str(h, "optimizer") ? jl_str(h, "optimizer") : "?");
    if (h->n && jl_num(h, "resumed", 0) == 1) { /* continued from a checkpoint: the curves join the earlier part's */
        size_t m = strlen(t);
        snprintf(t + m, sizeof t - m, " · resumed");
    }
    char right[80];
    snprintf(right, sizeof right, " %s ", v->paused ? "PAUSED (p resumes)" : v->status ? v->status : "");
    int rw = dash_cols(right);
    if (rw > s->w / 2) rw = 0;
    for (int x = 0; x < s->w; x++) dash_set(s, x, 0, " ", C_TITLE);
    dash_put(s, 0, 0, s->w - rw - 1, C_TITLE, true, t);
    if (rw) dash_put(s, s->w - rw, 0, rw, v->paused ? C_ORANGE : C_DIM, v->paused, right);
}

static void now_panel(dash_screen *s, const dash_run *r, int x, int y, int w, int h) {
    dash_box(s, x, y, w, h, "Now");
    const jl_line *st = &r->step;
    int cx = x + 2, cw = w - 4, yy = y + 1, bottom = y + h - 1;
    double step = jl_num(st, "step", NAN), total = jl_num(&r->header, "total_steps", NAN);
    if (isnan(step)) { /* an empty or starting log: nothing to show yet */
        if (yy < bottom) row(s, cx, yy, cw, "step", C_DIM, "%s", "waiting for the first step line");
        return;
    }
    if (isnan(total)) {
        if (yy < bottom) row(s, cx, yy++, cw, "step", C_DEFAULT, "%.0f", step);
    } else if (yy < bottom) {
        if (jl_has_num(st, "epoch"))
            row(s, cx, yy++, cw, "step", C_DEFAULT, "%.0f of %.0f (epoch %.0f of %.0f)", step, total, jl_num(st, "epoch", 0),
                jl_num(&r->header, "epochs", NAN));
        else row(s, cx, yy++, cw, "step", C_DEFAULT, "%.0f of %.0f", step, total);
    }
    if (yy < bottom) row(s, cx, yy++, cw, "train loss", C_BLUE, "%.4f", last(&r->s[DS_LOSS]));
    if (yy < bottom) row(s, cx, yy++, cw, "val loss", C_ORANGE, "%.4f", last(&r->s[DS_VAL_LOSS]));
    if (r->s[DS_VAL_PPL].n || r->s[DS_PPL].n) {
        if (yy < bottom) row(s, cx, yy++, cw, "perplexity", C_GREEN, "%.2f train, %.2f val", last(&r->s[DS_PPL]), last(&r->s[DS_VAL_PPL]));
    } else if (yy < bottom)
        row(s, cx, yy++, cw, "accuracy", C_GREEN, "%.2f%% batch, %.2f%% test", 100 * last(&r->s[DS_ACC]), 100 * last(&r->s[DS_VAL_ACC]));
    if (yy < bottom) {
        row(s, cx, yy, cw, "lr", C_PURPLE, "%.4g", last(&r->s[DS_LR]));
        dash_spark(s, cx + 26, yy++, cw - 26, &r->s[DS_LR], C_PURPLE);
    }
    if (yy < bottom) {
        char b[32];
        fmt_count(b, sizeof b, last(&r->s[DS_SPEED]));
        row(s, cx, yy, cw, r->tokens ? "tokens/s" : "samples/s", C_CYAN, "%s", b);
        dash_spark(s, cx + 26, yy++, cw - 26, &r->s[DS_SPEED], C_CYAN);
    }
    if (yy < bottom) row(s, cx, yy++, cw, "elapsed", C_DEFAULT, "%.1f s", jl_num(st, "elapsed_s", NAN));
    if (yy < bottom && r->end.n) row(s, cx, yy++, cw, "finished", C_GREEN, "%.0f steps in %.1f s", jl_num(&r->end, "steps", 0), jl_num(&r->end, "seconds", 0));
}

static void phase_panel(dash_screen *s, const dash_run *r, int x, int y, int w, int h) {
    static const char *const keys[] = { "ms_data", "ms_fwd_bwd", "ms_optimizer", "ms_compile", "ms_transfer_est" };
    static const char *const names[] = { "data", "fwd+bwd", "optimizer", "compile", "transfer est" };
    static const dash_color colors[] = { C_ORANGE, C_BLUE, C_GREEN, C_RED, C_PURPLE };
    const jl_line *st = &r->step;
    double total = jl_num(st, "ms_step", NAN), max = 0;
    char title[64];
    snprintf(title, sizeof title, "ms/step by phase: %.3f ms", total);
    dash_box(s, x, y, w, h, title);
    for (int k = 0; k < 5; k++) max = fmax(max, jl_num(st, keys[k], 0));
    max = fmax(max, isfinite(total) ? total : 0);
    int bar_w = w - 4 - 24;
    for (int k = 0, yy = y + 1; k < 5 && yy < y + h - 1; k++) {
        if (!jl_has_num(st, keys[k])) continue;
        double v = jl_num(st, keys[k], 0);
        dash_put(s, x + 2, yy, 12, C_DIM, false, names[k]);
        dash_putf(s, x + 15, yy, 10, colors[k], true, "%9.3f", v);
        int fill = max > 0 ? (int)lround(v / max * bar_w) : 0;
        for (int i = 0; i < fill && i < bar_w; i++) dash_set(s, x + 26 + i, yy, "█", colors[k]);
        yy++;
    }
}

static void engine_panel(dash_screen *s, const dash_run *r, int x, int y, int w, int h) {
    const jl_line *st = &r->step, *hd = &r->header;
    dash_box(s, x, y, w, h, "Engine accounting (per step)");
    double steps = jl_num(st, "step", 0);
    int cx = x + 2, cw = w - 4, yy = y + 1, bottom = y + h - 1;
    if (!st->n || steps <= 0) { dash_put(s, cx, yy, cw, C_DIM, false, "(no step yet)"); return; }
    char a[32], b[32];
    if (yy < bottom) row(s, cx, yy++, cw, "dispatches", C_DEFAULT, "%.2f", jl_num(st, "dispatches", 0) / steps);
    fmt_bytes(a, sizeof a, jl_num(st, "bytes_in", 0) / steps);
    fmt_bytes(b, sizeof b, jl_num(st, "bytes_out", 0) / steps);
    if (yy < bottom) row(s, cx, yy++, cw, "bytes in/out", C_DEFAULT, "%s in, %s out", a, b);
    fmt_count(a, sizeof a, jl_num(st, "engine_flops", 0) / steps);
    fmt_count(b, sizeof b, jl_num(st, "host_flops", 0) / steps);
    if (yy < bottom) row(s, cx, yy++, cw, "FLOPs", C_DEFAULT, "%s engine, %s host", a, b);
    double compiles = jl_num(&r->end, "compiles", jl_num(st, "compiles", 0)); /* the end line's total is the last word */
    if (yy < bottom) {
        if (jl_has_num(hd, "compile_limit"))
            row(s, cx, yy++, cw, "compiles", C_DEFAULT, "%.0f of %.0f budget", compiles, jl_num(hd, "compile_limit", 0));
        else row(s, cx, yy++, cw, "compiles", C_DEFAULT, "%.0f (cpu: no budget)", compiles);
    }
    if (yy < bottom) {
        if (jl_has_num(st, "est_ms_m1"))
            row(s, cx, yy++, cw, "est. on chip", C_DEFAULT, "M1 %.3f ms, M5 %.3f ms", jl_num(st, "est_ms_m1", 0), jl_num(st, "est_ms_m5", 0));
        else row(s, cx, yy++, cw, "est. on chip", C_DIM, "- (cpu target)");
    }
}

/* Text wrapped into the box's inner width, newlines kept. */
static void sample_panel(dash_screen *s, const dash_run *r, int x, int y, int w, int h) {
    char title[64];
    snprintf(title, sizeof title, "Sample (step %.0f)", r->sample_step);
    dash_box(s, x, y, w, h, title);
    int cw = w - 4, yy = y + 1;
    const char *p = r->sample;
    while (*p && yy < y + h - 1) {
        char line[1024];
        int cols = 0;
        size_t o = 0;
        while (*p && *p != '\n' && cols < cw && o + 5 < sizeof line) {
            int len = 1;
            while ((p[len] & 0xC0) == 0x80 && len < 4) len++;
            memcpy(line + o, p, (size_t)len);
            o += (size_t)len;
            p += len;
            cols++;
        }
        line[o] = 0;
        if (*p == '\n') p++;
        dash_put(s, x + 2, yy++, cw, C_DEFAULT, false, line);
    }
}

static void tail_panel(dash_screen *s, const dash_run *r, int x, int y, int w, int h, int scroll) {
    char title[192];
    snprintf(title, sizeof title, "Log (%lld lines%s%s) · ↑↓ PgUp PgDn scroll · p pause · q quit", (long long)r->lines,
             scroll ? ", scrolled back" : "", r->bad_lines ? ", some unreadable" : "");
    dash_box(s, x, y, w, h, title);
    int rows = h - 2;
    for (int i = 0; i < rows; i++) {
        const char *l = dash_run_tail(r, (int64_t)scroll + rows - 1 - i);
        if (l) dash_put(s, x + 2, y + 1 + i, w - 4, C_DIM, false, l);
    }
}

static void curve_panel(dash_screen *s, int x, int y, int w, int h, const char *title, const dash_series *a,
                        const dash_series *b, dash_color ca, dash_color cb) {
    dash_box(s, x, y, w, h, title);
    const dash_series *ser[2] = { a, b };
    dash_color col[2] = { ca, cb };
    dash_plot(s, x + 1, y + 1, w - 2, h - 2, ser, col, b ? 2 : 1);
}

void dash_view_draw(dash_screen *s, const dash_run *r, const dash_view_state *v) {
    dash_screen_clear(s);
    if (s->w < 40 || s->h < 12) {
        dash_put(s, 0, 0, s->w, C_DEFAULT, true, "aneforge dashboard: the terminal is too small (40x12 at least)");
        return;
    }
    title_bar(s, r, v);
    int tail_h = dash_view_tail_rows(s->h), top = 1, area = s->h - top - tail_h;
    int right_w = s->w >= 100 ? 50 : s->w * 45 / 100, left_w = s->w - right_w;
    int loss_h = area * 55 / 100;
    curve_panel(s, 0, top, left_w, loss_h, "Loss: ─ train (blue), ─ val (orange)", &r->s[DS_LOSS], &r->s[DS_VAL_LOSS], C_BLUE, C_ORANGE);
    if (r->s[DS_PPL].n || r->s[DS_VAL_PPL].n)
        curve_panel(s, 0, top + loss_h, left_w, area - loss_h, "Perplexity: train (green), val (red)", &r->s[DS_PPL], &r->s[DS_VAL_PPL],
                    C_GREEN, C_RED);
    else
        curve_panel(s, 0, top + loss_h, left_w, area - loss_h, "Accuracy: train batch (green), test (red)", &r->s[DS_ACC],
                    &r->s[DS_VAL_ACC], C_GREEN, C_RED);
    int now_h = 10, phase_h = 7, eng_h = area - now_h - phase_h;
    if (eng_h < 4) { phase_h = (area - now_h) / 2; eng_h = area - now_h - phase_h; }
    now_panel(s, r, left_w, top, right_w, now_h);
    phase_panel(s, r, left_w, top + now_h, right_w, phase_h);
    engine_panel(s, r, left_w, top + now_h + phase_h, right_w, eng_h);
    int y = top + area;
    if (r->sample[0]) {
        int sw = s->w * 2 / 5;
        sample_panel(s, r, 0, y, sw, tail_h);
        tail_panel(s, r, sw, y, s->w - sw, tail_h, v->scroll);
    } else
        tail_panel(s, r, 0, y, s->w, tail_h, v->scroll);
}

int dash_summary(const char *line, size_t n, char *out, size_t cap) {
    jl_line *l = malloc(sizeof *l);
    if (!l) return 0;
    int k = 0;
    out[0] = 0;
    if (jl_parse(line, n, l)) {
        k = snprintf(out, cap, "(unreadable log line)");
    } else if (jl_num(l, "header", 0) == 1) {
        k = snprintf(out, cap, "run: %s, plan %s, target %s %s, %s, batch %.0f, lr %g, %.0f steps",
                     jl_str(l, "model") ? jl_str(l, "model") : "?", jl_str(l, "plan") ? jl_str(l, "plan") : "?",
                     jl_str(l, "target") ? jl_str(l, "target") : "?", jl_str(l, "family") ? jl_str(l, "family") : "",
                     jl_str(l, "precision") ? jl_str(l, "precision") : "?", jl_num(l, "batch", 0), jl_num(l, "lr", 0),
                     jl_num(l, "total_steps", 0));
    } else if (jl_num(l, "end", 0) == 1) {
        k = snprintf(out, cap, "finished: %.0f steps in %.1f s", jl_num(l, "steps", 0), jl_num(l, "seconds", 0));
    } else if (jl_str(l, "sample")) {
        k = snprintf(out, cap, "sample at step %.0f: %.200s", jl_num(l, "step", 0), jl_str(l, "sample"));
        for (int i = 0; i < k && out[i]; i++) out[i] = out[i] == '\n' ? ' ' : out[i];
    } else if (jl_has_num(l, "loss")) {
        k = snprintf(out, cap, "step %.0f loss %.4f lr %.4g", jl_num(l, "step", 0), jl_num(l, "loss", 0), jl_num(l, "lr", 0));
        if (jl_has_num(l, "accuracy") && k < (int)cap) k += snprintf(out + k, cap - (size_t)k, " acc %.1f%%", 100 * jl_num(l, "accuracy", 0));
        if (jl_has_num(l, "ms_step") && k < (int)cap)
            k += snprintf(out + k, cap - (size_t)k, " %.0f %s/s %.3f ms/step (data %.3f, fwd+bwd %.3f, optimizer %.3f, compile %.3f)",
                          jl_num(l, jl_has_num(l, "tokens_per_s") ? "tokens_per_s" : "samples_per_s", 0),
                          jl_has_num(l, "tokens_per_s") ? "tokens" : "samples", jl_num(l, "ms_step", 0), jl_num(l, "ms_data", 0),
                          jl_num(l, "ms_fwd_bwd", 0), jl_num(l, "ms_optimizer", 0), jl_num(l, "ms_compile", 0));
    } else if (jl_has_num(l, "val_loss") || jl_has_num(l, "test_acc")) {
        if (jl_has_num(l, "val_loss")) k = snprintf(out, cap, "eval at step %.0f: val loss %.4f", jl_num(l, "step", 0), jl_num(l, "val_loss", 0));
        else
            k = snprintf(out, cap, "eval at step %.0f: test accuracy %.2f%%, test loss %.4f", jl_num(l, "step", 0),
                         100 * jl_num(l, "test_acc", 0), jl_num(l, "test_loss", NAN));
    }
    free(l);
    return k > 0;
}
