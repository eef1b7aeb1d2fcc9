/*
 * aneforge_llama.h: Llama 2 models in the layout of llama2.c, beside the core library
 * (aneforge.h): configs and presets, model files both ways, an fp32 generator with a KV
 * cache and run.c's sampler, the trainable model for the trainer, and a cost model of a
 * training step on the Neural Engine. Part of libaneforge, with its rules: errors
 * through af_error_message, nothing printed. Token ids are int32_t throughout.
 */
#ifndef ANEFORGE_LLAMA_H
#define ANEFORGE_LLAMA_H

#include "aneforge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- llama2.c models (src/llama)
 * Llama 2 models in the layout of Karpathy's llama2.c: its config, its weight order, its
 * model files (export.py's version 0 and version 1, fp32), an fp32 host forward with a
 * KV cache and run.c's sampler, so a seed gives run.c's choices. */

typedef struct {
    int dim;               /* model width; n_heads * head size (head size even) */
    int hidden_dim;        /* SwiGLU FFN width */
    int n_layers;
    int n_heads;           /* query heads */
    int n_kv_heads;        /* key/value heads; each serves n_heads / n_kv_heads consecutive query heads */
    int vocab_size;
    int seq_len;           /* the longest sequence (KV cache positions) */
    int shared_classifier; /* 1: the classifier is the token embedding (tied) */
} af_llama_config;

/* Fills *out with a preset ("tiny": 64 wide, 2 layers, 4 heads, 2 KV heads, hidden 172,
 * seq 128; "stories15m": 288, 6, 6, 768, 256; "stories42m": 512, 8, 8, 1376, 1024;
 * "stories110m": 768, 12, 12, 2048, 1024; KV heads = heads unless said), the given vocab
 * size (from the tokenizer) and a shared classifier. */
AF_API af_status af_llama_preset(const char *name, int vocab_size, af_llama_config *out);
/* AF_OK, or AF_ERR_INVALID with a message naming the bad field and the rule it breaks. */
AF_API af_status af_llama_config_check(const af_llama_config *c);
/* Floats in the weights of c (the classifier counted only when not shared); -1 if c is invalid. */
AF_API int64_t af_llama_weight_count(const af_llama_config *c);

/* The weights are one float array in llama2.c's (run.c's) order, each tensor [rows, cols]
 * row-major as PyTorch's nn.Linear keeps it ([out, in]), the per-layer tensors stacked
 * over layers: token embedding [vocab, dim], rms_att [L][dim], wq [L][dim, dim],
 * wk [L][kv_dim, dim], wv [L][kv_dim, dim], wo [L][dim, dim], rms_ffn [L][dim],
 * w1 [L][hidden, dim], w2 [L][dim, hidden], w3 [L][hidden, dim], rms_final [dim], then
 * the classifier [vocab, dim] unless shared (kv_dim = dim * n_kv_heads / n_heads). */
typedef enum {
    AF_LLAMA_TOKEN_EMBEDDING = 0, AF_LLAMA_RMS_ATT, AF_LLAMA_WQ, AF_LLAMA_WK, AF_LLAMA_WV, AF_LLAMA_WO,
    AF_LLAMA_RMS_FFN, AF_LLAMA_W1, AF_LLAMA_W2, AF_LLAMA_W3, AF_LLAMA_RMS_FINAL, AF_LLAMA_CLASSIFIER
} af_llama_tensor;
/* Where tensor t of `layer` (ignored for the three unlayered ones) lies in the array:
 * *offset in floats and its [*rows, *cols]. A shared classifier is the embedding. Any
 * out pointer may be NULL. */
AF_API af_status af_llama_tensor_at(const af_llama_config *c, af_llama_tensor t, int layer, int64_t *offset,
                                    int *rows, int *cols);
AF_API const char *af_llama_tensor_name(af_llama_tensor t); /* "wq", ...; "?" when out of range */

/* A config and its weights; the caller frees it with af_llama_weights_free. */
typedef struct af_llama_weights af_llama_weights;
/* Zero weights for c (NULL with a message if c is invalid or memory runs out). */
AF_API af_llama_weights *af_llama_weights_new(const af_llama_config *c);
AF_API void af_llama_weights_free(af_llama_weights *w); /* NULL is fine */
AF_API const af_llama_config *af_llama_weights_config(const af_llama_weights *w);
/* The af_llama_weight_count floats, in the order above; owned by w. */
AF_API float *af_llama_weights_data(af_llama_weights *w);

/* Reads a llama2.c model file written by its export.py: version 0 (a 7-int header, a
 * negative vocab size for an unshared classifier, fp32 weights, the legacy freq_cis
 * blocks, which are skipped) or version 1 (magic "ak42", version, the 7 ints and a shared
 * flag in a 256-byte header, fp32 weights). *version (may be NULL) says which it was.
 * Files are untrusted: every field, the file size and the weights' finiteness are
 * checked, and a failure names what is wrong. NULL on error. */
AF_API af_llama_weights *af_llama_load(const char *path, int *version);
/* Writes w as version 0 (what llama2.c's run.c reads; the freq_cis blocks hold cos and
 * sin of RoPE's angles) or version 1. The file is written beside path and renamed into
 * place, so a failed write leaves no partial file. */
AF_API af_status af_llama_save(const af_llama_weights *w, const char *path, int version);

/* A generator: the forward pass of run.c (RMSNorm eps 1e-5, RoPE on pairs (2i, 2i+1) with
 * theta 10000, grouped KV heads, SwiGLU) one token at a time with a KV cache, in fp32 on
 * the host, with run.c's arithmetic in run.c's order: its logits are run.c's bit for bit
 * (where the two are compiled alike), so with the sampler below a seed gives run.c's
 * tokens. The thread count never changes a result. It borrows w, which must outlive it;
 * threads 0 = one per core. Used by one thread at a time. */
typedef struct af_llama_gen af_llama_gen;
AF_API af_llama_gen *af_llama_gen_new(const af_llama_weights *w, int threads);
AF_API void af_llama_gen_free(af_llama_gen *g); /* NULL is fine */
/* Runs token at the next position (0, 1, ... up to seq_len - 1) and keeps its keys and
 * values; a token outside [0, vocab) or a full cache is AF_ERR_INVALID. */
AF_API af_status af_llama_gen_feed(af_llama_gen *g, int32_t token);
/* The vocab_size logits for the next token after the last feed (NULL before any); owned
 * by g, valid until the next feed or reset. */
AF_API const float *af_llama_gen_logits(const af_llama_gen *g);
AF_API int af_llama_gen_pos(const af_llama_gen *g);  /* tokens fed since the start or reset */
AF_API void af_llama_gen_reset(af_llama_gen *g);     /* forget the sequence; back to position 0 */

/* run.c's sampler: temperature 0 takes the argmax (the first on ties); otherwise softmax
 * of logits / temperature, then with 0 < top_p < 1 nucleus sampling by run.c's rule
 * (candidates >= (1 - top_p) / (n - 1), sorted by probability, ties by lower id, cut
 * where the sum first exceeds top_p), else sampling from all; the coin is run.c's xorshift
 * random_f32, so a seed gives run.c's tokens. seed must not be 0 (xorshift's fixed
 * point); temperature >= 0; top_p in [0, 1]. Used by one thread at a time. */
typedef struct af_llama_sampler af_llama_sampler;
AF_API af_llama_sampler *af_llama_sampler_new(int vocab_size, float temperature, float top_p, uint64_t seed);
AF_API void af_llama_sampler_free(af_llama_sampler *s); /* NULL is fine */
/* The next token for vocab_size logits (not modified); -1 with AF_ERR_NUMERIC on a
 * non-finite logit, AF_ERR_INVALID on NULL. */
AF_API int32_t af_llama_sample(af_llama_sampler *s, const float *logits);

/* ---------------------------------------------------------------- the trainable llama model
 * llama2.c's model.py as a graph (src/nn/llama.c): token embedding; per layer RMSNorm
 * (eps 1e-5), q, k, v projections, RoPE (af_rope, theta 10000), grouped KV heads, causal
 * softmax attention scaled by 1/sqrt(head_size), the output projection and a residual,
 * then RMSNorm, the SwiGLU FFN w2(silu(w1 x) * w3 x) and a residual; a final RMSNorm and
 * the classifier (the token embedding when shared). Its params are llama2.c's tensors,
 * one per layer, in llama2.c's order: token_embedding, rms_att[0..L-1], wq[..], wk[..],
 * wv[..], wo[..], rms_ffn[..], w1[..], w2[..], w3[..], rms_final, then the classifier
 * unless shared; matrices [out, in] as in the file, norms [dim]. The embedding is a gather
 * on a graph told it runs on the CPU (af_graph_set_target; trainers tell theirs), else a
 * one-hot matmul for a vocab <= 2048 (the engine has no scatter for the gather's
 * gradient; ids beyond 2048 are not exact in fp16, so a larger vocab keeps the gather). */

/* 9 * n_layers + 2 (+ 1 for a separate classifier), or -1 when c is NULL or has no layers. */
AF_API int af_llama_param_count(const af_llama_config *c);
/* Logits [B, T, vocab] for token ids tokens [B, T] (whole numbers as floats, T <= seq_len
 * is the caller's business) from the af_llama_param_count params (in tokens' graph). */
AF_API af_tensor *af_llama(const af_llama_config *c, af_tensor *tokens, af_tensor *const *params);
/* Param i: where its values lie in af_llama_weights_data (*offset, floats), its shape
 * and its tensor's name ("wq", ...). Out pointers may be NULL. */
AF_API af_status af_llama_param_at(const af_llama_config *c, int i, int64_t *offset, af_shape *shape, const char **name);
/* Creates the params in g initialised from w ("token_embedding", "layers.<l>.wq", ...),
 * writes them to params (room for max) and returns how many, or -1. */
AF_API int af_llama_params_new(af_graph *g, const af_llama_weights *w, af_tensor **params, int max);
/* Copies param i's values (count(shape) floats) into w, e.g. from af_trainer_read_param,
 * so trained models export with af_llama_save. */
AF_API af_status af_llama_weights_set_param(af_llama_weights *w, int i, const float *values);
/* Copies the master values (af_tensor_value) of all n params into w. */
AF_API af_status af_llama_weights_from_params(af_llama_weights *w, af_tensor *const *params, int n);
/* af_llama for the trainer (objective AF_OBJ_CUSTOM): samples are seq token ids
 * (seq <= the config's seq_len), the output is the logits flattened to [B, seq * vocab],
 * and the loss is the mean cross-entropy per token against one-hot targets [B, seq * vocab]
 * (row t: the token after position t). Starts from a copy of init; release with af_net_free. */
AF_API af_net af_net_llama(const af_llama_weights *init, int seq);

/* ---------------------------------------------------------------- what a training step costs on the engine
 * A model of one training step of a llama2.c-architecture model on each Apple chip's
 * Neural Engine, counted from the config and calibrated on published measurements of a
 * static pipeline training Stories110M (seq 256, batch 1). Per step: dispatches x the
 * per-dispatch overhead + engine FLOPs / the chip's effective kernel rate + host FLOPs /
 * its host rate + bytes / host<->engine bandwidth, plus compiles amortised over the steps
 * between them. Three plans:
 *   AF_LLAMA_COST_BAKED     six kernels per layer with the weights baked in, so 72
 *                           programs are recompiled (and the process restarted) every 10
 *                           steps; classifier, loss, dW, RMSNorm backward and Adam on the host
 *   AF_LLAMA_COST_PIPELINE  the same kernels compiled once with weights as inputs
 *                           (AF_PLAN_PIPELINE; final norm and classifier on the engine)
 *   AF_LLAMA_COST_RESIDENT  everything on the engine, Adam included, parameters and
 *                           moments resident, one program per step (AF_PLAN_RESIDENT) */
typedef enum {
    AF_LLAMA_COST_BAKED = 0, AF_LLAMA_COST_PIPELINE = 1, AF_LLAMA_COST_RESIDENT = 2, AF_LLAMA_COST_NPLANS = 3
} af_llama_cost_plan;
/* One chip and the published static-pipeline measurement of Stories110M on it, if any. */
typedef struct {
    const char *chip;     /* "M1 Pro" ... */
    af_family_id family;
    int published;        /* 1: the three figures below were measured; 0: interpolated */
    double ms_step;       /* static pipeline ms per step, compiles excluded */
    double ane_ms;        /* of which in engine evaluations */
    double compile_s;     /* seconds to compile its 72 programs (every 10 steps) */
} af_llama_chip;
/* The counts of one step (batch windows of seq tokens). */
typedef struct {
    double engine_flops, host_flops, bytes, dispatches;
    int programs;         /* distinct programs compiled (per 10 steps when baked) */
} af_llama_counts;
typedef struct {
    af_llama_counts n;
    double engine_ms, host_ms, io_ms, dispatch_ms; /* the step's terms */
    double step_ms;       /* their sum: comparable to a published ms per step */
    double compile_ms;    /* compiles amortised per step (baked: every 10 steps; others: once per run) */
    double total_ms;      /* step_ms + compile_ms */
} af_llama_cost;
/* The chips the cost model knows: how many, and chip i (0 .. count - 1). */
AF_API int af_llama_chip_count(void);
AF_API const af_llama_chip *af_llama_chip_at(int i);                /* NULL out of range; the library's */
AF_API const char *af_llama_cost_plan_name(af_llama_cost_plan p);   /* "baked", "pipeline", "resident", "?" */
/* The estimate for chip i under plan p, for batch windows of seq tokens. layers_only: a
 * bare stack of layers (no embedding, final norm or classifier). run_steps spreads the
 * pipeline's and resident plan's one-time compiles. AF_ERR_INVALID for a bad config,
 * chip or plan, with a message. */
AF_API af_status af_llama_cost_estimate(const af_llama_config *c, int seq, int batch, af_llama_cost_plan p,
                                        int layers_only, int chip, int64_t run_steps, af_llama_cost *out);

/* ---------------------------------------------------------------- the pipeline plan's kernels
 * AF_PLAN_PIPELINE runs each layer as six programs compiled once with the weights as
 * inputs ("fwdAttn", "fwdFFN", "ffnBwd", "sdpaBwd1", "sdpaBwd2", "qkvBwd") plus the
 * blocked classifier ("clsFwd", "clsBwd"). af_mil_llama_kernel builds one of them, fp16
 * ports, for the shapes below, e.g. to write it as MIL with af_mil_emit. */
typedef struct {
    int dim, hidden, heads, kv_heads, seq, batch;
    int vocab_block;      /* classifier rows per clsFwd / clsBwd run */
} af_llama_kernel_shape;
AF_API af_status af_mil_llama_kernel(const char *kernel, const af_llama_kernel_shape *shape, af_mil_sample *out);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif
