/* What `aneforge train` shows while it runs: a live progress bar on a terminal, plain
 * lines otherwise, and the per-step accounting of engine targets at the end. */
#ifndef AF_TOOLS_TRAIN_PROGRESS_H
#define AF_TOOLS_TRAIN_PROGRESS_H
#include "aneforge.h"
#include <stdbool.h>

typedef struct {
    bool tty, quiet;
    int epochs;
    int64_t steps_per_epoch;
    double start, last_draw, epoch_start;
    af_train_opts o;
    char extra[512];
} progress;

const char *train_target_name(af_target t); /* "cpu", "ane-sim", "ane" */
bool train_fp16(const af_compile_opts *c);   /* the programs run in fp16 */
int  train_parse_target(const char *spec, af_compile_opts *c);
void progress_init(progress *p, const af_train_opts *o, int epochs, int64_t steps_per_epoch, bool json);
void progress_step(progress *p, int64_t epoch, int64_t step_in_epoch, const af_step_info *info, double loss,
                   double acc, double s_per_step);
void progress_epoch(progress *p, int64_t epoch, double test_acc, double train_loss);
void progress_finish(progress *p, af_trainer *t, const af_stats *total, int64_t steps);
/* ",\"key\":value..." with the engine accounting for --json, or "". */
const char *progress_json_extra(progress *p, af_trainer *t, const af_stats *total, int64_t steps);
#endif
