/* Checkpoint records are checked for meaning after the checksum (issue 23, item 7): the
 * checksum proves only that a file is what was written, so a checkpoint whose weights or
 * Adam moments hold NaN or inf, whose second moments are negative, or whose run counters
 * are beyond any run (2^62) is refused with a message naming the record, and a refused
 * load leaves the trainer as it was. Both the library's trainer checkpoints
 * (af_trainer_load) and train llama's (--resume, and generate/eval --model). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "train/ckpt.h"
#include "train/trainer_io.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/af_ckpt_valuesXXXXXX";

static const char *tpath(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) & 3;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int msg_has(const char *s) { return strstr(af_error_message(), s) != NULL; }

/* A copy of src with record `name` holding element `at` of its floats set to v (float
 * records) or, for an int64 record, the value i64. */
static ckpt *with_float(const ckpt *src, const char *name, int64_t at, float v) {
    ckpt *c = ckpt_new();
    for (int64_t i = 0; c && i < ckpt_count(src); i++) {
        const char *nm = ckpt_name(src, i);
        int64_t bytes;
        const void *d = ckpt_get(src, nm, &bytes);
        if (strcmp(nm, name)) {
            ckpt_put(c, nm, d, bytes);
            continue;
        }
        float *copy = malloc((size_t)bytes);
        memcpy(copy, d, (size_t)bytes);
        CHECK(at * 4 < bytes, "%s has %lld bytes", name, (long long)bytes);
        if (at * 4 < bytes) copy[at] = v;
        ckpt_put(c, nm, copy, bytes);
        free(copy);
    }
    return c;
}

static af_trainer *tiny_trainer(void) {
    af_net net = af_net_mlp(AF_SHAPE(4), 3, 2, 7);
    af_train_opts o = af_train_defaults();
    o.compile.target = AF_TARGET_CPU;
    o.batch = o.eval_batch = 2;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "tiny trainer: %s", af_error_message());
    return t;
}

static ckpt *state_of(af_trainer *t) {
    ckpt *c = ckpt_new();
    CHECK(c && tr_export(t, c) == AF_OK, "export: %s", af_error_message());
    return c;
}

static int same_state(af_trainer *t, const ckpt *want) {
    ckpt *now = state_of(t);
    int same = ckpt_count(now) == ckpt_count(want);
    for (int64_t i = 0; same && i < ckpt_count(want); i++) {
        int64_t a, b;
        const void *x = ckpt_get(want, ckpt_name(want, i), &a), *y = ckpt_get(now, ckpt_name(want, i), &b);
        same = y && a == b && !memcmp(x, y, (size_t)a);
    }
    ckpt_free(now);
    return same;
}

static void test_trainer(void) {
    af_trainer *a = tiny_trainer(), *b = tiny_trainer();
    if (!a || !b) goto done;
    const float x[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1}, y[4] = {1, 0, 0, 1};
    for (int s = 0; s < 3; s++) CHECK(af_trainer_step(a, x, y, NULL) == AF_OK, "step: %s", af_error_message());
    ckpt *good = state_of(a), *before = state_of(b);
    const struct { const char *rec; int64_t at; float v; const char *says; } bad[] = {
        {"param.0", 5, NAN, "record 'param.0' holds nan at element 5, which is not finite"},
        {"param.3", 1, -INFINITY, "record 'param.3' holds -inf at element 1"},
        {"adam_m.1", 0, INFINITY, "record 'adam_m.1' holds inf at element 0"},
        {"adam_v.2", 2, -1.0f, "record 'adam_v.2' holds -1 at element 2, which is negative"},
        {"adam_v.0", 0, NAN, "record 'adam_v.0' holds nan"},
    };
    const char *path = tpath("t.ckpt");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ckpt *e = with_float(good, bad[i].rec, bad[i].at, bad[i].v);
        CHECK(e && ckpt_save(e, path) == AF_OK, "save: %s", af_error_message());
        af_status st = af_trainer_load(b, path);
        CHECK(st == AF_ERR_CORRUPT && msg_has(bad[i].says) && msg_has("start again"), "case %s: status %d, message: %s",
              bad[i].rec, (int)st, af_error_message());
        CHECK(same_state(b, before), "case %s: the refused load changed the trainer", bad[i].rec);
        ckpt_free(e);
    }
    /* Finite moments in a unit so small that this plan's units overflow them (the fuzzer's
     * find): r = sqrt(v) saved in units of 1e-30 is 1e30 r here, and v = r^2 is inf. */
    const float tiny = 1e-30f;
    ckpt *u1 = with_float(good, "trainer.moment_unit", 0, tiny), *u2 = NULL;
    if (u1) {
        u2 = ckpt_new();
        for (int64_t i = 0; u2 && i < ckpt_count(u1); i++) {
            int64_t bytes;
            const void *d = ckpt_get(u1, ckpt_name(u1, i), &bytes);
            if (strcmp(ckpt_name(u1, i), "trainer.moments")) ckpt_put(u2, ckpt_name(u1, i), d, bytes);
            else ckpt_put_str(u2, "trainer.moments", "rms");
        }
    }
    CHECK(u2 && ckpt_save(u2, path) == AF_OK, "save: %s", af_error_message());
    af_status ust = af_trainer_load(b, path);
    CHECK(ust == AF_ERR_CORRUPT && msg_has("overflow a float in this plan's moment units") && msg_has("'adam_v.0'"),
          "moment unit 1e-30: status %d, %s", (int)ust, af_error_message());
    CHECK(same_state(b, before), "the refused load changed the trainer");
    ckpt_free(u1);
    ckpt_free(u2);
    /* A legal edge: v = 0 and a negative first moment are what runs produce. */
    ckpt *e = with_float(good, "adam_v.2", 0, 0.0f), *e2 = e ? with_float(e, "adam_m.2", 0, -3.0f) : NULL;
    CHECK(e2 && ckpt_save(e2, path) == AF_OK && af_trainer_load(b, path) == AF_OK, "v = 0, m < 0: %s", af_error_message());
    ckpt_free(e);
    ckpt_free(e2);
    ckpt_free(good);
    ckpt_free(before);
done:
    af_trainer_free(a);
    af_trainer_free(b);
}

/* ------------------------------------------------------------- train llama's checkpoints */

static ckpt *edit_i64(const ckpt *src, const char *name, int64_t v) {
    ckpt *c = ckpt_new();
    for (int64_t i = 0; c && i < ckpt_count(src); i++) {
        const char *nm = ckpt_name(src, i);
        int64_t bytes;
        const void *d = ckpt_get(src, nm, &bytes);
        if (strcmp(nm, name)) ckpt_put(c, nm, d, bytes);
        else ckpt_put_i64(c, nm, v);
    }
    return c;
}

static void expect_cli(const char *args, const char *says, const char *what) {
    char out[8192];
    int rc = cli_run(args, 1, out, sizeof out);
    CHECK(rc != 0 && strstr(out, says), "%s: exit %d, output '%s' (want '%s')", what, rc, out, says);
}

static void test_llama(void) {
    int32_t tok[600];
    for (int i = 0; i < 600; i++) tok[i] = (int32_t)((i * 7 + i / 9) % 10);
    const char *data = tpath("tok.bin");
    CHECK(af_tokens_write(data, tok, 600) == AF_OK, "tokens: %s", af_error_message());
    char common[1024], args[2048], out[8192];
    snprintf(common, sizeof common, "train llama --config tiny --steps 4 --batch 2 --seq 16 --seed 3 --data %s", data);
    const char *saved = tpath("l.ckpt");
    snprintf(args, sizeof args, "%s --save %s --stop-after 2", common, saved);
    int rc = cli_run(args, 1, out, sizeof out);
    CHECK(rc == 0, "train llama --save: exit %d, %s", rc, out);
    ckpt *good = NULL;
    CHECK(ckpt_load(saved, &good) == AF_OK, "load: %s", af_error_message());
    if (!good) return;

    const char *bad = tpath("bad.ckpt");
    struct { ckpt *c; const char *says; } cases[] = {
        {edit_i64(good, "cli.steps", (int64_t)1 << 62), "cli.steps 4611686018427387904"},
        {edit_i64(good, "cli.calls", -1), "must be in 0..2^62"},
        {with_float(good, "adam_v.3", 4, -0.5f), "record 'adam_v.3' holds -0.5"},
        {with_float(good, "param.1", 0, NAN), "record 'param.1' holds nan"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(cases[i].c && ckpt_save(cases[i].c, bad) == AF_OK, "save: %s", af_error_message());
        snprintf(args, sizeof args, "%s --resume %s", common, bad);
        expect_cli(args, cases[i].says, "train llama --resume");
        ckpt_free(cases[i].c);
    }
    /* generate and eval read the weights alone: a NaN weight is refused there too. */
    ckpt *nan_w = with_float(good, "param.0", 3, NAN);
    CHECK(nan_w && ckpt_save(nan_w, bad) == AF_OK, "save: %s", af_error_message());
    snprintf(args, sizeof args, "generate --model %s --tokens 1,2 --steps 4", bad);
    expect_cli(args, "record 'param.0' holds nan at element 3", "generate --model");
    snprintf(args, sizeof args, "eval llama --model %s --data %s --seq 8", bad, data);
    expect_cli(args, "record 'param.0' holds nan at element 3", "eval llama --model");
    ckpt_free(nan_w);
    /* The untouched checkpoint still resumes. */
    snprintf(args, sizeof args, "%s --resume %s", common, saved);
    rc = cli_run(args, 1, out, sizeof out);
    CHECK(rc == 0, "resume of the good checkpoint: exit %d, %s", rc, out);
    ckpt_free(good);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_trainer();
    test_llama();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("ckpt_values");
}
