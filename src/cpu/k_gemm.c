/* The kernels' GEMM switch (kernels.h): fp32, or the bf16 path with fp32 accumulation
 * (AF_PRECISION_BF16). Matmul and conv products come here (the causal attention calls
 * the bf16 GEMM itself, k_attention.c); norms and the rest stay fp32, as under autocast. */
#include "cpu/gemm_bf16.h"
#include "cpu/kernels.h"

#include <stdlib.h>

/* The tensor B is, as a cache key, when B is the node's whole second source (a weight
 * [N, K] or [K, N]) and the call is the node's own (not one of several run side by side by
 * the pool's workers, which would share the cache). */
static const af_tensor *weight_of(const cpu_call *c, cpu_pool *p, const float *B, int64_t K, int64_t N) {
    if (!c->bf16_cache || p != c->pool || c->t->nsrc < 2 || B != c->in[1]) return NULL;
    const af_tensor *w = c->t->src[1];
    return af_shape_count(w->shape) == K * N ? w : NULL;
}

/* Whether a later node multiplies by w untransposed (the input gradient dy W after the
 * forward's x W^T): then the forward keeps that packing too. */
static bool read_later(const af_tensor *t, const af_tensor *w) {
    const af_graph *g = t->g;
    for (int i = t->id + 1; i < g->n; i++) {
        const af_tensor *u = g->t[i];
        if (u->op == IR_OP_MATMUL && u->nsrc > 1 && u->src[1] == w && !u->a.tb) return true;
    }
    return false;
}

static void epilogue(const cpu_epilogue *ep, float *C, int64_t ldc, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        float *row = C + i * ldc;
        if (ep->bias) {
            if (ep->bias_rows) for (int64_t j = 0; j < N; j++) row[j] += ep->bias[i];
            else for (int64_t j = 0; j < N; j++) row[j] += ep->bias[j];
        }
        if (ep->relu) for (int64_t j = 0; j < N; j++) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
    }
}

void cpu_kgemm(const cpu_call *c, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const cpu_epilogue *ep) {
    if (!c->bf16 || K <= 0 || M <= 0 || N <= 0) {
        cpu_sgemm_ep(p, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    /* The bf16 GEMM writes C = A @ B; an accumulating call (beta != 0) sums through a temporary. */
    float *T = beta != 0.0f ? malloc(sizeof(float) * (size_t)(M * N)) : NULL;
    const af_tensor *w = weight_of(c, p, B, K, N);
    bool ok = (beta == 0.0f || T) &&
              cpu_sgemm_bf16_c(p, (cpu_bf16_path)c->bf16, ta, tb, M, N, K, A, lda, B, ldb, T ? T : C, T ? N : ldc,
                               w ? c->bf16_cache : NULL, w, w && tb && read_later(c->t, w));
    if (!ok) {
        free(T);
        cpu_sgemm_ep(p, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    if (T) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta * C[i * ldc + j] + T[i * N + j];
        free(T);
    }
    if (ep && (ep->bias || ep->relu)) epilogue(ep, C, ldc, M, N);
}
