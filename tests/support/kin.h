/* Helpers of the kin tests (tests/test_kin_*.c, issue 32): run a small graph on the CPU
 * and evaluate the same graph with the independent double reference (support/ref.c),
 * rounding where the executor rounds in fp16 storage (fed inputs, constants, every node
 * result), as tests/test_ops.c does. */
#ifndef AF_TEST_KIN_H
#define AF_TEST_KIN_H
#include "aneforge.h"
#include "ir/ir.h"

#include <stdbool.h>

#define KIN_MAX_IO 8
typedef struct {
    af_graph *g;
    int nin, nout;
    af_tensor *in[KIN_MAX_IO];
    const float *data[KIN_MAX_IO]; /* count(in[i]) values each */
    af_tensor *out[KIN_MAX_IO];
} kin_graph;

/* Compiles for the CPU (fp16 storage or fp32, `threads` threads), runs once and writes
 * output k to out[k] (count(out[k]) floats, malloc'd). 0, or -1 after a failed CHECK. */
int kin_run(const kin_graph *k, bool fp16, int threads, float **out);
/* The reference value of output k in ref[k] (malloc'd doubles). 0, or -1 after a failed CHECK. */
int kin_ref(const kin_graph *k, bool fp16, double **ref);
/* Runs and compares every output: |got - want| <= abs_tol + rel_tol * |want|, NaN never
 * passes. Frees what it allocated. Returns the number of bad elements. */
int kin_check(const kin_graph *k, bool fp16, int threads, double abs_tol, double rel_tol, const char *what);
#endif
