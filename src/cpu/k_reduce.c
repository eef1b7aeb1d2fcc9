/* Reductions and softmax. Axes are grouped into (outer, reduced, inner) runs when the
 * reduced axes are contiguous, the common case; anything else takes a general path. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"
#include "cpu/vmath.h"
#include "ir/fp16.h"

#include <float.h>
#include <math.h>
#include <string.h>

static float combine(ir_op op, float acc, float x) {
    switch (op) {
    case IR_OP_REDUCE_MAX: return x > acc ? x : acc;
    case IR_OP_REDUCE_MIN: return x < acc ? x : acc;
    default: return acc + x; /* reduce_sum, reduce_mean: cpu_k_reduce admits only the four */
    }
}

static float identity(ir_op op) {
    return op == IR_OP_REDUCE_MAX ? -INFINITY : op == IR_OP_REDUCE_MIN ? INFINITY : 0.0f;
}

/* A row sum in double (wide accumulation keeps long sums accurate) over eight
 * independent partial sums: one running sum is bound by the adder's latency, eight
 * keep the adders busy and vectorise (a bias gradient's row sums went 4x faster). */
static double sum_wide(const float *x, int64_t n) {
    double s[8] = { 0 };
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) s[l] += x[j + l];
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) t += x[j];
    return t;
}

/* Reduced axes contiguous: out[o, i] = reduce_r x[o, r, i]. */
static void reduce_block(ir_op op, const float *x, float *out, int64_t outer, int64_t red, int64_t inner) {
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = x + o * red * inner;
        float *oo = out + o * inner;
        if (inner == 1) {
            float acc = identity(op);
            if (op == IR_OP_REDUCE_SUM || op == IR_OP_REDUCE_MEAN) {
                acc = (float)sum_wide(xo, red);
            } else {
                for (int64_t r = 0; r < red; r++) acc = combine(op, acc, xo[r]);
            }
            oo[0] = acc;
            continue;
        }
        memcpy(oo, xo, (size_t)inner * sizeof *oo);
        for (int64_t r = 1; r < red; r++) {
            const float *row = xo + r * inner;
            switch (op) {
            case IR_OP_REDUCE_MAX: for (int64_t i = 0; i < inner; i++) oo[i] = row[i] > oo[i] ? row[i] : oo[i]; break;
            case IR_OP_REDUCE_MIN: for (int64_t i = 0; i < inner; i++) oo[i] = row[i] < oo[i] ? row[i] : oo[i]; break;
            default: for (int64_t i = 0; i < inner; i++) oo[i] += row[i]; break; /* sum, mean */
            }
        }
    }
}

/* Any axis set, optionally rounding the running sum to fp16 after every add. */
static void reduce_general(ir_op op, const float *x, float *out, af_shape xs, unsigned mask, int fp16) {
    int64_t ostride[AF_MAX_RANK], idx[AF_MAX_RANK] = { 0 }, s = 1;
    for (int i = xs.rank - 1; i >= 0; i--) {
        ostride[i] = (mask & (1u << i)) ? 0 : s;
        if (!(mask & (1u << i))) s *= xs.dim[i];
    }
    for (int64_t i = 0; i < s; i++) out[i] = identity(op);
    int64_t n = af_shape_count(xs), off = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = combine(op, out[off], x[i]);
        out[off] = fp16 ? af_round_f16(v) : v;
        for (int d = xs.rank - 1; d >= 0; d--) {
            off += ostride[d];
            if (++idx[d] < xs.dim[d]) break;
            off -= ostride[d] * xs.dim[d];
            idx[d] = 0;
        }
    }
}

/* Any axis set, in blocks: adjacent axes with the same reduced-ness are merged and the
 * innermost run is handled contiguously (a row sum when it is reduced, a vector add into
 * the output when it is kept), so the multi-index bookkeeping runs once per block. */
static void reduce_blocked(ir_op op, const float *x, float *out, af_shape xs, unsigned mask) {
    int64_t dim[AF_MAX_RANK], ost[AF_MAX_RANK], idx[AF_MAX_RANK] = { 0 };
    bool red[AF_MAX_RANK];
    int r = 0;
    for (int i = 0; i < xs.rank; i++) {
        if (xs.dim[i] == 1) continue;
        bool rd = (mask >> i) & 1u;
        if (r > 0 && red[r - 1] == rd) { dim[r - 1] *= xs.dim[i]; continue; }
        dim[r] = xs.dim[i];
        red[r++] = rd;
    }
    int64_t nout = 1;
    for (int i = r - 1; i >= 0; i--) {
        ost[i] = red[i] ? 0 : nout;
        if (!red[i]) nout *= dim[i];
    }
    for (int64_t i = 0; i < nout; i++) out[i] = identity(op);
    if (r == 0) { out[0] = combine(op, out[0], x[0]); return; }
    int64_t inner = dim[r - 1], blocks = af_shape_count(xs) / inner, off = 0;
    bool sum = op == IR_OP_REDUCE_SUM || op == IR_OP_REDUCE_MEAN;
    for (int64_t b = 0; b < blocks; b++) {
        const float *xb = x + b * inner;
        if (red[r - 1]) {
            float acc = identity(op);
            if (sum) {
                acc = (float)sum_wide(xb, inner);
            } else {
                for (int64_t j = 0; j < inner; j++) acc = combine(op, acc, xb[j]);
            }
            out[off] = combine(op, out[off], acc);
        } else {
            float *o = out + off;
            switch (op) {
            case IR_OP_REDUCE_MAX: for (int64_t j = 0; j < inner; j++) o[j] = xb[j] > o[j] ? xb[j] : o[j]; break;
            case IR_OP_REDUCE_MIN: for (int64_t j = 0; j < inner; j++) o[j] = xb[j] < o[j] ? xb[j] : o[j]; break;
            default: for (int64_t j = 0; j < inner; j++) o[j] += xb[j]; break; /* sum, mean */
            }
        }
        for (int d = r - 2; d >= 0; d--) {
            off += ost[d];
            if (++idx[d] < dim[d]) break;
            off -= ost[d] * dim[d];
            idx[d] = 0;
        }
    }
}

void cpu_k_reduce(const cpu_call *c) {
    const af_tensor *t = c->t;
    switch (t->op) { /* the loops know max and min; every other op they sum (mean divides after) */
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, REDUCE, id)
#include "ir/ops.def"
#undef X
        return; /* another kind's op: never dispatched here */
    }
    af_shape xs = t->src[0]->shape;
    unsigned mask = (unsigned)t->a.ints[0];
    int64_t red = 1;
    int first = -1, last = -1;
    for (int i = 0; i < xs.rank; i++)
        if (mask & (1u << i)) {
            red *= xs.dim[i];
            if (first < 0) first = i;
            last = i;
        }
    bool contiguous = true;
    for (int i = first; i <= last; i++)
        if (!(mask & (1u << i)) && xs.dim[i] != 1) contiguous = false;
    bool fp16 = c->fp16_accum && t->op == IR_OP_REDUCE_SUM;
    if (contiguous && !fp16) {
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < first; i++) outer *= xs.dim[i];
        for (int i = last + 1; i < xs.rank; i++) inner *= xs.dim[i];
        reduce_block(t->op, c->in[0], c->out, outer, red, inner);
    } else if (!fp16) {
        reduce_blocked(t->op, c->in[0], c->out, xs, mask);
    } else {
        reduce_general(t->op, c->in[0], c->out, xs, mask, fp16);
    }
    if (t->op == IR_OP_REDUCE_MEAN) {
        int64_t n = af_shape_count(t->shape);
        float inv = 1.0f / (float)red;
        for (int64_t i = 0; i < n; i++) c->out[i] *= inv;
    }
}

typedef struct { const cpu_call *c; int64_t n, inner; } softmax_ctx;

/* One contiguous row, each pass vectorised (cpu_vexpf; the max and the sum as SIMD
 * reductions, so the sum's order follows the vector width). y may be x. */
static CPU_VECTOR_CLONES void softmax_row(const float *x, float *y, int64_t n) {
    float mx = -INFINITY, sum = 0.0f;
#if !defined(__clang__) /* clang 14 cannot vectorise this reduction and warns that it did not */
#pragma omp simd reduction(max : mx)
#endif
    for (int64_t k = 0; k < n; k++) mx = x[k] > mx ? x[k] : mx;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < n; k++) {
        float e = cpu_vexpf(x[k] - mx);
        y[k] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; k++) y[k] *= inv;
}

/* The clones stay static (an exported clone exports its resolver, and clang 14 gives a
 * static clone in a header one global resolver per file), so others call this. */
void cpu_softmax_row(const float *x, float *y, int64_t n) { softmax_row(x, y, n); }

static void softmax_rows(const float *x, float *y, int64_t rows, int64_t n) {
    for (int64_t o = 0; o < rows; o++, x += n, y += n) softmax_row(x, y, n);
}

static void softmax_range(void *p, int64_t o0, int64_t o1) {
    const softmax_ctx *s = p;
    int64_t n = s->n, inner = s->inner;
    if (inner == 1) {
        softmax_rows(s->c->in[0] + o0 * n, s->c->out + o0 * n, o1 - o0, n);
        return;
    }
    for (int64_t o = o0; o < o1; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *x = s->c->in[0] + o * n * inner + i;
            float *y = s->c->out + o * n * inner + i;
            float mx = -INFINITY;
            for (int64_t k = 0; k < n; k++) mx = x[k * inner] > mx ? x[k * inner] : mx;
            float sum = 0.0f;
            for (int64_t k = 0; k < n; k++) sum += (y[k * inner] = expf(x[k * inner] - mx));
            float inv = 1.0f / sum;
            for (int64_t k = 0; k < n; k++) y[k * inner] *= inv;
        }
}

void cpu_k_softmax(const cpu_call *c) {
    af_shape xs = c->t->shape;
    int ax = c->t->a.axis;
    softmax_ctx s = { .c = c, .n = xs.dim[ax], .inner = 1 };
    int64_t outer = 1;
    for (int i = 0; i < ax; i++) outer *= xs.dim[i];
    for (int i = ax + 1; i < xs.rank; i++) s.inner *= xs.dim[i];
    int64_t per = s.n * s.inner;
    cpu_pool_for(c->pool, outer, per >= 8192 ? 1 : 8192 / per + 1, softmax_range, &s);
}
