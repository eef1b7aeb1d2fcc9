#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* getc_unlocked */
#endif
#include "dash_run.h"
#include "cli_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dash_series_names[DS_COUNT] = { "train loss", "val loss", "train accuracy", "test accuracy",
                                                  "train perplexity", "val perplexity", "learning rate", "throughput" };

void dash_run_init(dash_run *r, const char *name) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name ? name : "run");
}

void dash_run_reset(dash_run *r) {
    char name[sizeof r->name];
    memcpy(name, r->name, sizeof name);
    dash_run_free(r);
    dash_run_init(r, name);
}

void dash_run_free(dash_run *r) {
    for (int i = 0; i < DS_COUNT; i++) {
        free(r->s[i].x);
        free(r->s[i].y);
    }
    for (int i = 0; i < DASH_TAIL; i++) free(r->tail[i]);
    memset(r->s, 0, sizeof r->s);
    memset(r->tail, 0, sizeof r->tail);
}

static void push(dash_series *s, double x, double y) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (!nx) return;
        s->x = nx;
        double *ny = realloc(s->y, (size_t)cap * sizeof *ny);
        if (!ny) return;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
}

static void add_tail(dash_run *r, const char *line, size_t n) {
    char *copy = malloc(n + 1);
    if (!copy) return;
    memcpy(copy, line, n);
    copy[n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)copy[i] < 0x20) copy[i] = ' '; /* no escapes reach the terminal */
    int slot = (int)(r->lines % DASH_TAIL);
    free(r->tail[slot]);
    r->tail[slot] = copy;
}

const char *dash_run_tail(const dash_run *r, int64_t i) {
    if (i < 0 || i >= r->lines || i >= DASH_TAIL) return NULL;
    return r->tail[(r->lines - 1 - i) % DASH_TAIL];
}

/* Adds the value at key to series id, at x. */
static void series_from(dash_run *r, const jl_line *l, const char *key, dash_series_id id, double x) {
    if (jl_has_num(l, key)) push(&r->s[id], x, jl_num(l, key, 0));
}

void dash_run_feed(dash_run *r, const char *line, size_t n) {
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    if (!n) return;
    jl_line *l = malloc(sizeof *l);
    if (!l) return;
    if (jl_parse(line, n, l)) {
        r->bad_lines++;
    } else if (jl_num(l, "header", 0) == 1) {
        /* A new run appended to the same log starts over; one resumed from a checkpoint
         * continues the curves. */
        if (!(r->header.n && jl_num(l, "resumed", 0) == 1)) dash_run_reset(r);
        r->end.n = 0;
        r->header = *l;
        const char *model = jl_str(l, "model");
        r->tokens = model && !strcmp(model, "llama");
    } else if (jl_num(l, "end", 0) == 1) {
        r->end = *l;
    } else if (jl_str(l, "sample")) {
        snprintf(r->sample, sizeof r->sample, "%s", jl_str(l, "sample"));
        r->sample_step = jl_num(l, "step", 0);
    } else if (jl_has_num(l, "step")) {
        double x = jl_num(l, "step", 0);
        if (jl_has_num(l, "loss")) { /* a step line */
            r->step = *l;
            series_from(r, l, "loss", DS_LOSS, x);
            series_from(r, l, "accuracy", DS_ACC, x);
            series_from(r, l, "ppl", DS_PPL, x);
            series_from(r, l, "lr", DS_LR, x);
            series_from(r, l, "samples_per_s", DS_SPEED, x);
            series_from(r, l, "tokens_per_s", DS_SPEED, x);
            if (jl_has_num(l, "tokens_per_s")) r->tokens = true;
        } else { /* an evaluation line */
            r->eval = *l;
            series_from(r, l, "val_loss", DS_VAL_LOSS, x);
            series_from(r, l, "test_loss", DS_VAL_LOSS, x);
            series_from(r, l, "test_acc", DS_VAL_ACC, x);
            series_from(r, l, "val_ppl", DS_VAL_PPL, x);
        }
    }
    free(l);
    add_tail(r, line, n);
    r->lines++;
}

int dash_run_load(dash_run *r, const char *path) {
    FILE *f = cli_fopen_regular(path, "log", DASH_MAX_LOG_BYTES, NULL);
    if (!f) return -1;
    /* Lines of up to DASH_MAX_LINE bytes; longer ones are skipped as unreadable. The file's
     * size was checked, and at most that many bytes are read even if it grows meanwhile. */
    char *line = malloc(DASH_MAX_LINE + 1);
    if (!line) {
        fclose(f);
        af_fail(AF_ERR_NOMEM, "log %s: out of memory", path);
        return -1;
    }
    size_t n = 0;
    bool overflow = false;
    uint64_t total = 0;
    int c;
    while (total < DASH_MAX_LOG_BYTES && (c = getc_unlocked(f)) != EOF) {
        total++;
        if (c != '\n') {
            if (n < DASH_MAX_LINE) line[n++] = (char)c;
            else overflow = true;
            continue;
        }
        if (overflow) r->bad_lines++, r->lines++;
        else dash_run_feed(r, line, n);
        n = 0, overflow = false;
    }
    if (overflow) r->bad_lines++, r->lines++;
    else if (n) dash_run_feed(r, line, n);
    int err = ferror(f);
    free(line);
    fclose(f);
    if (err) {
        af_fail(AF_ERR_IO, "log %s: read error", path);
        return -1;
    }
    return 0;
}
