/* Autograd internals: the VJP table and the helpers VJP rules share. VJPs are built
 * from graph ops only, avoiding the constructions the Neural Engine compiler rejects
 * (see seed 000: no multiplication of a reduce output by zero, no scatter op). */
#ifndef AF_GRAD_H
#define AF_GRAD_H
#include "ir/ir.h"

typedef enum { AF_LOSS_SCALAR, AF_LOSS_CE } nn_loss_kind;

struct af_loss {
    af_graph *g;
    nn_loss_kind kind;
    af_tensor *root;   /* the scalar, or the logits for CE */
    af_tensor *target; /* one-hot targets for CE */
    af_tensor *value;  /* the scalar loss, built lazily for CE */
};

typedef struct {
    af_tensor *t;      /* the node */
    af_tensor *g;      /* gradient arriving at its output (t's shape) */
    const bool *need;  /* need[k]: source k wants a gradient */
    af_tensor **dsrc;  /* out: one gradient per needed source, in the source's shape */
} grad_ctx;

typedef void (*grad_vjp_fn)(grad_ctx *c);
extern const grad_vjp_fn grad_vjps[IR_OP_COUNT];

/* Family rules. */
void grad_vjp_binary(grad_ctx *c);
void grad_vjp_select(grad_ctx *c);
void grad_vjp_unary(grad_ctx *c);
void grad_vjp_matmul(grad_ctx *c);
void grad_vjp_reduce(grad_ctx *c);
void grad_vjp_softmax(grad_ctx *c);
void grad_vjp_layout(grad_ctx *c);
void grad_vjp_norm(grad_ctx *c);
void grad_vjp_pool(grad_ctx *c);
void grad_vjp_conv(grad_ctx *c);
void grad_vjp_cast(grad_ctx *c);
/* Bridge ops (vjp_bridge_ops.c). */
void grad_vjp_rank(grad_ctx *c);
void grad_vjp_rearrange(grad_ctx *c);
void grad_vjp_geometry(grad_ctx *c);
void grad_vjp_bnorm(grad_ctx *c);
void grad_vjp_einsum(grad_ctx *c);
void grad_vjp_attention(grad_ctx *c);  /* vjp_bridge.c */
void grad_vjp_structural(grad_ctx *c);

/* A tensor shaped like t holding c, built as (t - t) + c: multiplying by zero trips
 * the engine's reduce-times-zero fusion wall, an exact-zero subtraction does not. */
af_tensor *grad_const_like(af_tensor *t, float c);
af_tensor *grad_zeros_like(af_tensor *t);          /* t - t */
af_tensor *grad_zeros(af_graph *g, af_shape s);    /* a baked zero constant */
/* Sums g over the axes along which a tensor of shape s was broadcast to g's shape. */
af_tensor *grad_unbroadcast(af_tensor *g, af_shape s);
/* Patches of x [N, Cin, H, W] for a kh x kw stride-1 kernel with padding: [N, Cin*kh*kw,
 * Ho*Wo], row ci*(kh*kw) + u*kw + v, built from slices and concats only. */
af_tensor *grad_im2col(af_tensor *x, int kh, int kw, int ph, int pw);
/* The same patches with the batch folded into the columns: [Cin*kh*kw, N*Ho*Wo]. */
af_tensor *grad_im2col_wide(af_tensor *x, int kh, int kw, int ph, int pw);
/* x reshaped so its n values lie along `axis` of a rank-`rank` shape (for gamma/beta). */
af_tensor *grad_along_axis(af_tensor *x, int rank, int axis);
#endif
