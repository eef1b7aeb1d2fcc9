#define _POSIX_C_SOURCE 200809L
#include "run_log.h"
#include "train_progress.h"
#include "cli_file.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

/* Appends printf-style text to buf (cap bytes), never past the end. */
static void add(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

void json_quote(char *dst, size_t cap, const char *s, size_t max_in) {
    size_t o = 0;
    if (cap < 3) { if (cap) dst[0] = 0; return; }
    dst[o++] = '"';
    for (size_t i = 0; s && s[i] && i < max_in; i++) {
        unsigned char c = (unsigned char)s[i];
        /* A multi-byte sequence goes whole or not at all. */
        size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (i + len > max_in || strnlen(s + i, len) < len) break;
        char esc[8];
        const char *piece = esc;
        size_t plen;
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; plen = 2; }
        else if (c == '\n') { memcpy(esc, "\\n", 2); plen = 2; }
        else if (c == '\t') { memcpy(esc, "\\t", 2); plen = 2; }
        else if (c < 0x20 || c == 0x7f) { snprintf(esc, sizeof esc, "\\u%04x", c); plen = 6; }
        else { piece = s + i; plen = len; }
        if (o + plen + 2 > cap) break;
        memcpy(dst + o, piece, plen);
        o += plen;
        i += len - 1;
    }
    dst[o++] = '"';
    dst[o] = 0;
}

void run_log_begin(run_log *l, cli_log *f, af_trainer *t, const af_train_opts *o, int64_t items_per_step,
                   const char *items_key) {
    memset(l, 0, sizeof *l);
    l->f = f;
    l->t = t;
    l->o = *o;
    l->items_per_step = items_per_step;
    l->items_key = items_key;
    l->start = l->last = cli_now_s();
    af_trainer_phase_seconds(t, l->phase_last);
}

static bool engine(const run_log *l) { return af_target_is_engine(l->o.compile.target); }

void run_log_header(run_log *l, const char *model, const char *extra) {
    if (!l->f) return;
    const af_train_opts *o = &l->o;
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double phase[AF_NPHASES];
    af_trainer_phase_seconds(l->t, phase);
    char line[4096] = ""; /* one write: a dashboard following the file never sees half a header */
    add(line, sizeof line,
            "{\"header\":1,\"model\":\"%s\",\"started\":\"%s\",\"plan\":\"%s\",\"target\":\"%s\",\"family\":\"%s\","
            "\"precision\":\"%s\",\"optimizer\":\"%s\",\"batch\":%d,\"lr\":%.6g,\"schedule\":\"%s\",\"warmup\":%lld,"
            "\"weight_decay\":%g,\"loss_scale\":%g,\"dynamic_loss_scale\":%d,\"steps_per_call\":%d,\"total_steps\":%lld,"
            "\"grad_clip\":%g,\"grad_accum\":%d,\"params\":%d,\"loss_source\":\"%s\",\"compile_s\":%.4f",
            model, when, af_plan_name(o->plan), train_target_name(o->compile.target),
            engine(l) ? af_family_name_of(o->compile.family) : "", train_fp16(&o->compile) ? "fp16" : "fp32",
            o->optimizer == AF_OPT_ADAM ? "adam" : "sgd", o->batch, (double)o->lr,
            o->schedule == AF_LR_COSINE ? "cosine" : "constant", (long long)o->warmup_steps, (double)o->weight_decay,
            (double)(l->t ? af_trainer_loss_scale(l->t) : o->loss_scale), o->dynamic_loss_scale, af_trainer_steps_per_call(l->t),
            (long long)o->total_steps, (double)o->grad_clip, o->grad_accum > 1 ? o->grad_accum : 1,
            af_trainer_num_params(l->t),
            af_metric_source_name(af_trainer_metric_source(l->t)), phase[AF_PHASE_COMPILE]);
    if (engine(l)) {
        af_ane_budget_info b;
        af_ane_budget(o->compile.sim_engine, &b);
        add(line, sizeof line, ",\"compile_limit\":%d", b.compile_limit);
    }
    cli_log_printf(l->f, "%s%s}\n", line, extra ? extra : "");
}

void run_log_data(run_log *l, double seconds) { l->data_s += seconds; }

void run_log_aside_begin(run_log *l) {
    l->aside_t = cli_now_s();
    af_trainer_phase_seconds(l->t, l->aside_phase);
}

void run_log_aside_end(run_log *l) {
    double phase[AF_NPHASES];
    af_trainer_phase_seconds(l->t, phase);
    l->last += cli_now_s() - l->aside_t;
    for (int i = 0; i < AF_NPHASES; i++) l->phase_last[i] += phase[i] - l->aside_phase[i];
}

/* Estimated on-device milliseconds per step on family fam for the totals s over steps. */
static double est_ms(af_family_id fam, const af_stats *s, int64_t steps) {
    return steps > 0 ? af_ane_estimate_us(fam, s) / 1000.0 / (double)steps : 0.0;
}

const char *run_log_step_fields(run_log *l, int64_t steps) {
    l->buf[0] = 0;
    if (!l->f) return l->buf;
    double now = cli_now_s(), phase[AF_NPHASES];
    af_trainer_phase_seconds(l->t, phase);
    int64_t d = steps - l->last_steps;
    double dt = now - l->last, per = d > 0 ? 1000.0 / (double)d : 0.0;
    af_stats s;
    af_trainer_stats(l->t, &s);
    add(l->buf, sizeof l->buf, ",\"elapsed_s\":%.3f,\"%s\":%.1f,\"ms_step\":%.4f,\"ms_data\":%.4f,\"ms_fwd_bwd\":%.4f,"
        "\"ms_optimizer\":%.4f,\"ms_compile\":%.4f",
        now - l->start, l->items_key, dt > 0 ? (double)(l->items_per_step * d) / dt : 0.0, dt * per, l->data_s * per,
        (phase[AF_PHASE_STEP] - l->phase_last[AF_PHASE_STEP]) * per,
        (phase[AF_PHASE_OPTIMIZER] - l->phase_last[AF_PHASE_OPTIMIZER]) * per,
        (phase[AF_PHASE_COMPILE] - l->phase_last[AF_PHASE_COMPILE]) * per);
    add(l->buf, sizeof l->buf,
        ",\"dispatches\":%lld,\"bytes_in\":%lld,\"bytes_out\":%lld,\"engine_flops\":%lld,\"host_flops\":%lld,\"compiles\":%lld",
        (long long)s.dispatches, (long long)s.bytes_in, (long long)s.bytes_out, (long long)s.engine_flops,
        (long long)s.host_flops, (long long)s.compiles);
    if (engine(l) && steps > 0) {
        /* Transfers are not separable from a run on the host: the cost model's share. */
        af_stats moved = { .bytes_in = s.bytes_in, .bytes_out = s.bytes_out };
        add(l->buf, sizeof l->buf, ",\"ms_transfer_est\":%.4f,\"est_ms_m1\":%.4f,\"est_ms_m5\":%.4f",
            est_ms(l->o.compile.family, &moved, steps), est_ms(AF_FAMILY_A13, &s, steps), est_ms(AF_FAMILY_A16, &s, steps));
    }
    l->last = now;
    l->last_steps = steps;
    l->data_s = 0;
    memcpy(l->phase_last, phase, sizeof phase);
    return l->buf;
}

void run_log_sample(run_log *l, int64_t step, const char *text) {
    if (!l->f) return;
    char q[6200];
    json_quote(q, sizeof q, text, 1000);
    cli_log_printf(l->f, "{\"step\":%lld,\"sample\":%s}\n", (long long)step, q);
}

void run_log_end(run_log *l, int64_t steps, const char *extra) {
    if (!l->f) return;
    af_stats st;
    af_trainer_stats(l->t, &st); /* compiles after the last step line (evaluation) included */
    cli_log_printf(l->f, "{\"end\":1,\"steps\":%lld,\"seconds\":%.3f,\"loss_source\":\"%s\",\"compiles\":%lld%s}\n", (long long)steps,
            cli_now_s() - l->start, af_metric_source_name(af_trainer_metric_source(l->t)), (long long)st.compiles,
            extra ? extra : "");
}
