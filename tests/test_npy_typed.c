/* One strict .npy reader for the library and the CLI (issue 23, item 2):
 *   - af_npy_read_typed reads every little-endian numeric descr; each value is checked
 *     against the number its bytes spell, written out by hand here;
 *   - a rank-7 file is refused by name (the CLI's old private parser took up to 8 dims
 *     into an array of AF_MAX_RANK = 6: a stack overflow), as are a shape of (1e3,), a
 *     shape 'abc' and a 'shape' hidden in another key's string, which it misread;
 *   - `aneforge op` and `aneforge mil run` go through that reader: an int32 file still
 *     feeds an op, and the bad files above give the library's messages. */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_data.h"
#include "support/check.h"
#include "support/cli_run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

static char tmp[256];

/* A v1.0 file: the dict (padded to 64 bytes with its newline), then n payload bytes. */
static const char *npy(const char *name, const char *dict, const void *payload, size_t n) {
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    char hdr[512];
    size_t hl = strlen(dict), total = (10 + hl + 1 + 63) / 64 * 64;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((total - 10) & 255), hdr[9] = (char)((total - 10) >> 8);
    memcpy(hdr + 10, dict, hl);
    memset(hdr + 10 + hl, ' ', total - 10 - hl - 1);
    hdr[total - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(hdr, 1, total, f) != total || (n && fwrite(payload, 1, n, f) != n) || fclose(f)) {
        CHECK(0, "cannot write %s", path);
    }
    return path;
}

typedef struct { const char *descr; af_npy_dtype dt; unsigned char bytes[16]; size_t n; double want[2]; } typed_case;

static void test_library(void) {
    /* Two elements each, little-endian bytes and the values they spell. */
    const typed_case cases[] = {
        { "|b1", AF_NPY_BOOL, { 1, 0 }, 2, { 1, 0 } },
        { "<b1", AF_NPY_BOOL, { 0, 1 }, 2, { 0, 1 } },
        { "|i1", AF_NPY_I8, { 0x80, 0x7f }, 2, { -128, 127 } },
        { "|u1", AF_NPY_U8, { 0xff, 0x00 }, 2, { 255, 0 } },
        { "<i2", AF_NPY_I16, { 0x00, 0x80, 0xff, 0xff }, 4, { -32768, -1 } },
        { "<u2", AF_NPY_U16, { 0xff, 0xff, 0x34, 0x12 }, 4, { 65535, 0x1234 } },
        { "<i4", AF_NPY_I32, { 0, 0, 0, 0x80, 0xfe, 0xff, 0xff, 0x7f }, 8, { -2147483648.0, 2147483646.0 } },
        { "<u4", AF_NPY_U32, { 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0 }, 8, { 4294967295.0, 7 } },
        { "<i8", AF_NPY_I64, { 0, 0, 0, 0, 0, 0, 0xe0, 0xff, 5, 0, 0, 0, 0, 0, 0, 0 }, 16, { -9007199254740992.0, 5 } },
        { "<u8", AF_NPY_U64, { 0, 0, 0, 0, 0, 0, 0x20, 0, 1, 0, 0, 0, 0, 0, 0, 0 }, 16, { 9007199254740992.0, 1 } },
        { "<f2", AF_NPY_F16, { 0x00, 0x3c, 0x00, 0xc0 }, 4, { 1.0, -2.0 } },
        { "<f4", AF_NPY_F32, { 0, 0, 0xc0, 0x3f, 0, 0, 0x80, 0xbe }, 8, { 1.5, -0.25 } },
        { "<f8", AF_NPY_F64, { 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f }, 16,
          { 0.1, INFINITY } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", cases[i].descr);
        const char *p = npy("t.npy", dict, cases[i].bytes, cases[i].n);
        double *v = NULL;
        int rank = -1;
        int64_t dims[AF_MAX_RANK];
        af_npy_dtype dt = (af_npy_dtype)-1;
        af_status st = af_npy_read_typed(p, &v, &rank, dims, &dt);
        CHECK(st == AF_OK && rank == 1 && dims[0] == 2 && dt == cases[i].dt, "%s: %s", cases[i].descr, af_error_message());
        if (st == AF_OK)
            CHECK(v[0] == cases[i].want[0] && v[1] == cases[i].want[1], "%s: got %.17g %.17g want %.17g %.17g",
                  cases[i].descr, v[0], v[1], cases[i].want[0], cases[i].want[1]);
        free(v);
        /* af_npy_read keeps to the float kinds and says where the others are read */
        float *f = NULL;
        st = af_npy_read(p, &f, &rank, dims);
        if (cases[i].dt == AF_NPY_F16 || cases[i].dt == AF_NPY_F32)
            CHECK(st == AF_OK && f[0] == (float)cases[i].want[0] && f[1] == (float)cases[i].want[1], "%s as float", cases[i].descr);
        else
            CHECK(st == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "af_npy_read_typed"), "%s as float: %s",
                  cases[i].descr, af_error_message());
        free(f);
    }
    double *v = NULL;
    int rank;
    int64_t dims[AF_MAX_RANK];
    af_npy_dtype dt;
    const unsigned char two[2] = { 1, 2 };
    const char *p = npy("b.npy", "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", two, 2);
    CHECK(af_npy_read_typed(p, &v, &rank, dims, &dt) == AF_ERR_CORRUPT && !v &&
          strstr(af_error_message(), "element 1 of the bool array is byte 2"), "bool byte 2: %s", af_error_message());
    const unsigned char four[4] = { 1, 2, 3, 4 };
    p = npy("r7.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 4), }", four, 4);
    CHECK(af_npy_read_typed(p, &v, &rank, dims, &dt) == AF_ERR_UNSUPPORTED && !v && rank == 0 &&
          strstr(af_error_message(), "rank 7"), "rank 7: %s", af_error_message());
    p = npy("be.npy", "{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", four, 4);
    CHECK(af_npy_read_typed(p, &v, &rank, dims, &dt) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "'>i4'"),
          "big-endian: %s", af_error_message());
}

/* `aneforge ARGS` must fail with a message holding want. */
static void cli_refuses(const char *what, const char *args, const char *want) {
    char cmd[1200], out[8192];
    snprintf(cmd, sizeof cmd, "%s", args);
    int rc = cli_run(cmd, 1, out, sizeof out);
    CHECK(rc > 0 && strstr(out, want), "%s: exit %d, output '%s' lacks '%s'", what, rc, out, want);
}

static void test_cli(void) {
    const float f7[4] = { 1, 2, 3, 4 };
    char a[1200], b[600];
    const char *model = AF_SOURCE_DIR "/tests/fixtures/mil/rmsnorm_conv/model.mil";
    snprintf(b, sizeof b, "%s", npy("r7.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 4), }", f7, 16));
    snprintf(a, sizeof a, "op relu --in x=%s", b);
    cli_refuses("op, rank 7", a, "the array has rank 7 but aneforge takes at most AF_MAX_RANK = 6");
    snprintf(a, sizeof a, "mil run %s --in x=%s --out %s/o", model, b, tmp);
    cli_refuses("mil run, rank 7", a, "the array has rank 7 but aneforge takes at most AF_MAX_RANK = 6");
    const struct { const char *what, *dict, *want; } bad[] = {
        { "(1e3,)", "{'descr': '<f4', 'fortran_order': False, 'shape': (1e3,), }", "npy 'shape' must be a tuple" },
        { "'abc'", "{'descr': '<f4', 'fortran_order': False, 'shape': 'abc', }", "npy 'shape' must be a tuple" },
        { "decoy", "{'descr': '<f4', 'fortran_order': False, 'note': \"'shape': (4,)\", 'shape': (2, 2), }",
          "unexpected or repeated npy header key 'note'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(b, sizeof b, "%s", npy("bad.npy", bad[i].dict, f7, 16));
        snprintf(a, sizeof a, "op relu --in x=%s", b);
        cli_refuses(bad[i].what, a, bad[i].want);
    }
    /* an int32 file still feeds an op: relu([-2, 3]) = [0, 3] */
    const int32_t iv[2] = { -2, 3 };
    snprintf(b, sizeof b, "%s", npy("i.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", iv, 8));
    snprintf(a, sizeof a, "op relu --in x=%s --out %s/relu", b, tmp);
    char out[8192];
    int rc = cli_run(a, 1, out, sizeof out);
    CHECK(rc == 0, "op relu on int32: exit %d: %s", rc, out);
    snprintf(b, sizeof b, "%s/relu/y.npy", tmp);
    float *y = NULL;
    int r = 0;
    int64_t d[AF_MAX_RANK];
    CHECK(af_npy_read(b, &y, &r, d) == AF_OK && r == 1 && d[0] == 2 && y[0] == 0 && y[1] == 3, "relu result: %s",
          af_error_message());
    free(y);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/af_npy_typed_XXXXXX");
    if (!mkdtemp(tmp)) { fprintf(stderr, "mkdtemp failed\n"); return 1; }
    test_library();
    test_cli();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmp);
    return check_finish("npy_typed");
}
