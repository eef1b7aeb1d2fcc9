/* Internal graph IR: tensors, the graph arena, the op table and error recording.
 * Every other layer includes this. */
#ifndef AF_IR_H
#define AF_IR_H

#include "aneforge.h"
#include <stdbool.h>
#include <stdarg.h>
#include <stdatomic.h>

typedef enum {
#define X(id, ...) IR_OP_##id,
#include "ops.def"
#undef X
} ir_op;
/* The number of rows: not an enumerator, so a switch over the ops lists every row and
 * nothing else (-Werror=switch). */
enum {
    IR_OP_ROWS = 0
#define X(id, ...) + 1
#include "ops.def"
#undef X
};
#define IR_OP_COUNT ((int)IR_OP_ROWS)

typedef enum {
#define K(KIND, name) IR_KIND_##KIND,
#include "kinds.def"
#undef K
    IR_KIND_COUNT
} ir_op_kind;

/* OPF_CPU_ONLY: a native CPU kernel with no engine lowering; only graphs targeted at the
 * CPU (af_graph_set_target) contain it, and the engine backends refuse it.
 * OPF_NODIFF: built only inside backward graphs; differentiating through it is an error. */
/* OPF_BRIDGE: a native engine layer the MIL frontend never emits (seed 004). On the CPU
 * it is an ordinary kernel; on the engine targets the graph is cut around it and it runs
 * as its own net.plist program (src/compile/segment.h, src/netplist/netplist.h). */
enum { OPF_LEAF = 1u << 0, OPF_DIFF = 1u << 1, OPF_ZEROGRAD = 1u << 2, OPF_CPU_ONLY = 1u << 3, OPF_NODIFF = 1u << 4,
       OPF_BRIDGE = 1u << 5 };

/* Where an attribute lives in ir_attrs, which also says how its value is written:
 * AXIS, MODE, GROUPS, KEEP, TA, TB, INT0..INT3 (ints[k]), SIZE0 (sizes[0]), FY, FX
 * (kernel[0], kernel[1]): one integer; AXES (a mask of axes), PERM and BEGIN (ints),
 * SIZES (sizes, the rest -1), SHAPE (sizes and naxes): a list; KERNEL, STRIDE, PAD,
 * DILATION: two integers h,w; SCALAR, EPS, BETA: a number; TO: fp16 or fp32; SEW
 * (mode): a scaled_elementwise op name. */
typedef enum {
    IR_ATTR_AXIS, IR_ATTR_AXES, IR_ATTR_KEEP, IR_ATTR_PERM, IR_ATTR_BEGIN, IR_ATTR_SIZES, IR_ATTR_SHAPE, IR_ATTR_TA,
    IR_ATTR_TB, IR_ATTR_MODE, IR_ATTR_GROUPS, IR_ATTR_KERNEL, IR_ATTR_STRIDE, IR_ATTR_PAD, IR_ATTR_DILATION,
    IR_ATTR_SCALAR, IR_ATTR_EPS, IR_ATTR_BETA, IR_ATTR_TO, IR_ATTR_INT0, IR_ATTR_INT1, IR_ATTR_INT2, IR_ATTR_INT3,
    IR_ATTR_SIZE0, IR_ATTR_FY, IR_ATTR_FX, IR_ATTR_SEW
} ir_attr_slot;

/* One attribute of an op-table row (ATTR in ops.def). */
typedef struct {
    const char *key;    /* its name: aneforge op --attr KEY=VALUE, af_op_info */
    ir_attr_slot slot;
    const char *def;    /* the value it takes when not given, written as a user would; "": zero */
    const char *help;
} ir_attr_def;

typedef struct {
    const char *name;
    int arity;
    ir_op_kind kind;
    unsigned flags;
    const char *mil;            /* the MIL ops it lowers to */
    const char *ports;          /* the sources' names (ops.def) */
    const ir_attr_def *attrs;   /* the attributes it reads, ended by a NULL key; NULL: none */
} ir_op_info;

extern const ir_op_info ir_ops[IR_OP_COUNT];
const char *ir_op_kind_name(ir_op_kind f);

/* Op attributes. One struct for all ops keeps builders and passes simple; each op's
 * row in ops.def lists the fields it reads. */
typedef struct {
    int64_t ints[AF_MAX_RANK]; /* transpose: perm; slice: begin; reduce: axis mask in ints[0] */
    int64_t sizes[AF_MAX_RANK];/* slice: size (resolved, never -1) */
    int naxes;                 /* reduce: number of reduced axes */
    int axis;                  /* softmax, concat, split */
    int keep_dims;             /* reduce */
    int ta, tb;                /* matmul transposes */
    int mode;                  /* gelu mode; rope: 1 = the inverse rotation */
    int groups;                /* conv, group_norm */
    int kernel[2], stride[2], pad[2], dilation[2];
    float scalar;              /* adds, muls */
    float eps;                 /* norms; lrn: the bias K; minmax_norm: epsilon */
    float beta;                /* lrn: the exponent */
    af_dtype to;               /* cast */
} ir_attrs;

/* The op table's ports and attributes (src/ir/op_attrs.c). */
/* The name of op's source k into buf (a variadic "x*" port: x0, x1, ...); NULL when the
 * op has no source k (any k is valid for a variadic "x*"). */
const char *ir_op_port(ir_op op, int k, char *buf, size_t n);
/* The number of names in op's ports: its arity, or for a variadic op the named ones. */
int ir_op_nports(ir_op op);
/* The op's attribute called key, or NULL. */
const ir_attr_def *ir_op_attr(ir_op op, const char *key);
/* Attributes at the op table's defaults. */
void ir_attrs_default(ir_op op, ir_attrs *a);
/* Sets op's attribute key from its text value (rank0: source 0's rank, for axes);
 * false with a message naming the key, the value and what it takes in err. */
bool ir_attr_parse(ir_op op, const char *key, const char *value, ir_attrs *a, int rank0, char *err, size_t errlen);

/* Tensor flags. */
enum {
    IR_TF_PARAM = 1u << 0,    /* trainable input with an fp32 master in data */
    IR_TF_VOUCHED = 1u << 1,  /* built by the library's own training kernels */
    IR_TF_CONV = 1u << 2,     /* a conv patch-matrix param; a.kernel = {kH, kW}, a.groups = Cin */
    IR_TF_HOSTVAL = 1u << 3,  /* computed only from constants and parameters: adapts its dtype like a constant */
    IR_TF_EXACT = 1u << 4,    /* holds a MIL integer or bool value (as do the nodes computing it): never rounded
                               * to fp16 whatever its dtype, so integers up to 2^24 stay exact at every
                               * precision; adapts its dtype like a constant */
    IR_TF_BORROWED = 1u << 5, /* a constant whose data is the caller's (ir_const_borrow): never freed or written */
};

struct af_tensor {
    af_graph *g;
    int id;                   /* creation index: sources always have smaller ids */
    ir_op op;
    af_dtype dtype;
    af_shape shape;
    int nsrc;
    af_tensor **src;
    ir_attrs a;
    float *data;              /* CONST value or parameter master (owned) */
    char *name;               /* owned, may be NULL */
    unsigned flags;
};

struct af_graph {
    af_tensor **t;
    int n, cap;
    char *error;              /* first error, sticky */
    int anon;                 /* counter for generated names */
    int vouching;             /* > 0: new nodes are the library's own vouched kernels */
    int cpu_only;             /* af_graph_set_target(g, AF_TARGET_CPU) was called */
    void **owned;             /* other graph-owned allocations (loss handles) */
    int nowned, capowned;
    atomic_int refs;          /* the creator's reference plus one per live model compiled from it */
};

/* A model keeps its graph alive: af_compile retains it, af_model_free releases it, and
 * af_graph_free drops the caller's reference. The graph is freed with the last one. */
af_graph *ir_graph_retain(af_graph *g);

/* Hands p to the graph, which frees it with the graph; returns p, or NULL (and frees
 * p) when out of memory. */
void *ir_graph_own(af_graph *g, void *p);

/* Records the first error on g (later ones are dropped) and on this thread. */
void ir_graph_fail(af_graph *g, const char *fmt, ...);
/* Sets this thread's error message; returns st for `return ir_fail(...)`. */
af_status ir_fail(af_status st, const char *fmt, ...);
/* Whole files (file_write.c): ir_open_write opens a temporary beside path (path +
 * ".partial"; a path that is a device or a pipe is written in place),
 * NULL with the error set; ir_close_written closes it and, when the writes (ok) and the
 * close worked, renames it over path, else removes it and fails with AF_ERR_IO naming
 * path and the errno text. path ends up written whole or as it was. */
void *ir_open_write(const char *path);
af_status ir_close_written(void *file, const char *path, bool ok);
/* Both at once for bytes in memory; who prefixes messages. */
af_status ir_write_file(const char *path, const void *data, size_t n, const char *who);
void ir_clear_error(void);
/* Sends a formatted message to the user's log function (af_set_log), if any. */
void ir_log(af_log_level level, const char *fmt, ...);

/* A constant whose values are the caller's memory, not a copy (a large model's frozen
 * weights held once): data (count(s) floats) must stay valid and unchanged while g and
 * every model compiled from it live (af_model_free and af_graph_free both done); fp32
 * CPU programs read it in place, the others copy it as they do any constant. Writing
 * through af_tensor_value writes the caller's memory. NULL with the error on g. */
af_tensor *ir_const_borrow(af_graph *g, const char *name, af_shape s, const float *data);

/* Creates a node; the caller has validated operands and computed shape. */
af_tensor *ir_node_new(af_graph *g, ir_op op, int nsrc, af_tensor *const *src, af_shape shape,
                       af_dtype dt, const ir_attrs *attrs);

/* Validates operands, infers the shape and adds the node; NULL (with the error
 * recorded on the graph) on failure. Used by every builder and by autograd. */
af_tensor *ir_build(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a);

/* The weight gradient [Cout, Cin, kh, kw] of conv(x, w) (groups 1) from x [N, Cin, H, W]
 * and the output gradient dy [N, Cout, Ho, Wo]: a CPU-only node (OPF_CPU_ONLY). */
/* The input gradient [N, C, H, W] of avg_pool or max_pool (op: IR_OP_AVG_POOL_GRAD or
 * IR_OP_MAX_POOL_GRAD) from x and dy [N, C, Ho, Wo], with the forward pool's kernel,
 * stride and pad: a CPU-only node. max_pool's goes to every position equal to its
 * window's max. */
af_tensor *ir_pool_grad(ir_op op, af_tensor *x, af_tensor *dy, const ir_attrs *pool);
af_tensor *ir_conv_weight_grad(af_tensor *x, af_tensor *dy, int kh, int kw, const int stride[2], const int pad[2],
                               const int dilation[2]);
/* The native causal attention node (CPU only) whatever the graph's target, and its
 * gradient [3, ...q's shape] (dq, dk, dv) from q, k, v and dy; layout 0: q, k, v
 * [B, heads, seq, d], 1: [B, seq, heads, d]. */
af_tensor *ir_causal_attention(af_tensor *q, af_tensor *k, af_tensor *v, float scale, int layout);
af_tensor *ir_causal_attention_grad(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *dy, float scale, int layout);
/* Heads per batch and sequence length of a causal_attention(_grad) node, read from q's
 * shape by the node's layout. */
void ir_attention_dims(const af_tensor *t, int64_t *heads, int64_t *seq);
/* The native rope node (CPU only): x turned by the angles of cos/sin [seq, hs/2]; inverse turns back. */
af_tensor *ir_rope(af_tensor *x, af_tensor *cos_t, af_tensor *sin_t, bool inverse);
/* The native swiglu node (CPU only), silu(a) * b, and its gradient for a (of_b false) or b. */
af_tensor *ir_swiglu(af_tensor *a, af_tensor *b);
af_tensor *ir_swiglu_grad(af_tensor *a, af_tensor *b, af_tensor *dy, bool of_b);
/* The native softmax cross-entropy node (CPU only): [N, 1] of logsumexp(z) sum(y) - sum(y z)
 * over logits z and targets y [N, C]; its gradient (softmax(z) sum(y) - y) dy for dy [N, 1]
 * or [1, 1], with every sum(y) taken as 1 when unit_rows (the trainer's seed). */
af_tensor *ir_softmax_xent(af_tensor *logits, af_tensor *targets);
af_tensor *ir_softmax_xent_grad(af_tensor *logits, af_tensor *targets, af_tensor *dy, bool unit_rows);

/* The attention af_sdpa computes, from ordinary ops (matmul, muls, add, softmax): the
 * fallback outside the native layer's bounds, and what its gradient differentiates. */
af_tensor *ir_sdpa_decomposed(af_tensor *q, af_tensor *k, af_tensor *v, af_tensor *mask, float scale);

/* The shape rules of the bridge kinds (src/ir/shape_bridge.c). */
bool ir_infer_attention(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen);
bool ir_infer_structural(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen);

/* Shape inference for op with sources and attributes; writes the result shape, or
 * returns false with a message in err. */
bool ir_infer_shape(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out,
                    char *err, size_t errlen);

/* The shape rules of the bridge-op kinds (shape_bridge_ops.c), called by ir_infer_shape. */
bool ir_infer_bridge(ir_op op, int nsrc, af_tensor *const *src, ir_attrs *a, af_shape *out, char *err, size_t errlen);
/* The channels [lo, hi) the engine's LRN sums for channel ch of C (seed 004): centred
 * low, clipped at the edges, so only the middle channel sees all C. */
void ir_lrn_window(int64_t ch, int64_t C, int64_t *lo, int64_t *hi);

/* Helpers shared across layers. */
char *ir_strdup(const char *s);              /* malloc'd copy (strdup is not C11) */
bool ir_shape_eq(af_shape a, af_shape b);
int  ir_shape_str(af_shape s, char *buf, size_t n);   /* "[2,3,4]" */
bool ir_broadcast_shape(af_shape a, af_shape b, af_shape *out);
int  ir_norm_axis(int axis, int rank);                 /* -1 when out of range */
/* Shape arithmetic is checked, never wrapped: a*b and a+b in int64, false on overflow. */
static inline bool ir_mul64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool ir_add64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
void ir_strides(af_shape s, int64_t *strides);         /* contiguous row-major */

#endif
