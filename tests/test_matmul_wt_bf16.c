/* Products against large weights at AF_PRECISION_BF16 on the CPU, which k_matmul.c cuts
 * into chunks run side by side: x W^T (a weight stored [N, K], as a linear layer's),
 * taken as C^T = W x^T over chunks of W's rows, and x W with a long K (lm_head's input
 * gradient), split over K among the threads and summed. Checked against a double loop
 * over the bf16-rounded operands: the plain product, a fused bias (applied per column
 * of C after the transpose), a fused ReLU, N across several chunks and not a multiple of
 * one, matmul_w (a matmul node with a weight of at most 8,192 rows is one product,
 * k_matmul.c), and
 * K across several chunks. Products with a side of 8 or less (LoRA's rank 8, a few
 * rows) stay fp32: they equal the double loop over the unrounded operands. A fused
 * addend (the product plus a tensor of its shape, fuse.c) on each path, the chunked one
 * applying the whole epilogue on C after the transpose. Skipped (77)
 * on a CPU with no bf16 path. */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "support/check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 99;
static float draw(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}
static bool rounded = true; /* the product is expected in bf16 */
static double bf(float x) { return rounded ? cpu_bf16_to_float(cpu_bf16_round(x)) : x; }

/* relu?(x W^T + b) with x [M, K], W [N, K]; matmul_w: af_matmul_w instead of af_matmul;
 * plain: x W with W stored [K, N]; addend: + r, a second input [M, N], in place of b */
static bool addend;
static void check_as(int64_t M, int64_t N, int64_t K, bool bias, bool relu, bool matmul_w, bool plain) {
    float *x = malloc(sizeof(float) * (size_t)(M * K)), *w = malloc(sizeof(float) * (size_t)(N * K));
    float *b = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)(M * N));
    float *r = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M * N; i++) r[i] = 3 * draw();
    for (int64_t i = 0; i < M * K; i++) x[i] = draw();
    for (int64_t i = 0; i < N * K; i++) w[i] = draw();
    for (int64_t i = 0; i < N; i++) b[i] = draw();
    af_graph *g = af_graph_new();
    af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(M, K));
    af_tensor *wt = af_const(g, "w", plain ? AF_SHAPE(K, N) : AF_SHAPE(N, K), w);
    af_tensor *o = matmul_w ? af_matmul_w(xi, wt) : af_matmul(xi, wt, 0, !plain);
    af_tensor *ri = addend ? af_input(g, "r", AF_F32, AF_SHAPE(M, N)) : NULL, *ins[2] = { xi, ri };
    if (bias) o = af_add(o, af_const(g, "b", AF_SHAPE(N), b));
    if (addend) o = af_add(ri, o);
    if (relu) o = af_relu(o);
    af_compile_opts opts = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_BF16, .threads = 2 };
    af_model *m = o ? af_compile(g, addend ? 2 : 1, ins, 1, &o, &opts) : NULL;
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (m) {
        af_buffer in[2] = { AF_BUF_F32(x, M * K), AF_BUF_F32(r, M * N) }, out = AF_BUF_F32(y, M * N);
        CHECK(af_run(m, in, &out) == AF_OK, "run: %s", af_error_message());
        double worst = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = (bias ? b[j] : 0) + (addend ? r[i * N + j] : 0);
                for (int64_t k = 0; k < K; k++) acc += bf(x[i * K + k]) * bf(plain ? w[k * N + j] : w[j * K + k]);
                if (relu && acc < 0) acc = 0;
                double e = fabs(acc - y[i * N + j]);
                worst = e > worst ? e : worst;
            }
        /* fp32 sums of K products of bf16 values: within a few fp32 ulps of the sum */
        CHECK(worst < (rounded ? 1e-4 : 1e-5) * sqrt((double)K),
              "M %lld N %lld K %lld bias %d relu %d matmul_w %d plain %d addend %d: worst error %g", (long long)M,
              (long long)N, (long long)K, bias, relu, matmul_w, plain, addend, worst);
        af_model_free(m);
    }
    af_graph_free(g);
    free(x), free(w), free(b), free(y), free(r);
}

static void check(int64_t M, int64_t N, int64_t K, bool bias, bool relu, bool matmul_w) {
    check_as(M, N, K, bias, relu, matmul_w, false);
}

/* A narrow product: fp32, so within fp32 rounding of the unrounded operands' product. */
static void check_fp32(int64_t M, int64_t N, int64_t K, bool plain) {
    rounded = false;
    check_as(M, N, K, false, false, false, plain);
    rounded = true;
}

int main(void) {
    if (!cpu_gemm_bf16_best()) {
        fprintf(stderr, "matmul_wt_bf16: this CPU has neither AMX-BF16 nor AVX512-BF16: skipped\n");
        return 77;
    }
    check(32, 300, 256, false, false, false);
    check(33, 4500, 288, true, false, false); /* three chunks of W's rows, the last partial */
    check(40, 2100, 256, true, true, false);
    check(36, 2049, 320, false, false, true);
    check(32, 1000, 256, false, false, false); /* one chunk per thread */
    check(32, 100, 256, true, false, false);   /* below the chunked path's threshold */
    check(32, 9000, 256, true, true, false);   /* a matmul node past WT_DIRECT_MAX: the chunked form */
    check_as(32, 40, 20000, false, false, false, true); /* K split over the threads: 5 chunks, the last partial */
    check_as(32, 40, 20000, true, false, false, true);  /* a fused bias: not split */
    addend = true;
    check(32, 300, 256, false, false, false);  /* one product, the addend in its epilogue */
    check(32, 9000, 256, false, true, false);  /* the chunked form: added on C, then the ReLU */
    check_as(32, 40, 20000, false, false, false, true); /* a long K with an addend: not split */
    check(36, 2049, 320, false, false, true);  /* matmul_w */
    addend = false;
    check_fp32(64, 300, 8, false);  /* LoRA's B: rank 8 */
    check_fp32(64, 8, 300, false);  /* LoRA's A */
    check_fp32(8, 300, 256, false); /* a few rows */
    check_fp32(64, 8, 300, true);
    return check_finish("test_matmul_wt_bf16");
}
