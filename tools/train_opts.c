#include "train_opts.h"
#include "cli_args.h"
#include "cli_env.h"
#include "train_progress.h"

#include <stdio.h>
#include <string.h>

/* A usage error: printed, and -1 for the caller. */
#define BAD(...) (cli_usage_error(prefix, __VA_ARGS__), -1)

int train_opt_flag(const char *k, af_train_opts *o) {
    if (!strcmp(k, "--dynamic-loss-scale")) o->dynamic_loss_scale = 1;
    else if (!strcmp(k, "--shuttle-state")) o->shuttle_state = 1;
    else return 0;
    return 1;
}

int train_opt_parse(const char *k, const char *v, af_train_opts *o, train_opt_flags *f, const char *prefix) {
    long n;
    if (!strcmp(k, "--batch")) { if (cli_parse_long(v, 1, 65536, &n)) return BAD("--batch wants an integer in 1..65536, not '%s'", v); o->batch = (int)n; }
    else if (!strcmp(k, "--unroll")) { if (cli_parse_long(v, 1, 64, &n)) return BAD("--unroll wants an integer in 1..64, not '%s'", v); o->unroll = (int)n; }
    else if (!strcmp(k, "--threads")) { if (cli_parse_long(v, 1, 1024, &n)) return BAD("--threads wants a positive integer, not '%s'", v); f->threads = (int)n; }
    else if (!strcmp(k, "--warmup")) { if (cli_parse_long(v, 0, 100000000, &n)) return BAD("--warmup wants a non-negative integer, not '%s'", v); o->warmup_steps = n; }
    else if (!strcmp(k, "--lr")) { if (cli_parse_float(v, &o->lr) || !(o->lr > 0)) return BAD("--lr wants a positive number, not '%s'", v); }
    else if (!strcmp(k, "--weight-decay")) { if (cli_parse_float(v, &o->weight_decay) || o->weight_decay < 0) return BAD("--weight-decay wants a number >= 0, not '%s'", v); }
    else if (!strcmp(k, "--loss-scale")) { if (cli_parse_float(v, &o->loss_scale) || !(o->loss_scale > 0)) return BAD("--loss-scale wants a positive number, not '%s'", v); f->loss_scale_set = true; }
    else if (!strcmp(k, "--optimizer")) {
        if (!strcmp(v, "adam")) o->optimizer = AF_OPT_ADAM;
        else if (!strcmp(v, "sgd")) o->optimizer = AF_OPT_SGD;
        else return BAD("--optimizer is adam or sgd, not '%s'", v);
    } else if (!strcmp(k, "--schedule")) {
        if (!strcmp(v, "constant")) o->schedule = AF_LR_CONSTANT;
        else if (!strcmp(v, "cosine")) o->schedule = AF_LR_COSINE;
        else return BAD("--schedule is constant or cosine, not '%s'", v);
    } else if (!strcmp(k, "--plan")) {
        if (af_plan_parse(v, &o->plan)) return BAD("--plan: %s", af_error_message());
    } else if (!strcmp(k, "--precision")) {
        if (!strcmp(v, "fp32")) o->compile.precision = AF_PRECISION_FP32;
        else if (!strcmp(v, "fp16")) o->compile.precision = AF_PRECISION_FP16;
        else if (!strcmp(v, "bf16")) o->compile.precision = AF_PRECISION_BF16;
        else return BAD("--precision is fp32, fp16 or bf16 (cpu only), not '%s'", v);
        f->precision_set = true;
    } else if (!strcmp(k, "--target")) f->target_spec = v;
    else return 0;
    return 1;
}

int train_opt_finish(af_train_opts *o, const train_opt_flags *f, const char *prefix) {
    if (f->target_spec && train_parse_target(f->target_spec, &o->compile)) return BAD("--target: %s", af_error_message());
    char env_err[300];
    if (cli_env_compile(&o->compile, f->target_spec != NULL, env_err, sizeof env_err)) return BAD("%s", env_err);
    af_compile_opts asked = o->compile;
    if (!f->precision_set) asked.precision = AF_PRECISION_DEFAULT; /* the target's default */
    bool fp16 = af_compile_opts_fp16(&asked);
    if (!f->loss_scale_set) o->loss_scale = fp16 ? 128.0f : 1.0f; /* keeps fp16 Adam moments inside fp16's range */
    o->compile.threads = f->threads;
    return 0;
}
