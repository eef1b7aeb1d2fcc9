/* Shared by the data and checkpoint fuzz targets: a check that aborts (so libFuzzer
 * records the input) and the target's entry point declaration. */
#ifndef AF_FUZZ_UTIL_H
#define AF_FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#endif
