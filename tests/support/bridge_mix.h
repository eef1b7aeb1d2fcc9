/* A graph mixing ordinary ops and three bridge ops (sdpa, flatten, broadcast):
 * x [1, 2, 6, 8] (fp16) -> q, k, v and a causal mask from a constant (fused) -> sdpa (bridge)
 * -> relu + x, reshape (fused) -> flatten (bridge) -> *2, reshape [1, 96] (fused)
 * -> broadcast to [3, 96] (bridge) -> sigmoid (fused). On an engine target: 7 segments.
 * Outputs: the sigmoid [3, 96] and the sdpa result [1, 2, 6, 8]. */
#ifndef AF_TEST_BRIDGE_MIX_H
#define AF_TEST_BRIDGE_MIX_H
#include "aneforge.h"

typedef struct {
    af_graph *g;
    af_tensor *x, *out[2];
} bridge_mix;

bridge_mix bridge_mix_build(void);
#endif
