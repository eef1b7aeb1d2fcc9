/* k and v packed once per attention head (gemm_bf16.h's cpu_bf16_pack_b and
 * cpu_sgemm_bf16_pb, issue 28): each block of query rows takes a leading part of the
 * head's packing instead of packing its prefix of k and v again. The products over
 * leading blocks (both layouts, a last block that ends off the 32 grid) against a double
 * loop over bf16-rounded operands; a K that would read the packing's data as padding is
 * refused; and the attention's B packings counted through cpu_bf16_stats: per head 2 in
 * the forward and 2 plus 2 per block in the gradient (they were 2 and 5 per block; then
 * 3 plus 2, before k^T and k came from one pass over k).
 * The attention's values are test_attention_bf16's. Skipped (77) without AMX-BF16 or
 * AVX512-BF16. */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "support/bf16_ref.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static test_rng rng = {3030};

static double bf(float x) { return cpu_bf16_to_float(cpu_bf16_round(x)); }

static void check_product(const char *what, const float *C, int64_t ldc, int tb, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const float *B, int64_t ldb) {
    double worst = 0, bound = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = bf(A[i * lda + k]) * bf(tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += p, mag += fabs(p);
            }
            double d = fabs(C[i * ldc + j] - s), tol = 1e-6 + mag * 4 * (double)K * 0x1p-24;
            if (d - tol > worst - bound) worst = d, bound = tol;
        }
    CHECK(worst <= bound, "%s: %lldx%lldx%lld off the bf16-operand reference by %g (bound %g)", what, (long long)M,
          (long long)N, (long long)K, worst, bound);
}

enum { T = 150, D = 40, M = 37 };

static void check_blocks(cpu_bf16_path path) {
    float *x = malloc(sizeof(float) * T * D), *A = malloc(sizeof(float) * M * T), *C = malloc(sizeof(float) * M * T);
    test_fill_uniform(&rng, x, T * D, -1, 1);
    test_fill_uniform(&rng, A, M * T, -1, 1);
    uint16_t *packed = aligned_alloc(64, cpu_bf16_packed_size(T, D) * 2);
    static const int64_t ends[] = {64, 128, T};
    for (int tb = 0; tb < 2; tb++) {
        CHECK(cpu_bf16_pack_b(NULL, path, tb, tb ? D : T, tb ? T : D, x, D, packed, NULL), "pack refused");
        for (int b = 0; b < 3; b++) {
            int64_t e = ends[b], K = tb ? D : e, N = tb ? e : D;
            char what[64];
            snprintf(what, sizeof what, "%s tb %d: leading block to %lld", cpu_bf16_path_name(path), tb, (long long)e);
            CHECK(cpu_sgemm_bf16_pb(NULL, path, 0, M, N, K, A, T, packed, tb ? D : T, tb ? T : D, C, N), "%s refused", what);
            check_product(what, C, N, tb, M, N, K, A, T, x, D);
        }
    }
    /* 100 rows of 150: the packing's rows 100..127 are k's, not zeros */
    CHECK(!cpu_sgemm_bf16_pb(NULL, path, 0, M, D, 100, A, T, packed, T, D, C, D) || 0, "K = 100 of 150 not refused");
    free(x), free(A), free(C), free(packed);
}

static int64_t packed_b(void) {
    int64_t n;
    cpu_bf16_stats(&n, NULL);
    return n;
}

/* The attention forward and gradient of H heads under bf16, counting B packings. */
static void check_attention_packs(void) {
    enum { H = 3, N = H * T * D, BLOCKS = 3 /* of 64 query rows */ };
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_shape s = AF_SHAPE(1, H, T, D);
    af_tensor *in[4] = { af_input(g, "q", AF_F32, s), af_input(g, "k", AF_F32, s), af_input(g, "v", AF_F32, s),
                         af_input(g, "dy", AF_F32, s) };
    af_tensor *res[4];
    res[0] = af_causal_attention(in[0], in[1], in[2], 0);
    CHECK(res[0] && af_backward_from(in[3], res[0], 3, in, res + 1, NULL) == AF_OK, "graph: %s", af_error_message());
    af_compile_opts o = { .precision = AF_PRECISION_BF16, .threads = 2 };
    af_model *m = af_compile(g, 4, in, 4, res, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    float *buf[8];
    for (int i = 0; i < 8; i++) buf[i] = malloc(sizeof(float) * N), test_fill_uniform(&rng, buf[i], N, -1, 1);
    af_buffer bi[4], bo[4];
    for (int i = 0; i < 4; i++) bi[i] = (af_buffer)AF_BUF_F32(buf[i], N), bo[i] = (af_buffer)AF_BUF_F32(buf[4 + i], N);
    int64_t p0 = packed_b();
    CHECK(m && af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
    int64_t want = H * 2 + H * (2 + 2 * BLOCKS);
    CHECK(packed_b() - p0 == want, "%lld right operands packed by %d heads' attention and gradient, %lld expected",
          (long long)(packed_b() - p0), H, (long long)want);
    for (int i = 0; i < 8; i++) free(buf[i]);
    af_model_free(m);
    af_graph_free(g);
}

int main(void) {
    if (cpu_gemm_bf16_best() == CPU_BF16_NONE) {
        fprintf(stderr, "bf16_head_pack: this CPU has neither AMX-BF16 nor AVX512-BF16: skipped\n");
        return 77;
    }
    cpu_bf16_path paths[2];
    for (int p = 0, n = bf16_ref_paths(paths); p < n; p++) check_blocks(paths[p]);
    check_attention_packs();
    return check_finish("bf16_head_pack");
}
