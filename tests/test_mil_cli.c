/* `aneforge mil` end to end, through the command's own entry point (cmd_mil, compiled
 * into this test):
 *   - mil run on the hand-written Apple-spelling program in tests/fixtures/mil/
 *     rmsnorm_conv (RMSNorm then a 1x1 conv, weights in a MILBlob file) matches the
 *     NumPy reference within one fp16 ulp of its scale (regenerate the fixture with
 *     `python3 tests/fixtures/mil/make_fixtures.py`);
 *   - mil emit writes a built-in program whose mil run output equals the graph's own
 *     fp16 result bit for bit;
 *   - mil check lists a program; bad input names, shapes, missing inputs and unknown
 *     subcommands fail with an exit code instead of crashing. */
#define _POSIX_C_SOURCE 200809L
#include "../tools/cmd_mil.c"
#include "mil/mil.h" /* the samples and the reader, which the CLI reaches through the public API */
#include "aneforge_data.h"
#include "../tools/mil_npy.c"
#include "../tools/cli_file.c"

#include "support/check.h"

#include <math.h>
#include <unistd.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

static int mil(int n, const char **args) {
    char *argv[16];
    argv[0] = "mil";
    for (int i = 0; i < n && i < 15; i++) argv[i + 1] = (char *)args[i];
    fflush(stdout);
    return cmd_mil(n + 1, argv);
}

static void test_fixture(const char *tmp) {
    const char *fx = AF_SOURCE_DIR "/tests/fixtures/mil/rmsnorm_conv";
    char model[600], in[600], out[600], got_path[700], want_path[700];
    snprintf(model, sizeof model, "%s/model.mil", fx);
    snprintf(in, sizeof in, "x=%s/x.npy", fx);
    snprintf(out, sizeof out, "%s/run", tmp);
    const char *args[] = { "run", model, "--in", in, "--out", out };
    CHECK(mil(6, args) == 0, "mil run on the fixture failed");
    snprintf(got_path, sizeof got_path, "%s/y.npy", out);
    snprintf(want_path, sizeof want_path, "%s/y_expected.npy", fx);
    float *got = NULL, *want = NULL;
    int rg = 0, rw = 0;
    int64_t dg[AF_MAX_RANK], dw[AF_MAX_RANK];
    CHECK(af_npy_read(got_path, &got, &rg, dg) == AF_OK, "%s", af_error_message());
    CHECK(af_npy_read(want_path, &want, &rw, dw) == AF_OK, "%s", af_error_message());
    if (got && want) {
        CHECK(rg == 4 && rw == 4 && !memcmp(dg, dw, sizeof(int64_t) * 4), "result shape differs from the reference");
        int64_t n = dw[0] * dw[1] * dw[2] * dw[3];
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
        int e;
        frexp(scale, &e);
        double ulp = ldexp(1.0, e - 11);
        CHECK(scale > 0.1 && worst <= ulp, "mil run differs from NumPy by %g (one fp16 ulp at scale %g is %g)", worst, scale, ulp);
        printf("mil_cli: fixture max |diff| %g (fp16 ulp %g)\n", worst, ulp);
    }
    free(got);
    free(want);
    /* a wrong shape, an unknown name, a missing input: errors, not crashes */
    char badin[700];
    snprintf(badin, sizeof badin, "nothere=%s/x.npy", fx);
    const char *a1[] = { "run", model, "--in", badin, "--out", out };
    CHECK(mil(6, a1) == 1, "an --in naming no argument must fail");
    const char *a2[] = { "run", model, "--out", out };
    CHECK(mil(4, a2) == 1, "a missing input must fail");
    snprintf(badin, sizeof badin, "x=%s/y_expected.npy", fx);
    const char *a3[] = { "run", model, "--in", badin, "--out", out };
    CHECK(mil(6, a3) == 1, "an input of the wrong shape must fail");
    const char *a4[] = { "check", model };
    CHECK(mil(2, a4) == 0, "mil check failed");
    const char *a5[] = { "frob" };
    CHECK(mil(1, a5) == 2, "an unknown subcommand must give 2");
    const char *a6[] = { "run", AF_SOURCE_DIR "/tests/corpus/mil/bad_unknown_op.mil", "--out", out };
    CHECK(mil(4, a6) == 1, "a program with an unknown op must fail");
}

static void test_emit_run(const char *tmp) {
    char dir[600], model[700], in[700], out[700], res[800];
    snprintf(dir, sizeof dir, "%s/conv", tmp);
    const char *args[] = { "emit", "conv", "--out", dir };
    CHECK(mil(4, args) == 0, "mil emit conv failed");
    mil_sample s;
    if (mil_sample_build("conv", &s)) { CHECK(0, "%s", af_error_message()); return; }
    int64_t n = af_shape_count(s.in[0]->shape), no = af_shape_count(s.out[0]->shape);
    float *x = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)no), *got = NULL;
    for (int64_t i = 0; i < n; i++) x[i] = (float)sin(0.37 * (double)i);
    snprintf(in, sizeof in, "%s/image.npy", tmp);
    CHECK(af_npy_write(in, x, s.in[0]->shape.rank, s.in[0]->shape.dim) == AF_OK, "%s", af_error_message());
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16 };
    af_model *m = af_compile(s.g, s.nin, s.in, s.nout, s.out, &o);
    af_buffer bi = AF_BUF_F32(x, n), bo = AF_BUF_F32(want, no);
    CHECK(m && af_run(m, &bi, &bo) == AF_OK, "direct run: %s", af_error_message());
    snprintf(model, sizeof model, "%s/model.mil", dir);
    char feed[800];
    snprintf(feed, sizeof feed, "image=%s", in);
    snprintf(out, sizeof out, "%s/conv-out", tmp);
    const char *run[] = { "run", model, "--in", feed, "--out", out };
    CHECK(mil(6, run) == 0, "mil run on the emitted conv failed");
    snprintf(res, sizeof res, "%s/features.npy", out);
    int r;
    int64_t d[AF_MAX_RANK];
    CHECK(af_npy_read(res, &got, &r, d) == AF_OK, "%s", af_error_message());
    CHECK(got && !memcmp(got, want, sizeof(float) * (size_t)no), "emit -> files -> mil run differs from the graph's own result");
    free(x);
    free(want);
    free(got);
    af_model_free(m);
    af_graph_free(s.g);
}

int main(void) {
    char tmp[] = "/tmp/aneforge_mil_cli_XXXXXX";
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    test_fixture(tmp);
    test_emit_run(tmp);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_finish("mil_cli");
}
