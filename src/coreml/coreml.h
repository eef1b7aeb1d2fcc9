/* Core ML packages (.mlpackage) both ways; the public calls are in aneforge_coreml.h.
 *
 * Export: the graph is emitted to MIL text (src/mil), that text is parsed into the MIL
 * syntax tree, and the tree is encoded as a CoreML.Specification.Model protobuf
 * (coreml_write.c) beside the emitter's MILBlob weight file and a Manifest.json.
 * Import: the protobuf is decoded with every field bounded (coreml_read.c) into MIL
 * text, which the MIL reader maps onto a graph; the manifest (coreml_manifest.c) names
 * the model file. Both directions thus share one op mapping, the MIL reader's.
 * Field numbers are those of coremltools' published Model.proto, MIL.proto and
 * FeatureTypes.proto (docs/coreml.md lists the ones used). */
#ifndef AF_COREML_H
#define AF_COREML_H
#include "aneforge_coreml.h"
#include "coreml/pb.h"
#include "mil/mil_ast.h"
#include "mil/milblob.h"

/* Deployment target iOS N: specification version N - 9, opset "CoreML<N - 10>" (iOS 18:
 * version 9, CoreML8, as coremltools numbers them). iOS 15 is the first with mlProgram. */
#define COREML_IOS_MIN 15
#define COREML_IOS_MAX 18
#define COREML_MAX_MODEL ((uint64_t)1 << 30)  /* model.mlmodel bytes we read */
#define COREML_MAX_MANIFEST ((uint64_t)1 << 20)
#define COREML_DATA "Data"
#define COREML_ITEM_DIR "com.apple.CoreML"

/* MIL.proto's DataType for a MIL dtype, 0 when it has none; and back (MIL_DT_NONE). */
int coreml_proto_dtype(mil_dtype dt);
mil_dtype coreml_mil_dtype(int proto);

/* ArrayFeatureType.ArrayDataType for a MIL dtype (0: not a multiarray element type). */
int coreml_array_dtype(mil_dtype dt);

/* Encodes the program text (as mil_emit_mem writes it, with its weights w16) as a Model
 * protobuf in *model (the caller frees it with pb_free). With o->precision 32 the
 * program is widened to fp32 (coreml_fp32) and *w32 receives the fp32 weight file the
 * package holds instead of w16 (the caller frees it); else *w32 is NULL. g is the
 * emitted graph (its constants' exact fp32 values). AF_ERR_* with the message set. */
af_status coreml_encode(const char *text, size_t len, const af_coreml_opts *o, af_graph *g, const milblob_writer *w16,
                        milblob_writer **w32, pb_buf *model);

/* Rewrites the emitted fp16 function f to fp32 in place; *w32: its new weight file. */
af_status coreml_fp32(mil_func *f, af_graph *g, const milblob_writer *w16, milblob_writer **w32);

/* Rewrites the emitted function f, in place, into what the opset of iOS `ios` accepts
 * (coreml_target.c: fp32 I/O with casts on iOS 15, scalars in x's dtype before iOS 17,
 * inputs later opsets added dropped); new nodes come from a. AF_ERR_UNSUPPORTED naming
 * the op, the target and the fix where the program needs a later target. */
af_status coreml_target(mil_func *f, mil_arena *a, int ios);

/* Classifiers (coreml_classify.c): checks o's labels against the program's results
 * (false with why set), writes the classify op and the block's two outputs into blk,
 * and the two output features and predicted*Name fields into desc. */
bool coreml_classify_check(const af_coreml_opts *o, int nret, const mil_type *prob, char *why, size_t n);
void coreml_classify_op(pb_buf *blk, const af_coreml_opts *o, const char *prob, const mil_type *prob_type);
void coreml_classify_features(pb_buf *desc, const af_coreml_opts *o);

/* Encodes the parsed function f as a Model protobuf into model (coreml_encode's second
 * half, for callers that build or rewrite the syntax tree themselves); false with why. */
bool coreml_encode_func(const mil_func *f, const af_coreml_opts *o, pb_buf *model, char *why, size_t n);

/* States (coreml_state.c): a state argument's description entry (ModelDescription.state),
 * and whether the deployment target ios allows f's states (iOS 18); false with why. */
bool coreml_state_feature(pb_buf *desc, const char *name, const mil_type *t, char *why, size_t n);
bool coreml_states_check(const mil_func *f, int ios, char *why, size_t n);

/* Writes the package folder `path` (which must not exist) from the model bytes and the
 * weight file: built beside it and renamed into place, nothing left on failure. */
af_status coreml_write_package(const char *path, const pb_buf *model, const milblob_writer *w);

/* Decodes a Model protobuf (untrusted) into MIL text in *text (NUL-terminated, the caller
 * frees it with pb_free); source names the file in messages. */
af_status coreml_decode(const uint8_t *bytes, size_t n, const char *source, pb_buf *text);

/* Reads Manifest.json (untrusted): the root model item's path relative to Data/, copied
 * into path (size n). AF_ERR_CORRUPT naming source and the problem on failure. */
af_status coreml_manifest_root(const char *json, size_t len, const char *source, char *path, size_t n);

/* Writes Manifest.json for a package whose model bytes are `model` (the item
 * identifiers are derived from them, so the same model gives the same manifest). */
af_status coreml_manifest_write(const pb_buf *model, pb_buf *json);

/* Reads the package (or bare model file) at path into m, as mil_parse does; function
 * NULL = "main" or the only one. */
af_status coreml_load_module(const char *path, const char *function, mil_module *m);

#endif
