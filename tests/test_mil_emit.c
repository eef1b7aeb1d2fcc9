/* The MIL emitter's spelling rules, one at a time: C99 hex floats, bare scalar types,
 * alphabetical function arguments and op arguments, named consts, the 10-element line
 * between inline and BLOBFILE constants with offsets at 64-byte records, unique and
 * valid names, the coremlc layout; plus: every non-leaf op-table row has a MIL lowering
 * (`aneforge ops` shows it) and the emitter's failures are reported, not aborted. */
#include "aneforge.h"
#include "mil/mil.h"
#include "mil/opinfo.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void hex(double v, const char *want) {
    char buf[40];
    mil_hexfloat(v, buf);
    CHECK(!strcmp(buf, want), "hexfloat(%.17g) = %s, want %s", v, buf, want);
    CHECK(isnan(v) || strtod(buf, NULL) == v, "hexfloat(%.17g) = %s does not read back", v, buf);
}

static char *emit(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, milblob_writer **w) {
    char *text = NULL;
    size_t len;
    milblob_writer *tmp = NULL;
    af_status st = mil_emit_mem(g, nin, in, nout, out, &text, &len, w ? w : &tmp, NULL);
    CHECK(st == AF_OK, "emit: %s", af_error_message());
    CHECK(!text || strlen(text) == len, "emit: length %zu but strlen %zu", len, text ? strlen(text) : 0);
    milblob_writer_free(tmp);
    return text;
}

static void test_hexfloat(void) {
    hex(1.0, "0x1p+0");
    hex(3.0, "0x1.8p+1");
    hex(-0.5, "-0x1p-1");
    hex(0.0, "0x0p+0");
    hex(-0.0, "-0x0p+0");
    hex(65504.0, "0x1.ffcp+15");          /* fp16 max */
    hex(ldexp(1.0, -24), "0x1p-24");      /* smallest fp16 subnormal */
    hex((double)1e-5f, "0x1.4f8b58p-17"); /* an fp32 epsilon */
    hex(-10000.0, "-0x1.388p+13");        /* coremlc's own example */
    hex(INFINITY, "inf");
    hex(-INFINITY, "-inf");
    hex(NAN, "nan");
}

static void test_layout(void) {
    af_graph *g = af_graph_new();
    af_tensor *b = af_input(g, "zeta", AF_F32, AF_SHAPE(2, 3));
    af_tensor *a = af_input(g, "alpha", AF_F32, AF_SHAPE(2, 3));
    float nine[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, ten[10] = { 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f, 5 };
    float five[5] = { 1, 2, 3, 4, 5 };
    af_tensor *c9 = af_const(g, "c9", AF_SHAPE(3, 3), nine);
    af_tensor *c10 = af_const(g, "c10", AF_SHAPE(10), ten);
    af_tensor *c10b = af_const(g, "c10b", AF_SHAPE(5, 2), ten);
    af_tensor *c5 = af_const(g, "1 bad-name", AF_SHAPE(5), five);
    af_tensor *y = af_add(a, b);
    af_tensor *outs[5] = { af_muls(y, 0.5f), af_matmul(c9, c9, 0, 0), af_reshape(c10, AF_SHAPE(2, 5)), af_adds(c10b, 1.0f), af_neg(c5) };
    af_tensor *in[2] = { b, a };
    milblob_writer *w = NULL;
    char *t = emit(g, 2, in, 5, outs, &w);
    if (!t) { af_graph_free(g); return; }
    const char *head = "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"" AF_MIL_BUILD_MIL
                       "\"}, {\"coremlc-version\", \"" AF_MIL_BUILD_COREMLC "\"}})]\n{\n    func main<ios18>(";
    CHECK(!strncmp(t, head, strlen(head)), "header: %.200s", t);
    CHECK(strstr(t, "func main<ios18>(tensor<fp16, [2, 3]> alpha, tensor<fp16, [2, 3]> zeta) {\n") != NULL, "arguments are not alphabetical fp16: %.300s", t);
    CHECK(strstr(t, "            tensor<fp16, [2, 3]> add_") != NULL, "statements are not indented 12 spaces");
    CHECK(strstr(t, "add(x = alpha, y = zeta)") != NULL, "add arguments: %s", t);
    CHECK(strstr(t, "fp16 muls_") != NULL && strstr(t, "val = fp16(0x1p-1)];") != NULL, "scalar const spelling");
    /* 9 elements inline (nested brackets), 10 in the weight file: c10 first at 64, c10b at 64+64+20 -> 192 */
    CHECK(strstr(t, "tensor<fp16, [3, 3]> c9 = const()[name = string(\"c9\"), val = tensor<fp16, [3, 3]>([[0x1p+0, 0x1p+1, 0x1.8p+1], [0x1p+2, 0x1.4p+2, 0x1.8p+2], [0x1.cp+2, 0x1p+3, 0x1.2p+3]])];") != NULL, "inline 3x3: %s", t);
    CHECK(strstr(t, "tensor<fp16, [10]> c10 = const()[name = string(\"c10\"), val = tensor<fp16, [10]>(BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(64)))];") != NULL, "blob c10: %s", t);
    CHECK(strstr(t, "offset = uint64(192)") != NULL, "second record not at 192");
    CHECK(strstr(t, "> v_1_bad_name = const()[name = string(\"v_1_bad_name\")") != NULL, "name sanitising: %s", t);
    CHECK(strstr(t, "        } -> (") != NULL && strlen(t) >= 5 && strcmp(t + strlen(t) - 5, ");\n}\n") == 0, "closing");
    size_t nb;
    const uint8_t *bytes = milblob_bytes(w, &nb);
    CHECK(milblob_writer_count(w) == 2 && nb == 192 + 64 + 20, "weight file: %d records, %zu bytes", milblob_writer_count(w), nb);
    CHECK(nb >= 130 && bytes[64] == 0xEF && bytes[68] == 1 && bytes[128] == 0x00 && bytes[129] == 0x38, "fp16 record 0 (0.5 = 0x3800)");
    free(t);
    milblob_writer_free(w);
    af_graph_free(g);
}

static void test_outputs_and_names(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "tensor", AF_F32, AF_SHAPE(4)); /* a reserved word as a name */
    af_tensor *r = af_relu(x);
    af_tensor *outs[3] = { r, r, x }; /* a repeat and an input among the results */
    char *t = emit(g, 1, &x, 3, outs, NULL);
    if (t) {
        CHECK(strstr(t, "tensor<fp16, [4]> tensor_)") != NULL, "reserved name kept: %s", t);
        CHECK(strstr(t, "identity(x = relu_0)") && strstr(t, "identity(x = tensor_)"), "repeats and inputs get an identity: %s", t);
        mil_module m;
        size_t len = strlen(t);
        CHECK(mil_parse(t, len, NULL, &m) == AF_OK && m.nout == 3, "reparse: %s", af_error_message());
        af_graph_free(m.g);
    }
    free(t);
    /* A missing input is an error, not a crash. */
    char *text;
    size_t len;
    milblob_writer *w;
    af_tensor *y = af_input(g, "y", AF_F32, AF_SHAPE(4));
    af_tensor *s = af_add(x, y);
    CHECK(mil_emit_mem(g, 1, &x, 1, &s, &text, &len, &w, NULL) == AF_ERR_INVALID && strstr(af_error_message(), "'y'"),
          "an unlisted input must be refused: %s", af_error_message());
    CHECK(mil_emit_mem(NULL, 0, NULL, 1, &s, &text, &len, &w, NULL) == AF_ERR_INVALID, "NULL graph");
    af_graph_free(g);
}

static void test_opinfo(void) {
    for (int op = 0; op < IR_OP_COUNT; op++)
        CHECK(mil_op_lowering(op) != NULL, "op '%s' has no MIL lowering: add it to mil_lower.c and mil_opinfo.c", ir_ops[op].name);
    CHECK(mil_op_lowering(-1) == NULL && mil_op_lowering(IR_OP_COUNT) == NULL, "out-of-range ops");
}

int main(void) {
    test_hexfloat();
    test_layout();
    test_outputs_and_names();
    test_opinfo();
    return check_finish("mil_emit");
}
