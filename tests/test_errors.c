/* Bad input never crashes and always says why: builders record the first error on
 * the graph (naming the op, the shapes and a remedy) and pass NULL through, af_compile
 * reports that first error, and af_compile/af_run reject bad requests and buffers with
 * a message. Every expectation is a substring of the message. */
#include "aneforge.h"
#include "support/check.h"

#include <stdarg.h>
#include <string.h>

/* Checks that msg is non-NULL and contains each fragment of the NULL-terminated list. */
static void expect_in(int line, const char *what, const char *msg, ...) {
    va_list ap;
    va_start(ap, msg);
    CHECK(msg && *msg, "line %d: %s: no error message", line, what);
    for (const char *frag; msg && (frag = va_arg(ap, const char *));)
        CHECK(strstr(msg, frag) != NULL, "line %d: %s: message \"%s\" lacks \"%s\"", line, what, msg, frag);
    va_end(ap);
}
#define EXPECT_GRAPH(g, ...) expect_in(__LINE__, "graph error", af_graph_error(g), __VA_ARGS__, (const char *)NULL)
#define EXPECT_MSG(...) expect_in(__LINE__, "error message", af_error_message(), __VA_ARGS__, (const char *)NULL)

static af_tensor *in(af_graph *g, const char *name, af_shape s) { return af_input(g, name, AF_F32, s); }

/* A fresh graph whose first builder call is expected to fail. */
#define FRESH(g) af_graph *g = af_graph_new()

/* af_compile of g must fail and report the graph's first error. */
static void expect_compile_reports(int line, af_graph *g, af_tensor *out, const char *frag) {
    af_tensor *outs[1] = { out };
    af_model *m = af_compile(g, 0, NULL, 1, outs, NULL);
    CHECK(m == NULL, "line %d: af_compile succeeded on a graph with an error", line);
    af_model_free(m);
    expect_in(line, "af_compile", af_error_message(), frag, (const char *)NULL);
}

static void test_binary_shapes(void) {
    FRESH(g);
    af_tensor *a = in(g, "a", AF_SHAPE(2, 3)), *b = in(g, "b", AF_SHAPE(4));
    CHECK(af_add(a, b) == NULL, "add of [2,3] and [4] built");
    EXPECT_GRAPH(g, "add", "[2,3]", "[4]", "broadcast");
    EXPECT_MSG("add", "[2,3]", "[4]");
    expect_compile_reports(__LINE__, g, NULL, "add: shapes do not broadcast");
    af_graph_free(g);

    FRESH(h);
    af_tensor *c = in(h, "c", AF_SHAPE(5, 7)), *d = in(h, "d", AF_SHAPE(6, 7));
    CHECK(af_mul(c, d) == NULL, "mul of [5,7] and [6,7] built");
    EXPECT_GRAPH(h, "mul", "[5,7]", "[6,7]");
    af_graph_free(h);

    FRESH(k);
    af_tensor *cond = in(k, "cond", AF_SHAPE(3, 1)), *x = in(k, "x", AF_SHAPE(4)), *y = in(k, "y", AF_SHAPE(2, 1, 1));
    CHECK(af_select(cond, x, y) != NULL, "select of [3,1], [4], [2,1,1] should broadcast");
    CHECK(af_select(cond, x, in(k, "z", AF_SHAPE(5))) == NULL, "select with [5] built");
    EXPECT_GRAPH(k, "select", "[3,1]", "[4]", "[5]");
    af_graph_free(k);
}

static void test_axes(void) {
    int ax3 = 3, axm4 = -4, dup[2] = { 1, -2 };
    FRESH(g1);
    af_tensor *x = in(g1, "x", AF_SHAPE(2, 3, 4));
    CHECK(af_reduce_sum(x, 1, &ax3, 0) == NULL, "reduce_sum axis 3 of rank 3 built");
    EXPECT_GRAPH(g1, "reduce_sum", "axis 3", "[2,3,4]");
    af_graph_free(g1);

    FRESH(g2);
    x = in(g2, "x", AF_SHAPE(2, 3, 4));
    CHECK(af_reduce_mean(x, 1, &axm4, 1) == NULL, "reduce_mean axis -4 of rank 3 built");
    EXPECT_GRAPH(g2, "reduce_mean", "axis -4");
    af_graph_free(g2);

    FRESH(g3);
    x = in(g3, "x", AF_SHAPE(2, 3, 4));
    CHECK(af_reduce_max(x, 2, dup, 0) == NULL, "reduce_max with axes 1 and -2 built");
    EXPECT_GRAPH(g3, "reduce_max", "twice");
    af_graph_free(g3);

    FRESH(g4);
    x = in(g4, "x", AF_SHAPE(2, 3));
    CHECK(af_reduce_min(x, 0, NULL, 0) == NULL, "reduce_min without axes built");
    EXPECT_GRAPH(g4, "reduce_min", "axis");
    af_graph_free(g4);

    FRESH(g5);
    x = in(g5, "x", AF_SHAPE(2, 3));
    CHECK(af_softmax(x, 2) == NULL, "softmax axis 2 of rank 2 built");
    EXPECT_GRAPH(g5, "softmax", "axis 2", "rank 2");
    af_graph_free(g5);

    FRESH(g5b);
    x = in(g5b, "x", AF_SHAPE(2, 3));
    CHECK(af_softmax(x, -3) == NULL, "softmax axis -3 of rank 2 built");
    EXPECT_GRAPH(g5b, "softmax", "axis -3");
    af_graph_free(g5b);

    FRESH(g6);
    af_tensor *c[3] = { in(g6, "a", AF_SHAPE(2, 3)), in(g6, "b", AF_SHAPE(2, 3)), in(g6, "c", AF_SHAPE(2, 3)) };
    CHECK(af_concat(3, c, 2) == NULL, "concat axis 2 of rank 2 built");
    EXPECT_GRAPH(g6, "concat", "axis 2", "rank 2");
    af_graph_free(g6);

    FRESH(g7);
    af_tensor *d[3] = { in(g7, "a", AF_SHAPE(2, 3)), in(g7, "b", AF_SHAPE(2, 4)), in(g7, "c", AF_SHAPE(3, 3)) };
    CHECK(af_concat(3, d, 1) == NULL, "concat of [2,3],[2,4],[3,3] on axis 1 built");
    EXPECT_GRAPH(g7, "concat", "operand 2", "axis 0", "[2,3]", "[3,3]");
    af_graph_free(g7);

    FRESH(g8);
    af_tensor *e[2] = { in(g8, "a", AF_SHAPE(2, 3)), in(g8, "b", AF_SHAPE(2, 3, 1)) };
    CHECK(af_concat(2, e, 0) == NULL, "concat of rank 2 and rank 3 built");
    EXPECT_GRAPH(g8, "concat", "rank 3");
    af_graph_free(g8);

    CHECK(af_concat(0, NULL, 0) == NULL, "concat of nothing built");
    EXPECT_MSG("concat", "at least one");

    af_tensor *parts[3] = { (af_tensor *)1, (af_tensor *)1, (af_tensor *)1 };
    FRESH(g9);
    x = in(g9, "x", AF_SHAPE(4, 6));
    CHECK(af_split(x, 2, 2, NULL, parts) == AF_ERR_INVALID, "split on axis 2 of rank 2 succeeded");
    CHECK(parts[0] == NULL && parts[1] == NULL, "split left garbage in out[] on failure");
    EXPECT_GRAPH(g9, "split", "axis 2", "rank 2");
    af_graph_free(g9);

    FRESH(g10);
    x = in(g10, "x", AF_SHAPE(4, 6));
    int64_t bad[3] = { 1, 2, 2 };
    CHECK(af_split(x, 1, 3, bad, parts) == AF_ERR_SHAPE, "split sizes 1+2+2 of 6 succeeded");
    EXPECT_GRAPH(g10, "split", "add up to 5", "extent 6");
    af_graph_free(g10);

    FRESH(g11);
    x = in(g11, "x", AF_SHAPE(4, 7));
    CHECK(af_split(x, -1, 3, NULL, parts) == AF_ERR_SHAPE, "split of 7 into 3 equal parts succeeded");
    EXPECT_GRAPH(g11, "split", "equal parts");
    af_graph_free(g11);

    CHECK(af_split(NULL, 0, 2, NULL, parts) != AF_OK, "split of NULL succeeded");
    EXPECT_MSG("split", "NULL");
    CHECK(af_split(NULL, 0, 0, NULL, parts) == AF_ERR_INVALID, "split into 0 parts succeeded");
}

static void test_layout(void) {
    FRESH(g1);
    af_tensor *x = in(g1, "x", AF_SHAPE(2, 3, 4));
    int dup[3] = { 0, 0, 2 }, range[3] = { 0, 1, 3 };
    CHECK(af_transpose(x, dup) == NULL, "transpose with perm {0,0,2} built");
    EXPECT_GRAPH(g1, "transpose", "perm", "[2,3,4]");
    af_graph_free(g1);

    FRESH(g2);
    x = in(g2, "x", AF_SHAPE(2, 3, 4));
    CHECK(af_transpose(x, range) == NULL, "transpose with perm {0,1,3} built");
    EXPECT_GRAPH(g2, "transpose", "perm");
    af_graph_free(g2);

    FRESH(g3);
    x = in(g3, "x", AF_SHAPE(2, 3));
    CHECK(af_transpose(x, NULL) == NULL, "transpose with NULL perm built");
    EXPECT_GRAPH(g3, "transpose", "perm is NULL");
    af_graph_free(g3);

    FRESH(g4);
    x = in(g4, "x", AF_SHAPE(2, 3));
    CHECK(af_reshape(x, AF_SHAPE(4, 2)) == NULL, "reshape of 6 elements to [4,2] built");
    EXPECT_GRAPH(g4, "reshape", "element counts differ", "6", "8", "[2,3]");
    af_graph_free(g4);

    FRESH(g5);
    x = in(g5, "x", AF_SHAPE(2, 3));
    CHECK(af_reshape(x, AF_SHAPE(-1, -1)) == NULL, "reshape to [-1,-1] built");
    EXPECT_GRAPH(g5, "reshape", "only one dimension may be -1");
    af_graph_free(g5);

    FRESH(g6);
    x = in(g6, "x", AF_SHAPE(7));
    CHECK(af_reshape(x, AF_SHAPE(2, -1)) == NULL, "reshape of 7 to [2,-1] built");
    EXPECT_GRAPH(g6, "reshape", "-1");
    af_graph_free(g6);

    FRESH(g7);
    x = in(g7, "x", AF_SHAPE(1));
    CHECK(af_reshape(x, AF_SHAPE(1, 1, 1, 1, 1, 1, 1)) == NULL, "reshape to rank 7 built");
    EXPECT_GRAPH(g7, "reshape", "rank");
    af_graph_free(g7);

    int64_t begin[2] = { 2, 0 }, size[2] = { 4, 5 }, far[2] = { 6, 0 }, zero[2] = { 1, 0 };
    FRESH(g8);
    x = in(g8, "x", AF_SHAPE(5, 5));
    CHECK(af_slice(x, begin, size) == NULL, "slice 2+4 of 5 built");
    EXPECT_GRAPH(g8, "slice_by_size", "overruns axis 0", "extent 5", "[5,5]");
    af_graph_free(g8);

    FRESH(g9);
    x = in(g9, "x", AF_SHAPE(5, 5));
    CHECK(af_slice(x, far, size) == NULL, "slice from 6 of 5 built");
    EXPECT_GRAPH(g9, "slice_by_size", "begin 6", "axis 0");
    af_graph_free(g9);

    FRESH(g10);
    x = in(g10, "x", AF_SHAPE(5, 5));
    CHECK(af_slice(x, begin, zero) == NULL, "slice of size 1 x 0 built");
    EXPECT_GRAPH(g10, "slice_by_size", "size 0");
    af_graph_free(g10);

    FRESH(g11);
    x = in(g11, "x", AF_SHAPE(5, 5));
    CHECK(af_slice(x, NULL, size) == NULL, "slice with NULL begin built");
    EXPECT_GRAPH(g11, "slice_by_size", "NULL");
    af_graph_free(g11);
}

static void test_matmul_conv_pool(void) {
    FRESH(g1);
    af_tensor *a = in(g1, "a", AF_SHAPE(3, 4)), *b = in(g1, "b", AF_SHAPE(5, 6));
    CHECK(af_matmul(a, b, 0, 0) == NULL, "matmul [3,4] @ [5,6] built");
    EXPECT_GRAPH(g1, "matmul", "inner dimensions differ (4 vs 5)", "[3,4]", "[5,6]");
    af_graph_free(g1);

    FRESH(g2);
    a = in(g2, "a", AF_SHAPE(3, 4));
    b = in(g2, "b", AF_SHAPE(6, 5));
    CHECK(af_matmul(a, b, 1, 1) == NULL, "matmul [3,4]^T @ [6,5]^T built");
    EXPECT_GRAPH(g2, "matmul", "inner dimensions differ (3 vs 5)");
    af_graph_free(g2);

    FRESH(g3);
    a = in(g3, "a", AF_SHAPE(2, 3, 4));
    b = in(g3, "b", AF_SHAPE(3, 4, 5));
    CHECK(af_matmul(a, b, 0, 0) == NULL, "matmul with batches 2 and 3 built");
    EXPECT_GRAPH(g3, "matmul", "batch");
    af_graph_free(g3);

    FRESH(g4);
    a = in(g4, "a", AF_SHAPE(4));
    b = in(g4, "b", AF_SHAPE(4, 5));
    CHECK(af_matmul(a, b, 0, 0) == NULL, "matmul of a vector built");
    EXPECT_GRAPH(g4, "matmul", "rank >= 2");
    af_graph_free(g4);

    FRESH(g5);
    a = in(g5, "x", AF_SHAPE(2, 7));
    float wdata[8 * 6] = { 0 };
    CHECK(af_matmul_w(a, af_const(g5, "w", AF_SHAPE(8, 6), wdata)) == NULL, "matmul_w with K 7 vs 6 built");
    EXPECT_GRAPH(g5, "matmul_w", "K = 6", "[2,7]", "[8,6]");
    af_graph_free(g5);

    float w[8 * 3 * 3 * 3] = { 0 };
    FRESH(g6);
    af_tensor *x = in(g6, "x", AF_SHAPE(1, 3, 8, 8));
    CHECK(af_conv(x, af_const(g6, "w", AF_SHAPE(4, 2, 3, 3), w), NULL, NULL, NULL, 1) == NULL, "conv 3 channels, weight for 2 built");
    EXPECT_GRAPH(g6, "conv", "input channels", "[1,3,8,8]", "[4,2,3,3]");
    af_graph_free(g6);

    FRESH(g7);
    x = in(g7, "x", AF_SHAPE(1, 3, 8, 8));
    CHECK(af_conv(x, af_const(g7, "w", AF_SHAPE(4, 1, 3, 3), w), NULL, NULL, NULL, 2) == NULL, "conv groups 2 of 3 channels built");
    EXPECT_GRAPH(g7, "conv", "groups = 2");
    af_graph_free(g7);

    FRESH(g8);
    x = in(g8, "x", AF_SHAPE(1, 3, 2, 2));
    CHECK(af_conv(x, af_const(g8, "w", AF_SHAPE(4, 3, 3, 3), w), NULL, NULL, NULL, 1) == NULL, "conv 3x3 on 2x2 built");
    EXPECT_GRAPH(g8, "conv", "kernel span 3", "padded input 2");
    af_graph_free(g8);

    FRESH(g9);
    x = in(g9, "x", AF_SHAPE(1, 3, 5, 5));
    CHECK(af_conv_transpose(x, af_const(g9, "w", AF_SHAPE(2, 3, 3, 3), w), NULL, NULL, NULL) == NULL, "conv_transpose channel mismatch built");
    EXPECT_GRAPH(g9, "conv_transpose", "input channels", "[Cin, Cout, kH, kW]");
    af_graph_free(g9);

    FRESH(g10);
    x = in(g10, "x", AF_SHAPE(3, 8, 8));
    CHECK(af_conv(x, af_const(g10, "w", AF_SHAPE(4, 3, 3, 3), w), NULL, NULL, NULL, 1) == NULL, "conv of rank 3 built");
    EXPECT_GRAPH(g10, "conv", "rank 4");
    af_graph_free(g10);

    int k5[2] = { 5, 5 }, k3[2] = { 3, 3 }, p2[2] = { 2, 2 }, s0[2] = { 0, 1 };
    FRESH(g11);
    x = in(g11, "x", AF_SHAPE(1, 1, 4, 4));
    CHECK(af_avg_pool(x, k5, NULL, NULL) == NULL, "avg_pool 5x5 on 4x4 built");
    EXPECT_GRAPH(g11, "avg_pool", "kernel 5", "larger", "4");
    af_graph_free(g11);

    FRESH(g12);
    x = in(g12, "x", AF_SHAPE(1, 1, 4, 4));
    CHECK(af_max_pool(x, k3, NULL, p2) == NULL, "max_pool pad 2 of kernel 3 built");
    EXPECT_GRAPH(g12, "max_pool", "pad 2", "kernel 3");
    af_graph_free(g12);

    FRESH(g13);
    x = in(g13, "x", AF_SHAPE(1, 1, 4, 4));
    CHECK(af_max_pool(x, k3, s0, NULL) == NULL, "max_pool stride 0 built");
    EXPECT_GRAPH(g13, "max_pool", "stride");
    af_graph_free(g13);

    FRESH(g14);
    x = in(g14, "x", AF_SHAPE(1, 4, 4));
    CHECK(af_avg_pool(x, k3, NULL, NULL) == NULL, "avg_pool of rank 3 built");
    EXPECT_GRAPH(g14, "avg_pool", "rank 4");
    af_graph_free(g14);

    FRESH(g15);
    x = in(g15, "x", AF_SHAPE(1, 1, 4, 4));
    CHECK(af_avg_pool(x, NULL, NULL, NULL) == NULL, "avg_pool with NULL kernel built");
    EXPECT_GRAPH(g15, "avg_pool", "kernel is NULL");
    af_graph_free(g15);
}

static void test_norms_and_modes(void) {
    FRESH(g1);
    af_tensor *x = in(g1, "x", AF_SHAPE(3, 5));
    CHECK(af_layer_norm(x, in(g1, "gamma", AF_SHAPE(4)), NULL, 1e-5f) == NULL, "layer_norm gamma [4] for D 5 built");
    EXPECT_GRAPH(g1, "layer_norm", "gamma", "[4]", "5 values");
    af_graph_free(g1);

    FRESH(g2);
    x = in(g2, "x", AF_SHAPE(2, 6, 3, 3));
    CHECK(af_group_norm(x, 4, NULL, NULL, 1e-5f) == NULL, "group_norm 4 groups of 6 channels built");
    EXPECT_GRAPH(g2, "group_norm", "groups = 4", "6 channels");
    af_graph_free(g2);

    FRESH(g3);
    x = in(g3, "x", AF_SHAPE(6));
    CHECK(af_channel_layer_norm(x, NULL, NULL, 1e-5f) == NULL, "channel_layer_norm of rank 1 built");
    EXPECT_GRAPH(g3, "channel_layer_norm", "rank");
    af_graph_free(g3);

    FRESH(g4);
    x = in(g4, "x", AF_SHAPE(2, 6));
    CHECK(af_rms_norm(x, NULL, -1.0f) == NULL, "rms_norm with eps -1 built");
    EXPECT_GRAPH(g4, "rms_norm", "eps");
    af_graph_free(g4);

    FRESH(g5);
    x = in(g5, "x", AF_SHAPE(2, 6));
    CHECK(af_gelu(x, (af_gelu_mode)7) == NULL, "gelu mode 7 built");
    EXPECT_GRAPH(g5, "gelu", "mode 7");
    af_graph_free(g5);

    FRESH(g6);
    x = in(g6, "x", AF_SHAPE(2, 6));
    CHECK(af_cast(x, (af_dtype)5) == NULL, "cast to dtype 5 built");
    EXPECT_GRAPH(g6, "cast", "dtype 5");
    af_graph_free(g6);
}

/* A failure sticks: later builders pass NULL through, valid ones return NULL too, and
 * af_compile reports the first error, not a later symptom. */
static void test_null_passthrough(void) {
    FRESH(g);
    af_tensor *x = in(g, "x", AF_SHAPE(2, 3)), *y = in(g, "y", AF_SHAPE(2, 3));
    af_tensor *bad = af_matmul(x, y, 0, 0); /* inner 3 vs 2 */
    CHECK(bad == NULL, "matmul [2,3] @ [2,3] built");
    int ax = 0, perm[2] = { 1, 0 }, k[2] = { 1, 1 };
    int64_t b0[2] = { 0, 0 }, s1[2] = { 1, 1 };
    af_tensor *t = af_relu(bad);
    t = af_add(t, x);
    t = af_add(x, t);
    t = af_reduce_sum(t, 1, &ax, 0);
    t = af_softmax(t, 0);
    t = af_transpose(t, perm);
    t = af_reshape(t, AF_SHAPE(6));
    t = af_slice(t, b0, s1);
    af_tensor *cat[3] = { x, t, y };
    t = af_concat(3, cat, 0);
    t = af_layer_norm(t, NULL, NULL, 1e-5f);
    t = af_group_norm(t, 1, NULL, NULL, 1e-5f);
    t = af_max_pool(t, k, NULL, NULL);
    t = af_matmul(t, x, 0, 0);
    t = af_select(t, x, y);
    t = af_cast(af_gelu(t, AF_GELU_TANH), AF_F16);
    CHECK(t == NULL, "a builder turned a NULL operand into a tensor");
    af_tensor *parts[2];
    CHECK(af_split(t, 0, 2, NULL, parts) != AF_OK, "split of NULL succeeded");
    CHECK(af_add(x, y) == NULL, "a valid builder on a failed graph returned a tensor");
    CHECK(af_add(x, in(g, "z", AF_SHAPE(9))) == NULL, "mismatched add on a failed graph built");
    EXPECT_GRAPH(g, "matmul", "inner dimensions differ (3 vs 2)");
    CHECK(strstr(af_graph_error(g), "add") == NULL, "a later error replaced the first: %s", af_graph_error(g));
    af_tensor *ins[2] = { x, y };
    af_model *m = af_compile(g, 2, ins, 1, &t, NULL);
    CHECK(m == NULL, "af_compile succeeded on a failed graph");
    af_model_free(m);
    EXPECT_MSG("af_compile", "matmul", "inner dimensions differ");
    af_graph_free(g);

    /* A NULL operand that is the first problem is itself the error. */
    FRESH(h);
    x = in(h, "x", AF_SHAPE(2, 3));
    CHECK(af_add(x, NULL) == NULL, "add with a NULL operand built");
    EXPECT_GRAPH(h, "add", "operand 1 is NULL");
    af_graph_free(h);

    FRESH(h2);
    af_tensor *gamma = in(h2, "gamma", AF_SHAPE(3));
    CHECK(af_layer_norm(NULL, gamma, NULL, 1e-5f) == NULL, "layer_norm of NULL built");
    EXPECT_GRAPH(h2, "layer_norm", "operand 0 is NULL");
    af_graph_free(h2);

    CHECK(af_relu(NULL) == NULL, "relu of NULL built");
    EXPECT_MSG("relu", "NULL");
}

static void test_graph_mixing(void) {
    FRESH(g1);
    FRESH(g2);
    af_tensor *a = in(g1, "a", AF_SHAPE(2, 3)), *b = in(g2, "b", AF_SHAPE(2, 3));
    CHECK(af_add(a, b) == NULL, "add across graphs built");
    EXPECT_GRAPH(g1, "add", "operand 1", "another graph");
    CHECK(af_graph_error(g2) == NULL, "the other graph got the error");
    af_tensor *c = in(g2, "c", AF_SHAPE(2, 3)), *r = af_relu(c);
    af_model *m = af_compile(g2, 1, &a, 1, &r, NULL);
    CHECK(m == NULL, "af_compile took an input from another graph");
    EXPECT_MSG("input 0", "another graph");
    af_model_free(m);
    af_tensor *r1 = af_relu(in(g1, "d", AF_SHAPE(1)));
    CHECK(r1 == NULL, "g1 has an error, relu must pass NULL");
    af_graph_free(g1);
    FRESH(g3);
    af_tensor *e = in(g3, "e", AF_SHAPE(2, 3)), *re = af_relu(e);
    m = af_compile(g2, 1, &c, 1, &re, NULL);
    CHECK(m == NULL, "af_compile took an output from another graph");
    EXPECT_MSG("output 0", "another graph");
    af_model_free(m);
    af_graph_free(g2);
    af_graph_free(g3);

    FRESH(g4);
    af_tensor *h = af_input(g4, "h", AF_F16, AF_SHAPE(4)), *f = in(g4, "f", AF_SHAPE(4));
    CHECK(af_add(af_cast(f, AF_F16), h) != NULL, "add after a cast failed: %s", af_graph_error(g4) ? af_graph_error(g4) : "");
    CHECK(af_add(h, f) == NULL, "fp16 + fp32 built without a cast");
    EXPECT_GRAPH(g4, "add", "fp32", "fp16", "af_cast");
    af_graph_free(g4);
}

static void test_invalid_shapes(void) {
    FRESH(g1);
    CHECK(af_input(g1, "big", AF_F32, AF_SHAPE(1, 2, 3, 4, 5, 6, 7)) == NULL, "rank 7 input built");
    EXPECT_GRAPH(g1, "big", "invalid", "too many dims");
    af_graph_free(g1);

    FRESH(g2);
    CHECK(af_input(g2, "empty", AF_F32, AF_SHAPE(2, 0)) == NULL, "input [2,0] built");
    EXPECT_GRAPH(g2, "empty", "[2,0]", "invalid", ">= 1");
    af_graph_free(g2);

    FRESH(g3);
    CHECK(af_parameter(g3, "neg", AF_SHAPE(-3), NULL) == NULL, "parameter [-3] built");
    EXPECT_GRAPH(g3, "neg", "[-3]");
    af_graph_free(g3);

    FRESH(g4);
    float one = 1.0f;
    CHECK(af_const(g4, "c", AF_SHAPE(0), &one) == NULL, "const [0] built");
    EXPECT_GRAPH(g4, "[0]", "invalid");
    af_graph_free(g4);

    FRESH(g5);
    CHECK(af_const(g5, "c", AF_SHAPE(2), NULL) == NULL, "const without data built");
    EXPECT_GRAPH(g5, "af_const", "data is NULL");
    af_graph_free(g5);

    FRESH(g6);
    CHECK(af_input(g6, "x", (af_dtype)9, AF_SHAPE(2)) == NULL, "input of dtype 9 built");
    EXPECT_GRAPH(g6, "dtype 9");
    af_graph_free(g6);

    CHECK(af_input(NULL, "x", AF_F32, AF_SHAPE(2)) == NULL, "input on a NULL graph built");
    EXPECT_MSG("graph is NULL");
}

static void test_compile_requests(void) {
    af_model *m;
    m = af_compile(NULL, 0, NULL, 0, NULL, NULL);
    CHECK(m == NULL, "compiled a NULL graph");
    EXPECT_MSG("graph is NULL");

    FRESH(empty);
    m = af_compile(empty, 0, NULL, 0, NULL, NULL);
    CHECK(m == NULL, "compiled an empty graph with no outputs");
    EXPECT_MSG("no outputs");
    af_graph_free(empty);

    FRESH(g);
    af_tensor *x = in(g, "x", AF_SHAPE(2, 3)), *y = in(g, "y", AF_SHAPE(2, 3)), *s = af_add(x, y);
    af_tensor *w = af_parameter(g, "weight", AF_SHAPE(2, 3), NULL), *sw = af_mul(s, w);
    float cv[6] = { 0 };
    af_tensor *c = af_const(g, "bias", AF_SHAPE(2, 3), cv), *sc = af_add(s, c);
    af_tensor *xy[2] = { x, y }, *xyw[3] = { x, y, w }, *xx[2] = { x, x }, *xc[3] = { x, y, c };
    CHECK(s && sw && sc, "building failed: %s", af_graph_error(g) ? af_graph_error(g) : "");

    m = af_compile(g, 2, xy, 0, &s, NULL);
    CHECK(m == NULL, "compiled with no outputs");
    EXPECT_MSG("no outputs");

    m = af_compile(g, 1, xy, 1, &s, NULL);
    CHECK(m == NULL, "compiled without input 'y'");
    EXPECT_MSG("'y'", "not in the input list");

    m = af_compile(g, 2, xy, 1, &sw, NULL);
    CHECK(m == NULL, "compiled without parameter 'weight'");
    EXPECT_MSG("parameter 'weight'", "not in the input list");

    m = af_compile(g, 3, xc, 1, &sc, NULL);
    CHECK(m == NULL, "compiled with a const listed as an input");
    EXPECT_MSG("'bias'", "const", "not an af_input");

    af_tensor *xs[2] = { x, s };
    m = af_compile(g, 2, xs, 1, &s, NULL);
    CHECK(m == NULL, "compiled with an add node listed as an input");
    EXPECT_MSG("input 1", "add");

    m = af_compile(g, 2, xx, 1, &s, NULL);
    CHECK(m == NULL, "compiled with an input listed twice");
    EXPECT_MSG("'x'", "twice");

    af_tensor *nul = NULL;
    m = af_compile(g, 2, xy, 1, &nul, NULL);
    CHECK(m == NULL, "compiled a NULL output");
    EXPECT_MSG("output 0 is NULL");

    af_tensor *xn[2] = { x, NULL };
    m = af_compile(g, 2, xn, 1, &s, NULL);
    CHECK(m == NULL, "compiled a NULL input");
    EXPECT_MSG("input 1 is NULL");

    m = af_compile(g, -1, xy, 1, &s, NULL);
    CHECK(m == NULL, "compiled with nin = -1");
    EXPECT_MSG("nin = -1", "negative");
    m = af_compile(g, 2, NULL, 1, &s, NULL);
    CHECK(m == NULL, "compiled with nin = 2 and no input array");
    EXPECT_MSG("in is NULL");

    af_compile_opts bad_target = { .target = (af_target)9 };
    m = af_compile(g, 2, xy, 1, &s, &bad_target);
    CHECK(m == NULL, "compiled for target 9");
    EXPECT_MSG("unknown target 9");

    /* A complete request compiles; the same graph stays usable after the failures. */
    m = af_compile(g, 3, xyw, 1, &sw, NULL);
    CHECK(m != NULL, "a valid request failed: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

static void test_run_buffers(void) {
    FRESH(g);
    af_tensor *x = in(g, "x", AF_SHAPE(2, 3)), *y = af_relu(x);
    af_model *m = af_compile(g, 1, &x, 1, &y, NULL);
    CHECK(m != NULL, "compile failed: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    float xv[6] = { 1, -2, 3, -4, 5, -6 }, yv[6];
    af_buffer bin = AF_BUF_F32(xv, 6), bout = AF_BUF_F32(yv, 6);

    CHECK(af_run(NULL, &bin, &bout) == AF_ERR_INVALID, "ran a NULL model");
    EXPECT_MSG("model is NULL");
    CHECK(af_run(m, NULL, &bout) == AF_ERR_INVALID, "ran with no input buffers");
    EXPECT_MSG("buffer array is NULL");
    CHECK(af_run(m, &bin, NULL) == AF_ERR_INVALID, "ran with no output buffers");
    EXPECT_MSG("buffer array is NULL");

    af_buffer nodata = AF_BUF_F32(NULL, 6);
    CHECK(af_run(m, &nodata, &bout) == AF_ERR_INVALID, "ran with a NULL input data pointer");
    EXPECT_MSG("input 0", "'x'", "no data");
    /* A NULL output data pointer means "don't deliver this output" (resident state). */
    CHECK(af_run(m, &bin, &nodata) == AF_OK, "a NULL output data pointer skips delivery: %s", af_error_message());

    af_buffer shortin = AF_BUF_F32(xv, 5);
    CHECK(af_run(m, &shortin, &bout) == AF_ERR_SHAPE, "ran with a 5-element input for [2,3]");
    EXPECT_MSG("input 0", "'x'", "5 elements", "[2,3]", "6");
    af_buffer longout = AF_BUF_F32(yv, 7);
    CHECK(af_run(m, &bin, &longout) == AF_ERR_SHAPE, "ran with a 7-element output for [2,3]");
    EXPECT_MSG("output 0", "7 elements", "[2,3]");

    af_buffer baddt = { xv, (af_dtype)3, 6 };
    CHECK(af_run(m, &baddt, &bout) == AF_ERR_INVALID, "ran with a buffer of dtype 3");
    EXPECT_MSG("input 0", "dtype 3");

    /* After all that, a good run still works. */
    CHECK(af_run(m, &bin, &bout) == AF_OK, "a valid run failed: %s", af_error_message());
    CHECK(yv[0] == 1 && yv[1] == 0 && yv[4] == 5 && yv[5] == 0, "relu gave %g %g %g %g", yv[0], yv[1], yv[4], yv[5]);
    af_model_free(m);
    af_graph_free(g);

    CHECK(af_status_name(AF_ERR_SHAPE) && *af_status_name(AF_ERR_SHAPE), "af_status_name is empty");
    CHECK(af_status_name((af_status)99) != NULL, "af_status_name of 99 is NULL");
}

int main(void) {
    test_binary_shapes();
    test_axes();
    test_layout();
    test_matmul_conv_pool();
    test_norms_and_modes();
    test_null_passthrough();
    test_graph_mixing();
    test_invalid_shapes();
    test_compile_requests();
    test_run_buffers();
    return check_finish("errors");
}
