/* llama2.c models: config, weights, model files, forward with a KV cache, sampling
 * (the public half is the "llama2.c models" section of include/aneforge.h). */
#ifndef AF_LLAMA_LLAMA_H
#define AF_LLAMA_LLAMA_H
#include "aneforge.h"
#include "aneforge_llama.h"

#include <stddef.h>
#include <stdint.h>

struct af_llama_weights {
    af_llama_config cfg;
    int64_t count; /* af_llama_weight_count(&cfg) */
    float *data;
};

/* export.py's version-1 magic: "ak42" read as a little-endian uint32. */
#define LLAMA_V1_MAGIC 0x616b3432u
enum { LLAMA_V0_HEADER = 28, LLAMA_V1_HEADER = 256 };

/* Why c is not a usable config, written into why (NULL when it is fine). */
const char *llama_config_problem(const af_llama_config *c, char *why, size_t cap);

/* RoPE's cos and sin for positions [0, seq_len) and pair index [0, head_size / 2):
 * angle pos * 10000^(-2i / head_size) in double, rounded to float ([seq_len][head_size/2]).
 * The version-0 writer fills freq_cis with them (run.c skips them; the generator
 * computes its angles in float, as run.c does). */
void llama_rope_table(int seq_len, int head_size, float *cos_out, float *sin_out);

/* Reads a model file held in memory (`what` names it in messages); as af_llama_load. */
af_status llama_parse(const uint8_t *bytes, size_t size, const char *what, af_llama_weights **out,
                      int *version);
/* The bytes of w as a version 0 or 1 file, malloc'd into *out. */
af_status llama_serialize(const af_llama_weights *w, int version, uint8_t **out, size_t *size);
#endif
