/* The reference evaluator's bridge ops (seed 004), from their definitions in
 * include/aneforge.h with plain loops in double: sorts by counting ranks, rearranges
 * by sending each input element to its output place (the kernels gather), furthest
 * point sampling by recomputing every distance to the chosen set. */
#include "support/ref.h"

#include <math.h>
#include <stdlib.h>

static int64_t cnt(af_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++) n *= s.dim[i];
    return n;
}

/* Position of column w in the stable order of keys (ascending, or descending). */
static int64_t rank_of(const double *key, int64_t W, int64_t w, bool desc) {
    int64_t r = 0;
    for (int64_t v = 0; v < W; v++) {
        bool before = desc ? key[v] > key[w] : key[v] < key[w];
        if (before || (key[v] == key[w] && v < w)) r++;
    }
    return r;
}

static void sort_ref(const af_tensor *t, const double *x, double *out) {
    af_shape s = t->src[0]->shape;
    int64_t C = s.dim[s.rank - 2], W = s.dim[s.rank - 1], B = cnt(s) / (C * W);
    int64_t K = t->op == IR_OP_TOPK ? t->a.ints[3] : W;
    bool desc = t->a.ints[1], ind = t->a.ints[2];
    for (int64_t b = 0; b < B; b++) {
        const double *xb = x + b * C * W, *key = xb + t->a.ints[0] * W;
        for (int64_t w = 0; w < W; w++) {
            int64_t r = rank_of(key, W, w, desc);
            if (r >= K) continue;
            if (ind) out[b * K + r] = (double)w;
            else for (int64_t ch = 0; ch < C; ch++) out[(b * C + ch) * K + r] = xb[ch * W + w];
        }
    }
}

static void argminmax_ref(const af_tensor *t, const double *x, double *out) {
    af_shape s = t->src[0]->shape;
    int r = s.rank;
    int64_t C = s.dim[r - 3], H = s.dim[r - 2], W = s.dim[r - 1], B = cnt(s) / (C * H * W);
    bool max = t->a.ints[1];
    for (int64_t b = 0; b < B; b++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    double v = x[((b * C + ch) * H + h) * W + w];
                    int64_t o = t->a.ints[0] ? b * H * W + h * W + w : b * C + ch, id = t->a.ints[0] ? ch : h * W + w;
                    bool first = t->a.ints[0] ? ch == 0 : (h == 0 && w == 0);
                    /* out holds the index; compare with the value at it */
                    if (first) { out[o] = (double)id; continue; }
                    int64_t bi = (int64_t)out[o];
                    double bv = t->a.ints[0] ? x[((b * C + bi) * H + h) * W + w] : x[(b * C + ch) * H * W + bi];
                    if (max ? v > bv : v < bv) out[o] = (double)id;
                }
}

static void global_ref(const af_tensor *t, const double *x, double *out) {
    af_shape s = t->src[0]->shape;
    int ax = t->a.axis;
    int64_t n = s.dim[ax], in = 1, on = cnt(t->shape);
    for (int i = ax + 1; i < s.rank; i++) in *= s.dim[i];
    for (int64_t f = 0; f < on; f++) {
        int64_t o = f / in, i = f % in, best = 0;
        for (int64_t j = 1; j < n; j++) {
            double v = x[(o * n + j) * in + i], bv = x[(o * n + best) * in + i];
            if (t->a.ints[1] ? v > bv : v < bv) best = j;
        }
        out[f] = (double)best;
    }
}

/* Each input element [n, c, h, w] sent to its output place. */
static void rearrange_ref(const af_tensor *t, const double *x, double *out) {
    af_shape is = t->src[0]->shape, os = t->shape;
    int64_t fy = t->a.kernel[0], fx = t->a.kernel[1];
    int64_t N = is.dim[0], C = is.dim[1], H = is.dim[2], W = is.dim[3];
    int64_t OC = os.dim[1], OH = os.dim[2], OW = os.dim[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    int64_t on = n, oc = c, oh = h, ow = w;
                    switch (t->op) {
                    case IR_OP_PIXEL_SHUFFLE: /* c = (oc*fy + i)*fx + j */
                        oc = c / (fy * fx); oh = h * fy + (c / fx) % fy; ow = w * fx + c % fx; break;
                    case IR_OP_CHANNEL_TO_SPACE: /* c = (i*fx + j)*OC + oc */
                        oc = c % OC; oh = h * fy + c / OC / fx; ow = w * fx + (c / OC) % fx; break;
                    case IR_OP_BATCH_TO_SPACE: { /* n = (i*fx + j)*ON + on */
                        int64_t ON = os.dim[0];
                        on = n % ON; oh = h * fy + n / ON / fx; ow = w * fx + (n / ON) % fx; break;
                    }
                    case IR_OP_PIXEL_UNSHUFFLE:
                        oc = (c * fy + h % fy) * fx + w % fx; oh = h / fy; ow = w / fx; break;
                    case IR_OP_SPACE_TO_CHANNEL:
                        oc = ((h % fy) * fx + w % fx) * C + c; oh = h / fy; ow = w / fx; break;
                    default: /* SPACE_TO_BATCH */
                        on = ((h % fy) * fx + w % fx) * N + n; oh = h / fy; ow = w / fx; break;
                    }
                    out[((on * OC + oc) * OH + oh) * OW + ow] = x[((n * C + c) * H + h) * W + w];
                }
}

static double d2(const double *p, const double *q) {
    double s = 0;
    for (int d = 0; d < 3; d++) s += (p[d] - q[d]) * (p[d] - q[d]);
    return s;
}

static int geometry_ref(const af_tensor *t, const double *const *in, double *out) {
    af_shape xs = t->src[0]->shape, os = t->shape;
    switch (t->op) {
    case IR_OP_CROSS_PRODUCT: /* y_i = eps_ijk a_j b_k */
        for (int64_t r = 0; r < cnt(os) / 3; r++)
            for (int i = 0; i < 3; i++) {
                int j = (i + 1) % 3, k = (i + 2) % 3;
                out[3 * r + i] = in[0][3 * r + j] * in[1][3 * r + k] - in[0][3 * r + k] * in[1][3 * r + j];
            }
        return 0;
    case IR_OP_CROSS_CORRELATION: {
        af_shape ts = t->src[1]->shape;
        for (int64_t i = 0; i < os.dim[0]; i++)
            for (int64_t j = 0; j < os.dim[1]; j++) {
                double s = 0;
                for (int64_t u = 0; u < ts.dim[0]; u++)
                    for (int64_t v = 0; v < ts.dim[1]; v++) s += in[0][(i + u) * xs.dim[1] + j + v] * in[1][u * ts.dim[1] + v];
                out[i * os.dim[1] + j] = s;
            }
        return 0;
    }
    case IR_OP_COST_VOLUME:
        for (int64_t d = 0; d < os.dim[0]; d++)
            for (int64_t x = 0; x < os.dim[1]; x++) out[d * os.dim[1] + x] = fabs(in[0][x] - in[1][x + d]);
        return 0;
    case IR_OP_FPS: {
        int64_t N = xs.dim[0], K = t->a.ints[0];
        int64_t *chosen = malloc((size_t)K * sizeof *chosen);
        if (!chosen) return -1;
        chosen[0] = 0;
        for (int64_t s = 1; s < K; s++) {
            double bestd = -1;
            for (int64_t i = 0; i < N; i++) {
                double m = INFINITY;
                for (int64_t q = 0; q < s; q++) m = fmin(m, d2(in[0] + 3 * i, in[0] + 3 * chosen[q]));
                if (m > bestd) { bestd = m; chosen[s] = i; }
            }
        }
        for (int64_t s = 0; s < K; s++) {
            if (t->a.ints[1]) out[s] = (double)chosen[s];
            else for (int d = 0; d < 3; d++) out[3 * s + d] = in[0][3 * chosen[s] + d];
        }
        free(chosen);
        return 0;
    }
    case IR_OP_RADIUS_SEARCH:
        for (int64_t i = 0; i < os.dim[0]; i++)
            for (int64_t j = 0; j < os.dim[1]; j++)
                out[i * os.dim[1] + j] = sqrt(d2(in[0] + 3 * i, in[1] + 3 * j)) <= (double)t->a.scalar ? 1.0 : 0.0;
        return 0;
    default: { /* DYNAMIC_SLICE */
        int ax = t->a.axis;
        int64_t ext = xs.dim[ax], size = t->a.sizes[0], in_ = 1;
        for (int i = ax + 1; i < xs.rank; i++) in_ *= xs.dim[i];
        double s = floor(in[1][0] + 0.5);
        s = s < 0 ? 0 : s > (double)(ext - size) ? (double)(ext - size) : s;
        for (int64_t f = 0; f < cnt(os); f++) {
            int64_t o = f / (size * in_), j = f / in_ % size, i = f % in_;
            out[f] = in[0][(o * ext + (int64_t)s + j) * in_ + i];
        }
        return 0;
    }
    }
}

static void bnorm_ref(const af_tensor *t, const double *const *in, double *out) {
    af_shape s = t->src[0]->shape;
    int64_t n = cnt(s);
    if (t->op == IR_OP_LRN) {
        int r = s.rank;
        int64_t C = s.dim[r - 3], HW = s.dim[r - 2] * s.dim[r - 1];
        for (int64_t f = 0; f < n; f++) {
            int64_t c = f / HW % C, base = f - c * HW;
            double sum = 0;
            for (int64_t j = 0; j < C; j++)
                if (j >= c - (C - 1) / 2 && j <= c + C / 2) sum += in[0][base + j * HW] * in[0][base + j * HW];
            out[f] = in[0][f] / pow((double)t->a.eps + (double)t->a.scalar * sum, (double)t->a.beta);
        }
    } else if (t->op == IR_OP_MINMAX_NORM) {
        int ax = t->a.axis;
        int64_t e = s.dim[ax], inner = 1;
        for (int i = ax + 1; i < s.rank; i++) inner *= s.dim[i];
        for (int64_t f = 0; f < n; f++) {
            int64_t base = f - (f / inner % e) * inner;
            double mn = INFINITY, mx = -INFINITY;
            for (int64_t j = 0; j < e; j++) { mn = fmin(mn, in[0][base + j * inner]); mx = fmax(mx, in[0][base + j * inner]); }
            out[f] = (in[0][f] - mn) / (mx - mn + (double)t->a.eps);
        }
    } else {
        for (int64_t f = 0; f < n; f++) {
            double x = in[0][f], z = in[1][f];
            double v = t->a.mode == 0 ? x + z : t->a.mode == 3 ? fmin(x, z) : fmax(x, z);
            out[f] = (double)t->a.scalar * v;
        }
    }
}

int ref_eval_bridge(const af_tensor *t, const double *const *in, double *out) {
    switch (ir_ops[t->op].kind) {
    case IR_KIND_RANK:
        if (t->op == IR_OP_ARGMINMAX) argminmax_ref(t, in[0], out);
        else if (t->op == IR_OP_GLOBAL_ARGMINMAX) global_ref(t, in[0], out);
        else sort_ref(t, in[0], out);
        return 0;
    case IR_KIND_REARRANGE: rearrange_ref(t, in[0], out); return 0;
    case IR_KIND_GEOMETRY: return geometry_ref(t, in, out);
    case IR_KIND_BNORM: bnorm_ref(t, in, out); return 0;
    case IR_KIND_EINSUM: {
        af_shape a = t->src[0]->shape;
        int64_t N = a.dim[0], C = a.dim[1], H = a.dim[2], W = a.dim[3], U = t->shape.dim[3];
        for (int64_t nn = 0; nn < N; nn++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t u = 0; u < U; u++) {
                        double s = 0;
                        for (int64_t w = 0; w < W; w++) s += in[0][((nn * C + c) * H + h) * W + w] * in[1][((nn * W + w) * H + h) * U + u];
                        out[((nn * C + c) * H + h) * U + u] = s;
                    }
        return 0;
    }
    default: return -1;
    }
}
