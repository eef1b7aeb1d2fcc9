/* Runs a parsed MIL module once on the CPU at the engine's fp16 precision, one thread,
 * fp32 host buffers (at most 4 inputs and 4 outputs); failures are CHECKs. */
#ifndef AF_TEST_MILRUN_H
#define AF_TEST_MILRUN_H
#include "mil/mil.h"

void test_mil_run(const mil_module *m, const float *const *in, float **out);

#endif
