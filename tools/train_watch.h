/* Watches a run's training loss for divergence (train_watch.c): a learning rate too high
 * for the model makes the loss grow without bound (fp32 llama at --lr 1e4 reaches 1e10)
 * or turn inf/nan, which no loss scale causes or cures. Warns once, naming the step and
 * what to do. */
#ifndef AF_TOOLS_TRAIN_WATCH_H
#define AF_TOOLS_TRAIN_WATCH_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double first; /* the first finite loss seen (0: none yet) */
    bool seen, warned;
} train_watch;

/* Whether loss is diverged: not finite, or above 4 x the first loss + 10 nats (a run
 * that starts at ln V never goes there by noise). */
bool train_diverged(const train_watch *w, double loss);
/* Feeds the loss of step `step`; on the first divergence prints to stderr
 * "CMD: warning: the loss diverged at step N ...: the learning rate LR is too high ...;
 * lower --lr (e.g. to LR/10)ADVICE" and returns true. */
bool train_watch_step(train_watch *w, const char *cmd, int64_t step, double loss, double lr, const char *advice);
#endif
