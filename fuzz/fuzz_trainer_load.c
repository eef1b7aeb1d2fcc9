/* libFuzzer target for the trainer's import of a loaded checkpoint (af_trainer_load
 * after ckpt_load). The first input byte picks one of two small fixed trainers and the
 * input form: a checkpoint file (its SHA-256 trailer fixed up so mutations get past the
 * checksum) or the compact record list of fuzz_trainer.h. Each input starts from the
 * trainer's pristine state. A failed import must leave that state untouched; an
 * accepted one must leave a trainer that can take a training step.
 *
 *   make fuzz            (builds build-fuzz/fuzz_trainer_load; seeds in tests/corpus/trainer_load) */
#include "data/sha256.h"
#include "train/trainer.h"
#include "train/trainer_io.h"
#include "fuzz_util.h"
#include "fuzz_trainer.h"

#include <math.h>

static af_trainer *trainers[FT_TRAINERS];
static ckpt *pristine[FT_TRAINERS];

static void setup(void) {
    if (trainers[0]) return;
    for (int i = 0; i < FT_TRAINERS; i++) {
        trainers[i] = ft_make_trainer(i);
        pristine[i] = ckpt_new();
        REQUIRE(trainers[i] && pristine[i] && tr_export(trainers[i], pristine[i]) == AF_OK);
    }
}

/* Same counters, scale and host-side values as the pristine export. */
static int matches(af_trainer *t, const ckpt *p) {
    ckpt *now = ckpt_new();
    REQUIRE(now && tr_export(t, now) == AF_OK && ckpt_count(now) == ckpt_count(p));
    int same = 1;
    for (int64_t i = 0; i < ckpt_count(p) && same; i++) {
        int64_t a, b;
        const void *x = ckpt_get(p, ckpt_name(p, i), &a), *y = ckpt_get(now, ckpt_name(p, i), &b);
        same = y && a == b && memcmp(x, y, (size_t)a) == 0;
    }
    ckpt_free(now);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    if (size < 1) return 0;
    int which = data[0] & 1, container = !(data[0] & 2);
    af_trainer *t = trainers[which];
    REQUIRE(tr_import(t, pristine[which]) == AF_OK); /* start from the same state every time */
    t->stuck_skips = 0;                               /* the one counter a checkpoint does not hold */
    data++, size--;
    ckpt *c = NULL;
    if (container) {
        if (size < 32) return 0;
        uint8_t *fixed = malloc(size);
        REQUIRE(fixed);
        memcpy(fixed, data, size);
        data_sha256(fixed, size - 32, fixed + size - 32);
        af_status st = ckpt_load_bytes(fixed, size, "fuzz.ckpt", &c);
        free(fixed);
        if (st != AF_OK) return 0;
    } else {
        c = ft_records_to_ckpt(data, size);
        REQUIRE(c);
    }
    if (tr_import(t, c) != AF_OK) {
        REQUIRE(matches(t, pristine[which])); /* a failed load changes nothing */
    } else {
        REQUIRE(t->step >= 0 && t->skipped >= 0 && t->clean_run >= 0 && t->skipped_consecutive >= 0);
        REQUIRE(t->scale > 0 && isfinite(t->scale) && t->moment_unit > 0 && isfinite(t->moment_unit));
        /* the records' meaning was checked: finite weights and moments, second moments >= 0 */
        for (int i = 0; i < t->np; i++)
            for (int64_t j = 0; j < t->count[i]; j++)
                REQUIRE(isfinite(t->master[i][j]) && isfinite(t->m[i][j]) && isfinite(t->v[i][j]) && t->v[i][j] >= 0);
        float x[FT_BATCH * FT_IN], y[FT_BATCH * FT_OUT] = {1, 0, 0, 1};
        for (int i = 0; i < FT_BATCH * FT_IN; i++) x[i] = (float)(i % 5) - 2.0f;
        int64_t before = t->step + t->skipped;
        af_step_info info;
        REQUIRE(af_trainer_step(t, x, y, &info) == AF_OK);
        REQUIRE(t->step + t->skipped == before + 1);
    }
    ckpt_free(c);
    return 0;
}
