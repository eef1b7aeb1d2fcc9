/* What the dashboard and the report know of one training run: its configuration (the
 * header line), curves indexed by optimizer step, the latest step and evaluation
 * records, the latest sample and the tail of the log. Fed one log line at a time. */
#ifndef AF_TOOLS_DASH_RUN_H
#define AF_TOOLS_DASH_RUN_H
#include "dash_json.h"

#include <stdint.h>

typedef struct {
    double *x, *y;
    int n, cap;
} dash_series;

typedef enum {
    DS_LOSS,       /* "loss" of step lines */
    DS_VAL_LOSS,   /* "val_loss" (llama) or "test_loss" (mlp, cnn) */
    DS_ACC,        /* "accuracy" of step lines (cross-entropy models) */
    DS_VAL_ACC,    /* "test_acc" */
    DS_PPL,        /* "ppl" (llama) */
    DS_VAL_PPL,    /* "val_ppl" */
    DS_LR,
    DS_SPEED,      /* "samples_per_s" or "tokens_per_s" */
    DS_COUNT
} dash_series_id;

extern const char *const dash_series_names[DS_COUNT]; /* "train loss", ... */

#define DASH_TAIL 256

typedef struct {
    char name[128];
    jl_line header, step, eval, end; /* the latest of each kind (n == 0: none yet) */
    dash_series s[DS_COUNT];
    char sample[4096];
    double sample_step;
    char *tail[DASH_TAIL];           /* the last log lines, raw (ring) */
    int64_t lines, bad_lines;
    bool tokens;                     /* throughput is tokens/s (llama) */
} dash_run;

void dash_run_init(dash_run *r, const char *name);
/* Forgets everything (a new header line that is not a resumed run's, or the file was
 * truncated). */
void dash_run_reset(dash_run *r);
void dash_run_free(dash_run *r);
/* One log line (no newline needed); bad lines are counted and kept in the tail. */
void dash_run_feed(dash_run *r, const char *line, size_t n);
/* The i-th newest tail line (0 = newest), or NULL. */
const char *dash_run_tail(const dash_run *r, int64_t i);
/* Bounds on what a log may make us read: a longer line is skipped (counted unreadable);
 * a larger file, or one that is not a regular file (a directory, /dev/zero, a pipe), is
 * refused. A log line is a few hundred bytes, so these are far above any real run. */
#define DASH_MAX_LINE ((size_t)1 << 20)
#define DASH_MAX_LOG_BYTES ((uint64_t)1 << 30)
/* Reads a whole file line by line into r. -1 with af_error_message() set when it is not
 * a regular file of at most DASH_MAX_LOG_BYTES or cannot be read. */
int dash_run_load(dash_run *r, const char *path);
#endif
