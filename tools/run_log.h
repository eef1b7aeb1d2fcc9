/* The JSON lines of `aneforge train --log` (the schema is in docs/cli.md, "Log lines"): a
 * header line with the run's configuration, fields appended to every step line (time
 * per phase, throughput, the engine accounting), a sample line and an end line. What
 * `aneforge dashboard` and `aneforge report` read. */
#ifndef AF_TOOLS_RUN_LOG_H
#define AF_TOOLS_RUN_LOG_H
#include "aneforge.h"
#include "aneforge.h"
#include "cli_out.h"

#include <stdint.h>
#include <stdio.h>

typedef struct {
    cli_log *f;                      /* NULL: no log */
    af_trainer *t;
    af_train_opts o;
    int64_t items_per_step;          /* samples (mlp, cnn) or tokens (llama) per optimizer step */
    const char *items_key;           /* "samples_per_s" or "tokens_per_s" */
    double start, last;              /* clock at run_log_begin and at the last step line */
    int64_t last_steps;
    double data_s;                   /* batch preparation since the last step line */
    double phase_last[AF_NPHASES];
    double aside_t, aside_phase[AF_NPHASES];
    char buf[1024];
} run_log;

/* f may be NULL (no log: every call does nothing and run_log_step_fields gives "");
 * its writes are checked (cli_log: the first failure stops the log and is printed). */
void run_log_begin(run_log *l, cli_log *f, af_trainer *t, const af_train_opts *o, int64_t items_per_step,
                   const char *items_key);
/* The header line: model, plan, target, precision, optimizer numbers, then `extra`
 * (",\"key\":value..." or "") from the command. */
void run_log_header(run_log *l, const char *model, const char *extra);
/* Seconds the command spent preparing batches, counted into the next step line. */
void run_log_data(run_log *l, double seconds);
/* Time (and trainer phases) between these two, e.g. an evaluation, is left out of the
 * next step line's interval. */
void run_log_aside_begin(run_log *l);
void run_log_aside_end(run_log *l);
/* ",\"key\":value..." for a step line at `steps` optimizer steps: the interval since the
 * previous step line (ms per step by phase, throughput) and the totals so far. */
const char *run_log_step_fields(run_log *l, int64_t steps);
/* {"step":N,"sample":"..."}: a generated text (JSON-escaped, cut at 1000 bytes). */
void run_log_sample(run_log *l, int64_t step, const char *text);
/* {"end":1,"steps":N,"seconds":S, ...extra}: the run finished (not written on failure). */
void run_log_end(run_log *l, int64_t steps, const char *extra);
/* s as a JSON string with its quotes into dst (cap bytes), at most max_in input bytes,
 * never splitting a UTF-8 sequence; control bytes as \u00XX. */
void json_quote(char *dst, size_t cap, const char *s, size_t max_in);
#endif
