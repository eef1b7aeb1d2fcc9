/* Every optional MIL attribute the reader maps, omitted (issue 32): the project's emitter
 * always writes its attributes explicitly, so a wrong default in src/ane/mil_map*.c was
 * never reached. Each case is one handwritten program run three ways on the CPU in fp32:
 *   omitted   the attribute left out,
 *   explicit  the attribute set to Core ML's default (coremltools'
 *             converters/mil/mil/ops/defs/iOS15: default_inputs of each op),
 *   other     set to another value, which must change the result, so the input is one
 *             that can tell the default apart,
 * and omitted must equal explicit exactly.
 *
 * planted (src/ane/mil_map.c, h_eps_unary): the inverse default `1e-4` written `1e-12`
 * -> "inverse epsilon" fails (1 / (1e-3 + eps) is 909.09 with Core ML's 1e-4, 1000 with
 * 1e-12). The same for rsqrt (Core ML: 1e-12) and log (1e-45: log(0) = -103.28). */
#include "aneforge.h"
#include "mil/mil.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *args;   /* the function's arguments */
    const char *pre;    /* statements before the op (constants it needs), or "" */
    const char *op;     /* the op's statement; the first %s receives "attr = a, " or nothing */
    const char *attr;   /* the attribute */
    const char *type;   /* its MIL type */
    const char *dflt;   /* Core ML's default, as a literal */
    const char *other;  /* a different value (NULL: the default changes the shape, no third run) */
    int n;              /* values fed to the single argument */
    float x[12];
} dcase;

static const dcase CASES[] = {
    { "inverse epsilon", "tensor<fp32, [4]> x", "", "tensor<fp32, [4]> y = inverse(%sx = x)[name = string(\"y\")];", "epsilon",
      "fp32", "fp32(1e-4)", "fp32(1e-12)", 4, { 1e-3f, 0.5f, -2, 3 } },
    { "rsqrt epsilon", "tensor<fp32, [4]> x", "", "tensor<fp32, [4]> y = rsqrt(%sx = x)[name = string(\"y\")];", "epsilon", "fp32",
      "fp32(1e-12)", "fp32(1e-4)", 4, { 1e-12f, 4e-12f, 0.25f, 4 } },
    { "log epsilon", "tensor<fp32, [4]> x", "", "tensor<fp32, [4]> y = log(%sx = x)[name = string(\"y\")];", "epsilon", "fp32",
      "fp32(1e-45)", "fp32(1e-12)", 4, { 0, 1e-30f, 0.5f, 2 } },
    { "l2_norm epsilon", "tensor<fp32, [4]> x", "", "tensor<fp32, [4]> y = l2_norm(%sx = x)[name = string(\"y\")];", "epsilon",
      "fp32", "fp32(1e-6)", "fp32(1e-12)", 4, { 1e-4f, 0, -2e-4f, 0 } },
    { "layer_norm epsilon", "tensor<fp32, [4]> x", "tensor<int32, [1]> ax = const()[name = string(\"ax\"), val = tensor<int32, [1]>([0])];",
      "tensor<fp32, [4]> y = layer_norm(axes = ax, %sx = x)[name = string(\"y\")];", "epsilon", "fp32", "fp32(1e-5)",
      "fp32(1e-3)", 4, { 1, 1.001f, 0.999f, 1.002f } },
    { "layer_norm axes", "tensor<fp32, [4]> x", "fp32 e = const()[name = string(\"e\"), val = fp32(1e-5)];",
      "tensor<fp32, [4]> y = layer_norm(%sepsilon = e, x = x)[name = string(\"y\")];", "axes", "tensor<int32, [1]>",
      "tensor<int32, [1]>([0])", NULL, 4, { 1, 2, -3, 0.5f } },
    { "instance_norm epsilon", "tensor<fp32, [1, 1, 4]> x", "", "tensor<fp32, [1, 1, 4]> y = instance_norm(%sx = x)[name = string(\"y\")];",
      "epsilon", "fp32", "fp32(1e-5)", "fp32(1e-3)", 4, { 1, 1.001f, 0.999f, 1.002f } },
    { "batch_norm epsilon", "tensor<fp32, [1, 2, 2]> x",
      "tensor<fp32, [2]> mu = const()[name = string(\"mu\"), val = tensor<fp32, [2]>([0.5, -1.0])];\n"
      "            tensor<fp32, [2]> var = const()[name = string(\"var\"), val = tensor<fp32, [2]>([1e-6, 4e-6])];",
      "tensor<fp32, [1, 2, 2]> y = batch_norm(%smean = mu, variance = var, x = x)[name = string(\"y\")];", "epsilon", "fp32",
      "fp32(1e-5)", "fp32(1e-3)", 4, { 0.5f, 0.75f, -1, -1.5f } },
    { "gelu mode", "tensor<fp32, [6]> x", "", "tensor<fp32, [6]> y = gelu(%sx = x)[name = string(\"y\")];", "mode", "string",
      "string(\"EXACT\")", "string(\"TANH_APPROXIMATION\")", 6, { -3, -1.5f, -0.5f, 0.5f, 1.5f, 3 } },
    { "softmax axis", "tensor<fp32, [2, 3]> x", "", "tensor<fp32, [2, 3]> y = softmax(%sx = x)[name = string(\"y\")];", "axis", "int32",
      "int32(-1)", "int32(0)", 6, { 1, 2, 3, -1, 0, 4 } },
    { "matmul transpose_x", "tensor<fp32, [2, 2]> x", "tensor<fp32, [2, 2]> b = const()[name = string(\"b\"), val = tensor<fp32, [2, 2]>([[1.0, 2.0], [3.0, 4.0]])];",
      "tensor<fp32, [2, 2]> y = matmul(%sx = x, y = b)[name = string(\"y\")];", "transpose_x", "bool", "bool(false)", "bool(true)", 4,
      { 1, -2, 0.5f, 3 } },
    { "matmul transpose_y", "tensor<fp32, [2, 2]> x", "tensor<fp32, [2, 2]> b = const()[name = string(\"b\"), val = tensor<fp32, [2, 2]>([[1.0, 2.0], [3.0, 4.0]])];",
      "tensor<fp32, [2, 2]> y = matmul(%sx = x, y = b)[name = string(\"y\")];", "transpose_y", "bool", "bool(false)", "bool(true)", 4,
      { 1, -2, 0.5f, 3 } },
    { "reduce_sum keep_dims", "tensor<fp32, [2, 3]> x", "tensor<int32, [1]> ax = const()[name = string(\"ax\"), val = tensor<int32, [1]>([1])];",
      "tensor<fp32, [2]> y = reduce_sum(axes = ax, %sx = x)[name = string(\"y\")];", "keep_dims", "bool", "bool(false)", NULL, 6,
      { 1, 2, 3, 4, 5, 6 } },
    { "reduce_mean axes", "tensor<fp32, [2, 3]> x", "", "fp32 y = reduce_mean(%sx = x)[name = string(\"y\")];", "axes",
      "tensor<int32, [2]>", "tensor<int32, [2]>([0, 1])", NULL, 6, { 1, 2, 3, 4, 5, 7 } },
    { "avg_pool strides", "tensor<fp32, [1, 1, 3, 3]> x",
      "tensor<int32, [2]> k = const()[name = string(\"k\"), val = tensor<int32, [2]>([2, 2])];\n"
      "            string pt = const()[name = string(\"pt\"), val = string(\"valid\")];",
      "tensor<fp32, [1, 1, 2, 2]> y = avg_pool(kernel_sizes = k, pad_type = pt, %sx = x)[name = string(\"y\")];", "strides",
      "tensor<int32, [2]>", "tensor<int32, [2]>([1, 1])", NULL, 9, { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "avg_pool exclude_padding_from_average", "tensor<fp32, [1, 1, 3, 3]> x",
      "tensor<int32, [2]> k = const()[name = string(\"k\"), val = tensor<int32, [2]>([2, 2])];\n"
      "            string pt = const()[name = string(\"pt\"), val = string(\"valid\")];",
      "tensor<fp32, [1, 1, 2, 2]> y = avg_pool(kernel_sizes = k, pad_type = pt, %sx = x)[name = string(\"y\")];",
      "exclude_padding_from_average", "bool", "bool(false)", NULL, 9, { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "max_pool ceil_mode", "tensor<fp32, [1, 1, 3, 3]> x",
      "tensor<int32, [2]> k = const()[name = string(\"k\"), val = tensor<int32, [2]>([2, 2])];\n"
      "            tensor<int32, [2]> s = const()[name = string(\"s\"), val = tensor<int32, [2]>([2, 2])];\n"
      "            string pt = const()[name = string(\"pt\"), val = string(\"valid\")];",
      "tensor<fp32, [1, 1, 1, 1]> y = max_pool(kernel_sizes = k, pad_type = pt, strides = s, %sx = x)[name = string(\"y\")];",
      "ceil_mode", "bool", "bool(false)", NULL, 9, { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "conv strides", "tensor<fp32, [1, 1, 3, 3]> x", "tensor<fp32, [1, 1, 2, 2]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 2, 2]>([[[[1.0, -1.0], [0.5, 2.0]]]])];",
      "tensor<fp32, [1, 1, 2, 2]> y = conv(%sweight = w, x = x)[name = string(\"y\")];", "strides", "tensor<int32, [2]>",
      "tensor<int32, [2]>([1, 1])", NULL, 9, { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "conv dilations", "tensor<fp32, [1, 1, 3, 3]> x", "tensor<fp32, [1, 1, 2, 2]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 2, 2]>([[[[1.0, -1.0], [0.5, 2.0]]]])];",
      "tensor<fp32, [1, 1, 2, 2]> y = conv(%sweight = w, x = x)[name = string(\"y\")];", "dilations", "tensor<int32, [2]>",
      "tensor<int32, [2]>([1, 1])", NULL, 9, { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "conv groups", "tensor<fp32, [1, 1, 3, 3]> x", "tensor<fp32, [1, 1, 2, 2]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 2, 2]>([[[[1.0, -1.0], [0.5, 2.0]]]])];",
      "tensor<fp32, [1, 1, 2, 2]> y = conv(%sweight = w, x = x)[name = string(\"y\")];", "groups", "int32", "int32(1)", NULL, 9,
      { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "conv pad_type", "tensor<fp32, [1, 1, 3, 3]> x", "tensor<fp32, [1, 1, 2, 2]> w = const()[name = string(\"w\"), val = tensor<fp32, [1, 1, 2, 2]>([[[[1.0, -1.0], [0.5, 2.0]]]])];",
      "tensor<fp32, [1, 1, 2, 2]> y = conv(%sweight = w, x = x)[name = string(\"y\")];", "pad_type", "string", "string(\"valid\")", NULL, 9,
      { 1, 2, 3, 4, 5, 6, 7, 8, 10 } },
    { "concat interleave", "tensor<fp32, [2]> x", "tensor<fp32, [2]> b = const()[name = string(\"b\"), val = tensor<fp32, [2]>([5.0, 6.0])];\n"
      "            int32 ax = const()[name = string(\"ax\"), val = int32(0)];",
      "tensor<fp32, [4]> y = concat(axis = ax, %svalues = (x, b))[name = string(\"y\")];", "interleave", "bool", "bool(false)", NULL, 2,
      { 1, 2 } },
    { "cumsum axis", "tensor<fp32, [2, 3]> x", "", "tensor<fp32, [2, 3]> y = cumsum(%sx = x)[name = string(\"y\")];", "axis", "int32",
      "int32(0)", "int32(1)", 6, { 1, 2, 3, 4, 5, 6 } },
    { "cumsum exclusive", "tensor<fp32, [2, 3]> x", "", "tensor<fp32, [2, 3]> y = cumsum(%sx = x)[name = string(\"y\")];", "exclusive",
      "bool", "bool(false)", "bool(true)", 6, { 1, 2, 3, 4, 5, 6 } },
    { "cumsum reverse", "tensor<fp32, [2, 3]> x", "", "tensor<fp32, [2, 3]> y = cumsum(%sx = x)[name = string(\"y\")];", "reverse",
      "bool", "bool(false)", "bool(true)", 6, { 1, 2, 3, 4, 5, 6 } },
    { "one_hot on_value", "tensor<int32, [3]> x", "int32 n = const()[name = string(\"n\"), val = int32(4)];",
      "tensor<int32, [3, 4]> y = one_hot(indices = x, one_hot_vector_size = n, %soff_value = int32(0))[name = string(\"y\")];",
      "on_value", "int32", "int32(1)", "int32(2)", 3, { 0, 3, 1 } }, /* Core ML's on_value is int32 1: an int32 result */
    { "one_hot off_value", "tensor<int32, [3]> x", "int32 n = const()[name = string(\"n\"), val = int32(4)];",
      "tensor<fp32, [3, 4]> y = one_hot(indices = x, one_hot_vector_size = n, on_value = fp32(1.0), %s)[name = string(\"y\")];",
      "off_value", "fp32", "fp32(0.0)", "fp32(-1.0)", 3, { 0, 3, 1 } },
    { "one_hot axis", "tensor<int32, [3]> x", "int32 n = const()[name = string(\"n\"), val = int32(3)];",
      "tensor<fp32, [3, 3]> y = one_hot(indices = x, one_hot_vector_size = n, on_value = fp32(1.0), %soff_value = fp32(0.0))[name = string(\"y\")];",
      "axis", "int32", "int32(-1)", "int32(0)", 3, { 1, 2, 0 } },
    { "pad mode", "tensor<fp32, [3]> x", "tensor<int32, [2]> p = const()[name = string(\"p\"), val = tensor<int32, [2]>([1, 1])];",
      "tensor<fp32, [5]> y = pad(%spad = p, x = x)[name = string(\"y\")];", "mode", "string", "string(\"constant\")",
      "string(\"replicate\")", 3, { 1, 2, 3 } },
    { "pad constant_val", "tensor<fp32, [3]> x", "tensor<int32, [2]> p = const()[name = string(\"p\"), val = tensor<int32, [2]>([1, 1])];",
      "tensor<fp32, [5]> y = pad(%spad = p, x = x)[name = string(\"y\")];", "constant_val", "fp32", "fp32(0.0)", "fp32(7.0)", 3,
      { 1, 2, 3 } },
    { "squeeze axes", "tensor<fp32, [1, 3, 1]> x", "", "tensor<fp32, [3]> y = squeeze(%sx = x)[name = string(\"y\")];", "axes",
      "tensor<int32, [2]>", "tensor<int32, [2]>([0, 2])", NULL, 3, { 1, 2, 3 } },
    { "reduce_argmax axis", "tensor<fp32, [2, 2]> x", "", "tensor<int32, [2]> y = reduce_argmax(%sx = x)[name = string(\"y\")];",
      "axis", "int32", "int32(-1)", "int32(0)", 4, { 1, 2, 4, 3 } },
    { "upsample_bilinear align_corners", "tensor<fp32, [1, 1, 2, 2]> x", "",
      "tensor<fp32, [1, 1, 4, 4]> y = upsample_bilinear(%sscale_factor_height = fp32(2.0), scale_factor_width = fp32(2.0), x = x)[name = string(\"y\")];",
      "align_corners", "bool", "bool(true)", "bool(false)", 4, { 1, 2, 4, 8 } },
    { "upsample_bilinear half_pixel_centers", "tensor<fp32, [1, 1, 2, 2]> x", "",
      "tensor<fp32, [1, 1, 4, 4]> y = upsample_bilinear(align_corners = bool(false), %sscale_factor_height = fp32(2.0), scale_factor_width = fp32(2.0), x = x)[name = string(\"y\")];",
      "half_pixel_centers", "bool", "bool(true)", "bool(false)", 4, { 1, 2, 4, 8 } }, /* !align_corners */
    { "upsample_bilinear scale_factor_height", "tensor<fp32, [1, 1, 2, 2]> x", "",
      "tensor<fp32, [1, 1, 2, 4]> y = upsample_bilinear(%sscale_factor_width = fp32(2.0), x = x)[name = string(\"y\")];",
      "scale_factor_height", "fp32", "fp32(1.0)", NULL, 4, { 1, 2, 4, 8 } },
    { "upsample_nearest_neighbor scale_factor_width", "tensor<fp32, [1, 1, 2, 2]> x", "",
      "tensor<fp32, [1, 1, 4, 2]> y = upsample_nearest_neighbor(scale_factor_height = fp32(2.0), %sx = x)[name = string(\"y\")];",
      "scale_factor_width", "fp32", "fp32(1.0)", NULL, 4, { 1, 2, 4, 8 } },
    { "band_part lower", "tensor<fp32, [3, 3]> x", "", "tensor<fp32, [3, 3]> y = band_part(%sx = x)[name = string(\"y\")];", "lower",
      "int32", "int32(-1)", "int32(0)", 9, { 1, 2, 3, 4, 5, 6, 7, 8, 9 } },
    { "band_part upper", "tensor<fp32, [3, 3]> x", "", "tensor<fp32, [3, 3]> y = band_part(%sx = x)[name = string(\"y\")];", "upper",
      "int32", "int32(-1)", "int32(0)", 9, { 1, 2, 3, 4, 5, 6, 7, 8, 9 } },
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

/* Parses and runs the program with the attribute given as `lit` (NULL: omitted); writes
 * the results to y (at most 32) and their count to *ny. 0, or -1 after a failed CHECK
 * (when `must` is set). */
static int run(const dcase *c, const char *lit, float *y, int64_t *ny) {
    char pre[1200], arg[120], op[800], text[4000];
    if (lit) {
        snprintf(pre, sizeof pre, "%s\n            %s a = const()[name = string(\"a\"), val = %s];", c->pre, c->type, lit);
        snprintf(arg, sizeof arg, strstr(c->op, "%s)") ? "%s = a" : "%s = a, ", c->attr);
    } else {
        snprintf(pre, sizeof pre, "%s", c->pre);
        arg[0] = 0;
    }
    snprintf(op, sizeof op, c->op, arg);
    if (!lit && strstr(c->op, ", %s)")) { /* the attribute was the last argument: drop its ", " */
        char *p = strstr(op, ", )");
        if (p) memmove(p, p + 2, strlen(p + 2) + 1);
    }
    snprintf(text, sizeof text, "program(1.3)\n{\n    func main<ios18>(%s) {\n            %s\n            %s\n        } -> (y);\n}\n",
             c->args, pre, op);
    mil_read_opts ro = { .source_name = c->name };
    mil_module m;
    af_status st = mil_parse(text, strlen(text), &ro, &m);
    CHECK(st == AF_OK, "%s (%s): parse: %s\n%s", c->name, lit ? lit : "omitted", af_error_message(), text);
    if (st) return -1;
    int rc = -1;
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *mod = m.nin == 1 && m.nout == 1 ? af_compile(m.g, 1, m.in, 1, m.out, &o) : NULL;
    CHECK(mod != NULL, "%s (%s): compile: %s", c->name, lit ? lit : "omitted", af_error_message());
    if (mod) {
        *ny = af_shape_count(af_tensor_shape(m.out[0]));
        if (*ny <= 32 && af_shape_count(af_tensor_shape(m.in[0])) == c->n) {
            af_buffer bi = AF_BUF_F32(c->x, c->n), bo = AF_BUF_F32(y, *ny);
            st = af_run(mod, &bi, &bo);
            CHECK(st == AF_OK, "%s: run: %s", c->name, af_error_message());
            rc = st == AF_OK ? 0 : -1;
        } else {
            CHECK(0, "%s (%s): %lld results / %lld arguments, want <= 32 and %d", c->name, lit ? lit : "omitted", (long long)*ny,
                  (long long)af_shape_count(af_tensor_shape(m.in[0])), c->n);
        }
        af_model_free(mod);
    }
    af_graph_free(m.g);
    return rc;
}

static bool same(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i])) return false;
    return true;
}

int main(void) {
    for (int i = 0; i < NCASES; i++) {
        const dcase *c = &CASES[i];
        float y0[32], y1[32], y2[32];
        int64_t n0 = 0, n1 = 0, n2 = 0;
        if (run(c, NULL, y0, &n0) || run(c, c->dflt, y1, &n1)) continue;
        CHECK(n0 == n1 && same(y0, y1, n0), "%s: omitted gives %lld values (first %.9g), Core ML's default %s gives %lld (first %.9g)",
              c->name, (long long)n0, (double)y0[0], c->dflt, (long long)n1, (double)y1[0]);
        if (c->other && run(c, c->other, y2, &n2) == 0)
            CHECK(n2 != n0 || !same(y0, y2, n0), "%s: %s gives the same result as the default: the case cannot tell them apart", c->name,
                  c->other);
    }
    return check_finish("kin_mil_defaults");
}
