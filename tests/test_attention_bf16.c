/* Causal attention under AF_PRECISION_BF16 (issue 28): the node and its gradient against
 * a double loop whose products see bf16-rounded operands (q, k, v, dy, and the softmax
 * weights p and score gradients ds, as the kernel packs them), softmax and its gradient in
 * full precision. The same graph compiled in fp32 must lie far outside the bound, so the
 * check fails unless the products really run on bf16 operands. Several row blocks (seq
 * 150, a partial last one), a head size that is no multiple of 32, three heads over two
 * threads. On a CPU with neither AMX-BF16 nor AVX512-BF16 it reports itself skipped (77). */
#include "aneforge.h"
#include "cpu/gemm_bf16.h"
#include "support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 1, H = 3, T = 150, D = 40, N = B * H * T * D };

static double bf(double x) { return cpu_bf16_to_float(cpu_bf16_round((float)x)); }

/* y, dq, dk, dv of causal attention over q, k, v with output gradient dy, at precision p. */
static int run(af_precision prec, const float *q, const float *k, const float *v, const float *dy, float *out[4]) {
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_shape s = AF_SHAPE(B, H, T, D);
    af_tensor *in[4] = { af_input(g, "q", AF_F32, s), af_input(g, "k", AF_F32, s), af_input(g, "v", AF_F32, s),
                         af_input(g, "dy", AF_F32, s) };
    af_tensor *res[4];
    res[0] = af_causal_attention(in[0], in[1], in[2], 0);
    int ok = res[0] && af_backward_from(in[3], res[0], 3, in, res + 1, NULL) == AF_OK;
    CHECK(ok, "graph: %s", af_error_message());
    af_compile_opts o = { .precision = prec, .threads = 2 };
    af_model *m = ok ? af_compile(g, 4, in, 4, res, &o) : NULL;
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (m) {
        af_buffer bi[4] = { AF_BUF_F32(q, N), AF_BUF_F32(k, N), AF_BUF_F32(v, N), AF_BUF_F32(dy, N) };
        af_buffer bo[4] = { AF_BUF_F32(out[0], N), AF_BUF_F32(out[1], N), AF_BUF_F32(out[2], N), AF_BUF_F32(out[3], N) };
        ok = af_run(m, bi, bo) == AF_OK;
        CHECK(ok, "run: %s", af_error_message());
    }
    af_model_free(m);
    af_graph_free(g);
    return ok && m;
}

/* How far a bf16 rounding of x may move when x itself is only known to within u (the
 * kernel's fp32 p and ds against the reference's double ones): one bf16 step where x
 * lies that close to a rounding boundary, else 0. */
static double slack(double x, double u) { return fabs(bf(x + u) - bf(x - u)); }

/* The reference: ref[0..3] = y, dq, dk, dv, and tol[0..3] the rounding-boundary slack
 * each element's sum may carry (slack over its terms). */
static void reference(const float *q, const float *k, const float *v, const float *dy, double *ref[4], double *tol[4]) {
    double scale = 1.0 / sqrt((double)D), *p = malloc(sizeof(double) * T), *ds = malloc(sizeof(double) * T);
    for (int r = 0; r < 4; r++) memset(ref[r], 0, sizeof(double) * N), memset(tol[r], 0, sizeof(double) * N);
    for (int64_t h = 0; h < B * H; h++) {
        const float *qh = q + h * T * D, *kh = k + h * T * D, *vh = v + h * T * D, *gh = dy + h * T * D;
        double *y = ref[0] + h * T * D, *dq = ref[1] + h * T * D, *dk = ref[2] + h * T * D, *dv = ref[3] + h * T * D;
        double *ty = tol[0] + h * T * D, *tq = tol[1] + h * T * D, *tk = tol[2] + h * T * D, *tv = tol[3] + h * T * D;
        for (int i = 0; i < T; i++) {
            double mx = -INFINITY, sum = 0, dot = 0;
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int c = 0; c < D; c++) s += bf(qh[i * D + c]) * bf(kh[j * D + c]);
                p[j] = s * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
            for (int j = 0; j <= i; j++) {
                p[j] /= sum;
                double dp = 0, sp = slack(p[j], 1e-5 * p[j]);
                for (int c = 0; c < D; c++) {
                    y[i * D + c] += bf(p[j]) * bf(vh[j * D + c]);
                    dv[j * D + c] += bf(p[j]) * bf(gh[i * D + c]);
                    ty[i * D + c] += sp * fabs(vh[j * D + c]);
                    tv[j * D + c] += sp * fabs(gh[i * D + c]);
                    dp += bf(gh[i * D + c]) * bf(vh[j * D + c]);
                }
                ds[j] = dp;
                dot += p[j] * dp;
            }
            for (int j = 0; j <= i; j++) {
                /* fp32's ds carries the rounding of dp and the row dot before they cancel */
                double d = p[j] * (ds[j] - dot) * scale, sd = slack(d, 1e-5 * p[j] * (fabs(ds[j]) + fabs(dot) + 1e-3) * scale);
                for (int c = 0; c < D; c++) {
                    dq[i * D + c] += bf(d) * bf(kh[j * D + c]);
                    dk[j * D + c] += bf(d) * bf(qh[i * D + c]);
                    tq[i * D + c] += sd * fabs(kh[j * D + c]);
                    tk[j * D + c] += sd * fabs(qh[i * D + c]);
                }
            }
        }
    }
    free(p);
    free(ds);
}

/* Elements off the reference by more than fp32 sums' error (2e-5 of the largest value,
 * about 150 terms' worth) plus their slack; *worst: the largest such excess over it. */
static int64_t outside(const float *y, const double *ref, const double *tol, double *worst) {
    double big = 0;
    for (int i = 0; i < N; i++) big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    int64_t n = 0;
    *worst = 0;
    for (int i = 0; i < N; i++) {
        double e = fabs(y[i] - ref[i]) / (2e-5 * big + tol[i]);
        n += e > 1;
        *worst = e > *worst ? e : *worst;
    }
    return n;
}

int main(void) {
    if (cpu_gemm_bf16_best() == CPU_BF16_NONE) {
        printf("SKIP: this CPU has neither AMX-BF16 nor AVX512-BF16; the bf16 attention is untested here\n");
        return 77;
    }
    test_rng rng = { 2828 };
    float *in[4], *o16[4], *o32[4];
    double *ref[4], *tol[4];
    for (int r = 0; r < 4; r++) {
        in[r] = malloc(sizeof(float) * N), o16[r] = malloc(sizeof(float) * N), o32[r] = malloc(sizeof(float) * N);
        ref[r] = malloc(sizeof(double) * N), tol[r] = malloc(sizeof(double) * N);
        /* q and k up to 3: peaked softmax rows, not only near-uniform ones */
        test_fill_uniform(&rng, in[r], N, r < 2 ? -3 : -1, r < 2 ? 3 : 1);
    }
    reference(in[0], in[1], in[2], in[3], ref, tol);
    if (run(AF_PRECISION_BF16, in[0], in[1], in[2], in[3], o16) && run(AF_PRECISION_FP32, in[0], in[1], in[2], in[3], o32)) {
        static const char *name[4] = { "y", "dq", "dk", "dv" };
        for (int r = 0; r < 4; r++) {
            double w16, w32;
            int64_t n16 = outside(o16[r], ref[r], tol[r], &w16), n32 = outside(o32[r], ref[r], tol[r], &w32);
            printf("%s: outside the bound: bf16 path %lld (worst %.3g of it), fp32 path %lld of %d (worst %.3g)\n", name[r],
                   (long long)n16, w16, (long long)n32, N, w32);
            CHECK(n16 == 0, "%s: bf16 attention off the bf16-operand reference at %lld elements (worst %g of the bound)",
                  name[r], (long long)n16, w16);
            /* fp32 operands: every term up to 2^-9 off, so most sums leave the bound */
            CHECK(n32 > N / 4, "%s: the case cannot tell bf16 operands from fp32 (%lld outside)", name[r], (long long)n32);
        }
    }
    for (int r = 0; r < 4; r++) free(in[r]), free(o16[r]), free(o32[r]), free(ref[r]), free(tol[r]);
    return check_finish("attention_bf16");
}
