/* Internal pieces of af_llama (src/nn/llama.c) that other llama graphs share. */
#ifndef AF_NN_LLAMA_GRAPH_H
#define AF_NN_LLAMA_GRAPH_H
#include "ir/ir.h"
#include "aneforge_llama.h"

/* The layers of af_llama on x [B * T, dim] (rows (b, t)) with params p in af_llama's
 * order; p[0] (the embedding) is not read, and the rest only as graph tensors, so they
 * may be a program's state inputs. NULL if x is NULL. */
af_tensor *nn_llama_layers(const af_llama_config *c, af_tensor *x, af_tensor *const *p, int64_t B, int64_t T);
#endif
