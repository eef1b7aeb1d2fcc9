/* Hugging Face checkpoints: a folder with config.json and model.safetensors (or shards
 * named by model.safetensors.index.json) for LlamaForCausalLM (Llama 2, Llama 3 with
 * rope_scaling "llama3", SmolLM), Qwen2ForCausalLM (q, k, v biases) and Qwen3ForCausalLM
 * (per-head RMSNorm on q and k). docs/hf.md says what is read, what is refused and how
 * the two RoPE conventions are converted. */
#ifndef ANEFORGE_HF_H
#define ANEFORGE_HF_H
#include "aneforge.h"
#include "aneforge_llama.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct af_hf_model af_hf_model;

/* Reads dir/config.json and the weights (any of F32, F16, BF16; held as fp32). NULL on
 * failure; af_error_message names the file, the field or tensor, and the fix. A
 * config.json field aneforge does not implement is refused by name. */
AF_API af_hf_model *af_hf_load(const char *dir);
AF_API void         af_hf_free(af_hf_model *m);
/* "LlamaForCausalLM", "Qwen2ForCausalLM" or "Qwen3ForCausalLM". */
AF_API const char  *af_hf_architecture(const af_hf_model *m);
AF_API int          af_hf_vocab_size(const af_hf_model *m);
/* Tensors in the model's fixed order (embedding, per layer, final norm, lm_head when
 * separate): their Hugging Face names and shapes. */
AF_API int          af_hf_param_count(const af_hf_model *m);
AF_API const char  *af_hf_param_name(const af_hf_model *m, int i);
AF_API af_shape     af_hf_param_shape(const af_hf_model *m, int i);
/* The model's own fp32 values of tensor i (count(af_hf_param_shape) floats), to read or
 * write in place; NULL when i is out of range. */
AF_API float       *af_hf_param_data(af_hf_model *m, int i);
/* Makes the model's parameters in g from its current weights (at most max); -1 on error. */
AF_API int          af_hf_params_new(af_graph *g, const af_hf_model *m, af_tensor **params, int max);
/* Logits [B, T, vocab] for token ids [B, T] (floats), built from public ops with
 * Hugging Face's half-split RoPE. */
AF_API af_tensor   *af_hf_forward(const af_hf_model *m, af_tensor *tokens, af_tensor *const *params);
/* Copies the values of n params (af_tensor_value, e.g. trained ones) into the model. */
AF_API af_status    af_hf_set_params(af_hf_model *m, af_tensor *const *params, int n);
/* The model as a trainer's net: x [B, seq] ids, next-token cross entropy (AF_OBJ_CUSTOM),
 * one-hot targets [B, seq * vocab]; seq <= max_position_embeddings. Free with af_net_free. */
AF_API af_net       af_net_hf(const af_hf_model *m, int seq);
/* The same without any copy of the base weights: the trainer's programs read m's arrays
 * in place (fp32 on the CPU; other targets copy them), so m must stay alive and its
 * base weights unchanged until the trainer is freed (af_trainer_free). For a large
 * model this holds the frozen weights once in the process (aneforge hf train). */
AF_API af_net       af_net_hf_borrow(const af_hf_model *m, int seq);
/* Writes dir/config.json and dir/model.safetensors (F32), creating dir if needed, so
 * transformers' from_pretrained(dir) loads it. */
AF_API af_status    af_hf_save(const af_hf_model *m, const char *dir);

/* One tensor for af_safetensors_write: fp32 values in row-major order, rank 0..8. */
typedef struct {
    const char *name;
    int rank;
    int64_t shape[8];
    const float *data;
} af_safetensor;
/* Writes n tensors as one safetensors file of F32 tensors (written whole: a temporary,
 * then renamed), with __metadata__ {"format": "pt"}. */
AF_API af_status    af_safetensors_write(const char *path, int n, const af_safetensor *t);
/* LoRA in PEFT's layout: adapters A [rank, in] and B [out, rank] on the projections named
 * in targets ("q,k,v,o,gate,up,down", or PEFT's "q_proj,..."; "all" for the seven), so
 * that a projection gives x W^T + (alpha / rank) (x A^T) B^T. Once a model has adapters
 * its params (af_hf_param_*, af_hf_params_new, af_net_hf, af_hf_set_params) are the
 * adapters alone and the base weights are constants: frozen, no gradient, no optimizer
 * state. lora_add draws A as PEFT does (uniform in +-1/sqrt(in), from seed) and sets B
 * to zero, so training starts at the base model. */
AF_API af_status af_hf_lora_add(af_hf_model *m, int rank, float alpha, const char *targets, uint64_t seed);
/* Reads a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors); a config
 * asking for what aneforge does not do (DoRA, rsLoRA, rank patterns, biases, ...) is
 * refused by name. */
AF_API af_status af_hf_lora_load(af_hf_model *m, const char *dir);
/* Writes the adapters alone as a PEFT folder that peft's PeftModel.from_pretrained reads. */
AF_API af_status af_hf_lora_save(const af_hf_model *m, const char *dir);
/* Folds the adapters into the weights (W += alpha / rank * B A) and drops them. */
AF_API af_status af_hf_lora_merge(af_hf_model *m);

/* llama2.c <-> Hugging Face Llama: q and k rows permuted between llama2.c's interleaved
 * RoPE pairs and Hugging Face's half-split ones. to_llama refuses a model af_llama
 * cannot express (biases, q/k norms, rope_theta other than 10000, rope_scaling, eps
 * other than 1e-5, head_dim other than hidden / heads), naming the field. */
AF_API af_hf_model *af_hf_from_llama(const af_llama_weights *w);
AF_API af_llama_weights *af_hf_to_llama(const af_hf_model *m);
/* Whether af_hf_to_llama would take the folder's model, from dir/config.json alone (the
 * weights are not read): AF_OK, or AF_ERR_UNSUPPORTED naming the field. */
AF_API af_status af_hf_check_llama(const char *dir);

/* tokenizer.json: byte-level BPE as Llama 3, Qwen2 and SmolLM ship it (the NFC normalizer
 * or none, the split pattern of Llama 3, Qwen2 or GPT-2, merges by rank, ignore_merges,
 * added and special tokens, the ByteLevel decoder, a TemplateProcessing post-processor).
 * A file asking for anything else (another normalizer, byte_fallback, another pattern)
 * is refused by name. */
typedef struct af_hf_tokenizer af_hf_tokenizer;
AF_API af_hf_tokenizer *af_hf_tokenizer_load(const char *path);
/* The same from bytes in memory (what names them in messages). */
AF_API af_hf_tokenizer *af_hf_tokenizer_parse(const char *json, size_t len, const char *what);
AF_API void             af_hf_tokenizer_free(af_hf_tokenizer *t);
AF_API int              af_hf_tokenizer_vocab_size(const af_hf_tokenizer *t);
/* The ids of text[0..len) (UTF-8; an invalid byte is encoded as itself), malloc'd into
 * *ids (free with af_free), *n of them. */
AF_API af_status        af_hf_tokenizer_encode(const af_hf_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                               int64_t *n);
/* The same as tokenizers' encode(text) (add_special_tokens=True): the post-processor's
 * single template around the ids (Llama 3's <|begin_of_text|> first; Qwen2 adds none). */
AF_API af_status        af_hf_tokenizer_encode_special(const af_hf_tokenizer *t, const char *text, size_t len,
                                                       int32_t **ids, int64_t *n);
/* Text of ids[0..n), as tokenizers' decode(ids, skip_special_tokens=skip_special): the
 * byte-level mapping undone, invalid UTF-8 replaced by U+FFFD. *text is malloc'd and
 * NUL-terminated (free with af_free), *len bytes before the NUL. An id outside the
 * vocab is AF_ERR_INVALID, naming it. */
AF_API af_status        af_hf_tokenizer_decode(const af_hf_tokenizer *t, const int32_t *ids, int64_t n, int skip_special,
                                               char **text, size_t *len);

/* The id of one token given by its text (an added or special token such as "<|im_end|>",
 * or any vocab entry), or -1 when text is not exactly one token. */
AF_API int32_t          af_hf_tokenizer_token_id(const af_hf_tokenizer *t, const char *token);

/* Chat templates. tokenizer_config.json's `chat_template` is Jinja; aneforge recognises
 * the families the supported models ship by their markers and renders them itself:
 * "chatml" (Qwen2, Qwen2.5, SmolLM2: <|im_start|>role\n...<|im_end|>\n, with the
 * template's default system prompt), "qwen3" (ChatML whose assistant turns carry
 * <think>...</think> as Qwen3's template does), "llama3" (Llama 3's <|begin_of_text|>
 * <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>), "llama3.1" (Llama 3.1 and
 * 3.2: the same after a system turn holding the knowledge cutoff and the date: the
 * template's date_string, or today's local date where it calls strftime_now, as
 * transformers does) and "llama2" ([INST] ... [/INST] with <<SYS>>). Any other template
 * is refused, naming its start: give a raw prompt instead. docs/hf.md has the table. */
typedef struct { const char *role; const char *content; } af_chat_message; /* role: system, user, assistant */
typedef struct af_hf_chat af_hf_chat;
/* dir/tokenizer_config.json's chat_template (or dir/chat_template.jinja), bos_token and eos_token. */
AF_API af_hf_chat *af_hf_chat_load(const char *dir);
/* The same from a template's text and its special tokens (NULL: unset); `what` names it in messages. */
AF_API af_hf_chat *af_hf_chat_parse(const char *tmpl, const char *bos_token, const char *eos_token, const char *what);
AF_API void        af_hf_chat_free(af_hf_chat *c);
/* "chatml", "qwen3", "llama3", "llama3.1" or "llama2". */
AF_API const char *af_hf_chat_family(const af_hf_chat *c);
/* The token that ends a turn ("<|im_end|>", "<|eot_id|>", Llama 2's eos_token): where generation stops. */
AF_API const char *af_hf_chat_end_of_turn(const af_hf_chat *c);
/* The text of n messages as transformers' apply_chat_template(messages, tokenize=False,
 * add_generation_prompt) gives it; *text malloc'd, NUL-terminated (free with af_free). */
AF_API af_status   af_hf_chat_render(const af_hf_chat *c, const af_chat_message *m, int n, int add_generation_prompt,
                                     char **text, size_t *len);
/* Its ids, as apply_chat_template(..., tokenize=True): the text encoded with special
 * tokens as their ids and no post-processor template (free *ids with af_free). */
AF_API af_status   af_hf_chat_encode(const af_hf_chat *c, const af_hf_tokenizer *t, const af_chat_message *m, int n,
                                     int add_generation_prompt, int32_t **ids, int64_t *count);

/* Generation with any supported model (LoRA adapters included): one token at a time with
 * a KV cache, fp32 on the CPU (threads: 0 one per core), the arithmetic of af_hf_forward.
 * feed appends one token at the next position; logits are the next token's [vocab],
 * valid until the next feed. At most max_position_embeddings tokens; the cache grows with
 * the sequence. The model must outlive the generator and stay unchanged. */
typedef struct af_hf_gen af_hf_gen;
AF_API af_hf_gen   *af_hf_gen_new(const af_hf_model *m, int threads);
AF_API void         af_hf_gen_free(af_hf_gen *g);
AF_API af_status    af_hf_gen_feed(af_hf_gen *g, int32_t token);
AF_API const float *af_hf_gen_logits(const af_hf_gen *g);
/* config.json's max_position_embeddings: the longest sequence the model takes. */
AF_API int          af_hf_max_positions(const af_hf_model *m);
/* config.json's eos_token_id entries (up to max; the count). */
AF_API int          af_hf_eos_ids(const af_hf_model *m, int32_t *ids, int max);

#ifdef __cplusplus
}
#endif
#endif
