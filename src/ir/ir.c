/* The graph arena, the op table, error recording and tensor facts. */
#include "ir/ir.h"
#include "ir/op_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A row's attributes: a static array ended by a NULL key (a file-scope compound literal). */
#define ATTR(key, slot, def, help) { key, IR_ATTR_##slot, def, help },
#define ATTRS(...) (const ir_attr_def[]){ __VA_ARGS__ { NULL, IR_ATTR_AXIS, NULL, NULL } }
#define NOATTRS NULL
const ir_op_info ir_ops[IR_OP_COUNT] = {
#define X(id, nm, arity, kind, flags, mil, ports, attrs) [IR_OP_##id] = { nm, arity, IR_KIND_##kind, flags, mil, ports, attrs },
#include "ops.def"
#undef X
};
#undef ATTR
#undef ATTRS
#undef NOATTRS

static const char *const kind_names[IR_KIND_COUNT] = {
#define K(KIND, name) [IR_KIND_##KIND] = name,
#include "kinds.def"
#undef K
};

/* Every kind can be named in a switch over its ops (op_cases.h). */
#define K(KIND, name) _Static_assert(IR_KIND_EQ(KIND, KIND), "src/ir/op_cases.h needs IR_SAME_KIND_" #KIND "_" #KIND);
#include "kinds.def"
#undef K

const char *ir_op_kind_name(ir_op_kind f) { return (unsigned)f < IR_KIND_COUNT ? kind_names[f] : "?"; }
int af_op_count(void) { return IR_OP_COUNT; }
const char *af_op_name(int op) { return (unsigned)op < IR_OP_COUNT ? ir_ops[op].name : NULL; }

/* ------------------------------------------------------------------ errors */

static _Thread_local char tls_error[1024];

const char *af_error_message(void) { return tls_error; }
void ir_clear_error(void) { tls_error[0] = 0; }

/* Formats aside first: callers often pass af_error_message() itself as an argument
 * ("kernel %s: %s", ..., af_error_message()), and formatting into the buffer being
 * read duplicated the prefix and cut the message. */
af_status ir_fail(af_status st, const char *fmt, ...) {
    char buf[sizeof tls_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(tls_error, buf, sizeof buf);
    return st;
}

void ir_graph_fail(af_graph *g, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    snprintf(tls_error, sizeof tls_error, "%s", buf);
    if (g && !g->error) g->error = ir_strdup(buf);
}

const char *af_status_name(af_status s) {
    switch (s) {
    case AF_OK: return "ok";
    case AF_ERR_INVALID: return "invalid argument";
    case AF_ERR_SHAPE: return "shape mismatch";
    case AF_ERR_UNSUPPORTED: return "unsupported";
    case AF_ERR_NOMEM: return "out of memory";
    case AF_ERR_IO: return "i/o error";
    case AF_ERR_CORRUPT: return "corrupt file";
    case AF_ERR_NUMERIC: return "non-finite values";
    }
    return "unknown status";
}

char *ir_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ------------------------------------------------------------------ shapes */

af_shape af_shape_make(int rank, const int64_t *dims) {
    af_shape s = { 0 };
    if (rank < 0 || rank > AF_MAX_RANK) { s.rank = -1; return s; }
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dim[i] = dims[i];
    return s;
}

int64_t af_shape_count(af_shape s) {
    if (s.rank < 0 || s.rank > AF_MAX_RANK) return 0;
    for (int i = 0; i < s.rank; i++)
        if (s.dim[i] <= 0) return 0; /* negative: invalid; zero: an empty shape */
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++) {
        if (n > AF_MAX_ELEMENTS / s.dim[i]) return 0; /* checked before it could wrap */
        n *= s.dim[i];
    }
    return n;
}

bool ir_shape_eq(af_shape a, af_shape b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; i++)
        if (a.dim[i] != b.dim[i]) return false;
    return true;
}

int ir_shape_str(af_shape s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "[");
    for (int i = 0; i < s.rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)s.dim[i]);
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "]");
    return (int)k;
}

bool ir_broadcast_shape(af_shape a, af_shape b, af_shape *out) {
    int r = a.rank > b.rank ? a.rank : b.rank;
    af_shape s = { .rank = r };
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a.rank), ib = i - (r - b.rank);
        int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        s.dim[i] = da == 1 ? db : da;
    }
    *out = s;
    return true;
}

int ir_norm_axis(int axis, int rank) {
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank ? axis : -1;
}

void ir_strides(af_shape s, int64_t *strides) {
    int64_t st = 1;
    for (int i = s.rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s.dim[i];
    }
}

/* ------------------------------------------------------------------ graph */

af_graph *af_graph_new(void) {
    af_graph *g = calloc(1, sizeof *g);
    if (g) atomic_init(&g->refs, 1);
    return g;
}

af_graph *ir_graph_retain(af_graph *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

static void tensor_free(af_tensor *t) {
    free(t->src);
    if (!(t->flags & IR_TF_BORROWED)) free(t->data);
    free(t->name);
    free(t);
}

void af_graph_free(af_graph *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) > 1) return; /* a model still runs from it */
    for (int i = 0; i < g->n; i++) tensor_free(g->t[i]);
    free(g->t);
    for (int i = 0; i < g->nowned; i++) free(g->owned[i]);
    free(g->owned);
    free(g->error);
    free(g);
}

void *ir_graph_own(af_graph *g, void *p) {
    if (!p) return NULL;
    if (g->nowned == g->capowned) {
        int cap = g->capowned ? g->capowned * 2 : 8;
        void **no = realloc(g->owned, (size_t)cap * sizeof *no);
        if (!no) { free(p); return NULL; }
        g->owned = no;
        g->capowned = cap;
    }
    g->owned[g->nowned++] = p;
    return p;
}

void af_graph_set_target(af_graph *g, af_target target) {
    /* src/ir sits below the backend registry (src/model), so it keeps its own notion of
     * a CPU-targeted graph instead of asking af_target_is_engine. */
    if (g) g->cpu_only = target == AF_TARGET_CPU;
}

const char *af_graph_error(const af_graph *g) { return g ? g->error : "graph is NULL"; }
int af_graph_size(const af_graph *g) { return g ? g->n : 0; }

af_tensor *ir_node_new(af_graph *g, ir_op op, int nsrc, af_tensor *const *src, af_shape shape,
                       af_dtype dt, const ir_attrs *attrs) {
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        af_tensor **nt = realloc(g->t, (size_t)cap * sizeof *nt);
        if (!nt) { ir_graph_fail(g, "out of memory growing the graph to %d tensors", cap); return NULL; }
        g->t = nt;
        g->cap = cap;
    }
    af_tensor *t = calloc(1, sizeof *t);
    if (!t) { ir_graph_fail(g, "out of memory creating a %s node", ir_ops[op].name); return NULL; }
    if (nsrc > 0) {
        t->src = malloc((size_t)nsrc * sizeof *t->src);
        if (!t->src) { free(t); ir_graph_fail(g, "out of memory"); return NULL; }
        memcpy(t->src, src, (size_t)nsrc * sizeof *src);
    }
    t->g = g;
    t->id = g->n;
    t->op = op;
    t->dtype = dt;
    t->shape = shape;
    t->nsrc = nsrc;
    if (g->vouching > 0) t->flags |= IR_TF_VOUCHED;
    if (attrs) t->a = *attrs;
    g->t[g->n++] = t;
    return t;
}

/* ------------------------------------------------------------------ tensor facts */

af_shape af_tensor_shape(const af_tensor *t) {
    af_shape s = { .rank = -1 };
    return t ? t->shape : s;
}
af_dtype af_tensor_dtype(const af_tensor *t) { return t ? t->dtype : AF_F32; }
const char *af_tensor_name(const af_tensor *t) { return t && t->name ? t->name : ""; }
const char *af_tensor_op(const af_tensor *t) { return t ? ir_ops[t->op].name : ""; }
af_graph *af_tensor_graph(const af_tensor *t) { return t ? t->g : NULL; }
int af_tensor_is_parameter(const af_tensor *t) { return t && (t->flags & IR_TF_PARAM); }
float *af_tensor_value(af_tensor *t) { return t ? t->data : NULL; }
