/* The CPU executor's arena (src/cpu/mem_plan.c, src/cpu/sched.c) on a graph whose best
 * plan is derived by hand: inputs u, v [1, n] and w [n, n]; out = u^T v + exp(exp(exp(w))).
 * The outer product u^T v [n, n] is made from two small vectors but read only by the
 * final sum. In the graph's order it would be held while the three exps run (3 n^2
 * intermediates live at once); the executor runs it just before the sum, so at most two
 * [n, n] intermediates are live at any time. The arena is then exactly the inputs (u, v,
 * w), the output and 2 n^2 floats (every buffer a multiple of 16 floats; no scratch for
 * these ops, 1 thread), and the values are a double loop's. The same graph with the
 * outer product requested as a second output keeps it where the graph made it (an
 * output is never moved) in the outputs' region, and still 2 n^2 intermediates. */
#include "aneforge.h"
#include "support/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

enum { N = 64 };

static void check_arena(bool outer_too) {
    af_graph *g = af_graph_new();
    af_set_log(NULL, NULL);
    af_tensor *u = af_input(g, "u", AF_F32, AF_SHAPE(1, N)), *v = af_input(g, "v", AF_F32, AF_SHAPE(1, N));
    af_tensor *w = af_input(g, "w", AF_F32, AF_SHAPE(N, N));
    af_tensor *outer = af_matmul(u, v, 1, 0);
    af_tensor *c = af_exp(af_exp(af_exp(w)));
    af_tensor *out = af_add(outer, c);
    af_tensor *in[3] = { u, v, w }, *outs[2] = { out, outer };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, 3, in, outer_too ? 2 : 1, outs, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    size_t n2 = (size_t)N * N, io = 2 * N + n2 + n2 * (outer_too ? 2 : 1);
    size_t want = 4 * (io + 2 * n2);
    CHECK(af_model_arena_bytes(m) == want, "%s: arena %zu bytes, want %zu (inputs and outputs %zu floats, 2 x %zu intermediates)",
          outer_too ? "outer requested" : "one output", af_model_arena_bytes(m), want, io, n2);
    float *ub = malloc(sizeof(float) * N), *vb = malloc(sizeof(float) * N), *wb = malloc(sizeof(float) * n2);
    float *ob = malloc(sizeof(float) * n2), *pb = malloc(sizeof(float) * n2);
    test_rng r = { 3 };
    test_fill_uniform(&r, ub, N, -1, 1);
    test_fill_uniform(&r, vb, N, -1, 1);
    test_fill_uniform(&r, wb, (long)n2, -1, 0);
    af_buffer ib[3] = { AF_BUF_F32(ub, N), AF_BUF_F32(vb, N), AF_BUF_F32(wb, n2) };
    af_buffer obuf[2] = { AF_BUF_F32(ob, n2), AF_BUF_F32(pb, n2) };
    CHECK(af_run(m, ib, obuf) == AF_OK, "run: %s", af_error_message());
    double err = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double want_ij = (double)ub[i] * vb[j] + exp(exp(exp((double)wb[i * N + j])));
            err = fmax(err, fabs(ob[i * N + j] - want_ij) / fabs(want_ij));
        }
    CHECK(err < 1e-5, "values: relative error %g", err);
    free(ub); free(vb); free(wb); free(ob); free(pb);
    af_model_free(m);
    af_graph_free(g);
}

/* Slices of whole trailing axes (the attention gradient's dq, dk, dv out of their
 * stack) read their source's buffer in place: s = exp(x) [3, N]; out = s[1] + s[2] and
 * out2 = 2 s[:, 8:24] (not contiguous: a copy). The arena holds the inputs, the outputs,
 * s and the copy, nothing for s[1] and s[2]; the values are a double loop's. */
static void check_slice_alias(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(3, N));
    af_tensor *st = af_exp(x);
    const int64_t b1[2] = { 1, 0 }, b2[2] = { 2, 0 }, row[2] = { 1, N }, bc[2] = { 0, 8 }, sc[2] = { 3, 16 };
    af_tensor *out = af_add(af_slice(st, b1, row), af_slice(st, b2, row));
    af_tensor *out2 = af_muls(af_slice(st, bc, sc), 2.0f);
    af_tensor *outs[2] = { out, out2 };
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, 1, &x, 2, outs, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    size_t want = 4 * (size_t)(3 * N + N + 48 + 3 * N + 48);
    CHECK(af_model_arena_bytes(m) == want, "slices: arena %zu bytes, want %zu (the contiguous slices need no buffer)",
          af_model_arena_bytes(m), want);
    float xb[3 * N], ob[N], o2[48];
    test_rng r = { 5 };
    test_fill_uniform(&r, xb, 3 * N, -2, 2);
    af_buffer ib[1] = { AF_BUF_F32(xb, 3 * N) }, obuf[2] = { AF_BUF_F32(ob, N), AF_BUF_F32(o2, 48) };
    for (int run = 0; run < 2; run++) { /* a second run: the aliases point at this run's values */
        if (run) for (int i = 0; i < 3 * N; i++) xb[i] = -xb[i];
        CHECK(af_run(m, ib, obuf) == AF_OK, "run: %s", af_error_message());
        double err = 0;
        for (int j = 0; j < N; j++) err = fmax(err, fabs(ob[j] - (exp((double)xb[N + j]) + exp((double)xb[2 * N + j]))));
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 16; j++) err = fmax(err, fabs(o2[i * 16 + j] - 2 * exp((double)xb[i * N + 8 + j])));
        CHECK(err < 1e-5, "slices (run %d): off the double loop by %g", run, err);
    }
    af_model_free(m);
    af_graph_free(g);
}

int main(void) {
    check_arena(false);
    check_arena(true);
    check_slice_alias();
    return check_finish("cpu_arena");
}
