/* CPU kernels of the geometry bridge ops (cross product, cross-correlation, cost volume,
 * furthest point sampling, radius search, dynamic slice) and of the native einsum
 * layer. Sums run in double; the executor rounds results as the precision asks. */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

#include <math.h>

static void cross_product(const cpu_call *c) {
    const float *a = c->in[0], *b = c->in[1];
    for (int64_t r = 0, n = af_shape_count(c->t->shape) / 3; r < n; r++, a += 3, b += 3) {
        float *y = c->out + 3 * r;
        y[0] = a[1] * b[2] - a[2] * b[1];
        y[1] = a[2] * b[0] - a[0] * b[2];
        y[2] = a[0] * b[1] - a[1] * b[0];
    }
}

static void cross_correlation(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape, ts = c->t->src[1]->shape;
    int64_t W = xs.dim[1], Th = ts.dim[0], Tw = ts.dim[1], OH = c->t->shape.dim[0], OW = c->t->shape.dim[1];
    for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++) {
            double s = 0;
            for (int64_t u = 0; u < Th; u++)
                for (int64_t v = 0; v < Tw; v++) s += (double)c->in[0][(i + u) * W + j + v] * c->in[1][u * Tw + v];
            c->out[i * OW + j] = (float)s;
        }
}

static void cost_volume(const cpu_call *c) {
    int64_t D = c->t->shape.dim[0], Wa = c->t->shape.dim[1];
    for (int64_t d = 0; d < D; d++)
        for (int64_t x = 0; x < Wa; x++) c->out[d * Wa + x] = fabsf(c->in[0][x] - c->in[1][x + d]);
}

static double dist2(const float *p, const float *q) {
    double dx = (double)p[0] - q[0], dy = (double)p[1] - q[1], dz = (double)p[2] - q[2];
    return dx * dx + dy * dy + dz * dz;
}

/* Greedy furthest point sampling from point 0; the lowest index wins equal distances.
 * mind (scratch) holds each point's squared distance to the chosen set. */
static void fps(const cpu_call *c) {
    const float *p = c->in[0];
    int64_t N = c->t->src[0]->shape.dim[0], k = c->t->a.ints[0];
    bool indices = c->t->a.ints[1] != 0;
    double *mind = (double *)(void *)c->scratch;
    int64_t cur = 0;
    for (int64_t i = 0; i < N; i++) mind[i] = INFINITY;
    for (int64_t s = 0; s < k; s++) {
        if (indices) c->out[s] = (float)cur;
        else for (int d = 0; d < 3; d++) c->out[3 * s + d] = p[3 * cur + d];
        int64_t best = 0;
        for (int64_t i = 0; i < N; i++) {
            double d = dist2(p + 3 * i, p + 3 * cur);
            if (d < mind[i]) mind[i] = d;
            if (mind[i] > mind[best]) best = i;
        }
        cur = best;
    }
}

static void radius_search(const cpu_call *c) {
    int64_t N = c->t->shape.dim[0], M = c->t->shape.dim[1];
    double r2 = (double)c->t->a.scalar * c->t->a.scalar;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++) c->out[i * M + j] = dist2(c->in[0] + 3 * i, c->in[1] + 3 * j) <= r2 ? 1.0f : 0.0f;
}

/* The start a dynamic_slice reads: rounded half up, clamped into the axis. */
int64_t cpu_dynamic_slice_start(float start, int64_t extent, int64_t size) {
    double s = floor((double)start + 0.5);
    if (!(s > 0)) return 0; /* also NaN */
    return s > (double)(extent - size) ? extent - size : (int64_t)s;
}

static void dynamic_slice(const cpu_call *c) {
    af_shape xs = c->t->src[0]->shape;
    int ax = c->t->a.axis;
    int64_t ext = xs.dim[ax], size = c->t->a.sizes[0], inner = 1, outer = 1;
    for (int i = ax + 1; i < xs.rank; i++) inner *= xs.dim[i];
    for (int i = 0; i < ax; i++) outer *= xs.dim[i];
    int64_t s = cpu_dynamic_slice_start(c->in[1][0], ext, size);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < size * inner; i++) c->out[o * size * inner + i] = c->in[0][(o * ext + s) * inner + i];
}

void cpu_k_geometry(const cpu_call *c) {
    switch (c->t->op) {
    case IR_OP_CROSS_PRODUCT: cross_product(c); break;
    case IR_OP_CROSS_CORRELATION: cross_correlation(c); break;
    case IR_OP_COST_VOLUME: cost_volume(c); break;
    case IR_OP_FPS: fps(c); break;
    case IR_OP_RADIUS_SEARCH: radius_search(c); break;
    case IR_OP_DYNAMIC_SLICE: dynamic_slice(c); break;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, GEOMETRY, id)
#include "ir/ops.def"
#undef X
        break; /* another kind's op: never dispatched here (cpu_kernels picks the kind's entry) */
    }
}

/* y[n, c, h, u] = sum_w a[n, c, h, w] b[n, w, h, u]. */
void cpu_k_einsum(const cpu_call *c) {
    af_shape as = c->t->src[0]->shape;
    int64_t N = as.dim[0], C = as.dim[1], H = as.dim[2], W = as.dim[3], U = c->t->shape.dim[3];
    const float *a = c->in[0], *b = c->in[1];
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t u = 0; u < U; u++) {
                    double s = 0;
                    for (int64_t w = 0; w < W; w++) s += (double)a[((n * C + ch) * H + h) * W + w] * b[((n * W + w) * H + h) * U + u];
                    c->out[((n * C + ch) * H + h) * U + u] = (float)s;
                }
}

int64_t cpu_bridge_scratch(const af_tensor *t) {
    af_shape xs = t->nsrc ? t->src[0]->shape : t->shape;
    if (t->op == IR_OP_SORT || t->op == IR_OP_TOPK) return 2 * xs.dim[xs.rank - 1]; /* (key, index) per column */
    if (t->op == IR_OP_FPS) return 2 * xs.dim[0] + 2;                                  /* a double per point */
    return 0;
}
