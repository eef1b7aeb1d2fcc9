/* `train llama --sample-every K`: a short text generated from the weights being trained,
 * for the log's sample lines (the dashboard's and report's sample panels). */
#ifndef AF_TOOLS_TRAIN_SAMPLE_H
#define AF_TOOLS_TRAIN_SAMPLE_H
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <stddef.h>

/* run.c's loop on w from BOS for up to `steps` positions (temperature 0.8, top-p 0.9,
 * the given seed, so a sample is reproducible): the text with a tokenizer (tok), the ids
 * separated by spaces without. out gets cap bytes at most, always terminated. 0 or -1. */
int train_llama_sample(const af_llama_weights *w, const af_tokenizer *tok, int steps, uint64_t seed, char *out, size_t cap);
#endif
