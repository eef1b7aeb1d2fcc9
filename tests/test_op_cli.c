/* `aneforge op` through the command's own entry point (cmd_op, compiled into this
 * test): bridge and fused ops run on the NumPy fixtures of tests/fixtures/bridge and
 * must write their results (DIR/y.npy) bit for bit; a gate refusal on ane-sim, unknown
 * ops, sources and attributes fail with an exit code and no crash; --help works. */
#define _POSIX_C_SOURCE 200809L
#include "../tools/cmd_op.c"
#include "ir/ir.h" /* the op table itself, which the CLI reads through af_op_info */
#include "aneforge_data.h"
#include "../tools/cli_args.c"
#include "../tools/cli_env.c"
#include "../tools/mil_npy.c"
#include "../tools/cli_file.c"

#include "support/check.h"

#include <stdlib.h>
#include <unistd.h>

#define FIX AF_SOURCE_DIR "/tests/fixtures/bridge/"

static int op(int n, const char **args) {
    char *argv[24];
    argv[0] = "op";
    for (int i = 0; i < n && i < 23; i++) argv[i + 1] = (char *)args[i];
    fflush(stdout);
    return cmd_op(n + 1, argv);
}

/* Runs args with --out dir and compares dir/y.npy with the fixture want, exactly. */
static void same_as(const char *what, int n, const char **args, const char *dir, const char *want) {
    const char *all[24];
    for (int i = 0; i < n; i++) all[i] = args[i];
    all[n] = "--out";
    all[n + 1] = dir;
    CHECK(op(n + 2, all) == 0, "%s: exit code", what);
    char path[700];
    snprintf(path, sizeof path, "%s/y.npy", dir);
    float *got = NULL, *ref = NULL;
    int rg = 0, rr = 0;
    int64_t dg[AF_MAX_RANK], dr[AF_MAX_RANK];
    bool ok = af_npy_read(path, &got, &rg, dg) == AF_OK && af_npy_read(want, &ref, &rr, dr) == AF_OK;
    CHECK(ok, "%s: %s", what, af_error_message());
    if (ok) {
        int64_t ng = 1, nr = 1;
        for (int i = 0; i < rg; i++) ng *= dg[i];
        for (int i = 0; i < rr; i++) nr *= dr[i];
        CHECK(rg == rr && ng == nr && !memcmp(got, ref, sizeof(float) * (size_t)nr), "%s: the result differs from %s", what, want);
    }
    free(got);
    free(ref);
    unlink(path);
}

int main(void) {
    char tmpl[] = "/tmp/aneforge_op_XXXXXX";
    const char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    if (!dir) return check_finish("op_cli");
    const char *ps[] = { "pixel_shuffle", "--in", "x=" FIX "rearr_deep.npy", "--attr", "fy=2", "--attr", "fx=3" };
    same_as("pixel_shuffle", 7, ps, dir, FIX "rearr_pixel_shuffle_2x3.npy");
    const char *s2b[] = { "space_to_batch", "--in", "0=" FIX "rearr_one.npy", "--attr", "fy=2", "--attr", "fx=3", "--fp16" };
    same_as("space_to_batch by index, fp16", 8, s2b, dir, FIX "rearr_space_to_batch_2x3.npy");
    const char *tk[] = { "top_k", "--in", "x=" FIX "topk_x.npy", "--attr", "k=2", "--attr", "indices=1" };
    same_as("top_k indices", 7, tk, dir, FIX "topk_indices_k2_lane0_min.npy");
    const char *sew[] = { "scaled_elementwise", "--in", "x=" FIX "norm_sew_x.npy", "--in", "z=" FIX "norm_sew_z.npy",
                          "--attr", "op=max", "--attr", "scale=2" };
    same_as("scaled_elementwise max", 9, sew, dir, FIX "norm_sew_max.npy");
    const char *rs[] = { "radius_search", "--in", "points=" FIX "geom_points.npy", "--in", "centroids=" FIX "geom_centroids.npy",
                         "--attr", "radius=2", "--target", "ane-sim:m1" };
    same_as("radius_search on ane-sim", 9, rs, dir, FIX "geom_radius_2.npy");
    const char *tr[] = { "matmul", "--in", "a=" FIX "einsum_matmul_0.npy", "--in", "b=" FIX "einsum_matmul_1.npy" };
    const char *all[8];
    memcpy(all, tr, sizeof tr);
    CHECK(op(5, all) == 0, "a fused op (matmul) runs");

    const char *sdpa[] = { "sdpa", "--in", "q=" FIX "sdpa_self.x0.npy", "--in", "k=" FIX "sdpa_self.x1.npy", "--in", "v=" FIX "sdpa_self.x2.npy" };
    CHECK(op(7, sdpa) == 0, "sdpa (variadic, the default scale) runs");
    const char *gate[] = { "top_k", "--in", "x=" FIX "topk_x.npy", "--attr", "k=3", "--target", "ane-sim:m1" };
    CHECK(op(7, gate) == 1, "top_k k=3 on ane-sim: refused at compile time");
    const char *bad_op[] = { "no_such_op" };
    CHECK(op(1, bad_op) == 2, "an unknown op is a usage error");
    const char *bad_src[] = { "sort", "--in", "y=" FIX "sort_x.npy" };
    CHECK(op(3, bad_src) == 2, "an unknown source name is a usage error");
    const char *missing[] = { "cross_product", "--in", "a=" FIX "geom_cross_a.npy" };
    CHECK(op(3, missing) == 2, "a missing source is a usage error");
    const char *bad_attr[] = { "sort", "--in", "x=" FIX "sort_x.npy", "--attr", "nope=1" };
    CHECK(op(5, bad_attr) == 2, "an unknown attribute is a usage error");
    const char *bad_val[] = { "sort", "--in", "x=" FIX "sort_x.npy", "--attr", "key_lane=one" };
    CHECK(op(5, bad_val) == 2, "a non-integer attribute is a usage error");
    const char *bad_shape[] = { "pixel_shuffle", "--in", "x=" FIX "rearr_wide.npy", "--attr", "fy=3", "--attr", "fx=3" };
    CHECK(op(7, bad_shape) == 1, "an indivisible pixel_shuffle fails with the op's message");
    const char *no_file[] = { "sort", "--in", "x=/nonexistent.npy" };
    CHECK(op(3, no_file) == 1, "a missing file fails");
    const char *help[] = { "lrn", "--help" };
    CHECK(op(2, help) == 0, "op NAME --help");
    const char *leaf[] = { "const" };
    CHECK(op(1, leaf) == 2, "a leaf is not an op to run");
    rmdir(dir);
    return check_finish("op_cli");
}
