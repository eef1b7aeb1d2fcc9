/* libFuzzer target for the Core ML package readers: the first byte picks the reader,
 * 0 the Manifest.json walker, anything else the Model protobuf decoder, whose MIL text
 * (when it decodes) is then parsed by the MIL reader with no weight files at hand.
 * Checks that the decoded text is NUL-terminated and that a failure leaves a message.
 *
 *   make fuzz-build && ./build-fuzz/fuzz_coreml -max_total_time=120 tests/corpus/coreml
 *
 * Seeds: tests/corpus/coreml, byte 0 or 1 followed by a manifest or a model.mlmodel
 * that aneforge exported or coremltools converted. */
#include "coreml/coreml.h"
#include "mil/mil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_coreml: %s failed\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (data[0] == 0) {
        char path[256];
        af_status st = coreml_manifest_root((const char *)p, n, "Manifest.json", path, sizeof path);
        REQUIRE(st == AF_OK ? strlen(path) < sizeof path : af_error_message()[0] != 0);
        return 0;
    }
    pb_buf text;
    af_status st = coreml_decode(p, n, "model.mlmodel", &text);
    if (st) {
        REQUIRE(af_error_message()[0] != 0 && text.p == NULL);
        return 0;
    }
    REQUIRE(text.p && text.p[text.n] == 0 && strlen((const char *)text.p) == text.n);
    mil_module m;
    if (mil_parse((const char *)text.p, text.n, NULL, &m) == AF_OK) af_graph_free(m.g);
    pb_free(&text);
    return 0;
}
