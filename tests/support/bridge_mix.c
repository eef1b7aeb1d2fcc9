/* The graph mixing ordinary ops and three bridge ops that test_segments and the ane
 * backend's bridges case run (bridge_mix.h). */
#include "support/bridge_mix.h"
#include "support/check.h"

/* x [1, 2, 6, 8] -> q, k, v (fused) -> sdpa (bridge) -> relu + x, reshape (fused)
 * -> flatten (bridge) -> *2, reshape [1, 96] (fused) -> broadcast to [3, 96] (bridge)
 * -> sigmoid (fused). Outputs: the sigmoid and the sdpa result. */
bridge_mix bridge_mix_build(void) {
    bridge_mix m = {.g = af_graph_new()};
    test_rng r = {42};
    float wq[64], mask[36];
    test_fill_uniform(&r, wq, 64, -0.5, 0.5);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) mask[i * 6 + j] = j <= i ? 0.0f : -1e4f; /* causal */
    m.x = af_input(m.g, "x", AF_F16, AF_SHAPE(1, 2, 6, 8)); /* engine programs take fp16 */
    af_tensor *q = af_matmul(m.x, af_const(m.g, "wq", AF_SHAPE(8, 8), wq), 0, 0);
    af_tensor *k = af_tanh(m.x), *v = af_adds(m.x, 1.0f);
    /* the mask is computed from a constant in the first region (an fp32 host value) and
     * crosses the cut like any value */
    af_tensor *am = af_reshape(af_const(m.g, "mask", AF_SHAPE(6, 6), mask), AF_SHAPE(6, 1, 6));
    af_tensor *a = af_sdpa(q, k, v, am, 0);
    af_tensor *h = af_reshape(af_add(af_relu(a), m.x), AF_SHAPE(2, 6, 8));
    af_tensor *f = af_flatten(h);
    af_tensor *g2 = af_reshape(af_muls(f, 2.0f), AF_SHAPE(1, 96));
    m.out[0] = af_sigmoid(af_broadcast(g2, 0, 3));
    m.out[1] = a;
    return m;
}

