/* libFuzzer target for the CIFAR-10 binary reader: the input is one batch file, read
 * once and then appended again (the multi-file path). Accepted records must come out
 * byte for byte: label, then the 3072 CHW pixel bytes.
 *
 *   make fuzz            (builds build-fuzz/fuzz_cifar; seeds in tests/corpus/cifar) */
#include "data/data.h"
#include "fuzz_util.h"

#include <string.h>

enum { PIX = 3 * 32 * 32, REC = 1 + PIX };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *pixels = NULL, *labels = NULL;
    size_t count = 0;
    if (data_cifar_append("fuzz.bin", data, size, &pixels, &labels, &count) == AF_OK) {
        REQUIRE(size % REC == 0 && count == size / REC && count > 0);
        REQUIRE(data_cifar_append("fuzz2.bin", data, size, &pixels, &labels, &count) == AF_OK);
        REQUIRE(count == 2 * (size / REC));
        for (size_t i = 0; i < count; i++) {
            const uint8_t *rec = data + (i % (size / REC)) * REC;
            REQUIRE(labels[i] == rec[0] && labels[i] < 10);
            REQUIRE(memcmp(pixels + i * PIX, rec + 1, PIX) == 0);
        }
    } else {
        REQUIRE(count == 0);
    }
    free(pixels);
    free(labels);
    return 0;
}
