/* The pieces under `aneforge dashboard` and `aneforge report` (tools/dash_*.c,
 * tools/run_log.c): the JSON-lines reader against hand-written lines and random bytes,
 * json_quote -> jl_parse round trips of random UTF-8, the run model fed a log, the axis
 * ticks, and the braille plot read back: every plotted dot's row maps back to a value
 * of the line through the series' points. */
#include "support/check.h"
#include "../tools/dash_json.h"
#include "../tools/dash_plot.h"
#include "../tools/dash_run.h"
#include "../tools/dash_screen.h"
#include "../tools/run_log.h"

#include <stdlib.h>
#include <string.h>

static int parse(const char *s, jl_line *l) { return jl_parse(s, strlen(s), l); }

static void test_parser(void) {
    static jl_line l;
    CHECK(parse("{\"step\":12,\"loss\":0.25,\"name\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\",\"ok\":true,\"n\":null,"
                "\"nest\":{\"x\":[1,{\"y\":\"}\"}]},\"neg\":-1.5e-3}\n", &l) == 0, "a good line parses");
    CHECK(l.n == 7, "7 fields, not %d", l.n);
    CHECK(jl_num(&l, "step", -1) == 12 && jl_num(&l, "loss", -1) == 0.25 && jl_num(&l, "neg", 0) == -1.5e-3, "numbers");
    CHECK(jl_str(&l, "name") && !strcmp(jl_str(&l, "name"), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80"), "escapes: %s", jl_str(&l, "name"));
    CHECK(jl_get(&l, "ok")->type == JL_BOOL && jl_get(&l, "ok")->num == 1 && jl_get(&l, "n")->type == JL_NULL, "literals");
    CHECK(jl_get(&l, "nest")->type == JL_NESTED && !jl_has_num(&l, "nest") && !jl_str(&l, "nest"), "nested values are skipped");
    CHECK(jl_num(&l, "missing", 7) == 7 && !jl_str(&l, "loss"), "absent keys and wrong types give the default");
    CHECK(parse("{}", &l) == 0 && l.n == 0, "the empty object");
    static const char *const bad[] = { "", "[1]", "{", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":\"\x01\"}",
                                       "{\"a\":tru}", "{\"a\":1e999}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{a:1}",
                                       "{\"a\":[1,2}", "{\"a\":\"unterminated}", "{\"a\":1 \"b\":2}", "{\"a\":--1}" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], &l);
        CHECK(rc == -1 && l.n == 0, "bad line %zu '%s' rejected", i, bad[i]);
    }
    /* A lone surrogate and \u0000 become U+FFFD, so strings stay C strings. */
    CHECK(parse("{\"s\":\"x\\ud800y\\u0000z\"}", &l) == 0 && !strcmp(jl_str(&l, "s"), "x\xef\xbf\xbdy\xef\xbf\xbdz"), "replacements");
    /* More fields than kept, and a string longer than the line's text buffer: cut, never overrun. */
    char big[20000];
    int o = sprintf(big, "{");
    for (int i = 0; i < 100; i++) o += sprintf(big + o, "\"k%d\":%d,", i, i);
    o += sprintf(big + o, "\"long\":\"");
    for (int i = 0; i < 6000; i++) big[o++] = 'a' + i % 26;
    strcpy(big + o, "\",\"after\":\"b\"}");
    CHECK(parse(big, &l) == 0 && l.n == JL_MAX_FIELDS && jl_num(&l, "k63", -1) == 63 && !jl_get(&l, "long"), "fields past %d dropped",
          JL_MAX_FIELDS);
    /* Random bytes and mutated good lines: accepted or rejected, within bounds (ASan checks). */
    test_rng r = { 17 };
    const char *good = "{\"step\":1,\"loss\":2.5,\"sample\":\"h\\u00e9llo\",\"x\":[{\"y\":1}]}";
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        char buf[80];
        size_t n = strlen(good);
        memcpy(buf, good, n);
        int flips = 1 + (int)(test_uniform(&r) * 4);
        for (int k = 0; k < flips; k++) buf[(size_t)(test_uniform(&r) * n)] = (char)(test_uniform(&r) * 256);
        if (it % 2) n = (size_t)(test_uniform(&r) * n);
        accepted += jl_parse(buf, n, &l) == 0;
        for (int i = 0; i < l.n; i++)
            if (l.f[i].type == JL_STR) CHECK(l.f[i].str < JL_TEXT && strlen(l.text + l.f[i].str) < JL_TEXT, "string in bounds");
    }
    CHECK(accepted > 100 && accepted < 20000, "some mutants parse and some do not (%d)", accepted);
}

/* json_quote then jl_parse gives back the text (random code points, controls included). */
static void test_quote_roundtrip(void) {
    test_rng r = { 5 };
    static jl_line l;
    for (int it = 0; it < 2000; it++) {
        char text[400], q[3000], line[3100];
        size_t n = 0;
        int len = (int)(test_uniform(&r) * 60);
        for (int i = 0; i < len; i++) {
            unsigned u = test_uniform(&r) < 0.5 ? 1 + (unsigned)(test_uniform(&r) * 127) : 0x80 + (unsigned)(test_uniform(&r) * (0x10000 - 0x80));
            if (u >= 0xD800 && u < 0xE000) u = 'x';
            if (u < 0x80) text[n++] = (char)u;
            else if (u < 0x800) text[n++] = (char)(0xC0 | u >> 6), text[n++] = (char)(0x80 | (u & 63));
            else text[n++] = (char)(0xE0 | u >> 12), text[n++] = (char)(0x80 | (u >> 6 & 63)), text[n++] = (char)(0x80 | (u & 63));
        }
        text[n] = 0;
        json_quote(q, sizeof q, text, sizeof text);
        snprintf(line, sizeof line, "{\"sample\":%s}", q);
        int ok = parse(line, &l) == 0 && jl_str(&l, "sample") && !strcmp(jl_str(&l, "sample"), text);
        CHECK(ok, "round trip %d: %s", it, q);
        if (!ok) break;
    }
    char q[16];
    json_quote(q, sizeof q, "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 1000);
    CHECK(!strcmp(q, "\"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\""), "cut at whole code points: %s", q);
}

static void test_run(void) {
    dash_run r;
    dash_run_init(&r, "t");
    const char *log[] = {
        "{\"header\":1,\"model\":\"old\"}",
        "{\"step\":5,\"loss\":9}",
        "{\"header\":1,\"model\":\"mlp\",\"total_steps\":20}",
        "{\"epoch\":1,\"step\":1,\"loss\":2.0,\"accuracy\":0.1,\"lr\":0.01,\"samples_per_s\":100}",
        "not json",
        "{\"epoch\":1,\"step\":10,\"loss\":1.0,\"accuracy\":0.5,\"lr\":0.005,\"samples_per_s\":200,\"ms_step\":1.5}",
        "{\"epoch\":1,\"test_acc\":0.6,\"train_loss\":1.1,\"step\":10,\"test_loss\":1.2}",
        "{\"step\":10,\"sample\":\"hi\\nthere\"}",
        "{\"end\":1,\"steps\":10}",
    };
    for (size_t i = 0; i < sizeof log / sizeof log[0]; i++) dash_run_feed(&r, log[i], strlen(log[i]));
    CHECK(!strcmp(jl_str(&r.header, "model"), "mlp"), "a second header starts the run over");
    CHECK(r.s[DS_LOSS].n == 2 && r.s[DS_LOSS].x[1] == 10 && r.s[DS_LOSS].y[1] == 1.0, "loss series");
    CHECK(r.s[DS_VAL_LOSS].n == 1 && r.s[DS_VAL_LOSS].y[0] == 1.2 && r.s[DS_VAL_ACC].y[0] == 0.6, "test loss and accuracy");
    CHECK(r.s[DS_LR].n == 2 && r.s[DS_SPEED].y[1] == 200 && r.s[DS_ACC].y[0] == 0.1, "lr, throughput, accuracy");
    CHECK(!strcmp(r.sample, "hi\nthere") && r.sample_step == 10 && r.end.n > 0, "sample and end");
    CHECK(r.bad_lines == 1 && r.lines == 7, "lines %lld (bad %lld)", (long long)r.lines, (long long)r.bad_lines);
    CHECK(!strcmp(dash_run_tail(&r, 0), log[8]) && !strcmp(dash_run_tail(&r, 4), "not json") && !dash_run_tail(&r, 7), "tail");
    /* A resumed run continues the curves; a fresh header after it starts over. */
    const char *more[] = { "{\"header\":1,\"model\":\"mlp\",\"resumed\":1}", "{\"epoch\":2,\"step\":20,\"loss\":0.5}" };
    for (int i = 0; i < 2; i++) dash_run_feed(&r, more[i], strlen(more[i]));
    CHECK(r.s[DS_LOSS].n == 3 && r.s[DS_LOSS].y[2] == 0.5 && r.s[DS_VAL_LOSS].n == 1 && r.end.n == 0, "resumed: curves continue");
    dash_run_feed(&r, log[2], strlen(log[2]));
    CHECK(r.s[DS_LOSS].n == 0 && r.lines == 1, "a fresh header after it starts over");
    dash_run_free(&r);
}

static void test_ticks(void) {
    double cases[][2] = { { 0.0476, 2.3331 }, { 1, 900 }, { -3, 7 }, { 5, 5 }, { 1e-7, 3e-3 }, { 123456, 123999 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double lo = cases[i][0], hi = cases[i][1], t[16];
        int n = dash_ticks(&lo, &hi, 6, t);
        CHECK(n >= 2 && n <= 7 && lo <= cases[i][0] && hi >= cases[i][1], "case %zu: %d ticks over [%g, %g]", i, n, lo, hi);
        double step = t[1] - t[0], mag = pow(10, floor(log10(step))), m = step / mag;
        CHECK(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6 || fabs(m - 10) < 1e-6, "case %zu: step %g is 1, 2 or 5 x 10^k", i, step);
        for (int k = 1; k < n; k++) CHECK(fabs(t[k] - t[k - 1] - step) < 1e-9 * (fabs(hi) + 1), "case %zu: even ticks", i);
    }
}

/* The braille glyph's dots at (x, y) of the screen: bit k of the pattern, as U+2800 + bits. */
static int braille_bits(const dash_screen *s, int x, int y) {
    const unsigned char *g = (const unsigned char *)s->c[y * s->w + x].g;
    if (g[0] != 0xE2 || (g[1] & 0xFC) != 0xA0) return 0;
    return (g[1] & 3) << 6 | (g[2] & 0x3F);
}

static void test_plot(void) {
    /* y = 10 - x / 10 over steps 0..100: every dot's value must lie on that line within
     * one dot of resolution. */
    dash_series ser = { 0 };
    double xs[11], ys[11];
    for (int i = 0; i <= 10; i++) xs[i] = 10 * i, ys[i] = 10 - i;
    ser.x = xs, ser.y = ys, ser.n = 11;
    dash_screen s;
    CHECK(dash_screen_init(&s, 60, 20) == 0, "screen");
    const dash_series *list[1] = { &ser };
    dash_color col[1] = { C_BLUE };
    dash_plot(&s, 0, 0, 60, 20, list, col, 1);
    /* The plot's frame: labels 8 wide, the axis at column 8, 19 rows over 0..10 (ticks). */
    const int ox = 9, pw = 60 - 8 - 1, ph = 19;
    double lo = 0, hi = 10, t[16];
    dash_ticks(&lo, &hi, 5, t);
    int dots = 0, off = 0;
    static const int bit_row[8] = { 0, 1, 2, 0, 1, 2, 3, 3 }, bit_col[8] = { 0, 0, 0, 1, 1, 1, 0, 1 };
    for (int cy = 0; cy < ph; cy++)
        for (int cx = 0; cx < pw; cx++) {
            int b = braille_bits(&s, ox + cx, cy);
            for (int k = 0; k < 8; k++) {
                if (!(b >> k & 1)) continue;
                int px = cx * 2 + bit_col[k], py = cy * 4 + bit_row[k];
                double x = px / (double)(pw * 2 - 1) * 100, y = hi - py / (double)(ph * 4 - 1) * (hi - lo);
                double dot_y = (hi - lo) / (ph * 4 - 1), dot_x = 100.0 / (pw * 2 - 1);
                dots++;
                /* On a slope of -1/10: within a dot vertically plus a dot's worth of x. */
                off += fabs(y - (10 - x / 10)) > dot_y + dot_x / 10 + 1e-9;
            }
        }
    CHECK(dots >= pw * 2 - 2 && off == 0, "%d dots, %d off the line", dots, off);
    char row0[64] = "";
    for (int x = 0; x < 8; x++) strcat(row0, s.c[x].g);
    CHECK(strstr(row0, "10") != NULL, "the top tick is labelled 10: '%s'", row0);
    dash_screen_free(&s);
}

int main(void) {
    test_parser();
    test_quote_roundtrip();
    test_run();
    test_ticks();
    test_plot();
    return check_finish("dash");
}
