/* The attention pieces of a llama2.c-architecture transformer, built from existing ops
 * so that their kernels, VJPs, MIL lowering and engine rules are the ones already
 * tested, and the MIL round trip reads back the very same nodes (on graphs targeted at
 * the CPU, af_rope is one native rope node instead):
 *   af_rope            rotary position embedding in llama2.c's pair convention
 *   af_causal_mask     the additive causal mask before softmax
 *   af_causal_attention  softmax(q k^T scale + mask) v: one native node on CPU graphs,
 *                      the matmul/mask/softmax chain the engines lower elsewhere
 *   af_repeat_kv_heads grouped KV heads (each serves n_rep consecutive query heads) */
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>

static bool fail_shape(af_tensor *x, const char *fn, const char *need) {
    char s[100];
    ir_shape_str(x->shape, s, sizeof s);
    ir_graph_fail(x->g, "%s: x %s %s", fn, s, need);
    return false;
}

static bool usable(af_tensor *x, const char *fn) {
    if (!x) { ir_fail(AF_ERR_INVALID, "%s: x is NULL (an earlier builder failed: see af_graph_error)", fn); return false; }
    return !x->g->error;
}

/* Pair i of a head (elements 2i, 2i+1) at position p turns by p * theta^(-2i/head_size).
 * The angle, its cosine and sine are computed in float exactly as llama2.c's run.c
 * does, and the products are the ones it forms (v0 c - v1 s, v0 s + v1 c), so fp32
 * results match run.c's. On a graph targeted at the CPU that is one rope node (its
 * gradient: the same node turning back). Elsewhere x splits into its even and odd
 * elements, each is rotated
 * against baked cos/sin tables [seq, 1, hs/2, 1] (broadcast over batch and heads), and
 * the halves interleave back. The gradient is the rotation by the negative angle,
 * which the mul/sub/add VJPs give. */
af_tensor *af_rope(af_tensor *x, int64_t offset, float theta) {
    if (!usable(x, "af_rope")) return NULL;
    af_shape s = x->shape;
    int r = s.rank;
    if (r < 3 || r + 1 > AF_MAX_RANK || s.dim[r - 1] % 2)
        return fail_shape(x, "af_rope", "must be [..., seq, heads, head_size] with rank 3..5 and an even head_size"), NULL;
    if (offset < 0 || !(theta > 0.0f) || !isfinite(theta)) {
        ir_graph_fail(x->g, "af_rope: offset %lld and theta %g must be >= 0 and > 0 (llama2.c uses theta 10000)", (long long)offset, theta);
        return NULL;
    }
    int64_t seq = s.dim[r - 3], hs = s.dim[r - 1], half = hs / 2;
    float *cs = malloc(sizeof(float) * (size_t)(2 * seq * half));
    if (!cs) { ir_graph_fail(x->g, "af_rope: out of memory"); return NULL; }
    float *sn = cs + seq * half;
    for (int64_t t = 0; t < seq; t++)
        for (int64_t i = 0; i < half; i++) {
            float freq = 1.0f / powf(theta, (float)(2 * i) / (float)hs);
            float val = (float)(offset + t) * freq;
            cs[t * half + i] = cosf(val);
            sn[t * half + i] = sinf(val);
        }
    bool native = x->g->cpu_only; /* one rope node (CPU only), else the engine-friendly ops */
    af_shape ts = native ? AF_SHAPE(seq, half) : (af_shape){ .rank = 4, .dim = { seq, 1, half, 1 } };
    af_tensor *c = af_const(x->g, "rope_cos", ts, cs), *sv = af_const(x->g, "rope_sin", ts, sn);
    free(cs);
    if (native) return ir_rope(x, c, sv, false);
    af_shape ps = s; /* [..., seq, heads, hs/2, 2] */
    ps.rank = r + 1;
    ps.dim[r - 1] = half;
    ps.dim[r] = 2;
    af_tensor *parts[2] = { NULL, NULL };
    if (af_split(af_reshape(x, ps), r, 2, NULL, parts) != AF_OK) return NULL;
    af_tensor *even = af_sub(af_mul(parts[0], c), af_mul(parts[1], sv));
    af_tensor *odd = af_add(af_mul(parts[0], sv), af_mul(parts[1], c));
    return af_reshape(af_concat(2, (af_tensor *[]){ even, odd }, r), s);
}

/* Query i (at position offset + i) sees keys 0 .. offset + i: the others get -1e4 added.
 * -1e4 rather than -inf: it is an fp16 number, so masked scores stay finite at fp16
 * and on the engine (an infinity that meets a zero, -inf * 0, is NaN), while exp of a
 * score 1e4 below the row's maximum is exactly 0 in fp32 and fp16 alike, so the
 * softmax equals llama2.c's, which only sums the visible positions. */
af_tensor *af_causal_mask(af_tensor *scores, int64_t offset) {
    if (!usable(scores, "af_causal_mask")) return NULL;
    af_shape s = scores->shape;
    if (s.rank < 2) return fail_shape(scores, "af_causal_mask", "must be [..., queries, keys]"), NULL;
    int64_t tq = s.dim[s.rank - 2], tk = s.dim[s.rank - 1];
    if (offset < 0 || offset + tq > tk) {
        ir_graph_fail(scores->g, "af_causal_mask: offset %lld plus %lld queries must be within the %lld keys", (long long)offset,
                      (long long)tq, (long long)tk);
        return NULL;
    }
    float *m = calloc((size_t)(tq * tk), sizeof *m);
    if (!m) { ir_graph_fail(scores->g, "af_causal_mask: out of memory"); return NULL; }
    for (int64_t i = 0; i < tq; i++)
        for (int64_t j = offset + i + 1; j < tk; j++) m[i * tk + j] = -1e4f;
    af_tensor *y = af_add(scores, af_const(scores->g, "causal_mask", AF_SHAPE(tq, tk), m));
    free(m);
    return y;
}

/* The native node where the graph runs on the CPU; elsewhere the engine-friendly chain
 * matmul -> muls -> causal_mask -> softmax -> matmul, which the engines lower. */
af_tensor *af_causal_attention(af_tensor *q, af_tensor *k, af_tensor *v, float scale) {
    if (!q || !k || !v) {
        ir_fail(AF_ERR_INVALID, "af_causal_attention: q, k and v must not be NULL");
        return NULL;
    }
    if (scale == 0 && q->shape.rank == 4) scale = 1.0f / sqrtf((float)q->shape.dim[3]);
    if (q->g->cpu_only) return ir_causal_attention(q, k, v, scale, 0);
    af_tensor *scores = af_causal_mask(af_muls(af_matmul(q, k, 0, 1), scale), 0);
    return af_matmul(af_softmax(scores, -1), v, 0, 0);
}

/* [..., kv_heads, hs] -> [..., kv_heads * n_rep, hs], head h a copy of kv head h / n_rep
 * (llama2.c's grouping): a new axis, n_rep copies concatenated along it, folded back. */
af_tensor *af_repeat_kv_heads(af_tensor *x, int n_rep) {
    if (!usable(x, "af_repeat_kv_heads")) return NULL;
    af_shape s = x->shape;
    int r = s.rank;
    if (r < 2 || r + 1 > AF_MAX_RANK || n_rep < 1 || n_rep > 4096)
        return fail_shape(x, "af_repeat_kv_heads", "must be [..., kv_heads, head_size] with rank 2..5, and n_rep 1..4096"), NULL;
    if (n_rep == 1) return x;
    af_shape e = s; /* [..., kv_heads, 1, hs] */
    e.rank = r + 1;
    e.dim[r - 1] = 1;
    e.dim[r] = s.dim[r - 1];
    af_tensor *one = af_reshape(x, e);
    af_tensor **copies = malloc(sizeof *copies * (size_t)n_rep);
    if (!copies) { ir_graph_fail(x->g, "af_repeat_kv_heads: out of memory"); return NULL; }
    for (int k = 0; k < n_rep; k++) copies[k] = one;
    af_tensor *y = af_concat(n_rep, copies, r - 1);
    free(copies);
    af_shape o = s;
    o.dim[r - 2] *= n_rep;
    return af_reshape(y, o);
}
