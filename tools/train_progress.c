#define _POSIX_C_SOURCE 200809L
#include "train_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int train_parse_target(const char *spec, af_compile_opts *c) {
    return af_target_parse(spec, &c->target, &c->family) != AF_OK;
}

const char *train_target_name(af_target t) { return af_target_name(t); }

bool train_fp16(const af_compile_opts *c) { return af_compile_opts_fp16(c) != 0; }

void progress_init(progress *p, const af_train_opts *o, int epochs, int64_t steps_per_epoch, bool json) {
    memset(p, 0, sizeof *p);
    p->tty = isatty(fileno(stderr));
    p->quiet = json && !p->tty;
    p->epochs = epochs;
    p->steps_per_epoch = steps_per_epoch;
    p->o = *o;
    p->start = p->epoch_start = now_s();
    if (!p->quiet) {
        const char *tgt = train_target_name(o->compile.target);
        bool fp16 = train_fp16(&o->compile), engine = af_target_is_engine(o->compile.target);
        fprintf(stderr, "training: plan %s, target %s%s%s, %s, batch %d, %s lr %g, loss scale %g, %lld steps/epoch\n",
                af_plan_name(o->plan), tgt, engine ? " " : "", engine ? af_family_name_of(o->compile.family) : "",
                fp16 ? "fp16" : "fp32",
                o->batch, o->optimizer == AF_OPT_ADAM ? "adam" : "sgd", (double)o->lr, (double)o->loss_scale,
                (long long)steps_per_epoch);
    }
}

static void fmt_time(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void progress_step(progress *p, int64_t epoch, int64_t step, const af_step_info *info, double loss, double acc,
                   double s_per_step) {
    if (p->quiet) return;
    double t = now_s();
    bool last = step >= p->steps_per_epoch;
    if (p->tty) {
        if (!last && t - p->last_draw < 0.1) return;
        p->last_draw = t;
        int width = 24, fill = (int)(width * step / p->steps_per_epoch);
        char bar[32], eta[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
        bar[width] = 0;
        int64_t left = (p->epochs - epoch - 1) * p->steps_per_epoch + (p->steps_per_epoch - step);
        fmt_time((double)left * s_per_step, eta, sizeof eta);
        fprintf(stderr, "\r\033[Kepoch %lld/%d [%s] %lld/%lld loss %.4f", (long long)epoch + 1, p->epochs, bar,
                (long long)step, (long long)p->steps_per_epoch, loss);
        if (p->o.objective == AF_OBJ_CE) fprintf(stderr, " acc %5.1f%%", 100.0 * acc);
        fprintf(stderr, " %.0f steps/s ETA %s", s_per_step > 0 ? 1.0 / s_per_step : 0.0, eta);
        if (info->skipped) fprintf(stderr, " skipped %lld", (long long)info->skipped);
        return;
    }
    int64_t every = p->steps_per_epoch / 10 > 0 ? p->steps_per_epoch / 10 : 1;
    if (step % every && !last) return;
    fprintf(stderr, "epoch %lld/%d step %lld/%lld loss %.4f", (long long)epoch + 1, p->epochs, (long long)step,
            (long long)p->steps_per_epoch, loss);
    if (p->o.objective == AF_OBJ_CE) fprintf(stderr, " acc %.1f%%", 100.0 * acc);
    fprintf(stderr, " %.2f ms/step\n", 1000.0 * s_per_step);
}

void progress_epoch(progress *p, int64_t epoch, double test_acc, double train_loss) {
    double t = now_s();
    if (!p->quiet) {
        if (p->tty) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "epoch %lld/%d: test accuracy %.2f%%, train loss %.4f (%.1f s)\n", (long long)epoch + 1, p->epochs,
                100.0 * test_acc, train_loss, t - p->epoch_start);
    }
    p->epoch_start = t;
}

static bool engine(const progress *p) { return af_target_is_engine(p->o.compile.target); }

/* Mean per-step estimate: the cost model is linear, so estimate the totals and divide. */
static double est_ms(af_family_id fam, const af_stats *s, int64_t steps) {
    return af_ane_estimate_us(fam, s) / 1000.0 / (double)steps;
}

void progress_finish(progress *p, af_trainer *t, const af_stats *s, int64_t steps) {
    (void)t;
    if (p->quiet || !engine(p) || steps < 1) return;
    double n = (double)steps;
    fprintf(stderr, "%s %s accounting per step: %.3g dispatches, %.1f KB in, %.1f KB out, %.3g engine FLOPs, %.0f host FLOPs"
                    " (%lld programs compiled in all)\n",
            train_target_name(p->o.compile.target), af_family_name_of(p->o.compile.family), s->dispatches / n, s->bytes_in / n / 1024.0, s->bytes_out / n / 1024.0,
            s->engine_flops / n, s->host_flops / n, (long long)s->compiles);
    fprintf(stderr, "estimated on-device step time: M1 %.3f ms, M5 %.3f ms\n", est_ms(AF_FAMILY_A13, s, steps),
            est_ms(AF_FAMILY_A16, s, steps));
}

const char *progress_json_extra(progress *p, af_trainer *t, const af_stats *s, int64_t steps) {
    (void)t;
    p->extra[0] = 0;
    if (!engine(p) || steps < 1) return p->extra;
    double n = (double)steps;
    snprintf(p->extra, sizeof p->extra,
             ",\"target\":\"%s:%s\",\"programs_compiled\":%lld,\"dispatches_per_step\":%.3f,\"bytes_in_per_step\":%.0f,"
             "\"bytes_out_per_step\":%.0f,\"engine_flops_per_step\":%.0f,\"host_flops_per_step\":%.0f,"
             "\"segment_bytes_per_step\":%.0f,\"est_ms_m1\":%.4f,\"est_ms_m5\":%.4f",
             train_target_name(p->o.compile.target), af_family_name_of(p->o.compile.family), (long long)s->compiles, s->dispatches / n, s->bytes_in / n, s->bytes_out / n,
             s->engine_flops / n, s->host_flops / n, s->segment_bytes / n, est_ms(AF_FAMILY_A13, s, steps), est_ms(AF_FAMILY_A16, s, steps));
    return p->extra;
}
