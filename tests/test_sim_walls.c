/* ane-sim compile-time walls: each fires on its naive form with a message naming the wall
 * and its remedy, while the library's own constructions (const_like = (t - t) + c, the
 * stacked Adam update, per-param backward programs, af_conv2d's im2col) compile on every
 * family. Also the per-family limits (extents, kernel width, rank), the fp16-only I/O
 * rule, target parsing and ANEFORGE_TARGET. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "aneforge.h"
#include "mil/opinfo.h"
#include "engine/walls.h"
#include "grad/grad.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static const af_family_id families[4] = { AF_FAMILY_A13, AF_FAMILY_A14, AF_FAMILY_A15, AF_FAMILY_A16 };

static af_model *sim(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out, af_family_id fam) {
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    return af_compile(g, nin, in, nout, out, &o);
}

/* Compiles on fam and expects success. */
static void expect_ok(int line, af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                      af_family_id fam, const char *what) {
    af_model *m = sim(g, nin, in, nout, out, fam);
    CHECK(m != NULL, "line %d: %s should compile on %s: %s", line, what, af_family_name_of(fam), af_error_message());
    af_model_free(m);
}

/* Compiles on fam and expects the wall: NULL, a message naming it and a remedy. */
static void expect_wall(int line, af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                        af_family_id fam, const char *wall, const char *also) {
    af_model *m = sim(g, nin, in, nout, out, fam);
    const char *msg = af_error_message();
    CHECK(m == NULL, "line %d: %s should fire on %s", line, wall, af_family_name_of(fam));
    CHECK(m || (strstr(msg, wall) && strstr(msg, "Remedy:") && (!also || strstr(msg, also))),
          "line %d: on %s the message should name the %s%s%s and a remedy: %s", line, af_family_name_of(fam), wall,
          also ? " and mention " : "", also ? also : "", msg);
    af_model_free(m);
}
#define OK_ALL(g, ni, in, no, out, what) \
    for (int f_ = 0; f_ < 4; f_++) expect_ok(__LINE__, g, ni, in, no, out, families[f_], what)
#define WALL_ALL(g, ni, in, no, out, wall, also) \
    for (int f_ = 0; f_ < 4; f_++) expect_wall(__LINE__, g, ni, in, no, out, families[f_], wall, also)

static float *filled(int64_t n, float v) {
    float *x = malloc((size_t)n * sizeof *x + sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = v;
    return x;
}

/* ------------------------------------------------------------------ the fusion wall */

static void test_fusion_wall(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 8));
    af_tensor *r = af_reduce_sum(x, 1, (int[]){ 1 }, 1);
    af_tensor *naive = af_adds(af_muls(r, 0.0f), 1.5f);                                  /* (t * 0) + c */
    af_tensor *naive_c = af_mul(af_reduce_mean(x, 1, (int[]){ 1 }, 1), af_const_fill(g, AF_SHAPE(4, 1), 0.0f));
    af_tensor *naive_r = af_muls(af_reshape(r, AF_SHAPE(4)), 0.0f);                    /* through a reshape */
    af_tensor *tiny = af_muls(r, 1e-9f);                                                  /* 0 once stored as fp16 */
    af_tensor *lib = grad_const_like(r, 1.5f);                                            /* (t - t) + c */
    af_tensor *nonzero = af_muls(r, 2.0f), *plain_zero = af_muls(x, 0.0f);
    WALL_ALL(g, 1, &x, 1, &naive, "reduce*0 fusion wall", "(t - t) + c");
    WALL_ALL(g, 1, &x, 1, &naive_c, "reduce*0 fusion wall", "reduce_mean");
    WALL_ALL(g, 1, &x, 1, &naive_r, "reduce*0 fusion wall", NULL);
    WALL_ALL(g, 1, &x, 1, &tiny, "reduce*0 fusion wall", NULL);
    OK_ALL(g, 1, &x, 1, &lib, "const_like (t - t) + c");
    OK_ALL(g, 1, &x, 1, &nonzero, "reduce * 2");
    OK_ALL(g, 1, &x, 1, &plain_zero, "x * 0 without a reduce");
    /* const_like gives the constant. */
    af_model *m = sim(g, 1, &x, 1, &lib, AF_FAMILY_A13);
    float *xv = filled(32, 3.0f), y[4] = { 0 };
    af_buffer ib = AF_BUF_F32(xv, 32), ob = AF_BUF_F32(y, 4);
    CHECK(m && af_run(m, &ib, &ob) == AF_OK && y[0] == 1.5f && y[3] == 1.5f, "const_like gave %g", y[0]);
    af_model_free(m);
    /* The CPU target has no such wall. */
    af_model *c = af_compile(g, 1, &x, 1, &naive, NULL);
    CHECK(c != NULL, "the cpu target must accept reduce * 0: %s", af_error_message());
    af_model_free(c);
    free(xv);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ the wide-row wall and Adam's stack */

static void test_wide_row_and_adam_stack(void) {
    enum { R = 784, C = 128 };
    af_graph *g = af_graph_new();
    af_tensor *w = af_parameter(g, "w", AF_SHAPE(R, C), NULL);
    af_tensor *m = af_input(g, "m", AF_F16, AF_SHAPE(R, C)), *v = af_input(g, "v", AF_F16, AF_SHAPE(R, C));
    af_tensor *gr = af_input(g, "g", AF_F16, AF_SHAPE(R, C)), *lr = af_input(g, "lr", AF_F16, AF_SHAPE(1, 1));
    /* Adam with bias correction folded into lr (seed 000): m' = b1 m + (1-b1) g,
     * v' = b2 v + (1-b2) g^2, w' = w - lr m' / (sqrt(v') + eps). */
    af_tensor *m2 = af_add(af_muls(m, 0.9f), af_muls(gr, 0.1f));
    af_tensor *v2 = af_add(af_muls(v, 0.999f), af_muls(af_square(gr), 0.001f));
    af_tensor *w2 = af_sub(w, af_mul(lr, af_div(m2, af_adds(af_sqrt(v2), 1e-3f))));
    af_tensor *in[5] = { w, m, v, gr, lr };
    af_tensor *stack = af_concat(3, (af_tensor *[]){ w2, m2, v2 }, 0); /* [3*R, C] */
    af_tensor *rows[3] = { af_reshape(w2, AF_SHAPE(1, R * C)), af_reshape(m2, AF_SHAPE(1, R * C)), af_reshape(v2, AF_SHAPE(1, R * C)) };
    af_tensor *wide = af_concat(3, rows, 0); /* [3, 100352]: the naive stack */
    OK_ALL(g, 5, in, 1, &stack, "the natural-width Adam stack concat([w,m,v], 0)");
    WALL_ALL(g, 5, in, 1, &wide, "wide-row wall", "100352");
    /* The stack computes Adam. */
    af_model *mod = sim(g, 5, in, 1, &stack, AF_FAMILY_A13);
    float *wv = filled(R * C, 0.5f), *mv = filled(R * C, 0.0f), *vv = filled(R * C, 0.0f), *gv = filled(R * C, 0.25f);
    float lrv = 0.01f, *out = filled(3 * R * C, 0.0f);
    af_tensor_value(w)[0] = 0.5f;
    af_buffer ib[5] = { AF_BUF_F32(wv, R * C), AF_BUF_F32(mv, R * C), AF_BUF_F32(vv, R * C), AF_BUF_F32(gv, R * C), AF_BUF_F32(&lrv, 1) };
    af_buffer ob = AF_BUF_F32(out, 3 * R * C);
    if (mod && af_run(mod, ib, &ob) == AF_OK) {
        double mw = 0.025, vw = 0.001 * 0.0625, ww = 0.5 - 0.01 * mw / (sqrt(vw) + 1e-3);
        CHECK_NEAR(out[0], ww, 2e-3, "stacked w'");
        CHECK_NEAR(out[R * C], mw, 1e-4, "stacked m'");
        CHECK_NEAR(out[2 * R * C], vw, 1e-6, "stacked v'");
    } else {
        CHECK(0, "the Adam stack did not run: %s", af_error_message());
    }
    af_model_free(mod);
    free(wv); free(mv); free(vv); free(gv); free(out);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ per-param backward programs */

static void test_per_param_backward(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(32, 784)), *t = af_input(g, "onehot", AF_F16, AF_SHAPE(32, 10));
    af_tensor *p[4] = { af_parameter(g, "w1", AF_SHAPE(128, 784), NULL), af_parameter(g, "b1", AF_SHAPE(128), NULL),
                        af_parameter(g, "w2", AF_SHAPE(10, 128), NULL), af_parameter(g, "b2", AF_SHAPE(10), NULL) };
    af_tensor *logits = af_linear(af_relu(af_linear(x, p[0], p[1])), p[2], p[3]);
    af_tensor *grads[4];
    af_backward_opts bo = { .loss_scale = 1024 };
    CHECK(af_backward(af_softmax_cross_entropy(logits, t), 4, p, grads, &bo) == AF_OK, "backward: %s", af_error_message());
    af_tensor *in[6] = { x, t, p[0], p[1], p[2], p[3] };
    for (int k = 0; k < 4; k++) OK_ALL(g, 6, in, 1, &grads[k], "a per-param backward program");
    OK_ALL(g, 6, in, 1, &logits, "the MLP forward");
    /* Concatenating every gradient as one wide row is the wall the per-param programs avoid. */
    af_tensor *flat[2] = { af_reshape(grads[0], AF_SHAPE(1, 128 * 784)), af_reshape(grads[2], AF_SHAPE(1, 1280)) };
    af_tensor *all = af_concat(2, flat, 1);
    WALL_ALL(g, 6, in, 1, &all, "wide-row wall", NULL);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ af_conv2d's im2col */

static void test_conv2d_im2col(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(8, 1, 28, 28));
    af_tensor *c1 = af_conv_param(g, "c1", 8, 1, 3, 3, NULL), *c2 = af_conv_param(g, "c2", 16, 8, 3, 3, NULL);
    int k2[2] = { 2, 2 };
    af_tensor *h = af_avg_pool(af_relu(af_conv2d(x, c1, 1, 1)), k2, k2, NULL);  /* [8, 8, 14, 14] */
    af_tensor *y = af_relu(af_conv2d(h, c2, 1, 0));                              /* [8, 16, 12, 12] */
    af_tensor *loss = af_reduce_mean(af_square(y), 4, (int[]){ 0, 1, 2, 3 }, 0);
    af_tensor *p[2] = { c1, c2 }, *grads[2];
    CHECK(af_backward(af_loss_scalar(loss), 2, p, grads, NULL) == AF_OK, "backward: %s", af_error_message());
    af_tensor *in[3] = { x, c1, c2 };
    OK_ALL(g, 3, in, 1, &y, "af_conv2d forward (im2col, patch index on axis 2)");
    for (int k = 0; k < 2; k++) OK_ALL(g, 3, in, 1, &grads[k], "af_conv2d weight gradient");
    af_graph_free(g);
}

/* ------------------------------------------------------------------ native conv */

static void test_native_conv(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 2, 8, 20));
    af_tensor *wi = af_input(g, "w", AF_F16, AF_SHAPE(4, 2, 3, 3));
    af_tensor *wc = af_const_fill(g, AF_SHAPE(4, 2, 3, 3), 0.1f);
    af_tensor *runtime = af_conv(x, wi, NULL, NULL, NULL, 1), *baked = af_conv(x, wc, NULL, NULL, NULL, 1);
    af_tensor *in2[2] = { x, wi };
    WALL_ALL(g, 2, in2, 1, &runtime, "conv-weight wall", "af_conv_param");
    OK_ALL(g, 1, &x, 1, &baked, "conv with a baked weight");

    af_tensor *wt = af_const_fill(g, AF_SHAPE(2, 3, 3, 3), 0.1f);
    af_tensor *up2 = af_conv_transpose(x, wt, (int[]){ 2, 2 }, NULL, NULL), *up1 = af_conv_transpose(x, wt, NULL, NULL, NULL);
    WALL_ALL(g, 1, &x, 1, &up2, "conv_transpose stride wall", "stride 1");
    OK_ALL(g, 1, &x, 1, &up1, "conv_transpose with stride 1");

    /* Kernel width: <= 13 on A13, <= 15 from A14. */
    af_tensor *k13 = af_conv(x, af_const_fill(g, AF_SHAPE(1, 2, 1, 13), 0.1f), NULL, NULL, NULL, 1);
    af_tensor *k14 = af_conv(x, af_const_fill(g, AF_SHAPE(1, 2, 1, 14), 0.1f), NULL, NULL, NULL, 1);
    af_tensor *k16 = af_conv(x, af_const_fill(g, AF_SHAPE(1, 2, 1, 16), 0.1f), NULL, NULL, NULL, 1);
    OK_ALL(g, 1, &x, 1, &k13, "kernel width 13");
    expect_wall(__LINE__, g, 1, &x, 1, &k14, AF_FAMILY_A13, "kernel-width limit", "13");
    for (int f = 1; f < 4; f++) expect_ok(__LINE__, g, 1, &x, 1, &k14, families[f], "kernel width 14 after A13");
    WALL_ALL(g, 1, &x, 1, &k16, "kernel-width limit", NULL);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ limits per family */

static void test_limits(void) {
    af_graph *g = af_graph_new();
    af_tensor *wide = af_input(g, "wide", AF_F16, AF_SHAPE(2, 16385)), *tall = af_input(g, "tall", AF_F16, AF_SHAPE(16385, 2));
    af_tensor *huge = af_input(g, "huge", AF_F16, AF_SHAPE(1, 65537)), *chan = af_input(g, "chan", AF_F16, AF_SHAPE(1, 65537, 1, 1));
    af_tensor *ok = af_input(g, "ok", AF_F16, AF_SHAPE(2, 16384));
    af_tensor *yw = af_relu(wide), *yt = af_relu(tall), *yh = af_relu(huge), *yc = af_relu(chan), *yo = af_relu(ok);
    for (int f = 0; f < 3; f++) {
        expect_wall(__LINE__, g, 1, &wide, 1, &yw, families[f], "axis-extent limit", "W (axis 1, the last)");
        expect_wall(__LINE__, g, 1, &tall, 1, &yt, families[f], "axis-extent limit", "H (axis 0)");
    }
    expect_ok(__LINE__, g, 1, &wide, 1, &yw, AF_FAMILY_A16, "W = 16385 on A16");
    expect_ok(__LINE__, g, 1, &tall, 1, &yt, AF_FAMILY_A16, "H = 16385 on A16");
    OK_ALL(g, 1, &ok, 1, &yo, "W = 16384");
    WALL_ALL(g, 1, &huge, 1, &yh, "axis-extent limit", "65536");
    WALL_ALL(g, 1, &chan, 1, &yc, "axis-extent limit", "65536");

    /* matmul K: 20000 is past 16384 before A16. */
    af_tensor *a = af_input(g, "a", AF_F16, AF_SHAPE(2, 20000));
    af_tensor *mk = af_matmul_w(a, af_const_fill(g, AF_SHAPE(3, 20000), 0.01f));
    for (int f = 0; f < 3; f++) expect_wall(__LINE__, g, 1, &a, 1, &mk, families[f], "axis-extent limit", NULL);
    expect_ok(__LINE__, g, 1, &a, 1, &mk, AF_FAMILY_A16, "matmul K = 20000 on A16");

    /* rank <= 5 */
    af_tensor *r6 = af_input(g, "r6", AF_F16, AF_SHAPE(1, 1, 1, 1, 2, 2)), *r5 = af_input(g, "r5", AF_F16, AF_SHAPE(1, 1, 1, 2, 2));
    af_tensor *y6 = af_relu(r6), *y5 = af_relu(r5);
    WALL_ALL(g, 1, &r6, 1, &y6, "rank limit", "af_reshape");
    OK_ALL(g, 1, &r5, 1, &y5, "rank 5");
    af_graph_free(g);
}

/* ------------------------------------------------------------------ fp16-only ports */

static void test_io_dtypes(void) {
    af_graph *g = af_graph_new();
    af_tensor *x32 = af_input(g, "x32", AF_F32, AF_SHAPE(4)), *x16 = af_input(g, "x16", AF_F16, AF_SHAPE(4));
    af_tensor *y32 = af_relu(x32), *y16 = af_relu(x16);
    af_tensor *out32 = af_cast(y16, AF_F32), *round_trip = af_cast(af_cast(y16, AF_F32), AF_F16);
    WALL_ALL(g, 1, &x32, 1, &y32, "fp16-only I/O rule", "AF_F16");
    WALL_ALL(g, 1, &x16, 1, &out32, "fp16-only I/O rule", "af_cast");
    OK_ALL(g, 1, &x16, 1, &round_trip, "a cast that ends in fp16");
    /* Host fp32 data is fed to an fp16 port: af_run rounds it. */
    af_model *m = sim(g, 1, &x16, 1, &y16, AF_FAMILY_A13);
    float xv[4] = { 0.1f, -1.0f, 3.0f, 65519.0f }, yv[4];
    uint16_t h[4], ho[4];
    af_buffer ib = AF_BUF_F32(xv, 4), ob = AF_BUF_F32(yv, 4);
    CHECK(m && af_run(m, &ib, &ob) == AF_OK, "fp32 host data into an fp16 port: %s", af_error_message());
    CHECK(yv[0] == af_round_f16(0.1f) && yv[1] == 0.0f && yv[2] == 3.0f && yv[3] == 65504.0f, "fp32 host data was not rounded to fp16: %g %g %g %g",
          yv[0], yv[1], yv[2], yv[3]);
    for (int i = 0; i < 4; i++) h[i] = af_f32_to_f16(xv[i]);
    af_buffer hb = { h, AF_F16, 4 }, hob = { ho, AF_F16, 4 };
    CHECK(m && af_run(m, &hb, &hob) == AF_OK && af_f16_to_f32(ho[0]) == yv[0], "fp16 host buffers: %s", af_error_message());
    af_model_free(m);
    /* Parameters keep their fp32 master on the host and are fed as fp16. */
    af_tensor *p = af_parameter(g, "p", AF_SHAPE(4), NULL), *yp = af_mul(x16, p);
    af_tensor *in[2] = { x16, p };
    OK_ALL(g, 2, in, 1, &yp, "an fp16 input times an fp32-master parameter");
    /* fp16 compute only. */
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .precision = AF_PRECISION_FP32 };
    m = af_compile(g, 1, &x16, 1, &y16, &o);
    CHECK(!m && strstr(af_error_message(), "fp16"), "ane-sim with AF_PRECISION_FP32: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ target specs */

static void test_targets(void) {
    af_target t;
    af_family_id f;
    const struct { const char *spec; af_target t; af_family_id f; } good[] = {
        { "cpu", AF_TARGET_CPU, AF_FAMILY_DEFAULT }, { "ane-sim", AF_TARGET_ANE_SIM, AF_FAMILY_DEFAULT },
        { "ane-sim:m1", AF_TARGET_ANE_SIM, AF_FAMILY_A13 }, { "ane-sim:M2", AF_TARGET_ANE_SIM, AF_FAMILY_A14 },
        { "ane-sim:m3", AF_TARGET_ANE_SIM, AF_FAMILY_A15 }, { "ane-sim:m4", AF_TARGET_ANE_SIM, AF_FAMILY_A16 },
        { "ane-sim:m5", AF_TARGET_ANE_SIM, AF_FAMILY_A16 }, { "ane-sim:a13", AF_TARGET_ANE_SIM, AF_FAMILY_A13 },
        { "ane-sim:A16", AF_TARGET_ANE_SIM, AF_FAMILY_A16 }, { "ane:m5", AF_TARGET_ANE, AF_FAMILY_A16 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        af_status st = af_target_parse(good[i].spec, &t, &f);
        CHECK(st == AF_OK && t == good[i].t && f == good[i].f, "af_target_parse('%s'): %s", good[i].spec, af_error_message());
    }
    const char *bad[] = { "gpu", "ane-sim:m9", "ane-sim:", "cpu:m1", "", "ane-simulator" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(af_target_parse(bad[i], &t, &f) != AF_OK && *af_error_message(), "af_target_parse accepted '%s'", bad[i]);
    CHECK(!strcmp(af_family_name_of(AF_FAMILY_A13), "A13") && !strcmp(af_family_name_of(AF_FAMILY_A16), "A16"), "family names");

    /* The default family is the hardware's, else A16; the library reads no environment
     * (the CLI maps ANEFORGE_TARGET onto the options). */
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4)), *y = af_relu(x);
    af_model *m = sim(g, 1, &x, 1, &y, AF_FAMILY_A15);
    CHECK(m && af_model_family(m) == AF_FAMILY_A15, "an explicit family is used");
    af_model_free(m);
#if !defined(__APPLE__)
    setenv("ANEFORGE_TARGET", "ane-sim:m1", 1);
    m = sim(g, 1, &x, 1, &y, AF_FAMILY_DEFAULT);
    CHECK(m && af_model_family(m) == AF_FAMILY_A16, "without hardware the family is A16, whatever the environment says: %s",
          m ? af_family_name_of(af_model_family(m)) : af_error_message());
    af_model_free(m);
    unsetenv("ANEFORGE_TARGET");
#endif
    m = sim(g, 1, &x, 1, &y, (af_family_id)12);
    CHECK(!m && strstr(af_error_message(), "family"), "family 12 must be rejected: %s", af_error_message());
    af_model_free(m);
    m = af_compile(g, 1, &x, 1, &y, NULL);
    CHECK(m && af_model_family(m) == AF_FAMILY_DEFAULT, "a cpu model has no family");
    af_model_free(m);
    af_graph_free(g);
}

/* ------------------------------------------------------------------ aneforge ops */

static void test_ops_column(void) {
    int n = 0;
    for (int op = 0; op < af_op_count(); op++) n += ane_rules_op_restrictions(op) != NULL;
    CHECK(n >= 10, "only %d ops carry ane-sim restrictions", n);
    const char *s = ane_rules_op_restrictions(IR_OP_SLICE_BY_SIZE), *c = ane_rules_op_restrictions(IR_OP_CONV);
    CHECK(s && strstr(s, "4094"), "slice_by_size restriction: %s", s ? s : "(none)");
    CHECK(c && strstr(c, "const"), "conv restriction: %s", c ? c : "(none)");
    CHECK(ane_rules_op_restrictions(-1) == NULL && ane_rules_op_restrictions(af_op_count()) == NULL, "out-of-range ops");
}

/* ------------------------------------------------------------------ token embedding */

static void test_embedding(void) {
    af_graph *g = af_graph_new();
    af_tensor *ids = af_input(g, "ids", AF_F16, AF_SHAPE(6)), *dy = af_input(g, "dy", AF_F16, AF_SHAPE(6, 4));
    af_tensor *big = af_embedding(af_const_fill(g, AF_SHAPE(3000, 4), 0.5f), ids);
    af_tensor *small = af_embedding(af_const_fill(g, AF_SHAPE(2049, 4), 0.5f), ids);
    static const float fixed[2] = { 2999, 7 };
    af_tensor *baked = af_embedding(af_const_fill(g, AF_SHAPE(3000, 4), 0.5f), af_const(g, "fixed", AF_SHAPE(2), fixed));
    af_tensor *in2[2] = { dy, ids }, *scatter = af_embedding_grad(dy, ids, 10);
    WALL_ALL(g, 1, &ids, 1, &big, "fp16 id limit", "3000 rows");
    OK_ALL(g, 1, &ids, 1, &small, "a 2049-row table (ids exact in fp16)");
    OK_ALL(g, 0, NULL, 1, &baked, "baked ids into a 3000-row table");
    WALL_ALL(g, 2, in2, 1, &scatter, "no-scatter rule", "onehot");
    af_graph_free(g);
}

int main(void) {
    af_ane_budget_set_limits(NULL, 100000, 0); /* this file tests walls, not the compile budget */
    test_fusion_wall();
    test_wide_row_and_adam_stack();
    test_per_param_backward();
    test_conv2d_im2col();
    test_native_conv();
    test_limits();
    test_embedding();
    test_io_dtypes();
    test_targets();
    test_ops_column();
    return check_finish("sim_walls");
}
