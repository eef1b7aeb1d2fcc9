/* The llama pipeline's RMSNorm backward (cpu_rms_norm_bwd_cf, channel-first [B, C, S],
 * vectorised along S) against independent references:
 *  - a double-precision loop of the closed form per (b, s), for dx (with and without
 *    the residual, and with the residual being the output itself) and dw;
 *  - central finite differences of L = sum dy * rmsnorm(x) * w in double, for dx and dw
 *    (the closed form itself is checked, not only transcribed);
 *  - on a pool of 2 threads it gives the inline result bit for bit.
 * Sizes cover positions that are not a multiple of the kernel's chunk, more than one
 * chunk per image, and a single position. */
#include "support/check.h"
#include "cpu/norm_bwd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double EPS = 1e-5;

/* y[b, c, s] = x * r(b, s) * w[c] in double. */
static double loss_of(int64_t B, int64_t C, int64_t S, const double *x, const double *w, const double *dy) {
    double L = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            double ss = 0;
            for (int64_t c = 0; c < C; c++) ss += x[(b * C + c) * S + s] * x[(b * C + c) * S + s];
            double r = 1.0 / sqrt(ss / (double)C + EPS);
            for (int64_t c = 0; c < C; c++) L += dy[(b * C + c) * S + s] * x[(b * C + c) * S + s] * r * w[c];
        }
    return L;
}

static void check_size(int64_t B, int64_t C, int64_t S, cpu_pool *pool) {
    int64_t n = B * C * S;
    float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)n), *out2 = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)C);
    float *dw = calloc((size_t)C, sizeof(float)), *dw2 = calloc((size_t)C, sizeof(float)), *scratch = malloc(sizeof(float) * 2 * (size_t)(B * S));
    double *xd = malloc(sizeof(double) * (size_t)n), *dyd = malloc(sizeof(double) * (size_t)n), *wd = malloc(sizeof(double) * (size_t)C);
    double *ref = malloc(sizeof(double) * (size_t)n), *dwref = calloc((size_t)C, sizeof(double));
    test_rng r = { (unsigned long long)(B * 1000 + C * 10 + S) };
    test_fill_uniform(&r, x, (long)n, -2.0, 2.0);
    test_fill_uniform(&r, dy, (long)n, -1.0, 1.0);
    test_fill_uniform(&r, res, (long)n, -1.0, 1.0);
    test_fill_uniform(&r, w, (long)C, 0.5, 1.5);
    for (int64_t i = 0; i < n; i++) xd[i] = x[i], dyd[i] = dy[i];
    for (int64_t c = 0; c < C; c++) wd[c] = w[c];

    /* the closed form in double */
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            double ss = 0, dot = 0;
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (b * C + c) * S + s;
                ss += xd[i] * xd[i];
                dot += dyd[i] * wd[c] * xd[i];
            }
            double rr = 1.0 / sqrt(ss / (double)C + EPS), k = rr * rr * rr * dot / (double)C;
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (b * C + c) * S + s;
                ref[i] = rr * dyd[i] * wd[c] - k * xd[i];
                dwref[c] += dyd[i] * xd[i] * rr;
            }
        }

    /* without the residual */
    cpu_rms_norm_bwd_cf(pool, B, C, S, (float)EPS, x, dy, w, NULL, out, dw, scratch);
    double worst = 0, scale = 1e-30, wworst = 0, wscale = 1e-30;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(out[i] - ref[i])), scale = fmax(scale, fabs(ref[i]));
    for (int64_t c = 0; c < C; c++) wworst = fmax(wworst, fabs(dw[c] - dwref[c])), wscale = fmax(wscale, fabs(dwref[c]));
    CHECK(worst / scale < 2e-6, "[%lld,%lld,%lld] dx vs double: relative %g", (long long)B, (long long)C, (long long)S, worst / scale);
    CHECK(wworst / wscale < 2e-6, "[%lld,%lld,%lld] dw vs double: relative %g", (long long)B, (long long)C, (long long)S, wworst / wscale);

    /* with the residual, written over the residual itself; dw accumulates */
    memcpy(out2, res, sizeof(float) * (size_t)n);
    memcpy(dw2, dw, sizeof(float) * (size_t)C);
    cpu_rms_norm_bwd_cf(pool, B, C, S, (float)EPS, x, dy, w, out2, out2, dw2, scratch);
    worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(out2[i] - (res[i] + ref[i])));
    CHECK(worst < 4e-6 * (scale + 1), "[%lld,%lld,%lld] resid + dx in place: max error %g", (long long)B, (long long)C, (long long)S, worst);
    wworst = 0;
    for (int64_t c = 0; c < C; c++) wworst = fmax(wworst, fabs(dw2[c] - 2 * dwref[c]));
    CHECK(wworst / wscale < 4e-6, "dw accumulates: relative %g", wworst / wscale);

    /* finite differences of the loss at a few entries */
    double h = 1e-5;
    for (int q = 0; q < 6; q++) {
        int64_t i = (int64_t)(test_uniform(&r) * (double)n), c = (int64_t)(test_uniform(&r) * (double)C);
        double keep = xd[i];
        xd[i] = keep + h;
        double lp = loss_of(B, C, S, xd, wd, dyd);
        xd[i] = keep - h;
        double lm = loss_of(B, C, S, xd, wd, dyd);
        xd[i] = keep;
        double fd = (lp - lm) / (2 * h);
        CHECK(fabs(fd - out[i]) < 1e-4 * (1 + fabs(fd)), "dL/dx[%lld]: kernel %.8g, finite difference %.8g", (long long)i, out[i], fd);
        keep = wd[c];
        wd[c] = keep + h;
        lp = loss_of(B, C, S, xd, wd, dyd);
        wd[c] = keep - h;
        lm = loss_of(B, C, S, xd, wd, dyd);
        wd[c] = keep;
        fd = (lp - lm) / (2 * h);
        CHECK(fabs(fd - dw[c]) < 1e-4 * (1 + fabs(fd)), "dL/dw[%lld]: kernel %.8g, finite difference %.8g", (long long)c, dw[c], fd);
    }

    /* threads change nothing */
    if (pool) {
        memset(dw2, 0, sizeof(float) * (size_t)C);
        cpu_rms_norm_bwd_cf(NULL, B, C, S, (float)EPS, x, dy, w, NULL, out2, dw2, scratch);
        CHECK(!memcmp(out, out2, sizeof(float) * (size_t)n) && !memcmp(dw, dw2, sizeof(float) * (size_t)C),
              "[%lld,%lld,%lld] 2 threads vs inline differ", (long long)B, (long long)C, (long long)S);
    }
    free(x), free(dy), free(res), free(out), free(out2), free(w), free(dw), free(dw2), free(scratch);
    free(xd), free(dyd), free(wd), free(ref), free(dwref);
}

int main(void) {
    cpu_pool *pool = cpu_pool_new(2);
    CHECK(pool != NULL, "a pool of 2 threads");
    check_size(1, 8, 1, NULL);
    check_size(2, 48, 37, NULL);
    check_size(2, 64, 300, pool); /* two chunks per image, the second partial */
    check_size(3, 96, 256, pool); /* large enough to split over the pool */
    cpu_pool_free(pool);
    return check_finish("rms_norm_bwd");
}
