/* The double reference of the bridge ops (structural and attention), from their
 * definitions: sdpa as softmax(q k^T * scale + mask) v with the softmax shifted by its row
 * max (scores near +-1000 overflow even a double's exp), causal_attention and its gradient from
 * the full weights matrix, broadcast by index arithmetic. */
#include "support/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void sdpa(const af_tensor *t, const double *const *in, double *out) {
    af_shape q = t->src[0]->shape, v = t->src[2]->shape;
    int64_t BH = q.dim[0] * q.dim[1], Sq = q.dim[2], D = q.dim[3], Skv = v.dim[2], Dv = v.dim[3];
    double scale = t->a.scalar;
    double *w = malloc((size_t)Skv * sizeof *w);
    for (int64_t b = 0; b < BH; b++)
        for (int64_t i = 0; i < Sq; i++) {
            double z = 0, mx = -INFINITY;
            for (int64_t j = 0; j < Skv; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += in[0][(b * Sq + i) * D + d] * in[1][(b * Skv + j) * D + d];
                w[j] = s * scale + (t->nsrc > 3 ? in[3][i * Skv + j] : 0.0);
                mx = fmax(mx, w[j]);
            }
            for (int64_t j = 0; j < Skv; j++) z += (w[j] = exp(w[j] - mx));
            for (int64_t e = 0; e < Dv; e++) {
                double y = 0;
                for (int64_t j = 0; j < Skv; j++) y += w[j] / z * in[2][(b * Skv + j) * Dv + e];
                out[(b * Sq + i) * Dv + e] = y;
            }
        }
    free(w);
}

/* The weights of one head of causal attention, p [T, T] (row i: softmax over keys j <= i
 * of q_i . k_j * scale, zero beyond). */
static void causal_weights(const double *q, const double *k, int64_t T, int64_t D, double scale, double *p) {
    for (int64_t i = 0; i < T; i++) {
        double z = 0, mx = -INFINITY;
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t d = 0; d < D; d++) s += q[i * D + d] * k[j * D + d];
            p[i * T + j] = s * scale;
            mx = fmax(mx, p[i * T + j]);
        }
        for (int64_t j = 0; j < T; j++) {
            p[i * T + j] = j <= i ? exp(p[i * T + j] - mx) : 0.0;
            z += p[i * T + j];
        }
        for (int64_t j = 0; j < T; j++) p[i * T + j] /= z;
    }
}

/* causal_attention: y = p v per head; its gradient: dv = p^T dy, dp = dy v^T,
 * ds = p (dp - rowsum(p dp)), dq = ds k * scale, dk = ds^T q * scale, as [3, ...]. Each
 * head is gathered into contiguous [T, D] arrays first (layout 1: q is [B, T, H, D], a
 * head's rows H * D apart) and its results scattered back. */
static int64_t att_index(af_shape s, int layout, int64_t bh, int64_t i) {
    if (!layout) return (bh * s.dim[2] + i) * s.dim[3];
    int64_t H = s.dim[2], b = bh / H, h = bh % H;
    return ((b * s.dim[1] + i) * H + h) * s.dim[3];
}

static void causal_attention(const af_tensor *t, const double *const *in, double *out, bool grad) {
    af_shape s = t->src[0]->shape;
    int layout = t->a.mode;
    int64_t BH = s.dim[0] * s.dim[layout ? 2 : 1], T = s.dim[layout ? 1 : 2], D = s.dim[3], hd = T * D, n = BH * hd;
    double scale = t->a.scalar, *p = malloc((size_t)(2 * T * T + 8 * hd) * sizeof *p), *ds = p + T * T;
    double *q = ds + T * T, *k = q + hd, *v = k + hd, *dy = v + hd, *y = dy + hd, *dq = y + hd, *dk = dq + hd, *dv = dk + hd;
    for (int64_t b = 0; b < BH; b++) {
        for (int64_t i = 0; i < T; i++) {
            int64_t o = att_index(s, layout, b, i);
            for (int64_t e = 0; e < D; e++) {
                q[i * D + e] = in[0][o + e], k[i * D + e] = in[1][o + e], v[i * D + e] = in[2][o + e];
                dy[i * D + e] = grad ? in[3][o + e] : 0;
            }
        }
        causal_weights(q, k, T, D, scale, p);
        if (!grad) {
            for (int64_t i = 0; i < T; i++)
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) acc += p[i * T + j] * v[j * D + e];
                    y[i * D + e] = acc;
                }
            for (int64_t i = 0; i < T; i++)
                for (int64_t e = 0; e < D; e++) out[att_index(s, layout, b, i) + e] = y[i * D + e];
            continue;
        }
        for (int64_t i = 0; i < T; i++) {
            double dot = 0;
            for (int64_t j = 0; j < T; j++) {
                double dp = 0;
                for (int64_t e = 0; e < D; e++) dp += dy[i * D + e] * v[j * D + e];
                ds[i * T + j] = dp;
                dot += p[i * T + j] * dp;
            }
            for (int64_t j = 0; j < T; j++) ds[i * T + j] = p[i * T + j] * (ds[i * T + j] - dot);
        }
        for (int64_t r = 0; r < T; r++)
            for (int64_t e = 0; e < D; e++) {
                double a = 0, bk = 0, c = 0;
                for (int64_t j = 0; j < T; j++) {
                    a += ds[r * T + j] * k[j * D + e];  /* dq[r] = sum_j ds[r, j] k[j] */
                    bk += ds[j * T + r] * q[j * D + e]; /* dk[r] = sum_i ds[i, r] q[i] */
                    c += p[j * T + r] * dy[j * D + e];  /* dv[r] = sum_i p[i, r] dy[i] */
                }
                dq[r * D + e] = a * scale;
                dk[r * D + e] = bk * scale;
                dv[r * D + e] = c;
            }
        for (int64_t i = 0; i < T; i++) {
            int64_t o = att_index(s, layout, b, i);
            for (int64_t e = 0; e < D; e++)
                out[o + e] = dq[i * D + e], out[n + o + e] = dk[i * D + e], out[2 * n + o + e] = dv[i * D + e];
        }
    }
    free(p);
}

/* rope: each pair (2i, 2i+1) of a head at position t turns by the table's angle,
 * (v0 c - v1 s, v0 s + v1 c); mode 1 with -s. */
static void rope(const af_tensor *t, const double *const *in, double *out) {
    af_shape s = t->shape;
    int r = s.rank;
    if (af_shape_count(s) == 0) return;
    int64_t seq = s.dim[r - 3], heads = s.dim[r - 2], half = s.dim[r - 1] / 2, rows = af_shape_count(s) / (heads * 2 * half);
    double sign = t->a.mode ? -1.0 : 1.0;
    for (int64_t row = 0; row < rows; row++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < half; i++) {
                int64_t at = (row * heads + h) * 2 * half + 2 * i, tab = (row % seq) * half + i;
                double v0 = in[0][at], v1 = in[0][at + 1], c = in[1][tab], sn = sign * in[2][tab];
                out[at] = v0 * c - v1 * sn;
                out[at + 1] = v0 * sn + v1 * c;
            }
}

/* swiglu: silu(a) b with silu(a) = a sigmoid(a); its gradient: da = dy b s (1 + a (1 - s)),
 * db = dy silu(a). */
static void swiglu(const af_tensor *t, const double *const *in, double *out) {
    int64_t n = af_shape_count(t->shape);
    for (int64_t i = 0; i < n; i++) {
        double a = in[0][i], s = 1.0 / (1.0 + exp(-a));
        if (t->op == IR_OP_SWIGLU) out[i] = a * s * in[1][i];
        else if (t->a.mode == 0) out[i] = in[2][i] * in[1][i] * s * (1.0 + a * (1.0 - s));
        else out[i] = in[2][i] * a * s;
    }
}

/* softmax_xent: per row logsumexp(z) sum(y) - sum(y z); its gradient (softmax(z) k - y) dy
 * with k = sum(y), or 1 in mode 1. */
static void xent(const af_tensor *t, const double *const *in, double *out) {
    af_shape z = t->src[0]->shape;
    int64_t n = z.dim[0], k = z.dim[1];
    bool grad = t->op == IR_OP_SOFTMAX_XENT_GRAD;
    for (int64_t i = 0; i < n; i++) {
        const double *zr = in[0] + i * k, *yr = in[1] + i * k;
        double m = -INFINITY, s = 0.0, ys = 0.0, yz = 0.0;
        for (int64_t j = 0; j < k; j++) m = zr[j] > m ? zr[j] : m;
        for (int64_t j = 0; j < k; j++) s += exp(zr[j] - m), ys += yr[j], yz += yr[j] * zr[j];
        if (!grad) {
            out[i] = (m + log(s)) * ys - yz;
            continue;
        }
        double g = in[2][t->src[2]->shape.dim[0] == 1 ? 0 : i], kk = t->a.mode == 1 ? 1.0 : ys;
        for (int64_t j = 0; j < k; j++) out[i * k + j] = (exp(zr[j] - m) / s * kk - yr[j]) * g;
    }
}

int ref_bridge_eval(const af_tensor *t, const double *const *in, double *out) {
    int64_t n = af_shape_count(t->shape);
    switch (t->op) {
    case IR_OP_SDPA: sdpa(t, in, out); return 0;
    case IR_OP_CAUSAL_ATTENTION: causal_attention(t, in, out, false); return 0;
    case IR_OP_ROPE: rope(t, in, out); return 0;
    case IR_OP_SWIGLU: case IR_OP_SWIGLU_GRAD: swiglu(t, in, out); return 0;
    case IR_OP_SOFTMAX_XENT: case IR_OP_SOFTMAX_XENT_GRAD: xent(t, in, out); return 0;
    case IR_OP_CAUSAL_ATTENTION_GRAD: causal_attention(t, in, out, true); return 0;
    case IR_OP_FLATTEN:
    case IR_OP_DROPOUT: memcpy(out, in[0], (size_t)n * sizeof *out); return 0;
    case IR_OP_INPUT_VIEW: memcpy(out, in[0] + t->a.ints[0], (size_t)n * sizeof *out); return 0;
    case IR_OP_BROADCAST: { /* out[.., i, ..] = x[.., 0, ..] along the axis */
        int64_t after = 1;
        for (int d = t->a.axis + 1; d < t->shape.rank; d++) after *= t->shape.dim[d];
        int64_t size = t->shape.dim[t->a.axis];
        for (int64_t f = 0; f < n; f++) out[f] = in[0][(f / (after * size)) * after + f % after];
        return 0;
    }
    default: return -1;
    }
}
