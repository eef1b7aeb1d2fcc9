/* libFuzzer target for the checkpoint container reader. Each input is loaded as it is
 * (almost always a checksum mismatch: that path is short) and again with its trailer
 * replaced by the right SHA-256, so mutations reach the structural checks and the
 * accepting path. An accepted container must answer every getter consistently.
 *
 *   make fuzz            (builds build-fuzz/fuzz_ckpt; seeds in tests/corpus/ckpt) */
#include "data/sha256.h"
#include "train/ckpt.h"
#include "fuzz_util.h"

#include <string.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt *c = NULL;
    if (ckpt_load_bytes(data, size, "fuzz.ckpt", &c) == AF_OK) check_loaded(c, size);
    else REQUIRE(c == NULL);
    ckpt_free(c);
    if (size < 32) return 0;
    uint8_t *fixed = malloc(size);
    REQUIRE(fixed);
    memcpy(fixed, data, size);
    data_sha256(fixed, size - 32, fixed + size - 32);
    c = NULL;
    if (ckpt_load_bytes(fixed, size, "fuzz.ckpt", &c) == AF_OK) check_loaded(c, size);
    else REQUIRE(c == NULL);
    ckpt_free(c);
    free(fixed);
    return 0;
}
