/* Corpus builders: each turns a case row into a graph through the public builders
 * and draws seeded input values inside the op's legal domain. */
#include "support/corpus_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The domain an op's operand k needs when the case does not say. */
static corpus_dom default_dom(ir_op op, int k) {
    switch (op) {
    case IR_OP_POW: return k == 0 ? (corpus_dom)DU(0.25f, 3.0f) : (corpus_dom)DU(-2.0f, 2.0f);
    case IR_OP_REAL_DIV: return k == 1 ? (corpus_dom)DM(0.5f, 2.0f) : (corpus_dom)DU(-2.0f, 2.0f);
    case IR_OP_GREATER: case IR_OP_LESS: case IR_OP_EQUAL: return (corpus_dom)DI(-2, 2); /* ties matter */
    case IR_OP_SELECT: return k == 0 ? (corpus_dom)DI(-1, 1) : (corpus_dom)DU(-2.0f, 2.0f);
    case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_LOG: return (corpus_dom)DU(0.05f, 4.0f);
    case IR_OP_INVERSE: return (corpus_dom)DM(0.25f, 2.0f);
    case IR_OP_EXP: return (corpus_dom)DU(-3.0f, 3.0f);
    case IR_OP_SIN: case IR_OP_COS: return (corpus_dom)DU(-4.0f, 4.0f);
    case IR_OP_ASIN: case IR_OP_ACOS: case IR_OP_ATANH: return (corpus_dom)DU(-0.9f, 0.9f);
    case IR_OP_GELU: case IR_OP_SILU: case IR_OP_SIGMOID: case IR_OP_TANH: case IR_OP_ERF: return (corpus_dom)DU(-4.0f, 4.0f);
    default: return (corpus_dom)DU(-2.0f, 2.0f);
    }
}

static corpus_dom dom_of(const corpus_case *c, int k) {
    return c->dom[k].kind == DOM_DEFAULT ? default_dom(c->op, k) : c->dom[k];
}

static void fill(test_rng *r, float *x, int64_t n, corpus_dom d) {
    for (int64_t i = 0; i < n; i++) {
        double u = test_uniform(r);
        switch (d.kind) {
        case DOM_INT: x[i] = (float)floor(d.lo + (d.hi - d.lo + 1.0) * u); break;
        case DOM_SIGNMAG: x[i] = (float)((test_uniform(r) < 0.5 ? -1.0 : 1.0) * (d.lo + (d.hi - d.lo) * u)); break;
        default: x[i] = (float)(d.lo + (d.hi - d.lo) * u); break;
        }
    }
}

static af_tensor *input(corpus_graph *cg, af_shape s, corpus_dom d, af_dtype dt) {
    char name[16];
    snprintf(name, sizeof name, "x%d", cg->nin);
    af_tensor *t = af_input(cg->g, name, dt, s);
    if (!t || cg->nin == CORPUS_MAX_IO) return NULL;
    int64_t n = af_shape_count(s);
    float *x = malloc((size_t)n * sizeof *x + sizeof *x);
    if (!x) return NULL;
    fill(&cg->rng, x, n, d);
    cg->in[cg->nin] = t;
    cg->data[cg->nin++] = x;
    return t;
}

static af_tensor *constant(corpus_graph *cg, af_shape s, corpus_dom d) {
    int64_t n = af_shape_count(s);
    if (n < 1) return af_const(cg->g, "w", s, NULL); /* lets the builder report the bad shape */
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return NULL;
    fill(&cg->rng, x, n, d);
    af_tensor *t = af_const(cg->g, "w", s, x);
    free(x);
    return t;
}

static void output(corpus_graph *cg, af_tensor *t) {
    if (cg->nout < CORPUS_MAX_IO) cg->out[cg->nout++] = t;
}

void corpus_graph_free(corpus_graph *cg) {
    for (int i = 0; i < cg->nin; i++) free(cg->data[i]);
    af_graph_free(cg->g);
    memset(cg, 0, sizeof *cg);
}

/* ------------------------------------------------------------------ elementwise */

void corpus_b_binary(corpus_graph *cg, const corpus_case *c) {
    af_dtype dt = c->p[1] ? AF_F16 : AF_F32;
    af_tensor *a = c->p[0] == 2 ? constant(cg, c->s[0], dom_of(c, 0)) : input(cg, c->s[0], dom_of(c, 0), dt);
    af_tensor *b = c->p[0] == 1 ? constant(cg, c->s[1], dom_of(c, 1)) : input(cg, c->s[1], dom_of(c, 1), dt);
    if (c->p[0] == 3) b = a; /* one tensor as both operands */
    af_tensor *y = NULL;
    switch (c->op) {
    case IR_OP_ADD: y = af_add(a, b); break;
    case IR_OP_SUB: y = af_sub(a, b); break;
    case IR_OP_MUL: y = af_mul(a, b); break;
    case IR_OP_REAL_DIV: y = af_div(a, b); break;
    case IR_OP_MAXIMUM: y = af_maximum(a, b); break;
    case IR_OP_MINIMUM: y = af_minimum(a, b); break;
    case IR_OP_POW: y = af_pow(a, b); break;
    case IR_OP_GREATER: y = af_greater(a, b); break;
    case IR_OP_LESS: y = af_less(a, b); break;
    case IR_OP_EQUAL: y = af_equal(a, b); break;
    default: break;
    }
    output(cg, y);
}

void corpus_b_select(corpus_graph *cg, const corpus_case *c) {
    af_tensor *cond = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *a = input(cg, c->s[1], dom_of(c, 1), AF_F32);
    af_tensor *b = input(cg, c->s[2], dom_of(c, 2), AF_F32);
    output(cg, af_select(cond, a, b));
}

void corpus_b_scalar(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    output(cg, c->op == IR_OP_ADDS ? af_adds(x, c->f) : af_muls(x, c->f));
}

void corpus_b_unary(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32), *y = NULL;
    switch (c->op) {
    case IR_OP_NEG: y = af_neg(x); break;
    case IR_OP_ABS: y = af_abs(x); break;
    case IR_OP_SQUARE: y = af_square(x); break;
    case IR_OP_SQRT: y = af_sqrt(x); break;
    case IR_OP_RSQRT: y = af_rsqrt(x); break;
    case IR_OP_INVERSE: y = af_inverse(x); break;
    case IR_OP_EXP: y = af_exp(x); break;
    case IR_OP_LOG: y = af_log(x); break;
    case IR_OP_TANH: y = af_tanh(x); break;
    case IR_OP_SIGMOID: y = af_sigmoid(x); break;
    case IR_OP_RELU: y = af_relu(x); break;
    case IR_OP_GELU: y = af_gelu(x, (af_gelu_mode)c->p[0]); break;
    case IR_OP_SILU: y = af_silu(x); break;
    case IR_OP_SIN: y = af_sin(x); break;
    case IR_OP_COS: y = af_cos(x); break;
    case IR_OP_ERF: y = af_erf(x); break;
    case IR_OP_FLOOR: case IR_OP_ATAN: case IR_OP_ASIN: case IR_OP_ACOS: case IR_OP_ATANH:
        y = ir_build(c->op, 1, &x, NULL); /* read from MIL only: no public builder */
        break;
    default: break;
    }
    output(cg, y);
}

void corpus_b_cast(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), (af_dtype)c->p[0]);
    af_tensor *y = af_cast(x, (af_dtype)c->p[1]);
    output(cg, c->p[2] ? af_cast(y, AF_F32) : y);
}

/* ------------------------------------------------------------------ tensor ops */

void corpus_b_matmul_w(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    output(cg, af_matmul_w(x, constant(cg, c->s[1], (corpus_dom)DU(-1.0f, 1.0f))));
}

void corpus_b_matmul(corpus_graph *cg, const corpus_case *c) {
    af_tensor *a = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *b = c->p[2] ? constant(cg, c->s[1], dom_of(c, 1)) : input(cg, c->s[1], dom_of(c, 1), AF_F32);
    output(cg, af_matmul(a, b, c->p[0], c->p[1]));
}

void corpus_b_reduce(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32), *y = NULL;
    const int *axes = &c->p[2];
    int n = c->p[1], keep = c->p[0];
    switch (c->op) {
    case IR_OP_REDUCE_SUM: y = af_reduce_sum(x, n, axes, keep); break;
    case IR_OP_REDUCE_MEAN: y = af_reduce_mean(x, n, axes, keep); break;
    case IR_OP_REDUCE_MAX: y = af_reduce_max(x, n, axes, keep); break;
    case IR_OP_REDUCE_MIN: y = af_reduce_min(x, n, axes, keep); break;
    default: break;
    }
    output(cg, y);
}

void corpus_b_softmax(corpus_graph *cg, const corpus_case *c) {
    output(cg, af_softmax(input(cg, c->s[0], dom_of(c, 0), AF_F32), c->p[0]));
}

void corpus_b_transpose(corpus_graph *cg, const corpus_case *c) {
    output(cg, af_transpose(input(cg, c->s[0], dom_of(c, 0), AF_F32), c->p));
}

void corpus_b_reshape(corpus_graph *cg, const corpus_case *c) {
    output(cg, af_reshape(input(cg, c->s[0], dom_of(c, 0), AF_F32), c->s[1]));
}

void corpus_b_slice(corpus_graph *cg, const corpus_case *c) {
    int64_t begin[AF_MAX_RANK];
    for (int i = 0; i < AF_MAX_RANK; i++) begin[i] = c->p[i];
    output(cg, af_slice(input(cg, c->s[0], dom_of(c, 0), AF_F32), begin, c->s[1].dim));
}

void corpus_b_concat(corpus_graph *cg, const corpus_case *c) {
    af_tensor *xs[6];
    int n = c->p[1];
    for (int k = 0; k < n; k++) xs[k] = input(cg, c->s[k], dom_of(c, 0), AF_F32);
    output(cg, af_concat(n, xs, c->p[0]));
}

void corpus_b_split(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32), *parts[8] = { 0 };
    int64_t sizes[8];
    int n = c->p[1];
    for (int k = 0; k < n && k < 8; k++) sizes[k] = c->p[2 + k];
    if (af_split(x, c->p[0], n, c->p[2] ? sizes : NULL, parts) != AF_OK) return;
    for (int k = 0; k < n; k++) output(cg, parts[k]);
}

/* embedding: s[0] table, s[1] ids (dom[1], whole numbers); p[1]: ids baked.
 * embedding_grad: s[0] dy, s[1] ids, p[0] vocab. */
void corpus_b_embedding(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *ids = c->p[1] ? constant(cg, c->s[1], c->dom[1]) : input(cg, c->s[1], c->dom[1], AF_F32);
    output(cg, c->op == IR_OP_EMBEDDING ? af_embedding(x, ids) : af_embedding_grad(x, ids, c->p[0]));
}

/* ------------------------------------------------------------------ nn ops */

void corpus_b_norm(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32), *gamma = NULL, *beta = NULL, *y = NULL;
    corpus_dom gd = DU(0.5f, 1.5f), bd = DU(-0.5f, 0.5f);
    if (!c->p[1]) {
        gamma = c->p[2] ? constant(cg, c->s[1], gd) : input(cg, c->s[1], gd, AF_F32);
        if (c->op != IR_OP_RMS_NORM) beta = c->p[2] ? constant(cg, c->s[2], bd) : input(cg, c->s[2], bd, AF_F32);
    }
    switch (c->op) {
    case IR_OP_RMS_NORM: y = af_rms_norm(x, gamma, c->f); break;
    case IR_OP_LAYER_NORM: y = af_layer_norm(x, gamma, beta, c->f); break;
    case IR_OP_CHANNEL_LAYER_NORM: y = af_channel_layer_norm(x, gamma, beta, c->f); break;
    case IR_OP_GROUP_NORM: y = af_group_norm(x, c->p[0], gamma, beta, c->f); break;
    default: break;
    }
    output(cg, y);
}

void corpus_b_pool(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    const int *k = &c->p[0], *s = c->p[2] ? &c->p[2] : NULL, *p = c->p[6] ? NULL : &c->p[4];
    if (c->op == IR_OP_AVG_POOL_GRAD || c->op == IR_OP_MAX_POOL_GRAD) { /* CPU-only: dy fed with the pooled shape */
        af_tensor *y = af_avg_pool(x, k, s, p);
        if (!y) return;
        af_tensor *dy = input(cg, y->shape, (corpus_dom)DU(-1.0f, 1.0f), AF_F32);
        output(cg, ir_pool_grad(c->op, x, dy, &y->a));
        return;
    }
    output(cg, c->op == IR_OP_AVG_POOL ? af_avg_pool(x, k, s, p) : af_max_pool(x, k, s, p));
}

void corpus_b_conv(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *w = constant(cg, c->s[1], (corpus_dom)DU(-1.0f, 1.0f));
    const int *s = c->p[0] ? &c->p[0] : NULL, *d = c->p[4] ? &c->p[4] : NULL;
    output(cg, af_conv(x, w, s, &c->p[2], d, c->p[6] ? c->p[6] : 1));
}

void corpus_b_conv_transpose(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *w = constant(cg, c->s[1], (corpus_dom)DU(-1.0f, 1.0f));
    const int *s = c->p[0] ? &c->p[0] : NULL, *d = c->p[4] ? &c->p[4] : NULL;
    output(cg, af_conv_transpose(x, w, s, &c->p[2], d));
}

/* The CPU-only weight gradient of a conv, as af_backward makes it on the CPU target. */
void corpus_b_conv_wgrad(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *dy = input(cg, c->s[1], dom_of(c, 1), AF_F32);
    const int *s = c->p[2] ? &c->p[2] : NULL, *d = c->p[6] ? &c->p[6] : NULL;
    output(cg, ir_conv_weight_grad(x, dy, c->p[0], c->p[1], s, &c->p[4], d));
}

/* ------------------------------------------------------------------ chains */

/* Small multi-node graphs: buffers reused by the memory plan, a tensor read several
 * times, intermediates that are also outputs, dead split parts, dtype changes mid-graph,
 * and an input requested as an output. */
void corpus_b_chain(corpus_graph *cg, const corpus_case *c) {
    corpus_dom d = DU(-2.0f, 2.0f);
    switch (c->p[0]) {
    case 0: { /* layer norm -> matmul -> softmax, the normalised tensor also an output */
        af_tensor *x = input(cg, SH_(4, 7, 13), d, AF_F32);
        af_tensor *h = af_layer_norm(x, NULL, NULL, 1e-5f);
        af_tensor *y = af_matmul(h, constant(cg, SH_(13, 9), d), 0, 0);
        output(cg, af_softmax(y, -1));
        output(cg, h);
        break;
    }
    case 1: { /* concat of one tensor three times, reduced, plus x + x */
        af_tensor *x = input(cg, SH_(3, 5), d, AF_F32);
        af_tensor *xs[3] = { x, x, x };
        int ax = 1;
        output(cg, af_reduce_sum(af_concat(3, xs, 0), 1, &ax, 1));
        output(cg, af_add(x, x));
        break;
    }
    case 2: { /* reshape -> transpose -> slice -> square via mul */
        af_tensor *x = input(cg, SH_(6, 10), d, AF_F32);
        int perm[3] = { 2, 0, 1 };
        af_tensor *t = af_transpose(af_reshape(x, SH_(3, 4, 5)), perm);
        int64_t b[3] = { 1, 1, 0 }, s[3] = { 3, -1, 4 };
        af_tensor *u = af_slice(t, b, s);
        output(cg, af_mul(u, u));
        break;
    }
    case 3: { /* split in three, concat two parts in reverse, one part unused */
        af_tensor *x = input(cg, SH_(2, 9, 3), d, AF_F32), *parts[3];
        int64_t sizes[3] = { 2, 3, 4 };
        af_split(x, 1, 3, sizes, parts);
        af_tensor *rev[2] = { parts[2], parts[0] };
        output(cg, af_concat(2, rev, 1));
        break;
    }
    case 4: { /* fp32 -> fp16 dtype -> add an fp16 input -> back to fp32 */
        af_tensor *x = input(cg, SH_(5, 7), d, AF_F32), *y = input(cg, SH_(7), d, AF_F16);
        output(cg, af_cast(af_add(af_cast(x, AF_F16), y), AF_F32));
        break;
    }
    case 5: { /* an input is itself an output, next to a node that reads it */
        af_tensor *x = input(cg, SH_(4, 6), d, AF_F32);
        output(cg, af_relu(x));
        output(cg, x);
        break;
    }
    case 6: { /* conv -> group norm -> silu -> avg pool, a small conv block */
        af_tensor *x = input(cg, SH_(2, 3, 8, 8), d, AF_F32);
        int pad[2] = { 1, 1 }, k[2] = { 2, 2 };
        af_tensor *y = af_conv(x, constant(cg, SH_(4, 3, 3, 3), d), NULL, pad, NULL, 1);
        output(cg, af_avg_pool(af_silu(af_group_norm(y, 2, NULL, NULL, 1e-5f)), k, NULL, NULL));
        break;
    }
    case 7: { /* no inputs at all: a baked constant through two ops */
        af_tensor *w = constant(cg, SH_(3, 4), d);
        output(cg, af_relu(af_muls(w, 3.0f)));
        break;
    }
    case 8: { /* llama attention weights: embedded tokens as queries, RoPE at offset 3,
               * one KV head shared by two query heads, causal mask, softmax */
        af_tensor *ids = input(cg, SH_(1, 4), (corpus_dom)DI(0, 9), AF_F32);
        af_tensor *q = af_reshape(af_embedding(constant(cg, SH_(10, 12), d), ids), SH_(1, 4, 2, 6));
        af_tensor *k = af_repeat_kv_heads(af_rope(input(cg, SH_(1, 4, 1, 6), d, AF_F32), 3, 10000.0f), 2);
        int perm[4] = { 0, 2, 1, 3 };
        af_tensor *sc = af_matmul(af_transpose(af_rope(q, 3, 10000.0f), perm), af_transpose(k, perm), 0, 1);
        output(cg, af_softmax(af_causal_mask(sc, 0), -1));
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------------ bridge ops */

void corpus_b_bridge(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32), *y = NULL;
    af_tensor *z = c->s[1].rank ? input(cg, c->s[1], dom_of(c, 1), AF_F32) : NULL;
    const int *p = c->p;
    switch (c->op) {
    case IR_OP_SORT: y = af_sort(x, p[0], p[1], p[2]); break;
    case IR_OP_TOPK: y = af_top_k(x, p[0], p[1], p[2], p[3]); break;
    case IR_OP_ARGMINMAX: y = af_arg_min_max(x, p[0], p[1]); break;
    case IR_OP_GLOBAL_ARGMINMAX: y = af_global_arg_min_max(x, p[0], p[1]); break;
    case IR_OP_PIXEL_SHUFFLE: y = af_pixel_shuffle(x, p[0], p[1]); break;
    case IR_OP_PIXEL_UNSHUFFLE: y = af_pixel_unshuffle(x, p[0], p[1]); break;
    case IR_OP_CHANNEL_TO_SPACE: y = af_channel_to_space(x, p[0], p[1]); break;
    case IR_OP_SPACE_TO_CHANNEL: y = af_space_to_channel(x, p[0], p[1]); break;
    case IR_OP_SPACE_TO_BATCH: y = af_space_to_batch(x, p[0], p[1]); break;
    case IR_OP_BATCH_TO_SPACE: y = af_batch_to_space(x, p[0], p[1]); break;
    case IR_OP_CROSS_PRODUCT: y = af_cross_product(x, z); break;
    case IR_OP_CROSS_CORRELATION: y = af_cross_correlation(x, z); break;
    case IR_OP_COST_VOLUME: y = af_cost_volume(x, z, p[0]); break;
    case IR_OP_FPS: y = af_furthest_point_sampling(x, p[0], p[1]); break;
    case IR_OP_RADIUS_SEARCH: y = af_radius_search(x, z, c->f); break;
    case IR_OP_DYNAMIC_SLICE: y = af_dynamic_slice(x, z, p[0], p[1]); break;
    case IR_OP_LRN: y = af_lrn(x, c->f, (float)p[0] / 100.0f, (float)p[1] / 100.0f); break;
    case IR_OP_MINMAX_NORM: y = af_minmax_norm(x, p[0], c->f); break;
    case IR_OP_SCALED_ELEMENTWISE: y = af_scaled_elementwise(x, z, (af_sew_op)p[0], c->f); break;
    case IR_OP_EINSUM: y = af_einsum(cg->g, "nchw,nwhu->nchu", 2, (af_tensor *[]){ x, z }); break;
    default: break;
    }
    output(cg, y);
}

/* sdpa: s[0] q, s[1] k, s[2] v, s[3] mask (rank 0: none); p[0]: the mask is a constant;
 * f the scale (0: 1/sqrt(d)). */
void corpus_b_sdpa(corpus_graph *cg, const corpus_case *c) {
    af_tensor *q = input(cg, c->s[0], dom_of(c, 0), AF_F32), *k = input(cg, c->s[1], dom_of(c, 1), AF_F32);
    af_tensor *v = input(cg, c->s[2], dom_of(c, 2), AF_F32), *mask = NULL;
    if (c->s[3].rank) mask = c->p[0] ? constant(cg, c->s[3], (corpus_dom)DU(-3.0f, 0.0f)) : input(cg, c->s[3], (corpus_dom)DU(-3.0f, 0.0f), AF_F32);
    output(cg, af_sdpa(q, k, v, mask, c->f));
}

/* causal_attention (p[0] 0) or its gradient (p[0] 1): q, k, v (and dy) of shape s[0];
 * f the scale (0: 1/sqrt(d)); p[1] the layout (1: [B, T, H, d]). The native node itself,
 * as af_causal_attention (layout 0) and the llama (1) build it on graphs targeted at the
 * CPU. */
void corpus_b_causal_attention(corpus_graph *cg, const corpus_case *c) {
    af_tensor *src[4];
    for (int i = 0; i < (c->p[0] ? 4 : 3); i++) src[i] = input(cg, c->s[0], dom_of(c, i < 3 ? i : 2), AF_F32); /* dy: v's domain */
    float scale = c->f != 0 ? c->f : 1.0f / sqrtf((float)c->s[0].dim[3]);
    output(cg, c->p[0] ? ir_causal_attention_grad(src[0], src[1], src[2], src[3], scale, (int)c->p[1])
                       : ir_causal_attention(src[0], src[1], src[2], scale, (int)c->p[1]));
}

/* rope: x of shape s[0], cos and sin tables s[1] (fed); p[0]: mode (1: turn back). */
void corpus_b_rope(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    af_tensor *cs = input(cg, c->s[1], (corpus_dom)DU(-1.0f, 1.0f), AF_F32), *sn = input(cg, c->s[1], (corpus_dom)DU(-1.0f, 1.0f), AF_F32);
    output(cg, ir_rope(x, cs, sn, c->p[0] != 0));
}

/* swiglu (p[0] 0), or its gradient for a (p[0] 1) or b (p[0] 2): a, b (and dy) of shape s[0]. */
void corpus_b_swiglu(corpus_graph *cg, const corpus_case *c) {
    af_tensor *a = input(cg, c->s[0], (corpus_dom)DU(-6.0f, 6.0f), AF_F32), *b = input(cg, c->s[0], dom_of(c, 1), AF_F32);
    if (!c->p[0]) {
        output(cg, ir_swiglu(a, b));
        return;
    }
    af_tensor *dy = input(cg, c->s[0], dom_of(c, 2), AF_F32);
    output(cg, ir_swiglu_grad(a, b, dy, c->p[0] == 2));
}

/* softmax_xent (p[0] 0) or its gradient (p[0] 1: dy [N, 1]; 2: mode 1, dy [1, 1]) over
 * logits in [-f, f] and targets in [0, 1], or one-hot rows (p[1] 1, baked). */
void corpus_b_xent(corpus_graph *cg, const corpus_case *c) {
    float f = c->f ? c->f : 4.0f;
    af_tensor *z = input(cg, c->s[0], (corpus_dom)DU(-f, f), AF_F32), *y;
    if (c->p[1]) {
        int64_t n = c->s[0].dim[0], k = c->s[0].dim[1];
        float *v = calloc((size_t)(n * k), sizeof *v);
        for (int64_t i = 0; v && i < n; i++) v[i * k + (i * 7919 + 13) % k] = 1.0f;
        y = v ? af_const(cg->g, "y", c->s[0], v) : NULL;
        free(v);
    } else {
        y = input(cg, c->s[0], (corpus_dom)DU(0.0f, 1.0f), AF_F32);
    }
    if (!c->p[0]) {
        output(cg, ir_softmax_xent(z, y));
        return;
    }
    af_shape ds = { .rank = 2, .dim = { c->p[0] == 2 ? 1 : c->s[0].dim[0], 1 } };
    af_tensor *dy = input(cg, ds, (corpus_dom)DU(-2.0f, 2.0f), AF_F32);
    output(cg, ir_softmax_xent_grad(z, y, dy, c->p[0] == 2));
}

/* flatten, dropout (f the rate), broadcast (p[0] axis, p[1] size), input_view (p[0]
 * offset, p[1] size) of one input s[0]. */
void corpus_b_structural(corpus_graph *cg, const corpus_case *c) {
    af_tensor *x = input(cg, c->s[0], dom_of(c, 0), AF_F32);
    switch (c->op) {
    case IR_OP_FLATTEN: output(cg, af_flatten(x)); break;
    case IR_OP_DROPOUT: output(cg, af_dropout(x, c->f)); break;
    case IR_OP_BROADCAST: output(cg, af_broadcast(x, c->p[0], c->p[1])); break;
    default: output(cg, af_input_view(x, c->p[0], c->p[1])); break;
    }
}
