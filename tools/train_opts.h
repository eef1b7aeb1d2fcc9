/* The training options `train mlp|cnn` and `train llama` share (train_opts.c): one parser
 * for the optimizer, schedule, plan, precision, target and their numbers. */
#ifndef AF_TOOLS_TRAIN_OPTS_H
#define AF_TOOLS_TRAIN_OPTS_H
#include "aneforge.h"

#include <stdbool.h>

typedef struct {
    const char *target_spec;
    int threads;
    bool loss_scale_set, precision_set;
} train_opt_flags;

/* A shared option that takes no value (--dynamic-loss-scale, --shuttle-state) into o:
 * 1 when k is one, 0 when it is not. */
int train_opt_flag(const char *k, af_train_opts *o);
/* Option k with value v into o: 1 when k is one of the shared options, 0 when it is not,
 * -1 when its value is bad (the message printed after "prefix: "). */
int train_opt_parse(const char *k, const char *v, af_train_opts *o, train_opt_flags *f, const char *prefix);
/* After all options: the target, the environment, the loss-scale default (128 in fp16)
 * and the threads into o. 0, or -1 with the message printed. */
int train_opt_finish(af_train_opts *o, const train_opt_flags *f, const char *prefix);
#endif
