/* MIL gather / scatter with indices outside their axis (issue 23, item 9): the graph
 * alone gives rows of zeros, -inf or a dropped update for them, so
 *   - constant indices out of range fail the reader (mil_parse) naming the op, the
 *     index and its element;
 *   - indices known only at run time are checked by `aneforge mil run` (fed as an
 *     argument, or computed in the program) and fail naming the op, line and index;
 *   - in range, negative indices -d..-1 count from the end as Core ML says (ios15/16,
 *     and later opsets without validate_indices), checked against a hand-computed
 *     result; with validate_indices = true on ios17+ they are out of range.
 * Every program here is written by hand. */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_data.h"
#include "mil/mil.h"
#include "support/check.h"
#include "support/cli_run.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp[256];

/* Parses text; "" on success, else the message. */
static const char *parse(const char *text) {
    static char msg[600];
    mil_module m;
    mil_read_opts o = { .source_name = "h.mil" };
    af_status st = mil_parse(text, strlen(text), &o, &m);
    snprintf(msg, sizeof msg, "%s", st ? af_error_message() : "");
    if (!st) af_graph_free(m.g);
    return msg;
}

#define HEAD "program(1.3)\n{\n"

static void test_constants(void) {
    const char *fmt = HEAD "    func main<%s>(tensor<fp32, [4, 3]> x) {\n"
                      "        tensor<int32, [3]> ids = const()[name = string(\"ids\"), val = tensor<int32, [3]>([%s])];\n"
                      "        tensor<fp32, [3, 3]> y = gather(axis = int32(0), indices = ids, x = x%s)[name = string(\"y\")];\n"
                      "    } -> (y);\n}\n";
    char text[1200];
    snprintf(text, sizeof text, fmt, "ios18", "0, 4, 1", "");
    const char *e = parse(text);
    CHECK(strstr(e, "h.mil:5:") && strstr(e, "gather: index 4 (element 1 of the indices) is outside -4..3"), "gather 4: '%s'", e);
    snprintf(text, sizeof text, fmt, "ios16", "0, -5, 1", "");
    e = parse(text);
    CHECK(strstr(e, "gather: index -5 (element 1 of the indices) is outside -4..3"), "gather -5: '%s'", e);
    snprintf(text, sizeof text, fmt, "ios16", "0, -4, 3", "");
    e = parse(text);
    CHECK(!*e, "gather -4 on ios16 (counts from the end): '%s'", e);
    snprintf(text, sizeof text, fmt, "ios18", "0, -1, 3", ", validate_indices = true");
    e = parse(text);
    CHECK(strstr(e, "gather: index -1 (element 1 of the indices) is outside 0..3"), "ios18 validate_indices -1: '%s'", e);
    /* along another axis (the one-hot pick) and gather_along_axis, scatter, scatter_along_axis */
    e = parse(HEAD "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n"
                   "        tensor<fp32, [2, 2]> y = gather(axis = int32(1), indices = tensor<int32, [2]>([2, 3]), x = x)[name = string(\"y\")];\n"
                   "    } -> (y);\n}\n");
    CHECK(strstr(e, "gather: index 3 (element 1 of the indices) is outside -3..2"), "gather axis 1: '%s'", e);
    e = parse(HEAD "    func main<ios18>(tensor<fp32, [2, 3]> x) {\n"
                   "        tensor<fp32, [2, 3]> y = gather_along_axis(axis = int32(1), indices = tensor<int32, [2, 3]>([0, 1, 2, 2, 7, 0]), x = x)[name = string(\"y\")];\n"
                   "    } -> (y);\n}\n");
    CHECK(strstr(e, "gather_along_axis: index 7 (element 4 of the indices)"), "gather_along_axis: '%s'", e);
    e = parse(HEAD "    func main<ios18>(tensor<fp32, [3, 2]> d, tensor<fp32, [2, 2]> u) {\n"
                   "        tensor<fp32, [3, 2]> y = scatter(axis = int32(0), data = d, indices = tensor<int32, [2]>([1, 3]), mode = string(\"update\"), updates = u)[name = string(\"y\")];\n"
                   "    } -> (y);\n}\n");
    CHECK(strstr(e, "scatter: index 3 (element 1 of the indices) is outside -3..2"), "scatter: '%s'", e);
    e = parse(HEAD "    func main<ios18>(tensor<fp32, [3, 2]> d, tensor<fp32, [3, 2]> u) {\n"
                   "        tensor<fp32, [3, 2]> y = scatter_along_axis(axis = int32(1), data = d, indices = tensor<int32, [3, 2]>([0, 1, 1, 0, -3, 1]), mode = string(\"add\"), updates = u)[name = string(\"y\")];\n"
                   "    } -> (y);\n}\n");
    CHECK(strstr(e, "scatter_along_axis: index -3 (element 4 of the indices) is outside -2..1"), "scatter_along_axis: '%s'", e);
}

static const char *write_file(const char *name, const void *bytes, size_t n) {
    static char path[2][400];
    static int k;
    char *p = path[k++ & 1];
    snprintf(p, 400, "%s/%s", tmp, name);
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0, "cannot write %s", p);
    return p;
}

static const char *npy_file(const char *name, const char *descr, const char *shape, const void *data, size_t n) {
    char hdr[128];
    int hl = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    int total = (10 + hl + 1 + 63) / 64 * 64;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(total - 10), hdr[9] = 0;
    memset(hdr + 10 + hl, ' ', (size_t)(total - 10 - hl - 1));
    hdr[total - 1] = '\n';
    char buf[512];
    memcpy(buf, hdr, (size_t)total);
    memcpy(buf + total, data, n);
    return write_file(name, buf, (size_t)total + n);
}

/* mil run of model with x [4, 3] (x[r][c] = 10 r + c) and ids; exit code, output in out. */
static int run(const char *model_text, const int32_t *ids, int nids, char *out, size_t cap) {
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)(10 * (i / 3) + i % 3);
    char shape[32], xp[400], ip[400], args[1400];
    snprintf(xp, sizeof xp, "%s", npy_file("x.npy", "<f4", "(4, 3)", x, sizeof x));
    snprintf(shape, sizeof shape, "(%d,)", nids);
    snprintf(ip, sizeof ip, "%s", npy_file("ids.npy", "<i4", shape, ids, sizeof(int32_t) * (size_t)nids));
    const char *mp = write_file("m.mil", model_text, strlen(model_text));
    snprintf(args, sizeof args, "mil run %s --in x=%s --in ids=%s --out %s/o --fp32", mp, xp, ip, tmp);
    return cli_run(args, 1, out, cap);
}

static void test_runtime(void) {
    /* ids fed directly, the embedding path (axis 0) */
    const char *direct = HEAD "    func main<ios18>(tensor<fp32, [4, 3]> x, tensor<int32, [2]> ids) {\n"
                              "        tensor<fp32, [2, 3]> y = gather(axis = int32(0), indices = ids, x = x)[name = string(\"y\")];\n"
                              "    } -> (y);\n}\n";
    /* ids computed in the program (ids + 1), along axis 1 (the one-hot pick) */
    const char *computed = HEAD "    func main<ios18>(tensor<fp32, [4, 3]> x, tensor<int32, [2]> ids) {\n"
                                "        tensor<int32, [2]> j = add(x = ids, y = int32(1))[name = string(\"j\")];\n"
                                "        tensor<fp32, [4, 2]> y = gather(axis = int32(1), indices = j, x = x)[name = string(\"y\")];\n"
                                "    } -> (y);\n}\n";
    char out[8192];
    int32_t ok[2] = { 3, -4 }, bad[2] = { 1, 4 };
    int rc = run(direct, ok, 2, out, sizeof out);
    CHECK(rc == 0, "direct, in range: exit %d: %s", rc, out);
    char yp[400];
    snprintf(yp, sizeof yp, "%s/o/y.npy", tmp);
    float *y = NULL;
    int r;
    int64_t d[AF_MAX_RANK];
    if (rc == 0 && af_npy_read(yp, &y, &r, d) == AF_OK) { /* rows 3 and 0 (-4 counts from the end) */
        const float want[6] = { 30, 31, 32, 0, 1, 2 };
        CHECK(r == 2 && d[0] == 2 && d[1] == 3 && !memcmp(y, want, sizeof want), "direct: wrong rows");
    }
    free(y);
    y = NULL;
    rc = run(direct, bad, 2, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "m.mil:4:") && strstr(out, "gather: index 4 (element 1 of the indices) is outside -4..3"),
          "direct, 4: exit %d: %s", rc, out);
    int32_t okc[2] = { 1, -3 }, badc[2] = { -5, 0 };
    rc = run(computed, okc, 2, out, sizeof out);
    CHECK(rc == 0, "computed, in range: exit %d: %s", rc, out);
    if (rc == 0 && af_npy_read(yp, &y, &r, d) == AF_OK) { /* columns 2 and -2 = 1 of each row */
        int good = r == 2 && d[0] == 4 && d[1] == 2;
        for (int i = 0; good && i < 4; i++) good = y[2 * i] == 10 * i + 2 && y[2 * i + 1] == 10 * i + 1;
        CHECK(good, "computed: wrong columns");
    }
    free(y);
    rc = run(computed, badc, 2, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "m.mil:5:") && strstr(out, "gather: index -4 (element 0 of the indices) is outside -3..2"),
          "computed, -4: exit %d: %s", rc, out);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/af_mil_indices_XXXXXX");
    if (!mkdtemp(tmp)) { fprintf(stderr, "mkdtemp failed\n"); return 1; }
    test_constants();
    test_runtime();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmp);
    return check_finish("mil_indices");
}
