/* The shared clusters problem (clusters.h). */
#include "support/clusters.h"
#include "support/check.h"

int clusters_mlp_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    const clusters_ctx *c = ctx;
    test_rng r = { c ? c->seed : 42 };
    float w1[CL_H * CL_D], w2[CL_C * CL_H];
    for (int i = 0; i < CL_H * CL_D; i++) w1[i] = (float)(test_normal(&r) * 0.5);
    for (int i = 0; i < CL_C * CL_H; i++) w2[i] = (float)(test_normal(&r) * 0.35);
    if (max < 4) return -1;
    p[0] = af_parameter(g, "w1", AF_SHAPE(CL_H, CL_D), w1);
    p[1] = af_parameter(g, "b1", AF_SHAPE(CL_H), NULL);
    p[2] = af_parameter(g, "w2", AF_SHAPE(CL_C, CL_H), w2);
    p[3] = af_parameter(g, "b2", AF_SHAPE(CL_C), NULL);
    return 4;
}

af_tensor *clusters_mlp_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    return af_linear(af_relu(af_linear(x, w[0], w[1])), w[2], w[3]);
}

void clusters_batch(int i, int nb, float *x, float *y) {
    test_rng r = { 1000u + (unsigned)i };
    for (int b = 0; b < nb * CL_B; b++) {
        int k = (int)(test_uniform(&r) * CL_C);
        for (int d = 0; d < CL_D; d++) x[b * CL_D + d] = (float)((d % CL_C == k ? 2.0 : 0.0) + 0.5 * test_normal(&r));
        for (int c = 0; c < CL_C; c++) y[b * CL_C + c] = c == k;
    }
}
