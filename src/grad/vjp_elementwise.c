/* VJPs of elementwise ops: closed-form derivatives from existing ops, reusing the
 * forward output t where it is itself the derivative term. */
#include "grad/grad.h"
#include "ir/op_cases.h"

#define SRC(k) (c->t->src[k])
#define NEED(k) (c->need[k])

void grad_vjp_binary(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g, *a = SRC(0), *b = SRC(1);
    af_tensor *da = NULL, *db = NULL;
    switch (t->op) {
    case IR_OP_ADD: da = g; db = g; break;
    case IR_OP_SUB: da = g; db = NEED(1) ? af_neg(g) : NULL; break;
    case IR_OP_MUL: da = NEED(0) ? af_mul(g, b) : NULL; db = NEED(1) ? af_mul(g, a) : NULL; break;
    case IR_OP_REAL_DIV:
        da = NEED(0) ? af_div(g, b) : NULL;
        db = NEED(1) ? af_neg(af_div(af_mul(g, t), b)) : NULL; /* -g a / b^2 = -g t / b */
        break;
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM: {
        /* Ties send the gradient to b. */
        af_tensor *pick = t->op == IR_OP_MAXIMUM ? af_greater(a, b) : af_less(a, b);
        af_tensor *zero = grad_zeros_like(g);
        da = NEED(0) ? af_select(pick, g, zero) : NULL;
        db = NEED(1) ? af_select(pick, zero, g) : NULL;
        break;
    }
    case IR_OP_POW:
        /* d/da = b a^(b-1) (no division, so a = 0 is fine); d/db = t log a. */
        da = NEED(0) ? af_mul(g, af_mul(b, af_pow(a, af_adds(b, -1.0f)))) : NULL;
        db = NEED(1) ? af_mul(g, af_mul(t, af_log(a))) : NULL;
        break;
    case IR_OP_GREATER: case IR_OP_LESS: case IR_OP_EQUAL: break; /* OPF_ZEROGRAD: never differentiated */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, BINARY, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        break;
    }
    if (NEED(0)) c->dsrc[0] = grad_unbroadcast(da, a->shape);
    if (NEED(1)) c->dsrc[1] = grad_unbroadcast(db, b->shape);
}

void grad_vjp_select(grad_ctx *c) {
    af_tensor *cond = SRC(0), *zero = grad_zeros_like(c->g);
    if (NEED(1)) c->dsrc[1] = grad_unbroadcast(af_select(cond, c->g, zero), SRC(1)->shape);
    if (NEED(2)) c->dsrc[2] = grad_unbroadcast(af_select(cond, zero, c->g), SRC(2)->shape);
}

void grad_vjp_cast(grad_ctx *c) { c->dsrc[0] = af_cast(c->g, SRC(0)->dtype); }

void grad_vjp_unary(grad_ctx *c) {
    af_tensor *t = c->t, *g = c->g, *x = SRC(0), *d = NULL;
    switch (t->op) {
    case IR_OP_ADDS: d = g; break;
    case IR_OP_MULS: d = af_muls(g, t->a.scalar); break;
    case IR_OP_NEG: d = af_neg(g); break;
    case IR_OP_ABS: {
        af_tensor *z = grad_zeros_like(x);
        d = af_mul(g, af_sub(af_greater(x, z), af_less(x, z)));
        break;
    }
    case IR_OP_SQUARE: d = af_mul(g, af_muls(x, 2.0f)); break;
    case IR_OP_SQRT: d = af_div(af_muls(g, 0.5f), t); break;
    case IR_OP_RSQRT: d = af_mul(g, af_muls(af_mul(t, af_square(t)), -0.5f)); break;
    case IR_OP_INVERSE: d = af_neg(af_mul(g, af_square(t))); break;
    case IR_OP_EXP: d = af_mul(g, t); break;
    case IR_OP_LOG: d = af_div(g, x); break;
    case IR_OP_TANH: d = af_mul(g, af_adds(af_neg(af_square(t)), 1.0f)); break;
    case IR_OP_SIGMOID: d = af_mul(g, af_mul(t, af_adds(af_neg(t), 1.0f))); break;
    case IR_OP_RELU: {
        /* select(x > 0, g, 0) with an exact-zero x - x, per the engine-safe recipe. */
        af_tensor *z = grad_zeros_like(x);
        d = af_select(af_greater(x, z), g, z);
        break;
    }
    case IR_OP_GELU:
        if (t->a.mode == AF_GELU_EXACT) {
            /* Phi(x) + x phi(x) */
            af_tensor *cdf = af_muls(af_adds(af_erf(af_muls(x, 0.70710678118654752f)), 1.0f), 0.5f);
            af_tensor *pdf = af_muls(af_exp(af_muls(af_square(x), -0.5f)), 0.39894228040143268f);
            d = af_mul(g, af_add(cdf, af_mul(x, pdf)));
        } else {
            /* 0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 c x^2), th = tanh(k (x + c x^3)) */
            const float k = 0.79788456080286536f, cc = 0.044715f;
            af_tensor *x2 = af_square(x);
            af_tensor *th = af_tanh(af_muls(af_add(x, af_muls(af_mul(x2, x), cc)), k));
            af_tensor *left = af_muls(af_adds(th, 1.0f), 0.5f);
            af_tensor *sech2 = af_adds(af_neg(af_square(th)), 1.0f);
            af_tensor *inner = af_muls(af_adds(af_muls(x2, 3.0f * cc), 1.0f), 0.5f * k);
            d = af_mul(g, af_add(left, af_mul(af_mul(x, sech2), inner)));
        }
        break;
    case IR_OP_SILU: {
        af_tensor *s = af_sigmoid(x); /* s (1 + x (1 - s)) */
        d = af_mul(g, af_mul(s, af_adds(af_mul(x, af_adds(af_neg(s), 1.0f)), 1.0f)));
        break;
    }
    case IR_OP_SIN: d = af_mul(g, af_cos(x)); break;
    case IR_OP_COS: d = af_neg(af_mul(g, af_sin(x))); break;
    case IR_OP_ERF: d = af_mul(g, af_muls(af_exp(af_neg(af_square(x))), 1.1283791670955126f)); break;
    case IR_OP_ATAN: d = af_div(g, af_adds(af_square(x), 1.0f)); break;                 /* 1 / (1 + x^2) */
    case IR_OP_ASIN: d = af_mul(g, af_rsqrt(af_adds(af_neg(af_square(x)), 1.0f))); break; /* 1 / sqrt(1 - x^2) */
    case IR_OP_ACOS: d = af_neg(af_mul(g, af_rsqrt(af_adds(af_neg(af_square(x)), 1.0f)))); break;
    case IR_OP_ATANH: d = af_div(g, af_adds(af_neg(af_square(x)), 1.0f)); break;        /* 1 / (1 - x^2) */
    case IR_OP_FLOOR: break; /* OPF_ZEROGRAD: never differentiated */
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND2(kind, SCALAR, UNARY, id)
#include "ir/ops.def"
#undef X
        ir_graph_fail(t->g, "af_backward: op %s reached the VJP of another kind", ir_ops[t->op].name);
        break;
    }
    c->dsrc[0] = d;
}
