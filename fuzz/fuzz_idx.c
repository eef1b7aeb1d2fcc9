/* libFuzzer target for the IDX reader (MNIST / Fashion-MNIST images and labels): every
 * input is read as a rank-1 (labels) and a rank-3 (images) file; an accepted one must
 * have a header whose dims multiply to exactly the payload behind it.
 *
 *   make fuzz            (builds build-fuzz/fuzz_idx; seeds in tests/corpus/idx) */
#include "data/data.h"
#include "fuzz_util.h"

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int rank = 1; rank <= 3; rank += 2) {
        int64_t dims[3] = {-1, -1, -1};
        const uint8_t *payload = NULL;
        if (data_idx_parse("fuzz.idx", data, size, rank, dims, &payload) != AF_OK) {
            REQUIRE(payload == NULL);
            continue;
        }
        size_t hdr = 4 + 4 * (size_t)rank;
        REQUIRE(size >= hdr && data[0] == 0 && data[1] == 0 && data[2] == 0x08 && data[3] == rank);
        REQUIRE(payload == data + hdr);
        uint64_t count = 1;
        for (int i = 0; i < rank; i++) {
            REQUIRE(dims[i] >= 1 && (uint64_t)dims[i] == be32(data + 4 + 4 * i));
            count *= (uint64_t)dims[i];
        }
        REQUIRE(count == size - hdr);
        volatile unsigned sum = 0;
        for (uint64_t k = 0; k < count; k++) sum += payload[k]; /* every byte is in bounds */
        (void)sum;
    }
    return 0;
}
