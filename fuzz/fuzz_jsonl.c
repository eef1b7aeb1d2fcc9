#define _POSIX_C_SOURCE 200809L /* dash_run.c's getline */
/* libFuzzer target for the training-log reader of `aneforge dashboard` and `aneforge
 * report` (tools/dash_json.c, tools/dash_run.c): arbitrary bytes, split at newlines as
 * the dashboard splits a followed file, must be read or counted unreadable without a
 * crash, every kept string inside its line's text, and every curve point finite.
 *
 *   make fuzz            (builds build-fuzz/fuzz_jsonl; seeds in tests/corpus/jsonl) */
#include "../tools/cli_file.c" /* first: it asks for POSIX before stdio is included */
#include "../tools/dash_json.c"
#include "../tools/dash_run.c"
#include "fuzz_util.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static dash_run r;
    static jl_line l;
    dash_run_init(&r, "fuzz");
    const char *s = (const char *)data;
    int64_t lines = 0;
    for (size_t start = 0, i = 0; i <= size; i++) {
        if (i < size && s[i] != '\n') continue;
        size_t n = i - start;
        if (jl_parse(s + start, n, &l) == 0)
            for (int k = 0; k < l.n; k++) {
                REQUIRE(l.f[k].type != JL_STR || l.f[k].str < JL_TEXT);
                REQUIRE(l.f[k].type != JL_NUM || isfinite(l.f[k].num));
            }
        size_t trimmed = n;
        while (trimmed && (s[start + trimmed - 1] == '\r')) trimmed--;
        lines += trimmed > 0;
        dash_run_feed(&r, s + start, n);
        start = i + 1;
    }
    REQUIRE(r.lines <= lines && r.bad_lines <= r.lines);
    for (int k = 0; k < DS_COUNT; k++)
        for (int i = 0; i < r.s[k].n; i++) REQUIRE(isfinite(r.s[k].x[i]) && isfinite(r.s[k].y[i]));
    REQUIRE(strlen(r.sample) < sizeof r.sample);
    for (int64_t i = 0; i < r.lines && i < DASH_TAIL; i++) REQUIRE(dash_run_tail(&r, i) != NULL);
    dash_run_free(&r);
    return 0;
}
