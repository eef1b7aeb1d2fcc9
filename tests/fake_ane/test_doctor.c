/* `aneforge doctor` run as a process: against the fake framework (named by --framework
 * and by $ANEFORGE_ANE_FRAMEWORK) every step passes, the engine family is the one the
 * fake reports, and the exit status is 0; with a framework that is not there it says
 * which step failed and what to try, and exits 1. */
#define _DEFAULT_SOURCE 1
#include "support/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef AF_FAKE_ANE
#error "AF_FAKE_ANE must name the fake framework library"
#endif
#ifndef AF_CLI
#error "AF_CLI must name the aneforge executable"
#endif

/* Runs cmd, returns its exit status and its output in buf. */
static int run(const char *cmd, char *buf, size_t n) {
    FILE *p = popen(cmd, "r");
    size_t k = 0;
    buf[0] = 0;
    if (!p) return -1;
    for (size_t r; k + 1 < n && (r = fread(buf + k, 1, n - 1 - k, p)) > 0;) k += r;
    buf[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    static char out[8192];
    char cmd[2048];
    const char *tmp = getenv("TMPDIR");
    if (tmp) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmp);
        if (system(cmd)) fprintf(stderr, "could not create %s\n", tmp);
    }

    snprintf(cmd, sizeof cmd, "env -u ANEFORGE_ANE_FRAMEWORK FAKE_ANE_SUBTYPE=h13 '%s' doctor --framework '%s' 2>&1", AF_CLI, AF_FAKE_ANE);
    int rc = run(cmd, out, sizeof out);
    printf("%s\n", out);
    CHECK(rc == 0, "doctor against the fake exited %d", rc);
    CHECK(strstr(out, "load       ok") && strstr(out, "compile    ok") && strstr(out, "run        ok"), "a step did not pass");
    CHECK(strstr(out, "entry      -[_ANEInMemoryModel compileWithQoS:options:error:]") != NULL,
          "doctor must say which compile entry point it used");
    CHECK(strstr(out, "engine     h13") && strstr(out, "A13 (M1)"), "the fake's subtype h13 must read as family A13 (M1)");
    CHECK(strstr(out, "(--framework)") != NULL, "the framework's source is not named");

    snprintf(cmd, sizeof cmd, "ANEFORGE_ANE_FRAMEWORK='%s' FAKE_ANE_SUBTYPE=h16 '%s' doctor 2>&1", AF_FAKE_ANE, AF_CLI);
    rc = run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "($ANEFORGE_ANE_FRAMEWORK)") && strstr(out, "A16"),
          "doctor must take the framework from $ANEFORGE_ANE_FRAMEWORK (exit %d):\n%s", rc, out);

    snprintf(cmd, sizeof cmd, "'%s' doctor --framework /nonexistent/AppleNeuralEngine 2>&1", AF_CLI);
    rc = run(cmd, out, sizeof out);
    printf("%s\n", out);
    CHECK(rc == 1, "doctor with a missing framework exited %d, want 1", rc);
    CHECK(strstr(out, "load       FAILED") && strstr(out, "/nonexistent/AppleNeuralEngine") && strstr(out, "what to try:"),
          "a missing framework must say which step failed, name the path and say what to try");

    snprintf(cmd, sizeof cmd, "'%s' doctor --bogus 2>&1", AF_CLI);
    CHECK(run(cmd, out, sizeof out) == 2, "an unknown option is a usage error");
    return check_finish("doctor");
}
