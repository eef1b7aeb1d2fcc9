/* The MIL reader's per-statement helpers, shared by the op handlers (mil_map.c for the
 * core ops, mil_map_ext.c for the rest of Core ML's op set): arguments as IR tensors or
 * constants, errors at the statement's line and column, and output binding with its
 * value-class check (float, bool or integer). */
#ifndef AF_ANE_MIL_CALL_H
#define AF_ANE_MIL_CALL_H
#include "mil/mil_ast.h"

typedef struct {
    mil_mapper *M;
    const mil_stmt *s;
    int in_cls;      /* value class of the first tensor argument read (MIL_VC_*), 0 before */
    int first_id;    /* graph size when the statement began: its nodes have ids from here */
} call;

/* Records "<op>: <message>" at argument a (or the statement); returns false. */
bool mil_cfail(call *c, af_status st, const mil_arg *a, const char *fmt, ...);
const mil_arg *mil_find(call *c, const char *name);
/* A value as an IR tensor (constants built on first use); *cls (may be NULL) its class. */
af_tensor *mil_value_tensor(call *c, const mil_value *v, const mil_arg *a, int *cls);
/* The tensor argument `name`; NULL with an error when required and missing. */
af_tensor *mil_targ(call *c, const char *name, bool required, int *cls);
/* A constant argument's literal, or NULL (absent: *present false; error otherwise). */
const mil_lit *mil_const_arg(call *c, const char *name, bool *present, const mil_arg **ap);
bool mil_get_ints(call *c, const char *name, int64_t *out, int max, int *n, bool required);
bool mil_get_int(call *c, const char *name, int64_t *v, int64_t dflt);
bool mil_get_bool(call *c, const char *name, bool *v, bool dflt);
bool mil_get_str(call *c, const char *name, const char **v, const char *dflt);
bool mil_get_float(call *c, const char *name, double *v, double dflt);
/* Binds output k to t after checking the declared type's class (MIL_VC_SAME: the
 * class of the first tensor argument) and shape; integer and bool results mark the
 * statement's nodes IR_TF_EXACT. */
bool mil_out(call *c, int k, af_tensor *t, int cls);
af_tensor *mil_b2(ir_op op, af_tensor *a, af_tensor *b);
af_tensor *mil_reshape_to(af_tensor *x, int rank, const int64_t *dims);

/* The indices of op (a static name) over an axis of extent d: constants are checked now
 * (one out of range fails the statement, naming it), values known only at run time are
 * recorded as a mil_index_guard for mil_check_indices. */
bool mil_guard_indices(call *c, const char *op, af_tensor *idx, int64_t d);
typedef bool (*mil_op_fn)(call *c, int op);
typedef struct { const char *name; mil_op_fn fn; int op; } mil_op_entry;
/* The handlers of mil_map_ext.c and mil_map_layout.c, NULL-name terminated. */
extern const mil_op_entry mil_ops_ext[];
extern const mil_op_entry mil_ops_layout[];
extern const mil_op_entry mil_ops_state[]; /* read_state, coreml_update_state (mil_map_state.c) */

#define X_(name) mil_targ(c, name, true, NULL)
#define NEED(p) do { if (!(p)) return false; } while (0)

#endif
