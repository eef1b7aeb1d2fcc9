/* The reference the bf16 product tests share: op(A) op(B) over bf16-rounded operands,
 * summed in double, against the bound of fp32 sums. */
#ifndef TEST_BF16_REF_H
#define TEST_BF16_REF_H
#include "cpu/gemm_bf16.h"

#include <stdint.h>

/* x rounded to bf16, as a double */
double bf16_ref_round(float x);
/* Checks C (M x N, leading dimension ldc) against the double sum over bf16-rounded
 * operands of op(A) op(B), op = transpose where ta/tb; a failure is a CHECK naming what. */
void bf16_ref_check_product(const char *what, const float *C, int64_t ldc, int ta, int tb, int64_t M, int64_t N,
                            int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb);
/* The bf16 paths this CPU runs, AMX first (each probed with a 1 x 1 x 1 product), into
 * out; returns how many. */
int bf16_ref_paths(cpu_bf16_path out[2]);
#endif
