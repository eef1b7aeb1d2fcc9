/* aneforge: Core ML packages (.mlpackage), both ways (src/coreml, docs/coreml.md).
 *
 * A package is a folder: Manifest.json, Data/com.apple.CoreML/model.mlmodel (a
 * CoreML.Specification.Model protobuf whose mlProgram holds the MIL program) and
 * Data/com.apple.CoreML/weights/weight.bin (MILBlob v2). Kept apart from aneforge.h so
 * the Core ML surface can grow without touching the core header. */
#ifndef ANEFORGE_COREML_H
#define ANEFORGE_COREML_H
#include "aneforge.h"
#include "aneforge_llama.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a package says about itself (all optional; NULL leaves the field out). */
typedef struct {
    const char *author;
    const char *license;
    const char *version;       /* versionString */
    const char *description;   /* shortDescription */
    int ios;                   /* deployment target: 15 to 18 (0 = 18), i.e. macOS 12 to 15,
                                * specification version 6 to 9 (docs/coreml.md's table;
                                * iOS 15: fp32 inputs and outputs, cast to fp16 inside) */
    int precision;             /* 16 (0 = 16) or 32: fp32 inputs, outputs, values and weights
                                * (coremltools' compute_precision=FLOAT32); the fp32 weights
                                * are the graph's fp32 constants, not their fp16 roundings */
    /* A classifier (Core ML's classifier description, as ct.ClassifierConfig writes it):
     * the single output, the probabilities [1, nclasses] or [nclasses], feeds a `classify`
     * op whose results "classLabel" (the predicted label) and "classLabel_probs" (label ->
     * probability) become the outputs, named by predictedFeatureName and
     * predictedProbabilitiesName. Labels that are all decimal integers are int64 labels,
     * otherwise strings. nclasses 0 = not a classifier. */
    int nclasses;
    const char *const *class_labels;
} af_coreml_opts;

/* Writes the part of g that computes `out` from `in` (af_compile's rules) as the Core ML
 * package `path` (normally ending in .mlpackage): an mlProgram for iOS 18 / macOS 15
 * (specification version 9, opset CoreML8; o->ios = 15, 16 or 17 picks an earlier target,
 * in what its opset accepts), fp16 inputs, outputs and
 * weights (fp32 with o->precision = 32), a classifier with o->nclasses labels, every op
 * lowered as af_mil_emit lowers it. Input and output features carry the tensors' names
 * and shapes. The package is built beside `path` and renamed into place: `path` must not
 * exist yet (AF_ERR_IO names it), and a failure leaves nothing behind. o may be NULL. */
AF_API af_status af_coreml_export(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                                  const af_coreml_opts *o, const char *path);

/* Exports a model given as code (an af_net, e.g. af_net_mlp, af_net_cnn or
 * af_net_llama) for a fixed batch: the forward from an fp16 input "input"
 * [batch, sample...] to the output "output" [batch, out_dim] (a classifier, o->nclasses
 * > 0: batch 1, a softmax over the logits feeds the classify op), with weights[i] (the
 * net's make_params order, af_trainer_read_param's values; NULL = the net's initial
 * values) baked in as constants. Otherwise as af_coreml_export. */
AF_API af_status af_coreml_export_net(const af_net *net, int batch, const float *const *weights,
                                      const af_coreml_opts *o, const char *path);

/* A llama2.c-architecture model (af_llama_weights, aneforge_llama.h) as a decode program
 * with its KV cache in Core ML states (iOS 18 / macOS 15, specification version 9): one
 * call runs one token, inputs "input_ids" [1, 1] (the token id) and "position" [1, 1]
 * (0, 1, ... in order), states "key_cache" and "value_cache" [layers, kv_heads,
 * max_seq, head_size] (fp16, zeros in a fresh MLState), output "logits" [1, vocab], the
 * stateless forward's logits at that position. max_seq 0 = the model's seq_len.
 * fp16 inputs: vocabulary and max_seq up to 2048. o->ios other than 0 or 18, and
 * o->precision 32, are AF_ERR_UNSUPPORTED naming the rule; otherwise as af_coreml_export.
 * Read back (af_coreml_open), each state is an fp16 argument and its value after the
 * call is a result named as the state, after the logits: feed it back for the next
 * token (af_model_bind_state does that inside a compiled model). */
AF_API af_status af_coreml_export_llama_kv(const af_llama_weights *w, int max_seq, const af_coreml_opts *o,
                                           const char *path);

/* A Core ML package (or .mlmodel) read as a MIL program (aneforge.h's af_mil_open
 * family: its graph, named arguments and results, run-time index checks); function NULL
 * = "main" or the only one. *out: close with af_mil_close. */
AF_API af_status af_coreml_open(const char *path, const char *function, af_mil_program **out);
/* Reads the mlProgram of the package `path` (or of a bare model.mlmodel file, whose
 * weights/ folder sits beside it) into a new graph, like af_mil_load: *in are the main
 * function's arguments (af_input nodes named as in the program), *out its results, both
 * owned by *g, which the caller frees with af_graph_free. The files are untrusted: a
 * malformed manifest or protobuf is AF_ERR_CORRUPT naming the file and the field, an op
 * or type aneforge cannot express AF_ERR_UNSUPPORTED naming it. Any out pointer except
 * g may be NULL; on failure *g, *in and *out are NULL and the counts 0. */
AF_API af_status af_coreml_load(const char *path, af_graph **g, int *nin, af_tensor ***in, int *nout,
                                af_tensor ***out);

/* Fine-tuning an imported model: turns the float weight constants of g (at least two
 * elements; integer values such as shapes and axes never) whose names match the glob
 * `pattern` (fnmatch; NULL or "" = all) into parameters with fp32 masters, writes them
 * to params (at most max) and returns how many. Train them as any af_parameter (feed
 * them to af_compile, af_backward for gradients); -1 with a message listing the
 * constants' names when none matches. */
AF_API int af_coreml_params(af_graph *g, const char *pattern, af_tensor **params, int max);
/* Freezes params (from af_coreml_params) back into constants holding values[i] (NULL:
 * the values they hold), so the graph exports with af_coreml_export again. */
AF_API af_status af_coreml_freeze(int n, af_tensor *const *params, const float *const *values);

/* The package `path` as an af_net, so af_trainer fine-tunes it like a built-in model:
 * its float weight constants named like `pattern` (af_coreml_params' rule) are the
 * net's params, in graph order, their values the initial weights; the rest stay
 * constants. The package has one input [batch, sample...] and one output; the net's
 * sample is the input's shape without its first dimension and out_dim the output's
 * elements per batch row (the output is flattened to [batch, out_dim]). The program is
 * fixed for the package's batch: set af_train_opts batch and eval_batch to it. Export
 * the tuned model with af_coreml_export_net(&net, batch, weights, ...), weights being
 * af_trainer_read_param's values. Release with af_net_free. */
AF_API af_status af_coreml_net(const char *path, const char *pattern, af_net *net);

/* The engine targets (ane-sim, ane) take fp16 inputs only: declares the fp32 inputs
 * among in fp16, which is exact for a model coremltools converted in fp16 precision
 * (each input is cast to fp16 first). AF_ERR_UNSUPPORTED naming the input when it feeds
 * anything but a cast (an fp32-precision model). */
AF_API af_status af_coreml_fp16_inputs(af_graph *g, int nin, af_tensor *const *in);

#ifdef __cplusplus
}
#endif
#endif
