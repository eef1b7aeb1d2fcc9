/* libFuzzer target for the safetensors reader (src/hf/safetensors.c): arbitrary bytes are
 * refused with a message or read to tensors that lie inside the data, tile it exactly,
 * and read as floats without touching a byte outside it (ASan watches).
 *
 *   make fuzz            (builds build-fuzz/fuzz_safetensors; seeds in tests/corpus/safetensors) */
#include "hf/safetensors.h"
#include "aneforge.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy sized exactly, so a read past the end is an ASan report */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    st_file *f = NULL;
    af_status st = st_parse(copy, size, "fuzz", &f);
    if (st != AF_OK) {
        REQUIRE(f == NULL && af_error_message()[0] != 0);
        free(copy);
        return 0;
    }
    uint64_t total = 0;
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        REQUIRE(t->begin <= t->end && t->end <= f->data_len);
        REQUIRE(st_find(f, t->name) == t);
        total += t->end - t->begin;
        if (t->count <= (1 << 20)) {
            float *v = malloc(sizeof(float) * (size_t)(t->count ? t->count : 1));
            if (v) st_read_f32(f, t, v);
            free(v);
        }
    }
    REQUIRE(total == f->data_len);
    st_close(f);
    free(copy);
    return 0;
}
