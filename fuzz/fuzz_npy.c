#define _GNU_SOURCE /* memmem */
/* libFuzzer target for the .npy reader: arbitrary bytes must be rejected cleanly or give
 * an array whose shape matches the payload exactly, with every element decoded as
 * IEEE binary32 / binary16 says (checked against the IR's own fp16 converter).
 *
 *   make fuzz            (builds build-fuzz/fuzz_npy; seeds in tests/corpus/npy) */
#include "data/data.h"
#include "ir/fp16.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    float *arr = NULL;
    int rank = -1;
    int64_t dims[8];
    if (data_npy_parse("fuzz.npy", data, size, &arr, &rank, dims) != AF_OK) {
        REQUIRE(arr == NULL && rank == 0);
        return 0;
    }
    REQUIRE(arr != NULL && rank >= 0 && rank <= 8);
    REQUIRE(size >= 10 && memcmp(data, "\x93NUMPY", 6) == 0);
    size_t hstart = data[6] == 1 ? 10 : 12;
    size_t hlen = data[6] == 1 ? (size_t)(data[8] | data[9] << 8)
                               : (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 | (size_t)data[11] << 24;
    REQUIRE(hstart + hlen <= size);
    const char *hdr = (const char *)data + hstart;
    int f2 = memmem(hdr, hlen, "<f2", 3) != NULL, f4 = memmem(hdr, hlen, "<f4", 3) != NULL;
    REQUIRE(f2 || f4);
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) {
        REQUIRE(dims[i] >= 0);
        count *= (uint64_t)dims[i];
    }
    size_t payload = size - hstart - hlen, item = payload && count ? payload / count : 0;
    REQUIRE(count * item == payload && (count == 0 || item == 2 || item == 4));
    const uint8_t *p = data + hstart + hlen;
    for (uint64_t i = 0; i < count; i++) {
        float want;
        if (item == 4) {
            uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            memcpy(&want, &b, 4);
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            ir_f16_to_f32_array(&h, &want, 1);
        }
        REQUIRE(memcmp(&want, &arr[i], 4) == 0 || (want != want && arr[i] != arr[i]));
    }
    free(arr);
    return 0;
}
