/* `train ... --distributed` (train_dist.c): the flags, joining the MPI job, each rank's
 * shard, the stop that all ranks agree on, and rank 0's summary of every rank's step
 * time. Only public calls (af_dist_*). */
#ifndef AF_TOOLS_TRAIN_DIST_H
#define AF_TOOLS_TRAIN_DIST_H
#include "aneforge.h"

#include <stdbool.h>

typedef struct {
    bool on;            /* --distributed */
    int sync_every;     /* --sync-every K (in-program plans; default 8) */
    double timeout_s;   /* --dist-timeout S (default 120) */
    af_dist *d;         /* joined (NULL: alone) */
    int rank, size;     /* 0 and 1 alone */
    int64_t bytes0;     /* af_dist_stats when training began (the start's broadcast excluded) */
    double comm0;
} train_dist;

/* --distributed: 1 when k is it. */
int train_dist_flag(const char *k, train_dist *d);
/* --sync-every, --dist-timeout: 1 when k is one, 0 when not, -1 with the message printed. */
int train_dist_parse(const char *k, const char *v, train_dist *d, const char *prefix);
/* Joins the job when --distributed (prints why not and returns -1). */
int train_dist_begin(train_dist *d, const char *prefix);
/* After af_trainer_new: the trainer over the job (rank 0's state broadcast); -1 printed. */
int train_dist_trainer(train_dist *d, af_trainer *t, const af_train_opts *o, const char *prefix);
/* Whether any rank wants to stop (its own flag in, all ranks' out): 1 or 0, -1 with
 * the error set when the others did not answer; collective. */
int  train_dist_any(train_dist *d, bool mine);
/* Rank 0's closing line on stderr and JSON fields (",\"ranks\":..."): every rank's
 * ms per step (min, mean, max), bytes all-reduced per step, communication share. All
 * ranks call it (collective); buf gets "" alone. */
void train_dist_summary(train_dist *d, double train_s, int64_t steps, bool print, char *buf, size_t cap);
/* A rank that cannot go on: its message, then every rank ends (MPI_Abort). */
void train_dist_fail(train_dist *d, int rc);
void train_dist_end(train_dist *d);
#endif
