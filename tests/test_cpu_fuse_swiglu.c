/* swiglu's two gradient nodes run as one pass by the CPU executor (src/cpu/fuse_swiglu.h):
 * the planner pairs them only when both operands' gradients are built, and the pair
 * computes what a double-precision loop computes, one thread and two. */
#include "aneforge.h"
#include "compile/plan.h"
#include "cpu/fuse_swiglu.h"
#include "ir/ir.h"
#include "support/check.h"
#include "support/fusion_plan.h"

#include <math.h>
#include <stdlib.h>

enum { R = 29, D = 611 }; /* 17719 values: more than one task, a remainder past the vectors */

static test_rng rng = { 5 };

static int pairs(af_graph *g, int nin, af_tensor **in, int nout, af_tensor **out, int *absorbed) {
    int nsched, n = 0;
    cpu_fusion *f = test_fusion_plan(g, nin, in, nout, out, &nsched, absorbed);
    if (!f) return -1;
    for (int s = 0; s < nsched; s++) n += f[s].kind == CPU_FUSE_SWIGLU_PAIR;
    free(f);
    return n;
}

/* need: 3 both operands' gradients, 1 only a's, 2 only b's. */
static void test_pair(int need) {
    static float a[R * D], b[R * D], g[R * D], da[R * D], db[R * D];
    static double wda[R * D], wdb[R * D];
    test_fill_uniform(&rng, a, R * D, -6, 6);
    test_fill_uniform(&rng, b, R * D, -2, 2);
    test_fill_uniform(&rng, g, R * D, -1, 1);
    for (int i = 0; i < R * D; i++) {
        double s = 1 / (1 + exp(-(double)a[i]));
        wda[i] = (double)g[i] * b[i] * s * (1 + a[i] * (1 - s));
        wdb[i] = (double)g[i] * a[i] * s;
    }
    af_graph *gr = af_graph_new();
    af_graph_set_target(gr, AF_TARGET_CPU);
    af_tensor *ai = af_input(gr, "a", AF_F32, AF_SHAPE(R, D)), *bi = af_input(gr, "b", AF_F32, AF_SHAPE(R, D));
    af_tensor *seed = af_input(gr, "g", AF_F32, AF_SHAPE(R, D)), *in[3] = { ai, bi, seed }, *out[2], *params[2];
    int n = 0;
    if (need & 1) params[n++] = ai;
    if (need & 2) params[n++] = bi;
    af_tensor *y = ir_swiglu(ai, bi);
    CHECK(y && y->op == IR_OP_SWIGLU, "swiglu node: %s", af_error_message());
    CHECK(af_backward_from(seed, y, n, params, out, NULL) == AF_OK, "backward: %s", af_error_message());
    int absorbed, np = pairs(gr, 3, in, n, out, &absorbed);
    CHECK(np == (need == 3) && absorbed == (need == 3), "gradients wanted %d: %d pairs, %d absorbed", need, np,
          absorbed);
    af_buffer inb[3] = { AF_BUF_F32(a, R * D), AF_BUF_F32(b, R * D), AF_BUF_F32(g, R * D) }, outb[2];
    n = 0;
    if (need & 1) outb[n++] = AF_BUF_F32(da, R * D);
    if (need & 2) outb[n++] = AF_BUF_F32(db, R * D);
    for (int threads = 1; threads <= 2; threads++) {
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
        af_model *m = af_compile(gr, 3, in, n, out, &o);
        CHECK(m != NULL, "compile: %s", af_error_message());
        if (!m) continue;
        CHECK(af_run(m, inb, outb) == AF_OK, "run: %s", af_error_message());
        if (need & 1) check_close_scaled("swiglu da", da, wda, R * D, 1e-5);
        if (need & 2) check_close_scaled("swiglu db", db, wdb, R * D, 1e-5);
        af_model_free(m);
    }
    af_graph_free(gr);
}

int main(void) {
    test_pair(3);
    test_pair(1);
    test_pair(2);
    return check_finish("cpu_fuse_swiglu");
}
