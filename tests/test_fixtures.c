/* Forward outputs and gradients checked against PyTorch reference fixtures.
 *
 * tests/fixtures/make_fixtures.py computed every case in float64 with torch.autograd
 * and stored inputs, parameters, outputs and gradients as float32 .npy files in
 * tests/fixtures/data/ (committed, so this test needs no torch). Each case here builds
 * the same computation with the public API, differentiates it with af_backward,
 * compiles it for the CPU target in fp32, runs it and compares every output and
 * gradient: cosine similarity >= 0.99999 and max |got - ref| <= 1e-4 * max |ref|.
 *
 * Cases: conv2d (pad 1, 3x3, bias-free), multi-head attention (full and causal),
 * layer_norm, group_norm, softmax cross-entropy, and a linear-relu-linear MLP with
 * cross-entropy. The R-weighted losses are sum(y * R) for a fixed random R.
 * AF_FIXTURES_VERBOSE=1 prints the agreement of every tensor. */
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/data"
#define COS_MIN 0.99999
#define REL_MAX 1e-4

/* ---------------------------------------------------------------- fixtures */

typedef struct {
    float *d;
    int rank;
    int64_t dims[AF_MAX_RANK];
    int64_t n;
} arr;

static arr load(const char *cs, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%s.npy", FIXDIR, cs, name);
    arr a = { 0 };
    af_status st = af_npy_read(path, &a.d, &a.rank, a.dims);
    CHECK(st == AF_OK, "read %s: %s (regenerate with python3 tests/fixtures/make_fixtures.py)", path, af_error_message());
    if (st != AF_OK) { a.d = NULL; a.rank = 0; return a; }
    a.n = 1;
    for (int i = 0; i < a.rank; i++) a.n *= a.dims[i];
    return a;
}

static af_shape arr_shape(const arr *a) { return af_shape_make(a->rank, a->dims); }

/* The worst agreement seen in one case, for the summary line. */
typedef struct {
    const char *name;
    double cos_min, rel_max;
    int compared;
} stats;

static stats stats_new(const char *name) { return (stats){ name, 1.0, 0.0, 0 }; }

static void stats_print(const stats *s) {
    printf("  %-11s %2d tensors  min cosine %.12f (1 - cos %.1e)  max rel err %.3e\n", s->name, s->compared, s->cos_min,
           1.0 - s->cos_min, s->rel_max);
}

/* Compares got (n floats) with the fixture ref; n must equal the fixture's count. */
static void compare(stats *s, const char *what, const float *got, int64_t n, const arr *ref) {
    CHECK(got != NULL && ref->d != NULL, "%s/%s: missing data", s->name, what);
    if (!got || !ref->d) return;
    CHECK(n == ref->n, "%s/%s: %lld elements, fixture has %lld", s->name, what, (long long)n, (long long)ref->n);
    if (n != ref->n) return;
    double dot = 0, ng = 0, nr = 0, maxref = 0, maxerr = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], b = ref->d[i];
        dot += a * b, ng += a * a, nr += b * b;
        if (fabs(b) > maxref) maxref = fabs(b);
        if (!(fabs(a - b) <= maxerr)) maxerr = fabs(a - b); /* NaN wins */
    }
    double cosv = (ng == 0 && nr == 0) ? 1.0 : dot / (sqrt(ng) * sqrt(nr));
    double rel = maxref > 0 ? maxerr / maxref : maxerr;
    if (isnan(cosv)) cosv = -2;
    if (isnan(rel)) rel = INFINITY;
    CHECK(cosv >= COS_MIN, "%s/%s: cosine %.9f < %g", s->name, what, cosv, COS_MIN);
    CHECK(rel <= REL_MAX, "%s/%s: max rel err %.3e > %g (max |ref| %.4g)", s->name, what, rel, REL_MAX, maxref);
    if (getenv("AF_FIXTURES_VERBOSE"))
        printf("    %-18s cosine %.12f (1 - cos %.1e)  max rel err %.3e\n", what, cosv, 1.0 - cosv, rel);
    if (cosv < s->cos_min) s->cos_min = cosv;
    if (rel > s->rel_max) s->rel_max = rel;
    s->compared++;
}

static double max_abs(const float *x, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(x[i]) <= m)) m = fabs(x[i]); /* NaN wins */
    return m;
}

/* A gradient that is zero analytically (the fixture holds float64 round-off): cosine
 * means nothing there, so the error is measured against `scale`, the size of the
 * case's other gradients. */
static void compare_zero(stats *s, const char *what, const float *got, int64_t n, const arr *ref, double scale) {
    CHECK(got != NULL && ref->d != NULL, "%s/%s: missing data", s->name, what);
    if (!got || !ref->d) return;
    CHECK(n == ref->n, "%s/%s: %lld elements, fixture has %lld", s->name, what, (long long)n, (long long)ref->n);
    if (n != ref->n) return;
    CHECK(max_abs(ref->d, n) <= 1e-12 * scale, "%s/%s: the fixture should be zero up to round-off", s->name, what);
    double rel = max_abs(got, n) / scale;
    if (getenv("AF_FIXTURES_VERBOSE"))
        printf("    %-18s zero analytically; max |got| / scale %.3e\n", what, rel);
    if (isnan(rel)) rel = INFINITY;
    CHECK(rel <= REL_MAX, "%s/%s: max |got| %.3e > %g * %.4g (should be zero)", s->name, what, rel * scale, REL_MAX, scale);
    if (rel > s->rel_max) s->rel_max = rel;
    s->compared++;
}

/* ---------------------------------------------------------------- compile and run */

enum { MAXIO = 16 };

/* Compiles out[] from in[] (fp32, CPU), feeds in_data[] and returns malloc'd outputs
 * in res[] (the caller frees them). Returns 0 on failure (already CHECKed). */
static int run_graph(const char *what, af_graph *g, int nin, af_tensor *const *in, const float *const *in_data,
                     int nout, af_tensor *const *out, float **res) {
    for (int i = 0; i < nout; i++) res[i] = NULL;
    CHECK(af_graph_error(g) == NULL, "%s: graph error: %s", what, af_graph_error(g));
    for (int i = 0; i < nout; i++) CHECK(out[i] != NULL, "%s: output %d is NULL", what, i);
    if (af_graph_error(g)) return 0;
    for (int i = 0; i < nout; i++) if (!out[i]) return 0;
    af_compile_opts opts = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32 };
    af_model *m = af_compile(g, nin, in, nout, out, &opts);
    CHECK(m != NULL, "%s: compile: %s", what, af_error_message());
    if (!m) return 0;
    af_buffer ib[MAXIO], ob[MAXIO];
    for (int i = 0; i < nin; i++) ib[i] = AF_BUF_F32(in_data[i], af_shape_count(af_tensor_shape(in[i])));
    int ok = 1;
    for (int i = 0; i < nout; i++) {
        int64_t n = af_shape_count(af_tensor_shape(out[i]));
        res[i] = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
        ok &= res[i] != NULL;
        ob[i] = AF_BUF_F32(res[i], n);
    }
    CHECK(ok, "%s: out of memory", what);
    if (ok) {
        af_status st = af_run(m, ib, ob);
        CHECK(st == AF_OK, "%s: run: %s", what, af_error_message());
        ok = st == AF_OK;
    }
    af_model_free(m);
    if (!ok)
        for (int i = 0; i < nout; i++) { free(res[i]); res[i] = NULL; }
    return ok;
}

static void free_all(float **p, int n) {
    for (int i = 0; i < n; i++) free(p[i]);
}

static void free_arrs(arr *a, int n) {
    for (int i = 0; i < n; i++) free(a[i].d);
}

/* sum(y * R) as a scalar loss, R a baked constant. */
static af_loss *weighted_sum_loss(af_graph *g, af_tensor *y, const arr *r) {
    if (!y || !r->d) return NULL;
    int axes[AF_MAX_RANK];
    int rank = af_tensor_shape(y).rank;
    for (int i = 0; i < rank; i++) axes[i] = i;
    af_tensor *rc = af_const(g, "R", arr_shape(r), r->d);
    return af_loss_scalar(af_reduce_sum(af_mul(y, rc), rank, axes, 0));
}

/* ---------------------------------------------------------------- (a) conv2d */

static void test_conv(void) {
    stats s = stats_new("conv2d");
    enum { X, W, R, Y, LOSS, DX, DW, NA };
    static const char *nm[NA] = { "x", "w", "R", "y", "loss", "dx", "dw" };
    arr a[NA];
    for (int i = 0; i < NA; i++) a[i] = load("conv", nm[i]);
    for (int i = 0; i < NA; i++) if (!a[i].d) { free_arrs(a, NA); return; }
    int cout = (int)a[W].dims[0], cin = (int)a[W].dims[1], kh = (int)a[W].dims[2], kw = (int)a[W].dims[3];

    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, arr_shape(&a[X]));
    af_tensor *w = af_conv_param(g, "w", cout, cin, kh, kw, a[W].d);
    af_tensor *y = af_conv2d(x, w, 1, 1);
    af_loss *loss = weighted_sum_loss(g, y, &a[R]);
    af_tensor *wrt[2] = { x, w }, *grads[2] = { 0 };
    af_status st = af_backward(loss, 2, wrt, grads, NULL);
    CHECK(st == AF_OK, "conv backward: %s", af_error_message());

    af_tensor *in[2] = { x, w };
    const float *feed[2] = { a[X].d, af_tensor_value(w) };
    af_tensor *out[4] = { y, af_loss_value(loss), grads[0], grads[1] };
    float *res[4];
    if (st == AF_OK && run_graph("conv", g, 2, in, feed, 4, out, res)) {
        compare(&s, "y", res[0], af_shape_count(af_tensor_shape(y)), &a[Y]);
        compare(&s, "loss", res[1], 1, &a[LOSS]);
        compare(&s, "dx", res[2], af_shape_count(af_tensor_shape(x)), &a[DX]);
        /* the weight gradient comes back as the patch matrix [Cin*kH*kW, Cout] */
        af_shape ws = af_tensor_shape(grads[1]);
        int64_t k = (int64_t)cin * kh * kw;
        CHECK(ws.rank == 2 && ws.dim[0] == k && ws.dim[1] == cout, "conv dw has the patch-matrix shape [%lld, %d]",
              (long long)k, cout);
        float *dw = malloc(sizeof *dw * (size_t)(k * cout));
        if (dw) {
            for (int co = 0; co < cout; co++)
                for (int64_t r = 0; r < k; r++) dw[co * k + r] = res[3][r * cout + co];
            compare(&s, "dw", dw, k * cout, &a[DW]);
        }
        free(dw);
        free_all(res, 4);
    }
    af_graph_free(g);
    free_arrs(a, NA);
    stats_print(&s);
}

/* ---------------------------------------------------------------- (b) attention */

static void test_mha(int causal) {
    const char *cs = causal ? "mha_causal" : "mha_full";
    stats s = stats_new(cs);
    static const char *pn[8] = { "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo" };
    arr x0 = load("mha", "x"), r = load("mha", "R"), p0[8], y0 = load(cs, "y"), l0 = load(cs, "loss"), dx0 = load(cs, "dx"), dp0[8];
    int ok = x0.d && r.d && y0.d && l0.d && dx0.d;
    for (int i = 0; i < 8; i++) {
        char dn[8];
        snprintf(dn, sizeof dn, "d%s", pn[i]);
        p0[i] = load("mha", pn[i]);
        dp0[i] = load(cs, dn);
        ok &= p0[i].d && dp0[i].d;
    }
    if (ok) {
        af_graph *g = af_graph_new();
        af_tensor *x = af_input(g, "x", AF_F32, arr_shape(&x0)), *p[8];
        for (int i = 0; i < 8; i++) p[i] = af_parameter(g, pn[i], arr_shape(&p0[i]), p0[i].d);
        af_tensor *y = af_mha(x, 2, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], causal);
        af_loss *loss = weighted_sum_loss(g, y, &r);
        af_tensor *wrt[9] = { x }, *grads[9] = { 0 };
        for (int i = 0; i < 8; i++) wrt[1 + i] = p[i];
        af_status st = af_backward(loss, 9, wrt, grads, NULL);
        CHECK(st == AF_OK, "%s backward: %s", cs, af_error_message());

        const float *feed[9] = { x0.d };
        for (int i = 0; i < 8; i++) feed[1 + i] = af_tensor_value(p[i]);
        af_tensor *out[11] = { y, af_loss_value(loss) };
        for (int i = 0; i < 9; i++) out[2 + i] = grads[i];
        float *res[11];
        if (st == AF_OK && run_graph(cs, g, 9, wrt, feed, 11, out, res)) {
            compare(&s, "y", res[0], af_shape_count(af_tensor_shape(y)), &y0);
            compare(&s, "loss", res[1], 1, &l0);
            compare(&s, "dx", res[2], x0.n, &dx0);
            /* The key bias adds q_i . bk to every score of row i, which softmax cancels:
             * its gradient is exactly zero. Measure it against the other gradients. */
            double scale = 0;
            for (int i = 0; i < 8; i++)
                if (i != 5 && max_abs(dp0[i].d, dp0[i].n) > scale) scale = max_abs(dp0[i].d, dp0[i].n);
            for (int i = 0; i < 8; i++) {
                char dn[8];
                snprintf(dn, sizeof dn, "d%s", pn[i]);
                int64_t n = af_shape_count(af_tensor_shape(grads[1 + i]));
                if (i == 5) compare_zero(&s, dn, res[3 + i], n, &dp0[i], scale);
                else compare(&s, dn, res[3 + i], n, &dp0[i]);
            }
            free_all(res, 11);
        }
        af_graph_free(g);
    }
    free(x0.d), free(r.d), free(y0.d), free(l0.d), free(dx0.d);
    free_arrs(p0, 8);
    free_arrs(dp0, 8);
    stats_print(&s);
}

/* ---------------------------------------------------------------- (c, d) norms */

static void test_norm(int group) {
    const char *cs = group ? "gn" : "ln";
    stats s = stats_new(group ? "group_norm" : "layer_norm");
    enum { X, GAMMA, BETA, R, Y, LOSS, DX, DGAMMA, DBETA, NA };
    static const char *nm[NA] = { "x", "gamma", "beta", "R", "y", "loss", "dx", "dgamma", "dbeta" };
    arr a[NA];
    for (int i = 0; i < NA; i++) a[i] = load(cs, nm[i]);
    for (int i = 0; i < NA; i++) if (!a[i].d) { free_arrs(a, NA); return; }

    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, arr_shape(&a[X]));
    af_tensor *gamma = af_parameter(g, "gamma", arr_shape(&a[GAMMA]), a[GAMMA].d);
    af_tensor *beta = af_parameter(g, "beta", arr_shape(&a[BETA]), a[BETA].d);
    af_tensor *y = group ? af_group_norm(x, 3, gamma, beta, 1e-5f) : af_layer_norm(x, gamma, beta, 1e-5f);
    af_loss *loss = weighted_sum_loss(g, y, &a[R]);
    af_tensor *wrt[3] = { x, gamma, beta }, *grads[3] = { 0 };
    af_status st = af_backward(loss, 3, wrt, grads, NULL);
    CHECK(st == AF_OK, "%s backward: %s", cs, af_error_message());

    const float *feed[3] = { a[X].d, af_tensor_value(gamma), af_tensor_value(beta) };
    af_tensor *out[5] = { y, af_loss_value(loss), grads[0], grads[1], grads[2] };
    float *res[5];
    if (st == AF_OK && run_graph(cs, g, 3, wrt, feed, 5, out, res)) {
        compare(&s, "y", res[0], a[X].n, &a[Y]);
        compare(&s, "loss", res[1], 1, &a[LOSS]);
        compare(&s, "dx", res[2], a[X].n, &a[DX]);
        compare(&s, "dgamma", res[3], af_shape_count(af_tensor_shape(grads[1])), &a[DGAMMA]);
        compare(&s, "dbeta", res[4], af_shape_count(af_tensor_shape(grads[2])), &a[DBETA]);
        free_all(res, 5);
    }
    af_graph_free(g);
    free_arrs(a, NA);
    stats_print(&s);
}

/* ---------------------------------------------------------------- (e) cross-entropy */

static void test_ce(void) {
    stats s = stats_new("softmax_ce");
    enum { Z, OH, LOSS, DZ, NA };
    static const char *nm[NA] = { "logits", "onehot", "loss", "dlogits" };
    arr a[NA];
    for (int i = 0; i < NA; i++) a[i] = load("ce", nm[i]);
    for (int i = 0; i < NA; i++) if (!a[i].d) { free_arrs(a, NA); return; }

    af_graph *g = af_graph_new();
    af_tensor *z = af_input(g, "logits", AF_F32, arr_shape(&a[Z]));
    af_tensor *oh = af_input(g, "onehot", AF_F32, arr_shape(&a[OH]));
    af_loss *loss = af_softmax_cross_entropy(z, oh);
    af_tensor *dz = NULL;
    af_status st = af_backward(loss, 1, &z, &dz, NULL);
    CHECK(st == AF_OK, "ce backward: %s", af_error_message());

    af_tensor *in[2] = { z, oh };
    const float *feed[2] = { a[Z].d, a[OH].d };
    af_tensor *out[2] = { af_loss_value(loss), dz };
    float *res[2];
    if (st == AF_OK && run_graph("ce", g, 2, in, feed, 2, out, res)) {
        compare(&s, "loss", res[0], af_shape_count(af_tensor_shape(out[0])), &a[LOSS]);
        compare(&s, "dlogits", res[1], a[Z].n, &a[DZ]);
        free_all(res, 2);
    }
    af_graph_free(g);
    free_arrs(a, NA);
    stats_print(&s);
}

/* ---------------------------------------------------------------- (f) MLP + cross-entropy */

static void test_mlp(void) {
    stats s = stats_new("mlp_ce");
    enum { X, W1, B1, W2, B2, OH, Z, LOSS, DX, DW1, DB1, DW2, DB2, NA };
    static const char *nm[NA] = { "x", "w1", "b1", "w2", "b2", "onehot", "logits", "loss", "dx", "dw1", "db1", "dw2", "db2" };
    arr a[NA];
    for (int i = 0; i < NA; i++) a[i] = load("mlp", nm[i]);
    for (int i = 0; i < NA; i++) if (!a[i].d) { free_arrs(a, NA); return; }

    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, arr_shape(&a[X]));
    af_tensor *oh = af_input(g, "onehot", AF_F32, arr_shape(&a[OH]));
    af_tensor *w1 = af_parameter(g, "w1", arr_shape(&a[W1]), a[W1].d);
    af_tensor *b1 = af_parameter(g, "b1", arr_shape(&a[B1]), a[B1].d);
    af_tensor *w2 = af_parameter(g, "w2", arr_shape(&a[W2]), a[W2].d);
    af_tensor *b2 = af_parameter(g, "b2", arr_shape(&a[B2]), a[B2].d);
    af_tensor *z = af_linear(af_relu(af_linear(x, w1, b1)), w2, b2);
    af_loss *loss = af_softmax_cross_entropy(z, oh);
    af_tensor *wrt[5] = { x, w1, b1, w2, b2 }, *grads[5] = { 0 };
    af_status st = af_backward(loss, 5, wrt, grads, NULL);
    CHECK(st == AF_OK, "mlp backward: %s", af_error_message());

    af_tensor *in[6] = { x, oh, w1, b1, w2, b2 };
    const float *feed[6] = { a[X].d, a[OH].d, af_tensor_value(w1), af_tensor_value(b1), af_tensor_value(w2),
                             af_tensor_value(b2) };
    af_tensor *out[7] = { z, af_loss_value(loss), grads[0], grads[1], grads[2], grads[3], grads[4] };
    float *res[7];
    if (st == AF_OK && run_graph("mlp", g, 6, in, feed, 7, out, res)) {
        compare(&s, "logits", res[0], af_shape_count(af_tensor_shape(z)), &a[Z]);
        compare(&s, "loss", res[1], af_shape_count(af_tensor_shape(out[1])), &a[LOSS]);
        for (int i = 0; i < 5; i++)
            compare(&s, nm[DX + i], res[2 + i], af_shape_count(af_tensor_shape(grads[i])), &a[DX + i]);
        free_all(res, 7);
    }
    af_graph_free(g);
    free_arrs(a, NA);
    stats_print(&s);
}

int main(void) {
    printf("fixtures from %s (cosine >= %g, max rel err <= %g):\n", FIXDIR, COS_MIN, REL_MAX);
    test_conv();
    test_mha(0);
    test_mha(1);
    test_norm(0);
    test_norm(1);
    test_ce();
    test_mlp();
    return check_finish("fixtures");
}
