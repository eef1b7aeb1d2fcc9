/* aneforge doctor --probe / --compare: measures this Mac's Neural Engine into a family
 * file, and compares a family file with the simulator's family. Each probe step runs in
 * a child process (a crash, a hang past the step's time limit, or the per-process
 * compile budget ends only that step); the file is rewritten after every step, so a
 * second run with the same -o resumes. Only public headers: the probe is the library's
 * (include/aneforge_probe.h). */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_probe.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int cmd_doctor_probe(const char *framework, const char *out, int quick);
int cmd_doctor_compare(const char *path, const char *family);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Runs step i in a child; returns how it ended ("" when it finished). */
static void run_child(const char *framework, const char *out, int i, int quick, int limit_s, char *why, size_t n) {
    why[0] = 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { snprintf(why, n, "could not start a process for it"); return; }
    if (pid == 0) {
        alarm((unsigned)limit_s); /* a hung compile ends with SIGALRM */
        af_probe *p = NULL;
        af_status st = af_probe_open(out, &p);
        if (!st) st = af_probe_run_step(p, i, framework, quick);
        if (st) fprintf(stderr, "  %s: %s\n", af_probe_step_name(i), af_error_message());
        af_probe_free(p);
        _exit(st ? 3 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {}
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGALRM) snprintf(why, n, "timed out after %d s", limit_s);
        else snprintf(why, n, "crashed (signal %d)", sig);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        snprintf(why, n, "refused (recorded)");
    }
}

int cmd_doctor_probe(const char *framework, const char *out, int quick) {
    af_probe *p = NULL;
    if (af_probe_open(out, &p)) {
        fprintf(stderr, "aneforge doctor --probe: %s\n", af_error_message());
        return 1;
    }
    int n = af_probe_step_count(), done = 0, failed = 0;
    for (int i = 0; i < n; i++) done += af_probe_step_done(p, i);
    af_probe_free(p);
    printf("probing the Neural Engine into %s (%d steps%s%s)\n", out, n, quick ? ", quick" : "",
           done ? "; resuming: finished steps are kept" : "");
    int limit = quick ? 60 : 600;
    double t_all = now_s();
    for (int i = 0; i < n; i++) {
        if (af_probe_open(out, &p)) {
            fprintf(stderr, "aneforge doctor --probe: %s\n", af_error_message());
            return 1;
        }
        int was_done = af_probe_step_done(p, i);
        if (was_done) printf("[%d/%d] %-20s kept: %s\n", i + 1, n, af_probe_step_name(i), af_probe_step_result(p, i));
        af_probe_free(p);
        if (was_done) continue;
        printf("[%d/%d] %-20s %s ...\n", i + 1, n, af_probe_step_name(i), af_probe_step_what(i));
        double t0 = now_s();
        char why[120];
        run_child(framework, out, i, quick, limit, why, sizeof why);
        if (af_probe_open(out, &p)) {
            fprintf(stderr, "aneforge doctor --probe: %s\n", af_error_message());
            return 1;
        }
        if (why[0] && !af_probe_step_done(p, i) && af_probe_mark_failed(p, i, why))
            fprintf(stderr, "aneforge doctor --probe: %s\n", af_error_message());
        const char *res = af_probe_step_result(p, i);
        failed += !strncmp(res, "failed", 6);
        printf("       %-20s -> %s (%.1f s)\n", "", res, now_s() - t0);
        af_probe_free(p);
    }
    printf("\n%d of %d steps measured in %.1f s; the family file is %s.\n", n - failed, n, now_s() - t_all, out);
    printf("Simulate this chip anywhere with --target ane-sim:%s; compare it with the simulator's\n"
           "family with aneforge doctor --compare %s. Please send the file (it holds no personal data\n"
           "beyond the chip and model names) with an issue titled \"probe: <chip>, macOS <version>\".\n", out, out);
    return failed ? 1 : 0;
}

int cmd_doctor_compare(const char *path, const char *family) {
    static char out[8192];
    int d = af_family_compare(path, family, out, sizeof out);
    if (d < 0) {
        fprintf(stderr, "aneforge doctor --compare: %s\n", af_error_message());
        return 2;
    }
    fputs(out, stdout);
    printf("%d field%s differ%s.\n", d, d == 1 ? "" : "s", d == 1 ? "s" : "");
    return d ? 1 : 0;
}
