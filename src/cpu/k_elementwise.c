/* Elementwise kernels: binary ops with broadcasting, select, scalar ops, unary math
 * and cast. Inner loops are specialised on operand strides so the compiler can
 * vectorise the common contiguous and scalar-broadcast cases. */
#include "cpu/bcast.h"
#include "ir/op_cases.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/vmath.h"
#include "ir/fp16.h"

#include <math.h>
#include <string.h>

#define PAR_MIN 16384 /* elements below which threading costs more than it saves */

/* Applies expression E(x, y) over n elements with strides sa, sb in {0, 1, other}. */
#define BIN_LOOP(E)                                                                     \
    do {                                                                                \
        if (sa == 1 && sb == 1) {                                                       \
            for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; o[i] = (E); }   \
        } else if (sa == 1 && sb == 0) {                                                \
            const float y = b[0];                                                       \
            for (int64_t i = 0; i < n; i++) { float x = a[i]; o[i] = (E); }             \
        } else if (sa == 0 && sb == 1) {                                                \
            const float x = a[0];                                                       \
            for (int64_t i = 0; i < n; i++) { float y = b[i]; o[i] = (E); }             \
        } else {                                                                        \
            for (int64_t i = 0; i < n; i++) { float x = a[i * sa], y = b[i * sb]; o[i] = (E); } \
        }                                                                               \
    } while (0)

CPU_VECTOR_CLONES static void bin_inner(ir_op op, const float *a, int64_t sa, const float *b, int64_t sb, float *o, int64_t n) {
    switch (op) {
    case IR_OP_ADD: BIN_LOOP(x + y); break;
    case IR_OP_SUB: BIN_LOOP(x - y); break;
    case IR_OP_MUL: BIN_LOOP(x * y); break;
    case IR_OP_REAL_DIV: BIN_LOOP(x / y); break;
    case IR_OP_MAXIMUM: BIN_LOOP(x > y ? x : y); break;
    case IR_OP_MINIMUM: BIN_LOOP(x < y ? x : y); break;
    case IR_OP_POW: BIN_LOOP(powf(x, y)); break;
    case IR_OP_GREATER: BIN_LOOP(x > y ? 1.0f : 0.0f); break;
    case IR_OP_LESS: BIN_LOOP(x < y ? 1.0f : 0.0f); break;
    case IR_OP_EQUAL: BIN_LOOP(x == y ? 1.0f : 0.0f); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BINARY, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}

typedef struct {
    const cpu_call *c;
    cpu_bcast b;
} bcast_ctx;

static void binary_rows(void *p, int64_t r0, int64_t r1) {
    const bcast_ctx *x = p;
    const cpu_call *c = x->c;
    const cpu_bcast *b = &x->b;
    int last = b->rank - 1;
    int64_t inner = b->dim[last], sa = b->st[0][last], sb = b->st[1][last];
    if (b->rank == 1) { /* one long row: the range is over elements */
        bin_inner(c->t->op, c->in[0] + r0 * sa, sa, c->in[1] + r0 * sb, sb, c->out + r0, r1 - r0);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[CPU_BCAST_MAX_OPS];
        cpu_bcast_row(b, r, off);
        bin_inner(c->t->op, c->in[0] + off[0], sa, c->in[1] + off[1], sb, c->out + r * inner, inner);
    }
}

/* Runs fn over rows (or elements, for a single row) of a broadcast, in parallel when large. */
static void bcast_run(const cpu_call *c, bcast_ctx *x, cpu_range_fn fn) {
    int64_t rows = cpu_bcast_rows(&x->b), inner = x->b.dim[x->b.rank - 1];
    if (x->b.rank == 1) cpu_pool_for(c->pool, inner, PAR_MIN, fn, x);
    else cpu_pool_for(c->pool, rows, inner >= PAR_MIN ? 1 : (PAR_MIN + inner - 1) / inner, fn, x);
}

void cpu_k_binary(const cpu_call *c) {
    bcast_ctx x = { .c = c };
    af_shape ins[2] = { c->t->src[0]->shape, c->t->src[1]->shape };
    cpu_bcast_init(&x.b, c->t->shape, 2, ins);
    bcast_run(c, &x, binary_rows);
}

static void select_rows(void *p, int64_t r0, int64_t r1) {
    const bcast_ctx *x = p;
    const cpu_call *c = x->c;
    const cpu_bcast *b = &x->b;
    int last = b->rank - 1;
    int64_t inner = b->dim[last];
    int64_t s0 = b->st[0][last], s1 = b->st[1][last], s2 = b->st[2][last];
    int64_t e0 = r0, e1 = r1, rr0 = r0, rr1 = r1;
    if (b->rank == 1) { rr0 = 0; rr1 = 1; } else { e0 = 0; e1 = inner; }
    for (int64_t r = rr0; r < rr1; r++) {
        int64_t off[CPU_BCAST_MAX_OPS] = { 0, 0, 0 };
        if (b->rank > 1) cpu_bcast_row(b, r, off);
        const float *cd = c->in[0] + off[0], *a = c->in[1] + off[1], *bb = c->in[2] + off[2];
        float *o = c->out + (b->rank > 1 ? r * inner : 0);
        if (s0 == 1 && s1 == 1 && s2 == 1) /* the common case (relu's gradient): vectorisable */
            for (int64_t i = e0; i < e1; i++) o[i] = cd[i] != 0.0f ? a[i] : bb[i];
        else
            for (int64_t i = e0; i < e1; i++) o[i] = cd[i * s0] != 0.0f ? a[i * s1] : bb[i * s2];
    }
}

typedef struct { const float *x, *g; float *out; } relu_grad_ctx;

CPU_VECTOR_CLONES static void relu_grad_range(void *p, int64_t b, int64_t e) {
    const relu_grad_ctx *r = p;
    const float *x = r->x, *g = r->g;
    float *out = r->out;
    for (int64_t i = b; i < e; i++) { /* g read unconditionally, so the loop vectorises */
        const float xi = x[i], gi = g[i], z = xi - xi; /* +0, or NaN for inf and NaN: as the unfused nodes */
        out[i] = xi > z ? gi : z;
    }
}

void cpu_relu_grad(cpu_pool *pool, const float *x, const float *g, float *out, int64_t n) {
    relu_grad_ctx r = { x, g, out };
    cpu_pool_for(pool, n, PAR_MIN, relu_grad_range, &r);
}

typedef struct { const float *x; float *out; float add, mul; } affine_ctx;

/* (x + a) * b rounds exactly as the two nodes do: a sum then a product, nothing to contract. */
CPU_VECTOR_CLONES static void affine_range(void *p, int64_t b, int64_t e) {
    const affine_ctx *r = p;
    const float *x = r->x;
    float *out = r->out, a = r->add, m = r->mul;
    for (int64_t i = b; i < e; i++) out[i] = (x[i] + a) * m;
}

void cpu_add_mul(cpu_pool *pool, const float *x, float add, float mul, float *out, int64_t n) {
    affine_ctx r = { x, out, add, mul };
    cpu_pool_for(pool, n, PAR_MIN, affine_range, &r);
}

void cpu_k_select(const cpu_call *c) {
    bcast_ctx x = { .c = c };
    af_shape ins[3] = { c->t->src[0]->shape, c->t->src[1]->shape, c->t->src[2]->shape };
    cpu_bcast_init(&x.b, c->t->shape, 3, ins);
    bcast_run(c, &x, select_rows);
}

/* ------------------------------------------------------------------ unary */

#define UN_LOOP(E) for (int64_t i = 0; i < n; i++) { float x = a[i]; o[i] = (E); }

static float gelu_exact(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

/* exp, SiLU and sigmoid (cross-entropy, the llama FFN's forward and backward): vectorised exp. */
static CPU_VECTOR_CLONES void exp_loop(const float *a, float *o, int64_t n) { UN_LOOP(cpu_vexpf(x)); }
static CPU_VECTOR_CLONES void silu_loop(const float *a, float *o, int64_t n) {
    UN_LOOP(x / (1.0f + cpu_vexpf(-x)));
}
static CPU_VECTOR_CLONES void sigmoid_loop(const float *a, float *o, int64_t n) {
    UN_LOOP(1.0f / (1.0f + cpu_vexpf(-x)));
}

static void unary_range(void *p, int64_t b, int64_t e) {
    const cpu_call *c = p;
    const float *a = c->in[0] + b;
    float *o = c->out + b;
    int64_t n = e - b;
    float s = c->fp16 ? af_round_f16(c->t->a.scalar) : c->t->a.scalar; /* as the engine stores it */
    switch (c->t->op) {
    case IR_OP_ADDS: UN_LOOP(x + s); break;
    case IR_OP_MULS: UN_LOOP(x * s); break;
    case IR_OP_NEG: UN_LOOP(-x); break;
    case IR_OP_ABS: UN_LOOP(fabsf(x)); break;
    case IR_OP_SQUARE: UN_LOOP(x * x); break;
    case IR_OP_SQRT: UN_LOOP(sqrtf(x)); break;
    case IR_OP_RSQRT: UN_LOOP(1.0f / sqrtf(x)); break;
    case IR_OP_INVERSE: UN_LOOP(1.0f / x); break;
    case IR_OP_EXP: exp_loop(a, o, n); break;
    case IR_OP_LOG: UN_LOOP(logf(x)); break;
    case IR_OP_TANH: UN_LOOP(tanhf(x)); break;
    case IR_OP_SIGMOID: sigmoid_loop(a, o, n); break;
    case IR_OP_RELU: UN_LOOP(x > 0.0f ? x : 0.0f); break;
    case IR_OP_GELU:
        if (c->t->a.mode == AF_GELU_TANH) { UN_LOOP(gelu_tanh(x)); }
        else { UN_LOOP(gelu_exact(x)); }
        break;
    case IR_OP_SILU: silu_loop(a, o, n); break;
    case IR_OP_SIN: UN_LOOP(sinf(x)); break;
    case IR_OP_COS: UN_LOOP(cosf(x)); break;
    case IR_OP_ERF: UN_LOOP(erff(x)); break;
    case IR_OP_FLOOR: UN_LOOP(floorf(x)); break;
    case IR_OP_ATAN: UN_LOOP(atanf(x)); break;
    case IR_OP_ASIN: UN_LOOP(asinf(x)); break;
    case IR_OP_ACOS: UN_LOOP(acosf(x)); break;
    case IR_OP_ATANH: UN_LOOP(atanhf(x)); break;
    case IR_OP_CAST:
        if (c->t->a.to == AF_F16) ir_round_f16_array(memmove(o, a, (size_t)n * sizeof *o), n);
        else memmove(o, a, (size_t)n * sizeof *o);
        break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND3(kind, SCALAR, UNARY, CAST, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}

void cpu_k_unary(const cpu_call *c) {
    cpu_pool_for(c->pool, af_shape_count(c->t->shape), PAR_MIN, unary_range, (void *)c);
}
void cpu_k_scalar(const cpu_call *c) { cpu_k_unary(c); }
void cpu_k_cast(const cpu_call *c) { cpu_k_unary(c); }
