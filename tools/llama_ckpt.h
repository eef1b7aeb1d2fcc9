/* Checkpoints of `aneforge train llama`: the trainer's records (weights, Adam moments,
 * step counters), the model's config, and where the run is (steps done, the window
 * generator, the recent losses), so a resumed run continues bit-identically. Also the
 * one loader of --model for eval, generate and export: such a checkpoint or a llama2.c
 * model file. */
#ifndef AF_TOOLS_LLAMA_CKPT_H
#define AF_TOOLS_LLAMA_CKPT_H
#include "aneforge.h"
#include "aneforge_llama.h"

#include <stdbool.h>
#include <stdint.h>

enum { LLAMA_RECENT = 10 }; /* the train loss reported is the mean of the last 10 calls */

typedef struct {
    int64_t steps, calls;          /* optimizer steps and trainer calls done */
    uint64_t rng;                  /* the window generator's state after them */
    double recent[LLAMA_RECENT];   /* recent[call % 10]: the losses of the last calls */
} llama_run_pos;

/* Saves t with the config, the data path and pos; prints the problem and returns 1 on failure. */
int llama_ckpt_save(const char *path, af_trainer *t, const af_llama_config *c, const char *data, const llama_run_pos *pos);
/* Loads path into t and *pos after checking that it was saved for config c and the same
 * data; prints the problem and returns 1 on failure (t unchanged then). */
int llama_ckpt_resume(const char *path, af_trainer *t, const af_llama_config *c, const char *data, llama_run_pos *pos);
/* A train llama checkpoint's weights (told apart by its magic) or a llama2.c file
 * (version 0 or 1); NULL with af_error_message() set on failure. */
af_llama_weights *llama_model_load(const char *path);
/* A folder holding config.json: a Hugging Face model (eval, generate and train llama's
 * --init route it to the hf model, aneforge_hf.h). */
bool llama_is_hf_folder(const char *path);
/* The weights of a loaded train llama checkpoint (path names it in messages); NULL with
 * af_error_message() set when its config or a param record is missing or wrong. */
af_llama_weights *llama_weights_from_ckpt(const af_checkpoint *c, const char *path);
#endif
