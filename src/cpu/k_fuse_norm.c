/* The kernels of RMSNorm's fused gradient chains (fuse_norm.h): one pass each over rows
 * of d floats, the row in cache between its two reads. */
#include "cpu/cpu_features.h"
#include "cpu/fuse_norm.h"

#include <stdlib.h>

#define ROWS_MIN(d) ((16384 + (d) - 1) / (d)) /* rows per task: threading below that costs more */

/* Eight partial double sums of a[j] * b[j] (each product rounded to fp32 first, as the
 * mul node stores it), times fl(c[j] * cs) when c is given, so the loop vectorises as
 * reduce_mean's sum_wide does. cs is 1 (exact) when c already holds xhat, r when it
 * holds x and xhat = x r is recomputed here. */
static CPU_VECTOR_CLONES double dot_wide(const float *a, const float *b, const float *c, float cs, int64_t n) {
    double s[8] = { 0 };
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            float ab = a[j + l] * b[j + l];
            s[l] += c ? ab * (c[j + l] * cs) : ab;
        }
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) {
        float ab = a[j] * b[j];
        t += c ? ab * (c[j] * cs) : ab;
    }
    return t;
}

typedef struct {
    const float *g, *gam, *xhat, *r, *resid;
    float *out;
    int64_t d;
    bool scaled; /* xhat holds x: xhat = x r recomputed (fuse_norm.h) */
} rms_ctx;

static CPU_VECTOR_CLONES void rms_dx_rows(void *p, int64_t i0, int64_t i1) {
    const rms_ctx *c = p;
    int64_t d = c->d;
    for (int64_t i = i0; i < i1; i++) {
        const float *g = c->g + i * d, *xh = c->xhat + i * d;
        float *o = c->out + i * d, r = c->r[i], xs = c->scaled ? r : 1.0f;
        float m = (float)dot_wide(g, c->gam, xh, xs, d) * (1.0f / (float)d); /* mean(dxhat * xhat), as reduce_mean */
        if (c->resid) {
            const float *res = c->resid + i * d;
            for (int64_t j = 0; j < d; j++) {
                float dxh = g[j] * c->gam[j], proj = (xh[j] * xs) * m, dx = (dxh - proj) * r;
                o[j] = dx + res[j];
            }
        } else {
            for (int64_t j = 0; j < d; j++) {
                float dxh = g[j] * c->gam[j], proj = (xh[j] * xs) * m;
                o[j] = (dxh - proj) * r;
            }
        }
    }
}

void cpu_rms_dx(cpu_pool *pool, const float *g, const float *gam, const float *xhat, const float *r, bool scaled,
                const float *resid, float *dx, int64_t rows, int64_t d) {
    rms_ctx c = { g, gam, xhat, r, resid, dx, d, scaled };
    cpu_pool_for(pool, rows, ROWS_MIN(d), rms_dx_rows, &c);
}

static void sq_mean_rows(void *p, int64_t i0, int64_t i1) {
    const rms_ctx *c = p;
    for (int64_t i = i0; i < i1; i++) {
        const float *x = c->g + i * c->d;
        c->out[i] = (float)dot_wide(x, x, NULL, 1.0f, c->d) * (1.0f / (float)c->d);
    }
}

void cpu_sq_mean(cpu_pool *pool, const float *x, float *out, int64_t rows, int64_t d) {
    rms_ctx c = { .g = x, .out = out, .d = d };
    cpu_pool_for(pool, rows, ROWS_MIN(d), sq_mean_rows, &c);
}

/* Columns [j0, j1) summed down the rows in fp32, as reduce_sum sums over rows; b times
 * its row's r when r is given (b is x, xhat = x r recomputed), else times 1 (exact). */
static CPU_VECTOR_CLONES void colsum_cols(void *p, int64_t j0, int64_t j1) {
    const rms_ctx *c = p;
    const float *a = c->g, *b = c->gam;
    int64_t d = c->d, rows = (int64_t)(intptr_t)c->resid;
    float *o = c->out;
    for (int64_t j = j0; j < j1; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < rows; i++) {
        float bs = c->r ? c->r[i] : 1.0f;
        for (int64_t j = j0; j < j1; j++) o[j] += a[i * d + j] * (b[i * d + j] * bs);
    }
}

void cpu_mul_colsum(cpu_pool *pool, const float *a, const float *b, const float *r, float *out, int64_t rows,
                    int64_t d) {
    rms_ctx c = { .g = a, .gam = b, .r = r, .resid = (const float *)(intptr_t)rows, .out = out, .d = d };
    cpu_pool_for(pool, d, d * rows >= 16384 ? 16 : d, colsum_cols, &c);
}
