/* The library's only way to say something unasked: the user's log function. */
#include "ir/ir.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static af_log_fn log_fn;
static void *log_user;

void af_set_log(af_log_fn fn, void *user) {
    pthread_mutex_lock(&lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&lock);
}

void ir_log(af_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&lock); /* one message at a time, and never to a stale function */
    if (log_fn) {
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_fn(level, msg, log_user);
    }
    pthread_mutex_unlock(&lock);
}
