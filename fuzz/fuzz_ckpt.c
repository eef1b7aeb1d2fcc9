/* libFuzzer target for the checkpoint container reader. Each input is loaded as it is
 * (almost always a checksum mismatch: that path is short) and again with its trailer
 * replaced by the right SHA-256, so mutations reach the structural checks and the
 * accepting path. An accepted container must answer every getter consistently, and
 * (the format has one encoding per content) save back to exactly the bytes it came from.
 *
 *   make fuzz            (builds build-fuzz/fuzz_ckpt; seeds in tests/corpus/ckpt) */
#include "data/sha256.h"
#include "train/ckpt.h"
#include "fuzz_util.h"

#include <string.h>
#include <unistd.h>

static void check_loaded(const ckpt *c, size_t size) {
    int64_t n = ckpt_count(c), total = 0;
    REQUIRE(n >= 0 && (uint64_t)n <= size / 24);
    REQUIRE(ckpt_name(c, n) == NULL && ckpt_name(c, -1) == NULL);
    for (int64_t i = 0; i < n; i++) {
        const char *name = ckpt_name(c, i);
        REQUIRE(name && name[0] && strlen(name) <= AF_CKPT_MAX_NAME);
        int64_t bytes = -1;
        const uint8_t *p = ckpt_get(c, name, &bytes);
        REQUIRE(p && bytes >= 0 && (uint64_t)bytes <= size && p[bytes] == 0); /* the hidden NUL */
        total += bytes;
        int64_t v;
        af_status st = ckpt_get_i64(c, name, &v);
        REQUIRE(bytes == 8 ? st == AF_OK : st == AF_ERR_CORRUPT);
        const char *s = ckpt_get_str(c, name);
        REQUIRE(s ? strlen(s) == (size_t)bytes : memchr(p, 0, (size_t)bytes) != NULL);
        for (int64_t j = 0; j < i; j++) REQUIRE(strcmp(ckpt_name(c, j), name) != 0); /* unique */
    }
    REQUIRE((uint64_t)total <= size);
}

/* Saves c (through the real atomic save, in a per-process scratch directory) and checks
 * the file is byte for byte `want`. */
static void check_resave(const ckpt *c, const uint8_t *want, size_t size) {
    static char path[512];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_ckpt_%d.ckpt", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    }
    REQUIRE(ckpt_save(c, path) == AF_OK);
    FILE *f = fopen(path, "rb");
    REQUIRE(f);
    uint8_t *got = malloc(size + 1);
    REQUIRE(got);
    size_t n = fread(got, 1, size + 1, f);
    fclose(f);
    remove(path);
    REQUIRE(n == size && memcmp(got, want, size) == 0);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt *c = NULL;
    if (ckpt_load_bytes(data, size, "fuzz.ckpt", &c) == AF_OK) check_loaded(c, size), check_resave(c, data, size);
    else REQUIRE(c == NULL);
    ckpt_free(c);
    if (size < 32) return 0;
    uint8_t *fixed = malloc(size);
    REQUIRE(fixed);
    memcpy(fixed, data, size);
    data_sha256(fixed, size - 32, fixed + size - 32);
    c = NULL;
    if (ckpt_load_bytes(fixed, size, "fuzz.ckpt", &c) == AF_OK) check_loaded(c, size), check_resave(c, fixed, size);
    else REQUIRE(c == NULL);
    ckpt_free(c);
    free(fixed);
    return 0;
}
