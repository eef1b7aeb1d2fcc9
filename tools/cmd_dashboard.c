/* aneforge dashboard: a training log (train --log) as a live full-screen terminal view
 * (dash_term.c, dash_view.c), plain summary lines when stdout is not a terminal, or one
 * drawn screen as text with --once. */
#include "cli.h"
#include "cli_args.h"
#include "dash_term.h"
#include "dash_view.h"
#include "aneforge_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge dashboard run.jsonl [--name NAME] [--once [--size WxH]]\n\n"
            "Follows a training log as it grows (as tail -f: a truncated or replaced file is read\n"
            "again from its start) and shows its loss and accuracy or perplexity curves, the\n"
            "latest figures, ms/step by phase, the engine accounting, the latest sample and the\n"
            "log's tail. Keys: q quit, p or space pause, arrows and PgUp/PgDn scroll the log.\n"
            "When stdout is not a terminal it prints one summary line per log line instead, and\n"
            "stops after the run's end line. The log must be a regular file; lines over 1 MiB are\n"
            "skipped (counted unreadable), and --once reads at most 1 GiB.\n\n"
            "  --once       draw the screen once as plain text (default size 120x40) and exit\n"
            "  --size WxH   the --once screen's size\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge dashboard", fmt, a); }

static int once(const char *path, const char *name, int w, int h) {
    dash_run r;
    dash_run_init(&r, name);
    if (dash_run_load(&r, path)) {
        fprintf(stderr, "aneforge dashboard: %s\n", af_error_message());
        return 1;
    }
    dash_screen s;
    int rc = dash_screen_init(&s, w, h);
    if (!rc) {
        dash_view_state v = { 0, false, r.end.n ? "finished" : "" };
        dash_view_draw(&s, &r, &v);
        dash_screen_write(&s, stdout, false);
    }
    dash_screen_free(&s);
    dash_run_free(&r);
    return rc ? 1 : 0;
}

int cmd_dashboard(int argc, char **argv) {
    const char *path = NULL, *name = NULL;
    int one = 0;
    long w = 120, h = 40;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 0; }
        if (!strcmp(k, "--once")) { one = 1; continue; }
        if (k[0] != '-') {
            if (path) return bad("one log at a time ('%s' is a second); 'aneforge report' compares runs", k);
            path = k;
            continue;
        }
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        if (!strcmp(k, "--name")) name = v;
        else if (!strcmp(k, "--size")) {
            char *end;
            w = strtol(v, &end, 10);
            h = *end == 'x' ? strtol(end + 1, &end, 10) : 0;
            if (*end || w < 40 || h < 12 || w > 1000 || h > 1000) return bad("--size wants WxH of at least 40x12, not '%s'", v);
        } else return bad("unknown option '%s'", k);
    }
    if (!path) return bad("%s", "name the log to watch (written by 'aneforge train ... --log FILE')");
    if (!name) name = cli_base_name(path);
    if (one) return once(path, name, (int)w, (int)h);
    /* A log that is not there yet is waited for; one that is there must be a regular file. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        int fd = af_open_regular(path, "log", UINT64_MAX, NULL);
        if (fd >= 0) close(fd); /* replaced by a file since stat: follow it */
        else {
            fprintf(stderr, "aneforge dashboard: %s\n", af_error_message());
            return 1;
        }
    }
    dash_live *d = dash_live_start(path, name);
    if (!d) return 1;
    while (!dash_live_poll(d, false)) {
        if (!dash_live_on_terminal(d) && dash_live_finished(d)) break; /* a pipe: done at the end line */
        dash_live_wait(d, 100);
    }
    dash_live_stop(d);
    return 0;
}
