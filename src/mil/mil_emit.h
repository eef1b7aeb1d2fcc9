/* Internals shared by the MIL writer (mil_writer.c), the emitter's driver (mil_emit.c)
 * and the op lowerings (mil_lower.c). */
#ifndef AF_ANE_MIL_EMIT_H
#define AF_ANE_MIL_EMIT_H
#include "mil/mil.h"
#include "ir/fp16.h"

typedef struct { char *s; size_t len, cap; bool oom; } mil_sb;
void mil_sb_printf(mil_sb *b, const char *fmt, ...);

typedef struct {
    af_graph *g;
    mil_sb text;
    milblob_writer *blob;
    const char **var;   /* per tensor id: its MIL variable, once emitted */
    char **names;       /* every name in use (owned) */
    int nnames, capnames;
    af_status st;       /* first internal failure (out of memory) */
} mil_emitter;

typedef struct { const char *key, *val; } mil_kv;
typedef struct { const char *name; af_tensor *t; } mil_arg_entry;

/* A fresh variable name from base: invalid characters become '_', reserved words get a
 * '_' suffix, repeats get _1, _2, ... The emitter owns the string. */
const char *mil_unique_name(mil_emitter *e, const char *base);
/* "tensor<fp16, [2, 3]>", or the bare dtype for rank 0. */
void mil_type_str(char *buf, size_t n, const char *dt, af_shape s);

/* Named const statements; each returns the (unique) variable name. fp16 tensors of
 * AF_MIL_BLOB_MIN or more elements go to the weight file. */
const char *mil_const_f16(mil_emitter *e, const char *base, af_shape s, const float *v);
const char *mil_const_f16_scalar(mil_emitter *e, const char *base, float v);
const char *mil_const_f32_scalar(mil_emitter *e, const char *base, float v);
const char *mil_const_ints(mil_emitter *e, const char *base, int n, const int64_t *v, bool scalar);
const char *mil_const_int(mil_emitter *e, const char *base, int64_t v);
const char *mil_const_bool(mil_emitter *e, const char *base, bool v);
const char *mil_const_string(mil_emitter *e, const char *base, const char *v);

/* `type var = op(args sorted by key)[name = string("var")];` */
void mil_stmt(mil_emitter *e, const char *type, const char *var, const char *op, int n, mil_kv *args);
/* The variable holding t, emitting t's const statement on first use. */
const char *mil_operand(mil_emitter *e, af_tensor *t);

/* Emits the statements computing node t into variable v; false when the op has no
 * lowering (mil_lower.c). */
bool mil_lower(mil_emitter *e, af_tensor *t, const char *v);

#endif
