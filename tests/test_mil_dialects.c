/* MIL as other tools and projects write it, end to end through `aneforge mil run`
 * (cmd_mil, compiled into this test) against NumPy references
 * (tests/fixtures/mil/make_dialects.py; the programs are hand-written, see
 * tests/fixtures/mil/dialects/README.md):
 *   - ints_ios17: program(1.0) with tensor<string, []> scalars, two functions run by
 *     name, int32/bool/fp16 arguments (an int64 .npy accepted for int32), integer
 *     arithmetic (floor_div, mod on negatives), casts to int8/uint8/int16 (truncate and
 *     wrap), bool and fp16, argmax; argmax_long gives indices 2049 and 2999, which fp16
 *     cannot hold, exact at fp16 precision too;
 *   - literals_ios18: program(1.5), untyped operands, flat lists for rank-2/3 tensors,
 *     bare scalars for one-element tensors, comments and blank lines anywhere;
 *   - ops_ios18: the Core ML ops this reader composes (round half to even, floor, ceil,
 *     sign, exp2, tan, sinh, cosh, softplus, softsign, floor_div, mod, reduce_l2_norm,
 *     reduce_log_sum_exp, reduce_prod, reduce_argmin, one_hot, cumsum both ways,
 *     band_part, tile, pad in three modes, l2_norm, upsample_nearest_neighbor,
 *     gather_along_axis, quantize, dequantize, leaky_relu, elu, sigmoid_hard);
 *   - layout_coreml8: program(1.2) with a CoreML8 opset: atan, asin, acos, atanh, gather
 *     (negative indices), scatter (update) and scatter_along_axis (add, duplicates),
 *     stack, flatten2d, shape, reverse, depth_to_space / space_to_depth, pixel_shuffle /
 *     pixel_unshuffle, upsample_bilinear both ways, einsum (contraction and batch),
 *     prelu, crop, range_1d past 2048, fill, constexpr_blockwise_shift_scale,
 *     constexpr_cast;
 *   - weights_ios16: @model_path/weights.bin whose header says 1 record for 2 (read,
 *     with a warning through the log) and @model_path/weights/weight.bin with int8
 *     constexpr_affine_dequantize data and an int32 table beyond fp16's range.
 * Every result is written with its declared dtype: integer and bool results must match
 * exactly at both precisions, floats within 2e-5 (fp32) or 3e-3 (engine fp16).
 * Malformed variants of each new spelling fail with their line and column. */
#define _POSIX_C_SOURCE 200809L
#include "../tools/cmd_mil.c"
#include "mil/mil.h" /* the samples and the reader, which the CLI reaches through the public API */
#include "aneforge_data.h"
#include "../tools/mil_npy.c"
#include "../tools/cli_file.c"

#include "support/check.h"
#include "support/milrun.h"

#include <dirent.h>
#include <math.h>
#include <unistd.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif
#define DIALECTS AF_SOURCE_DIR "/tests/fixtures/mil/dialects"

static char warned[1024];
static void capture(af_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == AF_LOG_WARN) snprintf(warned, sizeof warned, "%s", msg);
}

typedef struct {
    char descr[8], shape[64];
    unsigned char *data;
    size_t n;
} npy_raw;

static bool read_raw(const char *path, npy_raw *r) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n < 10 || memcmp(buf, "\x93NUMPY", 6) || buf[6] != 1) return false;
    size_t hl = buf[8] | (size_t)buf[9] << 8;
    if (10 + hl > n) return false;
    char hdr[512] = "";
    memcpy(hdr, buf + 10, hl < sizeof hdr - 1 ? hl : sizeof hdr - 1);
    const char *d = strstr(hdr, "'descr': '"), *s = strstr(hdr, "'shape': (");
    if (!d || !s || sscanf(d + 10, "%7[^']", r->descr) != 1 || sscanf(s + 10, "%63[^)]", r->shape) != 1) return false;
    if (!strcmp(r->shape, ")")) r->shape[0] = 0;
    r->n = n - 10 - hl;
    r->data = malloc(r->n + 1);
    memcpy(r->data, buf + 10 + hl, r->n);
    return true;
}

static double as_double(const npy_raw *r, size_t i) {
    const unsigned char *p = r->data;
    if (!strcmp(r->descr, "<f4")) { float f; memcpy(&f, p + 4 * i, 4); return f; }
    if (!strcmp(r->descr, "<f2")) return af_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    return NAN;
}

/* Compares one result file with its reference: same dtype and shape; integers and
 * bools byte for byte, floats within rtol/atol. */
static void compare(const char *got_path, const char *want_path, double tol, const char *what) {
    npy_raw g, w;
    bool ok = read_raw(got_path, &g) && read_raw(want_path, &w);
    CHECK(ok, "%s: cannot read %s or %s", what, got_path, want_path);
    if (!ok) { free(g.data); free(w.data); return; }
    CHECK(!strcmp(g.descr, w.descr) && !strcmp(g.shape, w.shape) && g.n == w.n, "%s: %s (%s) vs reference %s (%s)", what, g.descr,
          g.shape, w.descr, w.shape);
    if (!strcmp(g.descr, w.descr) && g.n == w.n) {
        if (w.descr[1] != 'f') {
            CHECK(!memcmp(g.data, w.data, g.n), "%s: integer or bool values differ", what);
        } else {
            size_t k = w.descr[2] == '4' ? 4 : 2, bad = 0;
            if (k == 2 && tol < 1e-3) tol = 1e-3; /* an fp16 result is rounded once per op, the reference once */
            double worst = 0;
            for (size_t i = 0; i < w.n / k; i++) {
                double a = as_double(&g, i), b = as_double(&w, i), e = fabs(a - b) / (tol + fabs(b) * tol);
                if (!(e <= 1.0)) bad++;
                if (e > worst || e != e) worst = e;
            }
            CHECK(bad == 0, "%s: %zu values off (worst %.3g of the tolerance %g)", what, bad, worst, tol);
        }
    }
    free(g.data);
    free(w.data);
}

static char tmp[256];

/* Runs one function of a fixture program through the CLI and checks every result. */
static void run_case(const char *prog, const char *fn, bool fp32) {
    char dir[512], ind[600], wantd[600], outd[600];
    snprintf(dir, sizeof dir, "%s/%s", DIALECTS, prog);
    snprintf(ind, sizeof ind, "%s/in_%s", dir, fn);
    snprintf(wantd, sizeof wantd, "%s/want_%s", dir, fn);
    snprintf(outd, sizeof outd, "%s/%s_%s_%s", tmp, prog, fn, fp32 ? "fp32" : "fp16");
    char model[600], feeds[8][1200];
    snprintf(model, sizeof model, "%s/model.mil", dir);
    const char *args[24] = { "run", model, "--function", fn, "--out", outd };
    int n = 6, nf = 0;
    DIR *d = opendir(ind);
    CHECK(d != NULL, "%s: no inputs in %s", prog, ind);
    for (struct dirent *e; d && (e = readdir(d)) && nf < 8;) {
        size_t L = strlen(e->d_name);
        if (L < 5 || strcmp(e->d_name + L - 4, ".npy")) continue;
        snprintf(feeds[nf], sizeof feeds[nf], "%.*s=%s/%s", (int)(L - 4), e->d_name, ind, e->d_name);
        args[n++] = "--in";
        args[n++] = feeds[nf++];
    }
    if (d) closedir(d);
    if (fp32) args[n++] = "--fp32";
    char *argv[26];
    argv[0] = "mil";
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    fflush(stdout);
    int rc = cmd_mil(n + 1, argv);
    CHECK(rc == 0, "%s %s (%s): mil run exited %d", prog, fn, fp32 ? "fp32" : "fp16", rc);
    d = opendir(wantd);
    int nw = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t L = strlen(e->d_name);
        if (L < 5 || strcmp(e->d_name + L - 4, ".npy")) continue;
        char gp[900], wp[900], what[600];
        snprintf(gp, sizeof gp, "%s/%s", outd, e->d_name);
        snprintf(wp, sizeof wp, "%s/%s", wantd, e->d_name);
        snprintf(what, sizeof what, "%s %s %s (%s)", prog, fn, e->d_name, fp32 ? "fp32" : "fp16");
        compare(gp, wp, fp32 ? 2e-5 : 3e-3, what);
        nw++;
    }
    if (d) closedir(d);
    CHECK(nw > 0, "%s %s: no references", prog, fn);
}

static void test_programs(void) {
    for (int p = 0; p < 2; p++) {
        bool fp32 = p == 0;
        run_case("ints_ios17", "main", fp32);
        run_case("ints_ios17", "argmax_long", fp32);
        run_case("literals_ios18", "main", fp32);
        run_case("ops_ios18", "main", fp32);
        run_case("layout_coreml8", "main", fp32);
        warned[0] = 0;
        run_case("weights_ios16", "main", fp32);
        CHECK(strstr(warned, "header says 1 records but the file holds 2"), "count-1 weight file: warning '%s'", warned);
    }
}

/* ---------------------------------------------------------------- spellings, one by one */

static mil_module parse_ok(const char *text, const char *fn, const char *what) {
    mil_read_opts o = { .source_name = "t.mil", .function = fn };
    mil_module m;
    af_status st = mil_parse(text, strlen(text), &o, &m);
    CHECK(st == AF_OK, "%s: %s", what, af_error_message());
    return m;
}

/* Every version and opset spelling reads; a program's functions are chosen by name. */
static void test_versions(void) {
    const char *versions[] = { "1", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5" };
    const char *opsets[] = { "ios15", "ios16", "ios17", "ios18", "CoreML5", "CoreML6", "CoreML7", "CoreML8", "CoreML9" };
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++)
        for (size_t o = 0; o < sizeof opsets / sizeof opsets[0]; o++) {
            char t[400], what[64];
            snprintf(t, sizeof t,
                     "program(%s)\n{\n  func main<%s>(tensor<int32, [3]> a) {\n"
                     "    tensor<int32, [3]> b = mul(x = a, y = int32(3));\n  } -> (b);\n"
                     "  func twice<%s>(tensor<fp32, [3]> a) {\n    tensor<fp32, [3]> b = add(x = a, y = a);\n  } -> (b);\n}\n",
                     versions[v], opsets[o], opsets[o]);
            snprintf(what, sizeof what, "program(%s) %s", versions[v], opsets[o]);
            for (int f = 0; f < 2; f++) {
                mil_module m = parse_ok(t, f ? "twice" : NULL, what);
                if (!m.g) continue;
                float a[3] = { -7, 5, 4096 + 1 }, r[3];
                const float *in[1] = { a };
                float *out[1] = { r };
                test_mil_run(&m, in, out);
                for (int i = 0; i < 3; i++) { /* int32 exact at fp16 precision; fp32 at the engine's fp16 */
                    float want = f ? af_round_f16(af_round_f16(a[i]) * 2) : a[i] * 3;
                    CHECK(r[i] == want, "%s %s: element %d is %g, want %g", what, f ? "twice" : "main", i, r[i], want);
                }
                CHECK(!strcmp(m.in_types[0], f ? "fp32" : "int32") && !strcmp(m.out_types[0], f ? "fp32" : "int32"), "%s: types", what);
                af_graph_free(m.g);
            }
        }
}

/* Literal spellings read as the values they stand for. */
static void test_literal_spellings(void) {
    const char *t =
        "program(1.3) { func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
        "  /* flat, nested, bare scalar, untyped list and scalars */\n"
        "  tensor<fp32, [2, 2]> a = add(x = x, y = tensor<fp32, [2, 2]>([1, 2, 3, 4]));\n"
        "  tensor<fp32, [2, 2]> b = add(x = a, y = tensor<fp32, [2, 2]>([[10, 20], [30, 40]]));\n"
        "  tensor<fp32, [2, 2]> c = mul(x = b, y = tensor<fp32, [1]>(0.5));\n"
        "  tensor<fp32, [2, 1]> d = reduce_sum(x = c, axes = [-1], keep_dims = true);\n"
        "  tensor<fp32, [2, 1]> e = mul(x = d, y = -2);\n"
        "  tensor<fp32, [2, 2]> f = matmul(x = c, y = c, transpose_x = false, transpose_y = true);\n"
        "} -> (e, f); }\n";
    mil_module m = parse_ok(t, NULL, "literal spellings");
    if (!m.g) return;
    float x[4] = { 1, -1, 0.5f, 2 }, e[2], f[4], c[4];
    const float *in[1] = { x };
    float *out[2] = { e, f };
    test_mil_run(&m, in, out);
    const float add[4] = { 11, 22, 33, 44 };
    for (int i = 0; i < 4; i++) c[i] = (x[i] + add[i]) * 0.5f;
    for (int r = 0; r < 2; r++) {
        CHECK(e[r] == -2 * (c[2 * r] + c[2 * r + 1]), "reduce row %d: %g", r, e[r]);
        for (int k = 0; k < 2; k++) {
            float want = c[2 * r] * c[2 * k] + c[2 * r + 1] * c[2 * k + 1];
            CHECK(fabsf(f[2 * r + k] - want) <= 2e-3f * fabsf(want), "matmul (%d,%d): %g vs %g", r, k, f[2 * r + k], want);
        }
    }
    af_graph_free(m.g);
}

typedef struct { const char *text; const char *fn; af_status st; const char *where, *what; } bad_case;

#define H "program(1.3)\n{\n  func main<ios18>(tensor<fp32, [2, 2]> x) {\n"
#define T "  } -> (y);\n}\n"

static const bad_case bad[] = {
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = tensor<fp32, [2, 2]>([1, 2, 3]));\n" T, NULL, AF_ERR_CORRUPT, ":4:74:", "the flat literal has 3 elements but its type holds 4" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = tensor<fp32, [2, 2]>([1, 2, 3, 4, 5]));\n" T, NULL, AF_ERR_CORRUPT, ":4:77:", "more than the 4 elements" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = tensor<fp32, [2, 2]>(1));\n" T, NULL, AF_ERR_CORRUPT, ":4:66:", "bare scalar stands only for a one-element tensor" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = tensor<fp32, [2, 2]>([[1, 2], 3, 4]));\n" T, NULL, AF_ERR_CORRUPT, ":4:75:", "expected '['" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = [1, true]);\n" T, NULL, AF_ERR_CORRUPT, ":4:49:", "mixes bools and numbers" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = [[1]]);\n" T, NULL, AF_ERR_CORRUPT, ":4:46:", "nested lists need a tensor<...> type" },
    { H "    tensor<fp32, [2, 2]> y = add(x = x, y = 1e);\n" T, NULL, AF_ERR_CORRUPT, ":4:45:", "expected a number" },
    { "program(1.3)\n{\n  func main<ios14>(tensor<fp32, [2, 2]> x) {\n" T, NULL, AF_ERR_UNSUPPORTED, ":3:13:", "opset 'ios14' is not one of" },
    { "program(1.x)\n{\n}\n", NULL, AF_ERR_UNSUPPORTED, ":1:9:", "not 1.x" },
    { "program(3)\n{\n}\n", NULL, AF_ERR_UNSUPPORTED, ":1:9:", "program version 3 is not 1.x" },
    { H "    /* never closed\n" T, NULL, AF_ERR_CORRUPT, ":4:5:", "unterminated /* comment" },
    { H "    tensor<fp32, [2, 2]> y = relu(x = x);\n" T, "other", AF_ERR_INVALID, ":1:1:", "no function 'other' (it has: main)" },
    { H "    tensor<fp32, [2, 2]> y = relu(x = x);\n" T "", NULL, AF_OK, NULL, NULL },
    { H "    tensor<int32, [2, 2]> y = const()[val = tensor<int32, [2, 2]>([1, 2, 3, 16777217])];\n" T, NULL, AF_ERR_UNSUPPORTED, ":4:45:", "int32 value 16777217 (element 3) is beyond 2^24" },
    { H "    tensor<fp16, [2, 2]> y = cast(x = x, dtype = string(\"int32\"));\n" T, NULL, AF_ERR_INVALID, ":4:5:", "output 'y' is declared fp16 but the op gives an integer type" },
    { H "    tensor<int32, [2, 2]> y = cast(x = x, dtype = string(\"uint64\"));\n" T, NULL, AF_ERR_UNSUPPORTED, ":4:43:", "cast to uint64 is not supported" },
    { "program(1.3)\n{\n  func main<ios18>(tensor<int64, [2]> x) {\n" T, NULL, AF_ERR_UNSUPPORTED, ":3:20:", "argument 'x' is int64" },
    { H "    tensor<fp32, [2, 2]> y = lstm(x = x);\n" T, NULL, AF_ERR_UNSUPPORTED, ":4:5:", "op 'lstm' is a Core ML op this reader does not support yet" },
    { H "    tensor<fp32, [2, 5]> y = pad(x = x, pad = [3, 0], mode = \"reflect\");\n" T, NULL, AF_ERR_INVALID, ":4:41:", "reflect padding of 3" },
    { H "    tensor<fp32, [2, 2]> y = pad(x = x, pad = [1, 0], mode = \"wrap\");\n" T, NULL, AF_ERR_UNSUPPORTED, ":4:55:", "mode 'wrap'" },
    { H "    tensor<fp32, [2, 4]> y = tile(x = x, reps = [2]);\n" T, NULL, AF_ERR_SHAPE, ":4:42:", "reps has 1 entries for a rank-2 x" },
    { H "    tensor<int32, [2]> y = reduce_argmax(x = x, axis = 2);\n" T, NULL, AF_ERR_INVALID, ":4:49:", "axis 2 is out of range" },
    { H "    tensor<fp32, [2, 2, 3]> y = one_hot(indices = x, one_hot_vector_size = 0);\n" T, NULL, AF_ERR_UNSUPPORTED, ":4:54:", "one_hot_vector_size must be a constant in 1..65536" },
    { H "    tensor<fp32, [2, 2]> y = upsample_nearest_neighbor(x = x, scale_factor_height = 1.5);\n" T, NULL, AF_ERR_SHAPE, ":4:5:", "x needs rank 4" },
};

static void test_errors(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mil_read_opts o = { .source_name = "t.mil", .function = bad[i].fn };
        mil_module m;
        af_status st = mil_parse(bad[i].text, strlen(bad[i].text), &o, &m);
        const char *msg = af_error_message();
        if (bad[i].st == AF_OK) {
            CHECK(st == AF_OK, "control case %zu: %s", i, msg);
            af_graph_free(m.g);
            continue;
        }
        CHECK(st == bad[i].st, "bad case %zu: status %s, want %s (%s)", i, af_status_name(st), af_status_name(bad[i].st), msg);
        CHECK(st != AF_OK && strstr(msg, bad[i].where) && strstr(msg, bad[i].what), "bad case %zu: message '%s' lacks '%s' / '%s'", i,
              msg, bad[i].where, bad[i].what);
        CHECK(m.g == NULL, "bad case %zu leaves no graph", i);
    }
}

/* The CLI refuses .npy values that do not fit the argument's dtype. */
static void test_cli_npy_errors(void) {
    char mil_path[300], npy[300], outd[300];
    snprintf(mil_path, sizeof mil_path, "%s/i8.mil", tmp);
    snprintf(npy, sizeof npy, "%s/big.npy", tmp);
    snprintf(outd, sizeof outd, "%s/i8-out", tmp);
    FILE *f = fopen(mil_path, "w");
    fputs("program(1) { func main<ios17>(tensor<int8, [2]> a) { tensor<int8, [2]> b = add(x = a, y = a); } -> (b); }\n", f);
    fclose(f);
    float v[2] = { 100, 300 };
    int64_t dims[1] = { 2 };
    CHECK(af_npy_write(npy, v, 1, dims) == AF_OK, "write npy");
    char feed[400];
    snprintf(feed, sizeof feed, "a=%s", npy);
    char *argv[] = { "mil", "run", mil_path, "--in", feed, "--out", outd };
    CHECK(cmd_mil(7, argv) == 1, "an int8 argument fed 300 is refused");
    v[1] = -28;
    CHECK(af_npy_write(npy, v, 1, dims) == AF_OK, "write npy");
    CHECK(cmd_mil(7, argv) == 0, "an int8 argument fed float32 whole numbers runs");
    char res[400];
    snprintf(res, sizeof res, "%s/b.npy", outd);
    npy_raw r;
    /* 100 + 100 and -28 + -28 wrap to -56 as int8, as NumPy's int8 addition does */
    CHECK(read_raw(res, &r) && !strcmp(r.descr, "|i1") && r.n == 2 && (int8_t)r.data[0] == -56 && (int8_t)r.data[1] == -56,
          "int8 result: descr %s", r.descr);
    free(r.data);
}

int main(void) {
    af_set_log(capture, NULL);
    snprintf(tmp, sizeof tmp, "/tmp/aneforge_mil_dialects_XXXXXX");
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    test_programs();
    test_versions();
    test_literal_spellings();
    test_errors();
    test_cli_npy_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_finish("mil_dialects");
}
