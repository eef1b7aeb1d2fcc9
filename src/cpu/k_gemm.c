/* The kernels' GEMM switch (kernels.h): fp32, or the bf16 path with fp32 accumulation
 * (AF_PRECISION_BF16). Matmul and conv products come here (the causal attention calls
 * the bf16 GEMM itself, k_attention.c); norms and the rest stay fp32, as under autocast. */
#include "cpu/gemm_bf16.h"
#include "cpu/kernels.h"

#include <stdlib.h>

/* A reshape shares its source's buffer: the same data, so the same key. */
static const af_tensor *data_of(const af_tensor *t) {
    while (t->op == IR_OP_RESHAPE && t->nsrc == 1) t = t->src[0];
    return t;
}

/* The tensor an operand is, as a cache key, when it is the node's whole source `i` and
 * the call is the node's own (not one of several run side by side by the pool's workers,
 * which would share the cache). */
static const af_tensor *operand_of(const cpu_call *c, cpu_pool *p, int i, const float *x, int64_t count) {
    if (!c->bf16_cache || p != c->pool || c->t->nsrc <= i || x != c->in[i]) return NULL;
    const af_tensor *s = c->t->src[i];
    return af_shape_count(s->shape) == count ? data_of(s) : NULL;
}

/* Whether a later matmul node reads x as its operand `i` with transposition `trans`
 * (the input gradient dy W after the forward's x W^T; wk and wv after wq on the same x):
 * then this product keeps its packing of x in that layout. */
static bool read_later(const af_tensor *t, const af_tensor *x, int i, int trans) {
    const af_graph *g = t->g;
    for (int n = t->id + 1; n < g->n; n++) {
        const af_tensor *u = g->t[n];
        if (u->op == IR_OP_MATMUL && u->nsrc > 1 && data_of(u->src[i]) == x && (i ? u->a.tb : u->a.ta) == trans) return true;
    }
    return false;
}

void cpu_kgemm(const cpu_call *c, cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const cpu_epilogue *ep) {
    if (!c->bf16 || K <= 0 || M <= 0 || N <= 0) {
        cpu_sgemm_ep(p, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    /* The bf16 GEMM writes C = A @ B; an accumulating call (beta != 0) sums through a temporary. */
    float *T = beta != 0.0f ? malloc(sizeof(float) * (size_t)(M * N)) : NULL;
    const af_tensor *a = operand_of(c, p, 0, A, M * K), *b = operand_of(c, p, 1, B, K * N);
    /* A bound alone (a weight's gradient) is taken by the kernel from each block it has
     * just stored; as a pass over C after the product it cost the bf16 llama b step more
     * than the host optimizer's read of the gradient it saves (53 -> 56 ms). With other
     * parts the epilogue stays a pass, the bound after them. */
    bool bound_only = ep && ep->absmax && !ep->bias && !ep->relu && !ep->add && beta == 0.0f;
    cpu_bf16_keys keys = { a, b, a && read_later(c->t, a, 0, ta), b && read_later(c->t, b, 1, tb),
                           b && tb && read_later(c->t, b, 1, 0), bound_only ? ep->absmax : NULL };
    bool ok = (beta == 0.0f || T) &&
              cpu_sgemm_bf16_k(p, (cpu_bf16_path)c->bf16, ta, tb, M, N, K, A, lda, B, ldb, T ? T : C, T ? N : ldc,
                               c->bf16_cache, &keys);
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
    if (!bound_only) cpu_apply_epilogue_rows(p, ep, C, ldc, M, N);
}
