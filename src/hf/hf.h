/* Hugging Face models inside the library (the public half is include/aneforge_hf.h). */
#ifndef AF_HF_HF_H
#define AF_HF_HF_H
#include "aneforge.h"
#include "aneforge_hf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { HF_LLAMA = 0, HF_QWEN2 = 1, HF_QWEN3 = 2 } hf_arch;

typedef struct {
    hf_arch arch;
    int vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos;
    double eps, theta;
    bool rope_llama3; /* rope_type "llama3": the scaled frequencies below */
    double rope_factor, low_freq_factor, high_freq_factor;
    int rope_orig_max_pos;
    bool tie;        /* lm_head is the embedding */
    bool qkv_bias;   /* q, k, v projections carry biases (Qwen2; Llama's attention_bias) */
    bool o_bias;     /* o_proj carries a bias (Llama's attention_bias) */
    bool qk_norm;    /* RMSNorm over each head of q and k (Qwen3) */
    int n_bos, n_eos;
    int64_t bos[8], eos[8]; /* kept for export; -1 entries unused */
} hf_config;

/* Parses config.json's bytes; on failure the error names the field (`what` names the file). */
af_status hf_config_parse(const char *text, size_t len, const char *what, hf_config *c);
/* dir/config.json, read (bounded) and parsed (model.c). */
af_status hf_read_config(const char *dir, hf_config *c);
/* config.json for c, malloc'd NUL-terminated. */
char *hf_config_json(const hf_config *c);
const char *hf_arch_name(hf_arch a);
/* AF_OK when llama2.c's layout holds a model of config c (af_hf_to_llama converts it),
 * else the error naming the field that it cannot hold. */
af_status hf_llama_fits(const hf_config *c);

/* The model's tensors in their fixed order: name and shape ([rows, cols] or [rows]). */
typedef struct {
    char name[80];
    int rank;
    int64_t shape[2];
} hf_slot;
/* Fills slots (room for hf_slot_count(c)) and returns the count. */
int hf_slot_count(const hf_config *c);
int hf_slots(const hf_config *c, hf_slot *slots);

/* LoRA (Hu et al. 2021; PEFT's layout): y = x W^T + (alpha / rank) (x A^T) B^T on the
 * targeted projections, A [rank, in], B [out, rank], W frozen. */
enum { HF_Q = 0, HF_K, HF_V, HF_O, HF_GATE, HF_UP, HF_DOWN, HF_NPROJ };
typedef struct {
    int rank;        /* 0: no adapters */
    double alpha;
    unsigned targets; /* bit HF_Q.. */
} hf_lora_cfg;

struct af_hf_model {
    hf_config c;
    int n;
    hf_slot *slot;
    float **w;       /* one array per slot */
    hf_lora_cfg lora;
    int na;          /* adapters: per layer, per target in HF_Q.. order, A then B */
    hf_slot *aslot;
    float **a;
};

extern const char *const HF_PROJ_NAME[HF_NPROJ]; /* "q_proj", ... */
/* Adapter slots of c and lora (NULL slots: just the count). */
int hf_lora_slots(const hf_config *c, const hf_lora_cfg *lora, hf_slot *slots);
/* Allocates m's adapters for lora (A, B left uninitialised). */
af_status hf_lora_alloc(af_hf_model *m, const hf_lora_cfg *lora);
void hf_lora_drop(af_hf_model *m);
/* Parses a PEFT adapter_config.json (plain LoRA only; anything else refused by name). */
af_status hf_lora_parse_config(const char *text, size_t len, const char *what, hf_lora_cfg *lc);

af_hf_model *hf_model_alloc(const hf_config *c);
/* The logits graph of config c over the base weights p (in slot order) and, when
 * lora->rank > 0, the adapters ad (in adapter slot order). */
af_tensor *hf_forward(const hf_config *c, const hf_lora_cfg *lora, af_tensor *tokens, af_tensor *const *p,
                      af_tensor *const *ad);
/* af_hf_forward; with borrow, LoRA's frozen base weights are constants that read m's
 * arrays in place (ir_const_borrow), so m must outlive g and every model compiled from it. */
af_tensor *hf_model_forward(const af_hf_model *m, af_tensor *tokens, af_tensor *const *params, bool borrow);
/* HF's RoPE angles for head_dim hd and positions [0, T): cos and sin [T][hd / 2]. */
void hf_rope_table(const hf_config *c, int T, float *cos_out, float *sin_out);
#endif
