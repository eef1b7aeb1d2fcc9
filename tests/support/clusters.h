/* The small learnable problem the training tests share: Gaussian clusters (class k's
 * samples sit around centre k) and a two-layer MLP for them, as an af_net's functions. */
#ifndef AF_TEST_CLUSTERS_H
#define AF_TEST_CLUSTERS_H
#include "aneforge.h"

enum { CL_D = 8, CL_H = 16, CL_C = 4, CL_B = 32 }; /* inputs, hidden, classes, batch */

/* af_net.ctx for clusters_mlp_params: the weights' seed (NULL: 42). */
typedef struct { unsigned long long seed; } clusters_ctx;

int clusters_mlp_params(void *ctx, af_graph *g, af_tensor **p, int max);
af_tensor *clusters_mlp_forward(void *ctx, af_tensor *x, af_tensor *const *w);
/* Batch i of a fixed stream: nb batches of CL_B samples, x [nb*CL_B, CL_D], one-hot y. */
void clusters_batch(int i, int nb, float *x, float *y);
#endif
