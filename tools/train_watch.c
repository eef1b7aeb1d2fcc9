/* See train_watch.h. */
#define _POSIX_C_SOURCE 200809L
#include "train_watch.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

bool train_diverged(const train_watch *w, double loss) {
    if (!isfinite(loss)) return true;
    return w->seen && loss > 4.0 * fabs(w->first) + 10.0;
}

bool train_watch_step(train_watch *w, const char *cmd, int64_t step, double loss, double lr, const char *advice) {
    if (!w->seen && isfinite(loss)) {
        w->first = loss;
        w->seen = true;
        return false;
    }
    if (w->warned || !train_diverged(w, loss)) return false;
    w->warned = true;
    if (isatty(fileno(stderr))) fputs("\r\033[K", stderr); /* off a half-drawn progress line */
    if (isfinite(loss)) fprintf(stderr, "%s: warning: the loss diverged at step %lld (%.4g", cmd, (long long)step, loss);
    else fprintf(stderr, "%s: warning: the loss diverged at step %lld (it is %s", cmd, (long long)step, isnan(loss) ? "nan" : "inf");
    if (w->seen) fprintf(stderr, ", from %.4g at the start", w->first);
    fprintf(stderr, "): the learning rate %g is too high for this model; lower --lr (e.g. to %g)%s\n", lr, lr / 10,
            advice ? advice : "");
    return true;
}
