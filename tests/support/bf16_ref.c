#include "support/bf16_ref.h"
#include "cpu/gemm_bf16.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>

double bf16_ref_round(float x) { return cpu_bf16_to_float(cpu_bf16_round(x)); }

void bf16_ref_check_product(const char *what, const float *C, int64_t ldc, int ta, int tb, int64_t M, int64_t N,
                            int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb) {
    double worst = 0, bound = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = bf16_ref_round(ta ? A[k * lda + i] : A[i * lda + k]) *
                           bf16_ref_round(tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += p, mag += fabs(p);
            }
            double d = fabs(C[i * ldc + j] - s), tol = 1e-6 + mag * 4 * (double)K * 0x1p-24;
            if (d - tol > worst - bound) worst = d, bound = tol;
        }
    CHECK(worst <= bound, "%s: %lldx%lldx%lld off the bf16-operand reference by %g (bound %g)", what, (long long)M,
          (long long)N, (long long)K, worst, bound);
}

int bf16_ref_paths(cpu_bf16_path out[2]) {
    static const cpu_bf16_path all[] = { CPU_BF16_AMX, CPU_BF16_AVX512 };
    int n = 0;
    for (int p = 0; p < 2; p++) {
        float one = 1, z;
        if (cpu_sgemm_bf16(NULL, all[p], 1, 1, 1, &one, 1, &one, 1, &z, 1)) out[n++] = all[p];
    }
    return n;
}
