/* MIL text: the emitter (IR -> Apple's MIL text + MILBlob weight file) and the reader
 * (MIL text + weight files -> IR). The public entry points are af_mil_emit and
 * af_mil_load in aneforge.h; these are the in-memory forms the library, the tests,
 * the fuzzer and the CLI share.
 *
 * What the emitter writes (Apple's coremlc spelling, ane-formats.md section 2):
 *   program(1.3) with a buildInfo dict and one `func main<ios18>`; function arguments
 *   in alphabetical order; every statement `T name = op(arg = var, ...)[name =
 *   string("name")];` with arguments sorted by name; every literal a named `const`
 *   statement; floats as C99 hex floats; constants of AF_MIL_BLOB_MIN or more elements
 *   in the weight file at @model_path/weights/weight.bin (fp16), smaller ones inline.
 *   Engine tensors are fp16 throughout: inputs, outputs, constants and every value.
 *   Ops with no single MIL op are decomposed into MIL ops (mil_opinfo.c lists how each
 *   op lowers); the reader recognises those decompositions and fuses them back, so
 *   emit -> parse gives the op it started from and bit-identical results.
 *
 * What the reader accepts: program(1) and (1.0) .. (1.5), opsets ios15..ios18 and
 * CoreML5..CoreML9, several functions (one chosen by name), the ios18 spelling
 * (`string("x")`, `fp16 e = ...`) and the ios16/17 one (`tensor<string, []>("x")`),
 * nested or flat value lists, bare scalars for one-element tensors, untyped operands
 * (`axis = -1`, `keep_dims = true`), inline or BLOBFILE constants in any number of
 * weight files (records found by their headers), statements without a name attribute,
 * `//` and block comments. Values may be bool, (u)int8, (u)int16, int32, fp16 or fp32:
 * integers and bools are held exactly (IR_TF_EXACT, whole numbers to 2^24). Input is
 * untrusted: every error is reported with its line and column, nothing aborts, sizes
 * are capped. */
#ifndef AF_ANE_MIL_H
#define AF_ANE_MIL_H

#include "mil/milblob.h"
#include "ir/ir.h"
#include "nn/llama_kernels.h"

#define AF_MIL_WEIGHT_PATH "@model_path/weights/weight.bin"
#define AF_MIL_WEIGHT_FILE "weight.bin"
#define AF_MIL_BLOB_MIN 10 /* constants with at least this many elements go to the weight file */
#define AF_MIL_BUILD_MIL "3510.2.1"     /* buildInfo coremlc-component-MIL */
#define AF_MIL_BUILD_COREMLC "3505.4.1" /* buildInfo coremlc-version */

/* Caps on untrusted input. */
#define AF_MIL_MAX_TEXT ((size_t)256 << 20)
#define AF_MIL_MAX_ELEMS ((int64_t)1 << 28)   /* elements in one tensor */
#define AF_MIL_MAX_INLINE ((int64_t)1 << 22)  /* elements in one inline literal */

/* ---------------------------------------------------------------- emitter */

/* Emits the part of g that computes out from in (like af_compile: every leaf the
 * outputs need must be in `in`, constants are baked). On success *text is a malloc'd
 * NUL-terminated MIL program of *len bytes and *blob a weight-file writer (never NULL,
 * possibly with no records); the caller frees both. arg_order (nin entries, may be
 * NULL) receives, for each function argument in MIL order, its index in `in`. */
af_status mil_emit_mem(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                          char **text, size_t *len, milblob_writer **blob, int *arg_order);

/* Writes a C99 hex float ("0x1.8p+1", "-0x0p+0", "inf", "nan") into buf (>= 32 bytes),
 * the same text on every platform. Returns buf. */
char *mil_hexfloat(double v, char *buf);

/* ---------------------------------------------------------------- reader */

/* A weight file held in memory, matched against the BLOBFILE path exactly. */
typedef struct {
    const char *path;       /* e.g. AF_MIL_WEIGHT_PATH */
    const uint8_t *bytes;
    size_t n;
} mil_blobsrc;

typedef struct {
    const char *source_name; /* for messages ("model.mil"); NULL = "<mil>" */
    const char *model_dir;   /* what @model_path names; NULL = no files on disk */
    const char *weights_dir; /* what @model_path/weights names; NULL = model_dir/weights */
    const char *function;    /* the function to read; NULL = "main", or the only one */
    int nblobs;              /* in-memory weight files, looked up before the disk */
    const mil_blobsrc *blobs;
} mil_read_opts;

/* Indices a gather or scatter reads that are known only at run time (constant ones are
 * checked when the program is read). The graph treats an index outside the axis as no
 * position (a row of zeros, -inf, a dropped update), so whoever runs the graph checks
 * these values with mil_check_indices, as `aneforge mil run` does. */
typedef struct {
    const char *op;         /* the MIL op: "gather", "scatter", ... (a static string) */
    int line, col;          /* the statement's position in the text */
    af_tensor *idx;         /* the indices as the op reads them (negative ones not yet wrapped) */
    int64_t extent;         /* the extent of the axis they index */
    bool negative;          /* -extent..-1 count from the end (Core ML's rule, unless
                             * validate_indices = true on ios17 and later) */
} mil_index_guard;

typedef struct {
    af_graph *g;            /* the caller frees it with af_graph_free */
    int nin, nout;
    af_tensor **in, **out;  /* owned by g: function arguments and returned values */
    char **in_names;        /* owned by g: the MIL names, in the same order */
    char **out_names;
    const char **in_types;  /* the declared MIL dtype of each argument ("fp16", "int32", "bool", ...) */
    const char **out_types; /* and of each result */
    int nguards;            /* owned by g: the run-time indices to check */
    mil_index_guard *guards;
    int nstates;            /* Core ML states (iOS 18): each state argument is an fp16 input of
                             * the wrapped shape, and its value after the run is one of the
                             * last nstates results, named as the state, in argument order */
} mil_module;

/* Checks the n = count(guard->idx) values v the guarded indices took in a run:
 * AF_ERR_INVALID naming the source, line, op and the first index outside its range. */
af_status mil_check_indices(const char *source, const mil_index_guard *guard, const float *v);
/* Whether one of v is outside the guard's range; if so, which, said in why. */
bool mil_index_bad(const mil_index_guard *guard, const float *v, char *why, size_t n);

/* Parses MIL text into a new graph. On failure *m is zeroed, nothing leaks, and
 * af_error_message() says "<source>:<line>:<col>: ..." (AF_ERR_CORRUPT for malformed
 * text or weights, AF_ERR_UNSUPPORTED for ops or forms the IR cannot express,
 * AF_ERR_IO for missing weight files). */
af_status mil_parse(const char *text, size_t len, const mil_read_opts *opts, mil_module *m);
/* Reads the MIL file at path (a regular file of at most AF_MIL_MAX_TEXT bytes) and parses
 * it as mil_parse does, @model_path being path's folder; function NULL = "main" or the
 * only one. What af_mil_load and af_mil_open share. */
af_status mil_load_file(const char *path, const char *weights_dir, const char *function, mil_module *m);

/* Wraps a module read some other way (a Core ML package) as the public af_mil_program;
 * the program owns m's graph from then on, source names it in index-check messages. On
 * failure m is freed. */
af_status mil_program_wrap(mil_module *m, const char *source, af_mil_program **out);

/* Emits the subgraph to MIL text and weights in memory and parses that back into a new
 * graph (*m): what the ane-sim target runs to prove every program survives the trip.
 * m->in is reordered to match `in` (m->in[i] stands for in[i]); m->out matches `out`. */
af_status mil_roundtrip(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                           mil_module *m);

/* ---------------------------------------------------------------- built-in programs
 * Small graphs `aneforge mil emit` writes and the golden tests pin: "mlp-step" (an MLP
 * training step: forward, softmax cross-entropy, backward, SGD update), "conv" (a conv
 * block with baked weights) and "attention" (a causal self-attention block). */
typedef struct {
    af_graph *g;             /* the caller frees it */
    int nin, nout;
    af_tensor *in[16], *out[16];
} mil_sample;

/* Builds seed 002's llama kernel called kernel ("fwdAttn" ... "clsBwd", nn/llama_kernels.h)
 * for the given shapes, fp16 ports: what the pipeline plan compiles. The "llama-<kernel>"
 * samples are the same at fixed small shapes. */
af_status mil_llama_kernel(const char *kernel, const lk_shape *shape, mil_sample *s);
/* Builds the sample called name; AF_ERR_INVALID for an unknown name. */
af_status mil_sample_build(const char *name, mil_sample *s);
/* The sample names, NULL-terminated. */
extern const char *const mil_sample_names[];

#endif
