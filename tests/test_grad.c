/* Gradient checks: for every differentiable op and every layer, the analytic gradient
 * graph (built by af_backward) is evaluated in double by the reference evaluator and
 * compared with central finite differences of the double forward; the same gradient
 * graph run by the fp32 executor must agree with the double one. A table-coverage check
 * fails when a differentiable op has no case here. */
#include "grad/grad.h"
#include "support/check.h"
#include "support/refgraph.h"

#include <stdlib.h>
#include <string.h>

#define MAXP 8
#define FD_SAMPLES 24

typedef struct {
    af_graph *g;
    test_rng *r;
    int np;
    af_tensor *p[MAXP];
    af_loss *loss; /* set by cases that make their own loss */
} gcase;

static float *rand_vals(test_rng *r, af_shape s, double lo, double hi, bool signmag) {
    int64_t n = af_shape_count(s);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double u = lo + (hi - lo) * test_uniform(r);
        v[i] = (float)(signmag && test_uniform(r) < 0.5 ? -u : u);
    }
    return v;
}

/* A trainable parameter with values in [lo, hi] (or +-[lo, hi] when signmag). */
static af_tensor *P_(gcase *c, af_shape s, double lo, double hi, bool signmag) {
    float *v = rand_vals(c->r, s, lo, hi, signmag);
    af_tensor *t = af_parameter(c->g, NULL, s, v);
    free(v);
    c->p[c->np++] = t;
    return t;
}
static af_tensor *C_(gcase *c, af_shape s, double lo, double hi) {
    float *v = rand_vals(c->r, s, lo, hi, false);
    af_tensor *t = af_const(c->g, NULL, s, v);
    free(v);
    return t;
}
#define P(c, lo, hi, ...) P_(c, AF_SHAPE(__VA_ARGS__), lo, hi, false)
#define PM(c, lo, hi, ...) P_(c, AF_SHAPE(__VA_ARGS__), lo, hi, true)
#define PN(c, ...) P_(c, AF_SHAPE(__VA_ARGS__), -1, 1, false)
#define CN(c, ...) C_(c, AF_SHAPE(__VA_ARGS__), -1, 1)

typedef af_tensor *(*case_fn)(gcase *c);
typedef struct { const char *name; ir_op op; case_fn fn; } grad_case;

/* ------------------------------------------------------------------ cases */

static af_tensor *c_add(gcase *c) { return af_add(PN(c, 3, 4), PN(c, 4)); }
static af_tensor *c_add_b(gcase *c) { return af_add(PN(c, 3, 1), PN(c, 2, 1, 5)); }
static af_tensor *c_sub(gcase *c) { return af_sub(PN(c, 1, 4), PN(c, 3, 4)); }
static af_tensor *c_mul(gcase *c) { return af_mul(PN(c, 2, 3, 4), PN(c, 3, 1)); }
static af_tensor *c_div(gcase *c) { return af_div(PN(c, 3, 4), PM(c, 0.5, 2, 4)); }
static af_tensor *c_max(gcase *c) { return af_maximum(PN(c, 3, 4), PN(c, 3, 4)); }
static af_tensor *c_min(gcase *c) { return af_minimum(PN(c, 3, 4), PN(c, 1, 4)); }
static af_tensor *c_pow(gcase *c) { return af_pow(P(c, 0.5, 2, 3, 4), PN(c, 4)); }
static af_tensor *c_select(gcase *c) {
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)(i % 3 == 0);
    return af_select(af_const(c->g, NULL, AF_SHAPE(3, 4), m), PN(c, 3, 4), PN(c, 4));
}
static af_tensor *c_adds(gcase *c) { return af_adds(PN(c, 5), 1.5f); }
static af_tensor *c_muls(gcase *c) { return af_muls(PN(c, 2, 3), -2.5f); }
static af_tensor *c_neg(gcase *c) { return af_neg(PN(c, 2, 3)); }
static af_tensor *c_abs(gcase *c) { return af_abs(PM(c, 0.1, 1, 2, 3)); }
static af_tensor *c_square(gcase *c) { return af_square(PN(c, 2, 3)); }
static af_tensor *c_sqrt(gcase *c) { return af_sqrt(P(c, 0.5, 2, 2, 3)); }
static af_tensor *c_rsqrt(gcase *c) { return af_rsqrt(P(c, 0.5, 2, 2, 3)); }
static af_tensor *c_inverse(gcase *c) { return af_inverse(PM(c, 0.5, 2, 2, 3)); }
static af_tensor *c_exp(gcase *c) { return af_exp(PN(c, 2, 3)); }
static af_tensor *c_log(gcase *c) { return af_log(P(c, 0.5, 2, 2, 3)); }
static af_tensor *c_tanh(gcase *c) { return af_tanh(PN(c, 2, 3)); }
static af_tensor *c_sigmoid(gcase *c) { return af_sigmoid(P(c, -3, 3, 2, 3)); }
static af_tensor *c_relu(gcase *c) { return af_relu(PM(c, 0.1, 1, 3, 4)); }
static af_tensor *c_gelu(gcase *c) { return af_gelu(P(c, -3, 3, 3, 4), AF_GELU_EXACT); }
static af_tensor *c_gelu_t(gcase *c) { return af_gelu(P(c, -3, 3, 3, 4), AF_GELU_TANH); }
static af_tensor *c_silu(gcase *c) { return af_silu(P(c, -3, 3, 3, 4)); }
static af_tensor *c_sin(gcase *c) { return af_sin(P(c, -3, 3, 3, 4)); }
static af_tensor *c_cos(gcase *c) { return af_cos(P(c, -3, 3, 3, 4)); }
static af_tensor *c_erf(gcase *c) { return af_erf(P(c, -2, 2, 3, 4)); }
static af_tensor *un(ir_op op, af_tensor *x) { return ir_build(op, 1, &x, NULL); } /* MIL-only ops */
static af_tensor *c_atan(gcase *c) { return un(IR_OP_ATAN, P(c, -3, 3, 3, 4)); }
static af_tensor *c_asin(gcase *c) { return un(IR_OP_ASIN, P(c, -0.8f, 0.8f, 3, 4)); }
static af_tensor *c_acos(gcase *c) { return un(IR_OP_ACOS, P(c, -0.8f, 0.8f, 3, 4)); }
static af_tensor *c_atanh(gcase *c) { return un(IR_OP_ATANH, P(c, -0.7f, 0.7f, 3, 4)); }
static af_tensor *c_matmul_w(gcase *c) { return af_matmul_w(PN(c, 2, 3, 5), CN(c, 4, 5)); }
static af_tensor *c_matmul_wp(gcase *c) { return af_matmul_w(PN(c, 3, 5), PN(c, 4, 5)); }
static af_tensor *c_matmul(gcase *c) { return af_matmul(PN(c, 2, 3, 4), PN(c, 4, 5), 0, 0); }
static af_tensor *c_matmul_t(gcase *c) { return af_matmul(PN(c, 2, 4, 3), PN(c, 2, 5, 4), 1, 1); }
static af_tensor *c_matmul_b(gcase *c) { return af_matmul(PN(c, 2, 1, 3, 4), PN(c, 3, 2, 4), 0, 1); }
static af_tensor *c_rsum(gcase *c) { int ax[2] = { 0, 2 }; return af_reduce_sum(PN(c, 2, 3, 4), 2, ax, 0); }
static af_tensor *c_rmean(gcase *c) { int ax[1] = { -1 }; return af_reduce_mean(PN(c, 2, 3, 4), 1, ax, 1); }
static af_tensor *c_rmax(gcase *c) { int ax[1] = { 1 }; return af_reduce_max(PN(c, 2, 5, 3), 1, ax, 0); }
static af_tensor *c_rmin(gcase *c) { int ax[2] = { 0, 1 }; return af_reduce_min(PN(c, 2, 5, 3), 2, ax, 1); }
static af_tensor *c_softmax(gcase *c) { return af_softmax(P(c, -2, 2, 3, 4, 5), 1); }
static af_tensor *c_softmax_l(gcase *c) { return af_softmax(P(c, -2, 2, 4, 7), -1); }
static af_tensor *c_transpose(gcase *c) { int p[4] = { 2, 0, 3, 1 }; return af_transpose(PN(c, 2, 3, 4, 5), p); }
static af_tensor *c_reshape(gcase *c) { return af_reshape(PN(c, 2, 3, 4), AF_SHAPE(4, -1)); }
static af_tensor *c_slice(gcase *c) {
    int64_t b[3] = { 1, 0, 2 }, s[3] = { 2, -1, 3 };
    return af_slice(PN(c, 4, 3, 6), b, s);
}
static af_tensor *c_concat(gcase *c) {
    af_tensor *xs[3] = { PN(c, 2, 1, 3), PN(c, 2, 4, 3), PN(c, 2, 2, 3) };
    return af_concat(3, xs, 1);
}
static af_tensor *c_split(gcase *c) {
    af_tensor *parts[3] = { NULL, NULL, NULL }; /* a failed split leaves NULLs, which the graph reports */
    int64_t sz[3] = { 1, 3, 2 };
    af_split(PN(c, 2, 6), 1, 3, sz, parts);
    return af_concat(2, (af_tensor *[]){ af_muls(parts[2], 2.0f), parts[1] }, 1);
}
/* Token ids with repeats (3 thrice) and a row no id names (2): the scatter-add sums. */
static af_tensor *ids_const(gcase *c) {
    static const float ids[6] = { 3, 0, 3, 1, 4, 3 };
    return af_const(c->g, NULL, AF_SHAPE(2, 3), ids);
}
static af_tensor *c_embedding(gcase *c) { return af_embedding(PN(c, 5, 4), ids_const(c)); }
static af_tensor *c_embedding_grad(gcase *c) { return af_embedding_grad(PN(c, 2, 3, 4), ids_const(c), 5); }
static af_tensor *c_rope(gcase *c) { return af_rope(PN(c, 2, 3, 2, 6), 5, 10000.0f); }
/* Causal attention weights with 2 query heads sharing 1 KV head: [B, T, H, hs] in. */
static af_tensor *c_gqa(gcase *c) {
    int perm[4] = { 0, 2, 1, 3 };
    af_tensor *q = af_transpose(PN(c, 1, 3, 2, 4), perm);
    af_tensor *k = af_transpose(af_repeat_kv_heads(PN(c, 1, 3, 1, 4), 2), perm);
    return af_softmax(af_causal_mask(af_matmul(q, k, 0, 1), 0), -1);
}
static af_tensor *c_rms(gcase *c) { return af_rms_norm(PN(c, 3, 8), P(c, 0.5, 1.5, 8), 1e-5f); }
static af_tensor *c_ln(gcase *c) { return af_layer_norm(PN(c, 2, 3, 8), P(c, 0.5, 1.5, 8), PN(c, 8), 1e-5f); }
static af_tensor *c_cln(gcase *c) { return af_channel_layer_norm(PN(c, 2, 5, 3, 2), P(c, 0.5, 1.5, 5), PN(c, 5), 1e-5f); }
static af_tensor *c_gn(gcase *c) { return af_group_norm(PN(c, 2, 6, 3, 2), 3, P(c, 0.5, 1.5, 6), PN(c, 6), 1e-5f); }
static af_tensor *c_avgpool(gcase *c) {
    int k[2] = { 3, 3 }, s[2] = { 2, 2 }, p[2] = { 1, 1 };
    return af_avg_pool(PN(c, 2, 3, 7, 6), k, s, p);
}
static af_tensor *c_maxpool(gcase *c) {
    int k[2] = { 2, 2 };
    return af_max_pool(PN(c, 2, 3, 6, 4), k, k, NULL);
}
static af_tensor *c_avgpool_cpu(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU); /* the native pool gradient */
    return c_avgpool(c);
}
static af_tensor *c_maxpool_cpu(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    return c_maxpool(c);
}
static af_tensor *c_maxpool_overlap_cpu(gcase *c) { /* overlapping padded windows: only the native path takes them */
    af_graph_set_target(c->g, AF_TARGET_CPU);
    int k[2] = { 3, 3 }, s[2] = { 2, 2 }, p[2] = { 1, 1 };
    return af_max_pool(PN(c, 2, 3, 7, 6), k, s, p);
}
static af_tensor *c_conv(gcase *c) {
    int pad[2] = { 1, 1 };
    return af_conv(PN(c, 2, 3, 6, 5), CN(c, 4, 3, 3, 3), NULL, pad, NULL, 1);
}
static af_tensor *c_conv_d(gcase *c) {
    int pad[2] = { 2, 1 }, dil[2] = { 2, 1 };
    return af_conv(PN(c, 1, 2, 7, 6), CN(c, 3, 2, 3, 2), NULL, pad, dil, 1);
}
static af_tensor *c_convt(gcase *c) {
    int st[2] = { 2, 2 }, pad[2] = { 1, 0 };
    return af_conv_transpose(PN(c, 2, 3, 4, 3), CN(c, 3, 2, 3, 3), st, pad, NULL);
}
static af_tensor *c_cast(gcase *c) { return af_cast(PN(c, 3, 4), AF_F32); }
static af_tensor *c_linear(gcase *c) { return af_linear(PN(c, 4, 6), PN(c, 3, 6), PN(c, 3)); }
static af_tensor *c_conv2d(gcase *c) {
    float *w = rand_vals(c->r, AF_SHAPE(4, 2, 3, 3), -1, 1, false);
    af_tensor *wp = af_conv_param(c->g, "w", 4, 2, 3, 3, w);
    free(w);
    af_tensor *x = PN(c, 2, 2, 5, 6);
    c->p[c->np++] = wp;
    return af_conv2d(x, wp, 1, 1);
}
static af_tensor *c_conv2d_cpu(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU); /* the native conv path */
    return c_conv2d(c);
}
static af_tensor *c_conv_wparam(gcase *c) {
    int pad[2] = { 1, 0 };
    return af_conv(PN(c, 2, 3, 5, 4), PN(c, 2, 3, 3, 2), NULL, pad, NULL, 1);
}
static af_tensor *c_mha(gcase *c) {
    af_tensor *x = PN(c, 2, 4, 6);
    af_tensor *w[4], *b[4];
    for (int i = 0; i < 4; i++) w[i] = P(c, -0.5, 0.5, 6, 6);
    for (int i = 0; i < 2; i++) b[i] = PN(c, 6);
    return af_mha(x, 2, w[0], w[1], w[2], w[3], b[0], b[1], NULL, NULL, 1);
}
static af_tensor *c_ce(gcase *c) {
    float y[12] = { 0 };
    for (int i = 0; i < 3; i++) y[i * 4 + (i * 7) % 4] = 1.0f;
    c->loss = af_softmax_cross_entropy(P(c, -2, 2, 3, 4), af_const(c->g, "y", AF_SHAPE(3, 4), y));
    return af_loss_value(c->loss);
}
static af_tensor *c_mse(gcase *c) {
    c->loss = af_mse(PN(c, 3, 4), CN(c, 3, 4));
    return af_loss_value(c->loss);
}

/* Bridge ops (seed 004). Continuous random keys keep sort orders and extremes away
 * from ties, where the gathered gradient is piecewise. */
static af_tensor *c_sort(gcase *c) { return af_sort(PN(c, 2, 3, 7), 1, 1, 0); }
static af_tensor *c_topk(gcase *c) { return af_top_k(PN(c, 3, 8), 3, 0, 0, 0); }
static af_tensor *c_pshuf(gcase *c) { return af_pixel_shuffle(PN(c, 2, 12, 2, 3), 2, 3); }
static af_tensor *c_punshuf(gcase *c) { return af_pixel_unshuffle(PN(c, 1, 2, 6, 4), 3, 2); }
static af_tensor *c_c2s(gcase *c) { return af_channel_to_space(PN(c, 1, 8, 2, 3), 2, 2); }
static af_tensor *c_s2c(gcase *c) { return af_space_to_channel(PN(c, 2, 3, 4, 6), 2, 3); }
static af_tensor *c_s2b(gcase *c) { return af_space_to_batch(PN(c, 2, 2, 4, 6), 2, 3); }
static af_tensor *c_b2s(gcase *c) { return af_batch_to_space(PN(c, 8, 2, 2, 3), 2, 2); }
static af_tensor *c_cross(gcase *c) { return af_cross_product(PN(c, 4, 3), PN(c, 4, 3)); }
static af_tensor *c_xcorr(gcase *c) { return af_cross_correlation(PN(c, 5, 6), PN(c, 2, 3)); }
static af_tensor *c_costvol(gcase *c) { return af_cost_volume(PN(c, 5), PN(c, 8), 3); }
static af_tensor *c_fps(gcase *c) { return af_furthest_point_sampling(PN(c, 12, 3), 5, 0); }
static af_tensor *c_dynslice(gcase *c) {
    const float start = 3.2f;
    return af_dynamic_slice(PN(c, 2, 7, 3), af_const(c->g, "start", AF_SHAPE(1), &start), 1, 3);
}
static af_tensor *c_dynslice_clamped(gcase *c) {
    const float start = 9.0f; /* past the end: clamped to 7 - 4 */
    return af_dynamic_slice(PN(c, 3, 7), af_const(c->g, "start", AF_SHAPE(1), &start), -1, 4);
}
static af_tensor *c_lrn(gcase *c) { return af_lrn(PN(c, 2, 5, 2, 3), 0.4f, 0.75f, 1.0f); }
static af_tensor *c_minmax_w(gcase *c) { return af_minmax_norm(PN(c, 1, 2, 3, 5), -1, 0.01f); }
static af_tensor *c_minmax_h(gcase *c) { return af_minmax_norm(PN(c, 2, 4, 3), -2, 0.1f); }
static af_tensor *c_sew_add(gcase *c) { return af_scaled_elementwise(PN(c, 3, 4), PN(c, 3, 4), AF_SEW_ADD, 0.5f); }
static af_tensor *c_sew_min(gcase *c) { return af_scaled_elementwise(PN(c, 3, 4), PN(c, 3, 4), AF_SEW_MIN, -2.0f); }
static af_tensor *c_sew_max(gcase *c) { return af_scaled_elementwise(PN(c, 3, 4), PN(c, 3, 4), AF_SEW_MAX, 1.5f); }
static af_tensor *c_einsum_native(gcase *c) {
    return af_einsum(c->g, "nchw,nwhu->nchu", 2, (af_tensor *[]){ PN(c, 2, 3, 4, 5), PN(c, 2, 5, 4, 2) });
}
static af_tensor *c_einsum_general(gcase *c) {
    return af_einsum(c->g, "bij,jkb->kbi", 2, (af_tensor *[]){ PN(c, 2, 3, 4), PN(c, 4, 5, 2) });
}
static af_tensor *c_local_response_norm(gcase *c) { return af_local_response_norm(PN(c, 2, 6, 2, 2), 3, 0.5f, 0.75f, 1.0f); }
/* Bridge ops: sdpa decoding with a trainable mask, and the structural layers. */
static af_tensor *c_sdpa(gcase *c) { return af_sdpa(PN(c, 1, 2, 3, 4), PN(c, 1, 2, 5, 4), PN(c, 1, 2, 5, 3), PN(c, 3, 1, 5), 0.6f); }
static af_tensor *c_sdpa_nomask(gcase *c) { return af_sdpa(PN(c, 2, 1, 4, 3), PN(c, 2, 1, 4, 3), PN(c, 2, 1, 4, 2), NULL, 0); }
/* The native node on a CPU-targeted graph: 37 positions, so more than one row block. */
static af_tensor *c_causal_attention(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    af_tensor *y = af_causal_attention(PN(c, 1, 2, 37, 3), PN(c, 1, 2, 37, 3), PN(c, 1, 2, 37, 3), 0);
    CHECK(y && y->op == IR_OP_CAUSAL_ATTENTION, "af_causal_attention on the CPU target: the native node");
    return y;
}
/* af_rope on a CPU-targeted graph: the native rope node, whose gradient turns back. */
static af_tensor *c_rope_native(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    af_tensor *y = af_rope(PN(c, 2, 5, 3, 6), 2, 10000.0f);
    CHECK(y && y->op == IR_OP_ROPE, "af_rope on the CPU target: the native node");
    return y;
}
/* The llama FFN's gate on a CPU-targeted graph: the native swiglu node and its gradients. */
static af_tensor *c_swiglu_native(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    af_tensor *y = ir_swiglu(PN(c, 3, 7), PN(c, 3, 7));
    CHECK(y && y->op == IR_OP_SWIGLU, "ir_swiglu: the native node");
    return y;
}
/* softmax_xent on a CPU-targeted graph, logits and (soft, signed) targets both trained,
 * and the CE loss value on such a graph, which is that node. */
static af_tensor *c_xent_native(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    af_tensor *y = ir_softmax_xent(P(c, -3, 3, 4, 9), PN(c, 4, 9));
    CHECK(y && y->op == IR_OP_SOFTMAX_XENT, "ir_softmax_xent: the native node");
    return y;
}
static af_tensor *c_ce_native(gcase *c) {
    af_graph_set_target(c->g, AF_TARGET_CPU);
    float y[12] = { 0 };
    for (int i = 0; i < 3; i++) y[i * 4 + (i * 7) % 4] = 1.0f;
    c->loss = af_softmax_cross_entropy(P(c, -2, 2, 3, 4), af_const(c->g, "y", AF_SHAPE(3, 4), y));
    af_tensor *v = af_loss_value(c->loss);
    CHECK(v && v->src[0]->src[0]->op == IR_OP_SOFTMAX_XENT, "the CE loss value on the CPU target: the native node");
    return v;
}
static af_tensor *c_flatten(gcase *c) { return af_flatten(PN(c, 2, 3, 4)); }
static af_tensor *c_dropout(gcase *c) { return af_dropout(PN(c, 3, 4), 0); }
static af_tensor *c_broadcast(gcase *c) { return af_broadcast(PN(c, 3, 1, 4), 1, 5); }
static af_tensor *c_input_view(gcase *c) { return af_input_view(PN(c, 3, 4), 2, 7); }

static const grad_case cases[] = {
    { "add", IR_OP_ADD, c_add }, { "add broadcast both", IR_OP_ADD, c_add_b }, { "sub", IR_OP_SUB, c_sub },
    { "mul", IR_OP_MUL, c_mul }, { "real_div", IR_OP_REAL_DIV, c_div }, { "maximum", IR_OP_MAXIMUM, c_max },
    { "minimum", IR_OP_MINIMUM, c_min }, { "pow", IR_OP_POW, c_pow }, { "select", IR_OP_SELECT, c_select },
    { "adds", IR_OP_ADDS, c_adds }, { "muls", IR_OP_MULS, c_muls }, { "neg", IR_OP_NEG, c_neg },
    { "abs", IR_OP_ABS, c_abs }, { "square", IR_OP_SQUARE, c_square }, { "sqrt", IR_OP_SQRT, c_sqrt },
    { "rsqrt", IR_OP_RSQRT, c_rsqrt }, { "inverse", IR_OP_INVERSE, c_inverse }, { "exp", IR_OP_EXP, c_exp },
    { "log", IR_OP_LOG, c_log }, { "tanh", IR_OP_TANH, c_tanh }, { "sigmoid", IR_OP_SIGMOID, c_sigmoid },
    { "relu", IR_OP_RELU, c_relu }, { "gelu exact", IR_OP_GELU, c_gelu }, { "gelu tanh", IR_OP_GELU, c_gelu_t },
    { "silu", IR_OP_SILU, c_silu }, { "sin", IR_OP_SIN, c_sin }, { "cos", IR_OP_COS, c_cos },
    { "erf", IR_OP_ERF, c_erf }, { "atan", IR_OP_ATAN, c_atan }, { "asin", IR_OP_ASIN, c_asin },
    { "acos", IR_OP_ACOS, c_acos }, { "atanh", IR_OP_ATANH, c_atanh }, { "matmul_w baked", IR_OP_MATMUL_W, c_matmul_w },
    { "matmul_w param weight", IR_OP_MATMUL_W, c_matmul_wp }, { "matmul shared rhs", IR_OP_MATMUL, c_matmul },
    { "matmul transposes", IR_OP_MATMUL, c_matmul_t }, { "matmul broadcast batch", IR_OP_MATMUL, c_matmul_b },
    { "reduce_sum", IR_OP_REDUCE_SUM, c_rsum }, { "reduce_mean", IR_OP_REDUCE_MEAN, c_rmean },
    { "reduce_max", IR_OP_REDUCE_MAX, c_rmax }, { "reduce_min", IR_OP_REDUCE_MIN, c_rmin },
    { "softmax mid axis", IR_OP_SOFTMAX, c_softmax }, { "softmax last axis", IR_OP_SOFTMAX, c_softmax_l },
    { "transpose", IR_OP_TRANSPOSE, c_transpose }, { "reshape", IR_OP_RESHAPE, c_reshape },
    { "slice_by_size", IR_OP_SLICE_BY_SIZE, c_slice }, { "concat", IR_OP_CONCAT, c_concat },
    { "split", IR_OP_SPLIT, c_split }, { "embedding", IR_OP_EMBEDDING, c_embedding },
    { "embedding_grad", IR_OP_EMBEDDING_GRAD, c_embedding_grad }, { "rms_norm", IR_OP_RMS_NORM, c_rms }, { "layer_norm", IR_OP_LAYER_NORM, c_ln },
    { "channel_layer_norm", IR_OP_CHANNEL_LAYER_NORM, c_cln }, { "group_norm", IR_OP_GROUP_NORM, c_gn },
    { "avg_pool", IR_OP_AVG_POOL, c_avgpool }, { "max_pool", IR_OP_MAX_POOL, c_maxpool },
    { "avg_pool native (cpu)", IR_OP_AVG_POOL, c_avgpool_cpu }, { "max_pool native (cpu)", IR_OP_MAX_POOL, c_maxpool_cpu },
    { "max_pool overlapping native (cpu)", IR_OP_MAX_POOL, c_maxpool_overlap_cpu },
    { "conv pad 1", IR_OP_CONV, c_conv }, { "conv dilation", IR_OP_CONV, c_conv_d },
    { "conv_transpose stride 2", IR_OP_CONV_TRANSPOSE, c_convt }, { "cast", IR_OP_CAST, c_cast },
    { "layer: linear", IR_OP_INPUT, c_linear }, { "layer: conv2d pad 1", IR_OP_INPUT, c_conv2d },
    { "layer: conv2d native (cpu)", IR_OP_INPUT, c_conv2d_cpu }, { "conv param weight", IR_OP_CONV, c_conv_wparam },
    { "layer: mha causal", IR_OP_INPUT, c_mha }, { "loss: cross-entropy", IR_OP_INPUT, c_ce },
    { "loss: mse", IR_OP_INPUT, c_mse }, { "layer: rope", IR_OP_INPUT, c_rope },
    { "layer: causal attention, grouped kv", IR_OP_INPUT, c_gqa },
    { "sort", IR_OP_SORT, c_sort }, { "top_k", IR_OP_TOPK, c_topk }, { "pixel_shuffle", IR_OP_PIXEL_SHUFFLE, c_pshuf },
    { "pixel_unshuffle", IR_OP_PIXEL_UNSHUFFLE, c_punshuf }, { "channel_to_space", IR_OP_CHANNEL_TO_SPACE, c_c2s },
    { "space_to_channel", IR_OP_SPACE_TO_CHANNEL, c_s2c }, { "space_to_batch", IR_OP_SPACE_TO_BATCH, c_s2b },
    { "batch_to_space", IR_OP_BATCH_TO_SPACE, c_b2s }, { "cross_product", IR_OP_CROSS_PRODUCT, c_cross },
    { "cross_correlation", IR_OP_CROSS_CORRELATION, c_xcorr }, { "cost_volume", IR_OP_COST_VOLUME, c_costvol },
    { "furthest_point_sampling", IR_OP_FPS, c_fps }, { "dynamic_slice", IR_OP_DYNAMIC_SLICE, c_dynslice },
    { "dynamic_slice clamped", IR_OP_DYNAMIC_SLICE, c_dynslice_clamped }, { "lrn", IR_OP_LRN, c_lrn },
    { "minmax_norm width", IR_OP_MINMAX_NORM, c_minmax_w }, { "minmax_norm height", IR_OP_MINMAX_NORM, c_minmax_h },
    { "scaled_elementwise add", IR_OP_SCALED_ELEMENTWISE, c_sew_add },
    { "scaled_elementwise min", IR_OP_SCALED_ELEMENTWISE, c_sew_min },
    { "scaled_elementwise max", IR_OP_SCALED_ELEMENTWISE, c_sew_max }, { "einsum native", IR_OP_EINSUM, c_einsum_native },
    { "layer: einsum decomposed", IR_OP_INPUT, c_einsum_general },
    { "layer: local_response_norm", IR_OP_INPUT, c_local_response_norm },
    { "causal_attention native (cpu)", IR_OP_CAUSAL_ATTENTION, c_causal_attention },
    { "rope native (cpu)", IR_OP_ROPE, c_rope_native }, { "swiglu native (cpu)", IR_OP_SWIGLU, c_swiglu_native },
    { "softmax_xent native (cpu)", IR_OP_SOFTMAX_XENT, c_xent_native }, { "loss: cross-entropy native (cpu)", IR_OP_INPUT, c_ce_native },
    { "sdpa decode, mask", IR_OP_SDPA, c_sdpa }, { "sdpa no mask", IR_OP_SDPA, c_sdpa_nomask },
    { "flatten", IR_OP_FLATTEN, c_flatten }, { "dropout", IR_OP_DROPOUT, c_dropout },
    { "broadcast", IR_OP_BROADCAST, c_broadcast }, { "input_view", IR_OP_INPUT_VIEW, c_input_view },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ------------------------------------------------------------------ harness */

/* Loss value in double with param i's values replaced by pv. */
static double eval_loss(af_graph *g, af_tensor *loss, gcase *c, double **pv) {
    double **leaf = calloc((size_t)g->n, sizeof *leaf);
    for (int i = 0; i < c->np; i++) leaf[c->p[i]->id] = pv[i];
    double v = 0;
    int rc = refgraph_eval(g, leaf, 1, &loss, (double *[]){ &v });
    free(leaf);
    return rc ? NAN : v;
}

static void run_case(const grad_case *gc, int seed) {
    test_rng rng = { (unsigned long long)seed * 7919u + 17u };
    gcase c = { .g = af_graph_new(), .r = &rng };
    af_tensor *y = gc->fn(&c);
    af_tensor *loss_t;
    af_loss *loss = c.loss;
    if (!loss) { /* L = sum(y * R) with fixed random R */
        int axes[AF_MAX_RANK];
        for (int i = 0; y && i < y->shape.rank; i++) axes[i] = i;
        af_tensor *ry = y ? af_mul(y, C_(&c, y->shape, -1, 1)) : NULL;
        loss_t = ry && ry->shape.rank ? af_reduce_sum(ry, ry->shape.rank, axes, 0) : ry;
        loss = af_loss_scalar(loss_t);
    } else {
        loss_t = af_loss_value(loss);
    }
    af_tensor *grads[MAXP];
    af_status st = loss ? af_backward(loss, c.np, c.p, grads, NULL) : AF_ERR_INVALID;
    CHECK(st == AF_OK, "%s: backward failed: %s", gc->name, af_error_message());
    if (st) { af_graph_free(c.g); return; }

    /* Analytic gradients in double. */
    double *ga[MAXP], *pv[MAXP];
    for (int i = 0; i < c.np; i++) {
        int64_t n = af_shape_count(c.p[i]->shape);
        ga[i] = malloc((size_t)n * sizeof(double));
        pv[i] = malloc((size_t)n * sizeof(double));
        for (int64_t j = 0; j < n; j++) pv[i][j] = c.p[i]->data[j];
    }
    CHECK(refgraph_eval(c.g, NULL, c.np, grads, ga) == 0, "%s: reference evaluation failed", gc->name);

    /* Central differences on a sample of elements of each param. */
    double asym = 0;
    int cnt = 0;
    for (int i = 0; i < c.np; i++) {
        int64_t n = af_shape_count(c.p[i]->shape), step = n > FD_SAMPLES ? n / FD_SAMPLES : 1;
        for (int64_t j = 0; j < n; j += step) {
            double x0 = pv[i][j], h = 1e-6 * (fabs(x0) > 1 ? fabs(x0) : 1);
            pv[i][j] = x0 + h;
            double lp = eval_loss(c.g, loss_t, &c, pv);
            pv[i][j] = x0 - h;
            double lm = eval_loss(c.g, loss_t, &c, pv);
            pv[i][j] = x0;
            double fd = (lp - lm) / (2 * h), a = ga[i][j];
            double den = fabs(a + fd);
            double as = den > 1e-8 ? fabs(a - fd) / den : fabs(a - fd);
            asym += as;
            cnt++;
            if (as > 1e-4)
                fprintf(stderr, "  %s: param %d elem %lld analytic %.10g fd %.10g\n", gc->name, i, (long long)j, a, fd);
        }
    }
    asym /= cnt ? cnt : 1;
    CHECK(asym < 1e-6, "%s: mean asymmetry %.3g between analytic and finite-difference gradients", gc->name, asym);

    /* The same gradient graph on the fp32 executor. */
    af_compile_opts o = { .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(c.g, c.np, c.p, c.np, grads, &o);
    CHECK(m != NULL, "%s: compile failed: %s", gc->name, af_error_message());
    if (m) {
        af_buffer in[MAXP], out[MAXP];
        float *res[MAXP];
        for (int i = 0; i < c.np; i++) {
            int64_t n = af_shape_count(c.p[i]->shape);
            res[i] = malloc((size_t)n * sizeof(float));
            in[i] = AF_BUF_F32(c.p[i]->data, n);
            out[i] = AF_BUF_F32(res[i], n);
        }
        CHECK(af_run(m, in, out) == AF_OK, "%s: run failed: %s", gc->name, af_error_message());
        double all = 1e-6; /* a param whose gradient is identically 0 is judged on the case's scale */
        for (int i = 0; i < c.np; i++)
            for (int64_t j = 0, n = af_shape_count(c.p[i]->shape); j < n; j++) all = fmax(all, fabs(ga[i][j]));
        for (int i = 0; i < c.np; i++) {
            int64_t n = af_shape_count(c.p[i]->shape);
            double scale = 1e-3 * all, err = 0;
            for (int64_t j = 0; j < n; j++) scale = fmax(scale, fabs(ga[i][j]));
            for (int64_t j = 0; j < n; j++) err = fmax(err, fabs(res[i][j] - ga[i][j]));
            CHECK(err <= 2e-4 * scale, "%s: fp32 executor gradient of param %d off by %.3g (scale %.3g)", gc->name, i, err, scale);
            free(res[i]);
        }
        af_model_free(m);
    }
    for (int i = 0; i < c.np; i++) { free(ga[i]); free(pv[i]); }
    af_graph_free(c.g);
}

/* Every differentiable op of the table has a case here; every row says how gradients
 * meet it (a leaf, a VJP, zero, or an error for ops made only in backward graphs). */
static void check_coverage(void) {
    for (int op = 0; op < IR_OP_COUNT; op++) {
        unsigned f = ir_ops[op].flags;
        CHECK(f & (OPF_LEAF | OPF_DIFF | OPF_ZEROGRAD | OPF_NODIFF), "op %s has no gradient flag", ir_ops[op].name);
        CHECK(!(f & OPF_NODIFF) || !(f & (OPF_DIFF | OPF_ZEROGRAD)), "op %s is flagged both ways", ir_ops[op].name);
        if (!(ir_ops[op].flags & OPF_DIFF)) continue;
        bool found = false;
        for (int i = 0; i < NCASES; i++) found |= cases[i].op == (ir_op)op;
        CHECK(found, "op %s is differentiable but has no gradient check", ir_ops[op].name);
        CHECK(af_op_has_vjp(op), "op %s is differentiable but has no VJP rule", ir_ops[op].name);
    }
}

/* Unrolled two-step SGD on L = 0.5 (w x - y)^2: the second step's gradient must treat
 * the updated weight w1 as a leaf. With L_total = L1(w) + L2(w1) and stop = {w1}, dL/dw
 * is L1's gradient alone; without the frontier it would include the path through w1. */
static void check_stop_frontier(void) {
    const float w0 = 0.7f, x1 = 1.5f, y1 = 2.0f, x2 = -0.5f, y2 = 0.25f, lr = 0.1f;
    af_graph *g = af_graph_new();
    af_tensor *w = af_parameter(g, "w", AF_SHAPE(1), &w0);
    af_tensor *e1 = af_adds(af_muls(w, x1), -y1);
    af_tensor *l1 = af_muls(af_square(e1), 0.5f);
    af_tensor *g1 = af_muls(e1, x1);                  /* dL1/dw, hand-built */
    af_tensor *w1 = af_sub(w, af_muls(g1, lr));       /* the updated weight */
    af_tensor *e2 = af_adds(af_muls(w1, x2), -y2);
    af_tensor *l2 = af_muls(af_square(e2), 0.5f);
    af_loss *loss = af_loss_scalar(af_add(l1, l2));
    af_tensor *params[2] = { w, w1 }, *grads[2];
    af_backward_opts o = { .nstop = 2, .stop = params };
    CHECK(af_backward(loss, 2, params, grads, &o) == AF_OK, "frontier backward: %s", af_error_message());
    double wv1 = w0 - lr * (w0 * x1 - y1) * x1;
    double want_w = (w0 * x1 - y1) * x1, want_w1 = (wv1 * x2 - y2) * x2;
    double got[2];
    CHECK(refgraph_eval(g, NULL, 2, grads, (double *[]){ &got[0], &got[1] }) == 0, "frontier eval");
    CHECK_NEAR(got[0], want_w, 1e-6, "dL/dw with w1 a leaf");
    CHECK_NEAR(got[1], want_w1, 1e-6, "dL/dw1");
    /* Without the frontier the gradient flows through the update: (1 - lr x1^2) dL2/dw1 more. */
    af_tensor *grad_full;
    af_backward_opts o2 = { .nstop = 1, .stop = &w };
    CHECK(af_backward(loss, 1, &w, &grad_full, &o2) == AF_OK, "full backward");
    double full;
    CHECK(refgraph_eval(g, NULL, 1, &grad_full, (double *[]){ &full }) == 0, "full eval");
    CHECK_NEAR(full, want_w + (1 - lr * x1 * x1) * want_w1, 1e-6, "dL/dw through the update");
    af_graph_free(g);
}

/* loss_scale multiplies every gradient; the CE seed is (softmax - y) * scale / N. */
static void check_loss_scale(void) {
    af_graph *g = af_graph_new();
    float z[6] = { 0.1f, -0.3f, 0.7f, 1.2f, 0.0f, -1.0f }, y[6] = { 0, 0, 1, 1, 0, 0 };
    af_tensor *zp = af_parameter(g, "z", AF_SHAPE(2, 3), z);
    af_loss *l = af_softmax_cross_entropy(zp, af_const(g, "y", AF_SHAPE(2, 3), y));
    af_tensor *g1 = NULL, *g8 = NULL;
    CHECK(af_backward(l, 1, &zp, &g1, NULL) == AF_OK, "backward: %s", af_error_message());
    CHECK(af_backward(l, 1, &zp, &g8, &(af_backward_opts){ .loss_scale = 8.0f }) == AF_OK, "backward x8: %s", af_error_message());
    double a[6] = { 0 }, b[6] = { 0 };
    CHECK(g1 && g8 && refgraph_eval(g, NULL, 2, (af_tensor *[]){ g1, g8 }, (double *[]){ a, b }) == 0, "loss scale eval");
    for (int r = 0; r < 2; r++) {
        double mx = fmax(fmax(z[r * 3], z[r * 3 + 1]), z[r * 3 + 2]), s = 0;
        for (int k = 0; k < 3; k++) s += exp(z[r * 3 + k] - mx);
        for (int k = 0; k < 3; k++) {
            double want = (exp(z[r * 3 + k] - mx) / s - y[r * 3 + k]) / 2.0;
            CHECK_NEAR(a[r * 3 + k], want, 1e-7, "CE seed");
            CHECK_NEAR(b[r * 3 + k], 8 * want, 1e-6, "CE seed scaled");
        }
    }
    af_graph_free(g);
}

/* A parameter the loss does not reach gets zeros; bad arguments are errors. */
static void check_edges(void) {
    af_graph *g = af_graph_new();
    float v[3] = { 1, 2, 3 };
    af_tensor *a = af_parameter(g, "a", AF_SHAPE(3), v), *b = af_parameter(g, "b", AF_SHAPE(3), v);
    int ax = 0;
    af_loss *l = af_loss_scalar(af_reduce_sum(af_square(a), 1, &ax, 0));
    af_tensor *gr[2];
    CHECK(af_backward(l, 2, (af_tensor *[]){ a, b }, gr, NULL) == AF_OK, "unused param");
    double ga[3], gb[3];
    CHECK(refgraph_eval(g, NULL, 2, gr, (double *[]){ ga, gb }) == 0, "eval");
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(ga[i], 2 * v[i], 1e-9, "d sum(a^2)/da");
        CHECK_NEAR(gb[i], 0, 0, "unused param grad");
    }
    CHECK(af_backward(NULL, 1, &a, gr, NULL) != AF_OK, "NULL loss is an error");
    CHECK(af_loss_scalar(a) == NULL && strstr(af_graph_error(g), "one element"), "non-scalar loss: %s", af_graph_error(g));
    af_graph_free(g);
    /* A strided conv's input gradient is refused with a remedy. */
    g = af_graph_new();
    af_tensor *x = af_parameter(g, "x", AF_SHAPE(1, 1, 4, 4), NULL);
    float w[9] = { 0 };
    int st[2] = { 2, 2 };
    af_tensor *y = af_conv(x, af_const(g, "w", AF_SHAPE(1, 1, 3, 3), w), st, NULL, NULL, 1);
    int axes[4] = { 0, 1, 2, 3 };
    l = af_loss_scalar(af_reduce_sum(y, 4, axes, 0));
    CHECK(af_backward(l, 1, &x, gr, NULL) != AF_OK && strstr(af_error_message(), "avg_pool"), "strided conv VJP: %s", af_error_message());
    af_graph_free(g);
}

/* d/dx and d/dw of sum(conv2d(x, w) * c) with the graph targeted at the CPU or not; the
 * gradient graphs are evaluated in double. Returns how many conv_weight_grad nodes the
 * backward made. */
static int conv_grads(bool cpu, double *gx, double *gw) {
    test_rng r = { 77 };
    af_graph *g = af_graph_new();
    if (cpu) af_graph_set_target(g, AF_TARGET_CPU);
    float *xv = rand_vals(&r, AF_SHAPE(2, 3, 6, 5), -1, 1, false), *wv = rand_vals(&r, AF_SHAPE(4, 3, 3, 3), -1, 1, false);
    float *cv = rand_vals(&r, AF_SHAPE(2, 4, 6, 5), -1, 1, false);
    af_tensor *x = af_parameter(g, "x", AF_SHAPE(2, 3, 6, 5), xv), *w = af_conv_param(g, "w", 4, 3, 3, 3, wv);
    int axes[4] = { 0, 1, 2, 3 };
    af_loss *l = af_loss_scalar(af_reduce_sum(af_mul(af_conv2d(x, w, 1, 1), af_const(g, "c", AF_SHAPE(2, 4, 6, 5), cv)), 4, axes, 0));
    af_tensor *gr[2] = { 0 };
    CHECK(af_backward(l, 2, (af_tensor *[]){ x, w }, gr, NULL) == AF_OK, "conv backward (cpu %d): %s", cpu, af_error_message());
    int native = 0;
    for (int i = 0; i < g->n; i++) native += g->t[i]->op == IR_OP_CONV_WEIGHT_GRAD;
    if (gr[0] && gr[1]) CHECK(refgraph_eval(g, NULL, 2, gr, (double *[]){ gx, gw }) == 0, "conv grads eval (cpu %d)", cpu);
    if (cpu && gr[1]) { /* the native node is not differentiable: asking through it is an error that says so */
        af_loss *l2 = af_loss_scalar(af_reduce_sum(af_square(gr[1]), gr[1]->shape.rank, axes, 0));
        af_tensor *gg;
        CHECK(af_backward(l2, 1, &x, &gg, NULL) != AF_OK && strstr(af_error_message(), "not differentiable"),
              "differentiating conv_weight_grad must fail with a clear message: %s", af_error_message());
    }
    free(xv); free(wv); free(cv);
    af_graph_free(g);
    return native;
}

/* On the CPU target the conv weight gradient is one native node and agrees with the
 * portable graph-built im2col construction; elsewhere the portable one is kept. */
static void check_cpu_target_conv(void) {
    double gx[2][2 * 3 * 6 * 5], gw[2][4 * 3 * 3 * 3];
    CHECK(conv_grads(false, gx[0], gw[0]) == 0, "a graph not targeted at the CPU must keep the portable construction");
    CHECK(conv_grads(true, gx[1], gw[1]) == 1, "the CPU target's conv weight gradient must be one conv_weight_grad node");
    double scale = 0, err = 0;
    for (int i = 0; i < 4 * 3 * 3 * 3; i++) { scale = fmax(scale, fabs(gw[0][i])); err = fmax(err, fabs(gw[0][i] - gw[1][i])); }
    CHECK(err <= 1e-12 * scale, "native vs portable conv weight gradient differ by %.3g (scale %.3g)", err, scale);
    err = 0;
    for (int i = 0; i < 2 * 3 * 6 * 5; i++) err = fmax(err, fabs(gx[0][i] - gx[1][i]));
    CHECK(err <= 1e-9, "native vs portable conv input gradient differ by %.3g", err);
}

/* d/dx of sum(pool(x) * c), 2x2 windows of stride 2, with the graph targeted at the CPU
 * or not, in double; returns how many native pool-gradient nodes the backward made. */
static int pool_grads(bool cpu, bool max, double *gx) {
    test_rng r = { 91 };
    af_graph *g = af_graph_new();
    if (cpu) af_graph_set_target(g, AF_TARGET_CPU);
    float *xv = rand_vals(&r, AF_SHAPE(2, 3, 6, 4), -1, 1, false), *cv = rand_vals(&r, AF_SHAPE(2, 3, 3, 2), -1, 1, false);
    af_tensor *x = af_parameter(g, "x", AF_SHAPE(2, 3, 6, 4), xv);
    int k[2] = { 2, 2 }, axes[4] = { 0, 1, 2, 3 };
    af_tensor *y = max ? af_max_pool(x, k, k, NULL) : af_avg_pool(x, k, k, NULL);
    af_loss *l = af_loss_scalar(af_reduce_sum(af_mul(y, af_const(g, "c", AF_SHAPE(2, 3, 3, 2), cv)), 4, axes, 0));
    af_tensor *gr = NULL;
    CHECK(af_backward(l, 1, &x, &gr, NULL) == AF_OK, "pool backward (cpu %d): %s", cpu, af_error_message());
    int native = 0;
    for (int i = 0; i < g->n; i++) native += g->t[i]->op == (max ? IR_OP_MAX_POOL_GRAD : IR_OP_AVG_POOL_GRAD);
    if (gr) CHECK(refgraph_eval(g, NULL, 1, &gr, (double *[]){ gx }) == 0, "pool grads eval (cpu %d)", cpu);
    free(xv); free(cv);
    af_graph_free(g);
    return native;
}

static void check_cpu_target_pool(void) {
    for (int max = 0; max < 2; max++) {
        double gx[2][2 * 3 * 6 * 4], err = 0;
        CHECK(pool_grads(false, max, gx[0]) == 0, "%s: other targets keep the portable construction", max ? "max" : "avg");
        CHECK(pool_grads(true, max, gx[1]) == 1, "%s: the CPU target's pool gradient must be one native node", max ? "max" : "avg");
        for (int i = 0; i < 2 * 3 * 6 * 4; i++) err = fmax(err, fabs(gx[0][i] - gx[1][i]));
        CHECK(err <= 1e-12, "%s pool: native vs portable gradient differ by %.3g", max ? "max" : "avg", err);
    }
}

int main(void) {
    check_coverage();
    check_cpu_target_conv();
    check_cpu_target_pool();
    for (int i = 0; i < NCASES; i++)
        for (int seed = 1; seed <= 2; seed++) run_case(&cases[i], seed * 100 + i);
    check_stop_frontier();
    check_loss_scale();
    check_edges();
    return check_finish("grad");
}
