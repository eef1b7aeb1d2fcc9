/* The MIL reader's internals: tokens (mil_lex.c), the syntax tree the parser builds
 * (mil_parse.c), the fusion pass (mil_fuse.c) and the op mapping to IR (mil_map.c).
 * Everything the parser allocates lives in one arena freed at once. */
#ifndef AF_ANE_MIL_AST_H
#define AF_ANE_MIL_AST_H
#include "mil/mil.h"

#define MIL_MAX_RANK 8
#define MIL_MAX_DEPTH 32 /* nesting of types, tuples and brackets */

/* ---------------------------------------------------------------- arena */
typedef struct mil_block mil_block;
typedef struct { mil_block *head; size_t total; } mil_arena;
void *mil_alloc(mil_arena *a, size_t n);              /* zeroed; NULL when out of memory */
char *mil_strndup(mil_arena *a, const char *s, size_t n);
void mil_arena_free(mil_arena *a);

/* ---------------------------------------------------------------- errors */
typedef struct {
    const char *source;
    af_status st;      /* first error, AF_OK when none */
    char msg[600];
} mil_diag;
/* Records the first error as "<source>:<line>:<col>: <message>"; returns false. */
bool mil_error(mil_diag *d, af_status st, int line, int col, const char *fmt, ...);

/* ---------------------------------------------------------------- tokens */
typedef enum { TK_EOF, TK_IDENT, TK_NUM, TK_STR, TK_PUNCT, TK_ARROW } mil_tk;
typedef struct {
    mil_tk kind;
    const char *p;  /* the token's text in the source */
    size_t n;
    int line, col;
} mil_token;
typedef struct {
    const char *s;
    size_t n, i;
    int line, col;
    mil_diag *diag;
} mil_lexer;
/* The next token; false (with the diagnostic set) on a character no token starts with,
 * an unterminated string or an over-long token. */
bool mil_lex(mil_lexer *L, mil_token *t);
bool mil_tok_is(const mil_token *t, const char *text); /* kind IDENT or PUNCT/ARROW with exactly this text */

/* ---------------------------------------------------------------- syntax tree */
typedef enum {
    MIL_DT_NONE = 0, MIL_BOOL, MIL_STRING, MIL_FP16, MIL_FP32, MIL_FP64, MIL_BF16,
    MIL_INT4, MIL_INT8, MIL_INT16, MIL_INT32, MIL_INT64,
    MIL_UINT1, MIL_UINT2, MIL_UINT3, MIL_UINT4, MIL_UINT6, MIL_UINT8, MIL_UINT16, MIL_UINT32, MIL_UINT64
} mil_dtype;
mil_dtype mil_dtype_from(const char *p, size_t n);   /* MIL_DT_NONE when not a dtype name */
const char *mil_dtype_name(mil_dtype dt);
bool mil_dtype_is_int(mil_dtype dt);
bool mil_dtype_is_float(mil_dtype dt);
/* Value classes: how the IR holds a MIL value. Floats as fp16/fp32; bools as 0/1 and
 * integers as whole numbers in fp32 tensors flagged IR_TF_EXACT (exact to 2^24). */
enum { MIL_VC_SAME = 0, MIL_VC_BOOL = 1, MIL_VC_FLOAT = 2, MIL_VC_INT = 3 };
int mil_dtype_class(mil_dtype dt);

typedef enum { MIL_TY_TENSOR, MIL_TY_OTHER } mil_tykind; /* a bare dtype is a rank-0 tensor */
typedef struct {
    mil_tykind kind;
    mil_dtype dt;
    int rank;
    int64_t dim[MIL_MAX_RANK];
    bool dynamic;      /* a '?' or symbolic dimension */
    bool state;        /* state<tensor<...>>: a Core ML state wrapping this tensor type (iOS 18) */
    int line, col;
} mil_type;

typedef struct {
    mil_type type;
    int64_t count;     /* elements */
    double *v;         /* numeric elements (bools as 0/1), NULL for strings and blobs */
    char *s;           /* a string scalar */
    bool blob;
    char *blob_path;
    uint64_t blob_offset;
    int line, col;
} mil_lit;

typedef enum { MIL_V_IDENT, MIL_V_LIT, MIL_V_TUPLE } mil_vkind;
typedef struct mil_value {
    mil_vkind kind;
    const char *ident;
    mil_lit *lit;
    int n;
    struct mil_value *items;
    int line, col;
} mil_value;

typedef struct { const char *name; mil_value val; int line, col; } mil_arg;

typedef struct {
    int nout;
    mil_type *out_types;
    const char **out_names;
    const char *op;
    int nargs;
    mil_arg *args;     /* inputs and attributes together; `name` is dropped */
    int line, col;
} mil_stmt;

typedef struct { mil_type type; const char *name; int line, col; } mil_param;
typedef struct { const char *name; int line, col; } mil_ret;

typedef struct {
    const char *name, *opset;
    int nparams, nstmts, nret;
    mil_param *params;
    mil_stmt *stmts;
    mil_ret *ret;
    int line, col;
} mil_func;

typedef struct {
    char version[16];
    int nfuncs;
    mil_func *funcs;
} mil_program;

/* Parses a whole program; false with the diagnostic set on error. */
bool mil_parse_program(const char *text, size_t len, mil_arena *a, mil_diag *d, mil_program *p);

/* ---------------------------------------------------------------- mapping to IR */
typedef struct {
    const char *name;
    int def;            /* defining statement, -1 for a function argument */
    mil_type type;      /* as declared */
    af_tensor *t;       /* IR tensor, once built (consts lazily) */
    const mil_lit *lit; /* a const's value */
    float *vals;        /* a const's values as floats, once resolved (arena) */
    int cls;            /* its value class (MIL_VC_*), once built */
    int uses;
    af_tensor *state;   /* a state argument's input (its t stays NULL: read through read_state) */
    af_tensor *state_now; /* and its value now: the input, then each coreml_update_state's value */
} mil_sym;

typedef struct {
    int kind;           /* MIL_FUSE_* */
    int groups;
    float eps;
    const char *x, *gamma, *beta;
} mil_fused;
enum { MIL_FUSE_NONE = 0, MIL_FUSE_ABSORBED, MIL_FUSE_RMS, MIL_FUSE_LN, MIL_FUSE_CLN, MIL_FUSE_GN };

typedef struct mil_mapper {
    mil_arena *arena;
    mil_diag *diag;
    const mil_read_opts *opts;
    const mil_func *f;
    af_graph *g;
    mil_sym *syms;
    int nsyms, capsyms;
    int *table;         /* open-addressing hash: name -> sym index + 1 */
    int tabcap;
    mil_fused *fuse;    /* per statement */
    struct mil_blobfile *files;
    int nfiles, capfiles;
    mil_module *mod; /* filled by mil_map_function */
    mil_index_guard *guards; /* run-time index checks (malloc'd; handed to mod->g at the end) */
    int nguards, capguards;
} mil_mapper;

mil_sym *mil_lookup(mil_mapper *M, const char *name);
/* Adds a symbol; an error (NULL) when the name is taken or the table is full. */
mil_sym *mil_define(mil_mapper *M, const char *name, int def, const mil_type *ty, int line, int col);
/* The IR shape of a static tensor type (rank <= AF_MAX_RANK, dims >= 1, capped size). */
bool mil_shape_of(mil_mapper *M, const mil_type *ty, af_shape *s, int line, int col);
/* An IR constant holding a literal's values (vals NULL: read them now). */
af_tensor *mil_const_tensor(mil_mapper *M, const char *name, const mil_lit *lit, const float *vals, int line, int col);
/* A const's values as floats (inline or from its weight file); NULL on error. */
const float *mil_const_values(mil_mapper *M, mil_sym *s, int line, int col);
/* The scalar value of a const sym or an inline literal, for fusion decisions. */
bool mil_scalar_of(mil_mapper *M, const mil_value *v, double *out);
/* Finds the canonical decompositions mil_lower.c writes; fills M->fuse. */
void mil_fuse(mil_mapper *M);
/* Whether the reader maps the MIL op `name` (mil_map.c, mil_map_ext.c). */
bool mil_op_supported(const char *name);
/* Whether Core ML's iOS 15..18 op set (coremltools' MIL op definitions) has `name`
 * (mil_opset.c); the list itself, NULL-terminated, for `aneforge ops --mil`. */
bool mil_coreml_op_known(const char *name);
extern const char *const mil_coreml_ops[];
/* The dtypes function arguments and results may have. */
bool mil_io_dtype(mil_dtype dt);
/* Builds the graph for function f; false with the diagnostic set on error. */
bool mil_map_function(mil_mapper *M);
/* Blob files (mil_weights.c): the payload of the record at offset in the file `path`,
 * the file opened on first use; mil_blobs_free closes every file the mapper opened. */
bool mil_blob_get(mil_mapper *M, const char *path, uint64_t offset, milblob_dtype *dt, const void **data,
                  int64_t *nbytes, int line, int col);
void mil_blobs_free(mil_mapper *M);

#endif
