/* A tied embedding's gradient: a table used both as the token embedding and as the
 * classifier's weight gets add(dW, embedding_grad(dy, ids)) from autograd, where dW is
 * the classifier's weight-gradient product, made early in the backward pass, and the
 * embedding's scatter comes last. Unfused, that is three [vocab, dim] arrays (dW, a
 * zero-filled table holding a few hundred rows, and the sum; 98 MB each at Stories110M)
 * and two passes over them. Fused, the product writes the sum's buffer directly
 * (cpu_fusion.tail at its node), the embedding_grad node adds its rows there
 * (cpu_fusion.acc_into), and the add is absorbed. Each touched row gets
 * dW[r] + (0 + dy[i1] + dy[i2] + ...) in id order, the unfused node's exact sums; rows
 * no id names keep dW's values (the add's dW + 0 differed only for -0). */
#ifndef AF_CPU_FUSE_EMBED_H
#define AF_CPU_FUSE_EMBED_H
#include "cpu/fuse.h"

/* Marks the pairs in f (reads[id]: how many sources name tensor id, is_out: requested,
 * pos[id]: schedule index) and returns how many nodes were absorbed. */
int cpu_fuse_embed_acc(const compile_plan *p, cpu_fusion *f, const int *reads, const bool *is_out, const int *pos);

/* out[row r] += sum of dy's rows i with id r, for ids [n] over a [v, row] table, summed
 * per row in id order first (scratch: cpu_embed_acc_scratch(n, row) floats). */
void cpu_embed_acc(const float *dy, const float *ids, int64_t n, int64_t v, int64_t row, float *out, float *scratch);
int64_t cpu_embed_acc_scratch(int64_t n, int64_t row);
#endif
