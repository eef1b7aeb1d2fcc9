/* Naive double-precision reference for one node. Each op follows its textbook
 * definition: broadcasting maps output multi-indices to operand multi-indices,
 * matmul is a triple loop, conv a direct sum, conv_transpose a direct scatter. */
#include "support/ref.h"

#include <math.h>
#include <string.h>

static int64_t count(af_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.rank; d++) n *= s.dim[d];
    return n;
}

/* Multi-index of flat position f in row-major shape s. */
static void unravel(af_shape s, int64_t f, int64_t *idx) {
    for (int d = s.rank - 1; d >= 0; d--) {
        idx[d] = f % s.dim[d];
        f /= s.dim[d];
    }
}

static int64_t ravel(af_shape s, const int64_t *idx) {
    int64_t f = 0;
    for (int d = 0; d < s.rank; d++) f = f * s.dim[d] + idx[d];
    return f;
}

/* Flat index in operand shape `in` of the element NumPy broadcasting pairs with the
 * output multi-index idx (rank r): operand axes align to the right, size-1 axes repeat. */
static int64_t bcast_at(af_shape in, int r, const int64_t *idx) {
    int64_t f = 0;
    for (int d = 0; d < in.rank; d++) {
        int64_t i = idx[d + r - in.rank];
        f = f * in.dim[d] + (in.dim[d] == 1 ? 0 : i);
    }
    return f;
}

static double binop(ir_op op, double x, double y) {
    switch (op) {
    case IR_OP_ADD: return x + y;
    case IR_OP_SUB: return x - y;
    case IR_OP_MUL: return x * y;
    case IR_OP_REAL_DIV: return x / y;
    case IR_OP_MAXIMUM: return x > y ? x : y;
    case IR_OP_MINIMUM: return x < y ? x : y;
    case IR_OP_POW: return pow(x, y);
    case IR_OP_GREATER: return x > y ? 1.0 : 0.0;
    case IR_OP_LESS: return x < y ? 1.0 : 0.0;
    case IR_OP_EQUAL: return x == y ? 1.0 : 0.0;
    default: return NAN;
    }
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double unop(const af_tensor *t, double x) {
    const double pi = 3.14159265358979323846;
    switch (t->op) {
    case IR_OP_ADDS: return x + (double)t->a.scalar;
    case IR_OP_MULS: return x * (double)t->a.scalar;
    case IR_OP_NEG: return -x;
    case IR_OP_ABS: return fabs(x);
    case IR_OP_SQUARE: return x * x;
    case IR_OP_SQRT: return sqrt(x);
    case IR_OP_RSQRT: return 1.0 / sqrt(x);
    case IR_OP_INVERSE: return 1.0 / x;
    case IR_OP_EXP: return exp(x);
    case IR_OP_LOG: return log(x);
    case IR_OP_TANH: return tanh(x);
    case IR_OP_SIGMOID: return sigmoid(x);
    case IR_OP_RELU: return x > 0 ? x : 0.0;
    case IR_OP_GELU:
        if (t->a.mode == AF_GELU_TANH) return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case IR_OP_SILU: return x * sigmoid(x);
    case IR_OP_SIN: return sin(x);
    case IR_OP_COS: return cos(x);
    case IR_OP_ERF: return erf(x);
    case IR_OP_FLOOR: return floor(x);
    case IR_OP_ATAN: return atan(x);
    case IR_OP_ASIN: return asin(x);
    case IR_OP_ACOS: return acos(x);
    case IR_OP_ATANH: return atanh(x);
    case IR_OP_CAST: return t->a.to == AF_F16 ? (double)af_round_f16((float)x) : x;
    default: return NAN;
    }
}

/* a[..., M, K] @ b[..., K, N] (after the optional transposes of the last two axes),
 * batch dims broadcast. */
static void matmul(const af_tensor *t, const double *a, const double *b, double *out) {
    af_shape as = t->src[0]->shape, bs = t->src[1]->shape, os = t->shape;
    int r = os.rank, ra = as.rank, rb = bs.rank;
    int64_t kdim = t->a.ta ? as.dim[ra - 2] : as.dim[ra - 1];
    int64_t acols = as.dim[ra - 1], bcols = bs.dim[rb - 1];
    int64_t idx[AF_MAX_RANK];
    for (int64_t f = 0; f < count(os); f++) {
        unravel(os, f, idx);
        int64_t abase = 0, bbase = 0;
        for (int d = 0; d < ra - 2; d++) abase = abase * as.dim[d] + (as.dim[d] == 1 ? 0 : idx[d + (r - ra)]);
        for (int d = 0; d < rb - 2; d++) bbase = bbase * bs.dim[d] + (bs.dim[d] == 1 ? 0 : idx[d + (r - rb)]);
        abase *= as.dim[ra - 2] * acols;
        bbase *= bs.dim[rb - 2] * bcols;
        int64_t i = idx[r - 2], j = idx[r - 1];
        double s = 0.0;
        for (int64_t k = 0; k < kdim; k++) {
            double x = t->a.ta ? a[abase + k * acols + i] : a[abase + i * acols + k];
            double y = t->a.tb ? b[bbase + j * bcols + k] : b[bbase + k * bcols + j];
            s += x * y;
        }
        out[f] = s;
    }
}

static void reduce(const af_tensor *t, const double *x, double *out) {
    af_shape xs = t->src[0]->shape;
    unsigned mask = (unsigned)t->a.ints[0];
    int64_t on = count(t->shape), idx[AF_MAX_RANK];
    double init = t->op == IR_OP_REDUCE_MAX ? -INFINITY : t->op == IR_OP_REDUCE_MIN ? INFINITY : 0.0;
    for (int64_t o = 0; o < on; o++) out[o] = init;
    for (int64_t f = 0; f < count(xs); f++) {
        unravel(xs, f, idx);
        int64_t o = 0; /* reduced axes vanish (or stay as size 1, index 0) */
        for (int d = 0; d < xs.rank; d++)
            if (!(mask & (1u << d))) o = o * xs.dim[d] + idx[d];
        double v = x[f];
        switch (t->op) {
        case IR_OP_REDUCE_MAX: if (v > out[o]) out[o] = v; break;
        case IR_OP_REDUCE_MIN: if (v < out[o]) out[o] = v; break;
        default: out[o] += v; break;
        }
    }
    if (t->op == IR_OP_REDUCE_MEAN) {
        double per = (double)count(xs) / (double)on;
        for (int64_t o = 0; o < on; o++) out[o] /= per;
    }
}

static void softmax(const af_tensor *t, const double *x, double *out) {
    af_shape s = t->shape;
    int ax = t->a.axis;
    int64_t idx[AF_MAX_RANK];
    for (int64_t f = 0; f < count(s); f++) {
        unravel(s, f, idx);
        if (idx[ax] != 0) continue; /* each line along ax is handled from its first element */
        int64_t at[AF_MAX_RANK], n = s.dim[ax];
        memcpy(at, idx, sizeof at);
        double mx = -INFINITY, sum = 0.0;
        for (at[ax] = 0; at[ax] < n; at[ax]++) mx = fmax(mx, x[ravel(s, at)]);
        for (at[ax] = 0; at[ax] < n; at[ax]++) sum += exp(x[ravel(s, at)] - mx);
        for (at[ax] = 0; at[ax] < n; at[ax]++) out[ravel(s, at)] = exp(x[ravel(s, at)] - mx) / sum;
    }
}

/* The table row a token id names: truncated toward zero, -1 outside [0, v). */
static int64_t id_row(double id, int64_t v) {
    double r = trunc(id);
    return r >= 0 && r < (double)v ? (int64_t)r : -1;
}

/* Embedding (gather) and its gradient (scatter-add), straight from their definitions:
 * out[i, k] = table[ids[i], k]; grad[v, k] = sum of dy[i, k] over ids[i] == v. */
static void embedding(const af_tensor *t, const double *const *in, double *out) {
    int64_t n = count(t->src[1]->shape);
    if (t->op == IR_OP_EMBEDDING) {
        int64_t v = t->src[0]->shape.dim[0], row = count(t->src[0]->shape) / v;
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < row; k++) {
                int64_t r = id_row(in[1][i], v);
                out[i * row + k] = r < 0 ? 0.0 : in[0][r * row + k];
            }
        return;
    }
    int64_t v = t->shape.dim[0], row = count(t->shape) / v;
    for (int64_t r = 0; r < v; r++)
        for (int64_t k = 0; k < row; k++) {
            double s = 0.0;
            for (int64_t i = 0; i < n; i++)
                if (id_row(in[1][i], v) == r) s += in[0][i * row + k];
            out[r * row + k] = s;
        }
}

/* Layout ops: each output element reads one source element found by index arithmetic. */
static void layout(const af_tensor *t, const double *const *in, double *out) {
    af_shape os = t->shape, xs = t->src[0]->shape;
    int64_t oi[AF_MAX_RANK], xi[AF_MAX_RANK];
    if (t->op == IR_OP_EMBEDDING || t->op == IR_OP_EMBEDDING_GRAD) { embedding(t, in, out); return; }
    for (int64_t f = 0; f < count(os); f++) {
        unravel(os, f, oi);
        switch (t->op) {
        case IR_OP_TRANSPOSE: /* out[i0..] = x[j] with j[perm[d]] = i[d] */
            for (int d = 0; d < os.rank; d++) xi[t->a.ints[d]] = oi[d];
            out[f] = in[0][ravel(xs, xi)];
            break;
        case IR_OP_RESHAPE:
            out[f] = in[0][f];
            break;
        case IR_OP_SLICE_BY_SIZE:
            for (int d = 0; d < os.rank; d++) xi[d] = oi[d] + t->a.ints[d];
            out[f] = in[0][ravel(xs, xi)];
            break;
        case IR_OP_SPLIT:
            memcpy(xi, oi, sizeof xi);
            xi[t->a.axis] += t->a.ints[0];
            out[f] = in[0][ravel(xs, xi)];
            break;
        case IR_OP_CONCAT: {
            int ax = t->a.axis, k = 0;
            memcpy(xi, oi, sizeof xi);
            while (xi[ax] >= t->src[k]->shape.dim[ax]) xi[ax] -= t->src[k++]->shape.dim[ax];
            out[f] = in[k][ravel(t->src[k]->shape, xi)];
            break;
        }
        default:
            break;
        }
    }
}

/* Normalises the n values x[base + i*step] (two-pass mean and biased variance); the
 * affine parameters for value i are gamma[aff(i)], beta[aff(i)]. */
static void norm_set(const af_tensor *t, const double *x, const double *gamma, const double *beta, double *out,
                     int64_t base, int64_t n, int64_t step, int64_t per, int64_t aff0) {
    double eps = (double)t->a.eps;
    if (t->op == IR_OP_RMS_NORM) {
        double ms = 0.0;
        for (int64_t i = 0; i < n; i++) ms += x[base + i * step] * x[base + i * step];
        ms /= (double)n;
        for (int64_t i = 0; i < n; i++)
            out[base + i * step] = x[base + i * step] / sqrt(ms + eps) * gamma[aff0 + i / per];
        return;
    }
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < n; i++) mean += x[base + i * step];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (x[base + i * step] - mean) * (x[base + i * step] - mean);
    var /= (double)n;
    for (int64_t i = 0; i < n; i++)
        out[base + i * step] = (x[base + i * step] - mean) / sqrt(var + eps) * gamma[aff0 + i / per] + beta[aff0 + i / per];
}

static void norm(const af_tensor *t, const double *const *in, double *out) {
    af_shape s = t->shape;
    const double *x = in[0], *gamma = in[1], *beta = t->op == IR_OP_RMS_NORM ? NULL : in[2];
    if (t->op == IR_OP_RMS_NORM || t->op == IR_OP_LAYER_NORM) {
        int64_t d = s.dim[s.rank - 1];
        for (int64_t r = 0; r < count(s) / d; r++) norm_set(t, x, gamma, beta, out, r * d, d, 1, 1, 0);
        return;
    }
    int64_t nb = s.dim[0], c = s.dim[1], sp = count(s) / (nb * c);
    if (t->op == IR_OP_CHANNEL_LAYER_NORM) { /* over C at each (n, spatial) position */
        for (int64_t b = 0; b < nb; b++)
            for (int64_t p = 0; p < sp; p++) norm_set(t, x, gamma, beta, out, b * c * sp + p, c, sp, 1, 0);
        return;
    }
    int64_t g = t->a.groups, cg = c / g; /* group_norm: over (C/G channels x spatial) */
    for (int64_t b = 0; b < nb; b++)
        for (int64_t gi = 0; gi < g; gi++) norm_set(t, x, gamma, beta, out, (b * c + gi * cg) * sp, cg * sp, 1, sp, gi * cg);
}

static void pool(const af_tensor *t, const double *x, double *out) {
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, os = t->shape;
    int64_t h = xs.dim[2], w = xs.dim[3];
    for (int64_t n = 0; n < os.dim[0]; n++)
        for (int64_t c = 0; c < os.dim[1]; c++)
            for (int64_t oh = 0; oh < os.dim[2]; oh++)
                for (int64_t ow = 0; ow < os.dim[3]; ow++) {
                    double sum = 0.0, mx = -INFINITY;
                    for (int64_t u = 0; u < a->kernel[0]; u++)
                        for (int64_t v = 0; v < a->kernel[1]; v++) {
                            int64_t ih = oh * a->stride[0] - a->pad[0] + u, iw = ow * a->stride[1] - a->pad[1] + v;
                            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue; /* padding: 0 in the sum, skipped by max */
                            double val = x[((n * xs.dim[1] + c) * h + ih) * w + iw];
                            sum += val;
                            mx = fmax(mx, val);
                        }
                    double area = (double)a->kernel[0] * (double)a->kernel[1];
                    out[((n * os.dim[1] + c) * os.dim[2] + oh) * os.dim[3] + ow] = t->op == IR_OP_AVG_POOL ? sum / area : mx;
                }
}

/* dx[n, c, ih, iw] = sum over the windows holding (ih, iw) of dy / (kh*kw) (avg), or of dy
 * where x equals the window's max (max). */
static void pool_grad(const af_tensor *t, const double *x, const double *dy, double *dx) {
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ds = t->src[1]->shape;
    int64_t h = xs.dim[2], w = xs.dim[3], ho = ds.dim[2], wo = ds.dim[3];
    for (int64_t f = 0; f < count(xs); f++) dx[f] = 0.0;
    for (int64_t p = 0; p < xs.dim[0] * xs.dim[1]; p++)
        for (int64_t oh = 0; oh < ho; oh++)
            for (int64_t ow = 0; ow < wo; ow++) {
                double mx = -INFINITY, g = dy[(p * ho + oh) * wo + ow];
                for (int pass = 0; pass < 2; pass++)
                    for (int64_t u = 0; u < a->kernel[0]; u++)
                        for (int64_t v = 0; v < a->kernel[1]; v++) {
                            int64_t ih = oh * a->stride[0] - a->pad[0] + u, iw = ow * a->stride[1] - a->pad[1] + v;
                            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                            double xv = x[(p * h + ih) * w + iw];
                            if (t->op == IR_OP_AVG_POOL_GRAD) {
                                if (pass == 0) dx[(p * h + ih) * w + iw] += g / ((double)a->kernel[0] * a->kernel[1]);
                            } else if (pass == 0) {
                                mx = fmax(mx, xv);
                            } else if (xv == mx) {
                                dx[(p * h + ih) * w + iw] += g;
                            }
                        }
            }
}

/* out[n, co, oh, ow] = sum_{ci, u, v} x[n, g*Cin_g + ci, oh*s - p + u*d, ow*s - p + v*d] * w[co, ci, u, v]. */
static void conv(const af_tensor *t, const double *x, const double *w, double *out) {
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t cin = xs.dim[1], h = xs.dim[2], wd = xs.dim[3];
    int64_t cout = os.dim[1], cin_g = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3], cout_g = cout / a->groups;
    for (int64_t n = 0; n < os.dim[0]; n++)
        for (int64_t co = 0; co < cout; co++)
            for (int64_t oh = 0; oh < os.dim[2]; oh++)
                for (int64_t ow = 0; ow < os.dim[3]; ow++) {
                    int64_t g = co / cout_g;
                    double s = 0.0;
                    for (int64_t ci = 0; ci < cin_g; ci++)
                        for (int64_t u = 0; u < kh; u++)
                            for (int64_t v = 0; v < kw; v++) {
                                int64_t ih = oh * a->stride[0] - a->pad[0] + u * a->dilation[0];
                                int64_t iw = ow * a->stride[1] - a->pad[1] + v * a->dilation[1];
                                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                                s += x[((n * cin + g * cin_g + ci) * h + ih) * wd + iw] * w[((co * cin_g + ci) * kh + u) * kw + v];
                            }
                    out[((n * cout + co) * os.dim[2] + oh) * os.dim[3] + ow] = s;
                }
}

/* dw[co, ci, u, v] = sum_{n, oh, ow} dy[n, co, oh, ow] * x[n, ci, oh*s - p + u*d, ow*s - p + v*d]. */
static void conv_weight_grad(const af_tensor *t, const double *x, const double *dy, double *out) {
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ds = t->src[1]->shape, os = t->shape;
    int64_t h = xs.dim[2], wd = xs.dim[3], ho = ds.dim[2], wo = ds.dim[3];
    for (int64_t co = 0; co < os.dim[0]; co++)
        for (int64_t ci = 0; ci < os.dim[1]; ci++)
            for (int64_t u = 0; u < os.dim[2]; u++)
                for (int64_t v = 0; v < os.dim[3]; v++) {
                    double s = 0.0;
                    for (int64_t n = 0; n < xs.dim[0]; n++)
                        for (int64_t oh = 0; oh < ho; oh++)
                            for (int64_t ow = 0; ow < wo; ow++) {
                                int64_t ih = oh * a->stride[0] - a->pad[0] + u * a->dilation[0];
                                int64_t iw = ow * a->stride[1] - a->pad[1] + v * a->dilation[1];
                                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                                s += dy[((n * ds.dim[1] + co) * ho + oh) * wo + ow] * x[((n * xs.dim[1] + ci) * h + ih) * wd + iw];
                            }
                    out[((co * os.dim[1] + ci) * os.dim[2] + u) * os.dim[3] + v] = s;
                }
}

/* Every input element scatters x[n, ci, ih, iw] * w[ci, co, u, v] to
 * out[n, co, ih*s - p + u*d, iw*s - p + v*d]. */
static void conv_transpose(const af_tensor *t, const double *x, const double *w, double *out) {
    const ir_attrs *a = &t->a;
    af_shape xs = t->src[0]->shape, ws = t->src[1]->shape, os = t->shape;
    int64_t cin = xs.dim[1], h = xs.dim[2], wd = xs.dim[3];
    int64_t cout = ws.dim[1], kh = ws.dim[2], kw = ws.dim[3], ho = os.dim[2], wo = os.dim[3];
    for (int64_t f = 0; f < count(os); f++) out[f] = 0.0;
    for (int64_t n = 0; n < xs.dim[0]; n++)
        for (int64_t ci = 0; ci < cin; ci++)
            for (int64_t ih = 0; ih < h; ih++)
                for (int64_t iw = 0; iw < wd; iw++)
                    for (int64_t co = 0; co < cout; co++)
                        for (int64_t u = 0; u < kh; u++)
                            for (int64_t v = 0; v < kw; v++) {
                                int64_t oh = ih * a->stride[0] - a->pad[0] + u * a->dilation[0];
                                int64_t ow = iw * a->stride[1] - a->pad[1] + v * a->dilation[1];
                                if (oh < 0 || oh >= ho || ow < 0 || ow >= wo) continue;
                                out[((n * cout + co) * ho + oh) * wo + ow] +=
                                    x[((n * cin + ci) * h + ih) * wd + iw] * w[((ci * cout + co) * kh + u) * kw + v];
                            }
}

int ref_eval(const af_tensor *t, const double *const *in, double *out) {
    af_shape os = t->shape;
    int64_t n = count(os), idx[AF_MAX_RANK];
    if ((unsigned)t->op >= IR_OP_COUNT) return -1;
    switch (ir_ops[t->op].kind) {
    case IR_KIND_BINARY:
        for (int64_t f = 0; f < n; f++) {
            unravel(os, f, idx);
            out[f] = binop(t->op, in[0][bcast_at(t->src[0]->shape, os.rank, idx)],
                           in[1][bcast_at(t->src[1]->shape, os.rank, idx)]);
        }
        return 0;
    case IR_KIND_SELECT:
        for (int64_t f = 0; f < n; f++) {
            unravel(os, f, idx);
            double c = in[0][bcast_at(t->src[0]->shape, os.rank, idx)];
            out[f] = c != 0.0 ? in[1][bcast_at(t->src[1]->shape, os.rank, idx)]
                              : in[2][bcast_at(t->src[2]->shape, os.rank, idx)];
        }
        return 0;
    case IR_KIND_SCALAR:
    case IR_KIND_UNARY:
    case IR_KIND_CAST:
        for (int64_t f = 0; f < n; f++) out[f] = unop(t, in[0][f]);
        return 0;
    case IR_KIND_MATMUL:
        if (t->op == IR_OP_MATMUL_W) { /* x[..., K] @ wt[N, K]^T */
            int64_t nn = t->src[1]->shape.dim[0], k = t->src[1]->shape.dim[1];
            for (int64_t r = 0; r < n / nn; r++)
                for (int64_t j = 0; j < nn; j++) {
                    double s = 0.0;
                    for (int64_t q = 0; q < k; q++) s += in[0][r * k + q] * in[1][j * k + q];
                    out[r * nn + j] = s;
                }
            return 0;
        }
        matmul(t, in[0], in[1], out);
        return 0;
    case IR_KIND_REDUCE:
        reduce(t, in[0], out);
        return 0;
    case IR_KIND_SOFTMAX:
        softmax(t, in[0], out);
        return 0;
    case IR_KIND_LAYOUT:
        layout(t, in, out);
        return 0;
    case IR_KIND_NORM:
        norm(t, in, out);
        return 0;
    case IR_KIND_POOL:
        if (t->op == IR_OP_AVG_POOL_GRAD || t->op == IR_OP_MAX_POOL_GRAD) pool_grad(t, in[0], in[1], out);
        else pool(t, in[0], out);
        return 0;
    case IR_KIND_CONV:
        if (t->op == IR_OP_CONV) conv(t, in[0], in[1], out);
        else if (t->op == IR_OP_CONV_WEIGHT_GRAD) conv_weight_grad(t, in[0], in[1], out);
        else conv_transpose(t, in[0], in[1], out);
        return 0;
    case IR_KIND_RANK: case IR_KIND_REARRANGE: case IR_KIND_GEOMETRY: case IR_KIND_BNORM: case IR_KIND_EINSUM:
        return ref_eval_bridge(t, in, out);
    case IR_KIND_ATTENTION:
    case IR_KIND_STRUCTURAL:
        return ref_bridge_eval(t, in, out);
    default:
        return -1;
    }
}
