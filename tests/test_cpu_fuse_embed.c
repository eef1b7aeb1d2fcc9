/* A tied embedding's gradient summed in place by the CPU executor (src/cpu/fuse_embed.h):
 * a table used as the embedding and as the classifier's weight gets
 * add(dW, embedding_grad(dy, ids)) from autograd. The planner must fuse exactly that
 * pair (not an untied table, not a sum whose parts are requested), the fused run must
 * equal the unfused one bit for bit (repeated ids summed in id order, ids outside the
 * table dropped) and a double-precision loop, on one thread and two, and the fused plan
 * must need less memory (no zero-filled table, no separate product). */
#include "aneforge.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "cpu/fuse_embed.h"
#include "ir/ir.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 41, D = 67, N = 29 }; /* odd sizes; N ids with repeats */

static test_rng rng = { 23 };

typedef struct { int acc, absorbed; } fusion_count;

static fusion_count count_fusions(const compile_plan *p) {
    fusion_count c = { 0, -1 };
    cpu_fusion *f = calloc((size_t)p->nsched + 1, sizeof *f);
    if (!f) return c;
    c.absorbed = cpu_fuse_plan(p, f);
    for (int s = 0; s < p->nsched; s++) c.acc += f[s].acc_into >= 0;
    free(f);
    return c;
}

/* Runs the plan through the executor; returns its arena + scratch bytes. */
static size_t run_exec(const compile_plan *p, bool fuse, int threads, const af_buffer *in, af_buffer *out) {
    cpu_exec *e = NULL;
    char msg[256];
    cpu_exec_opts o = { .threads = threads, .fuse = fuse };
    if (cpu_exec_new(p, &o, &e, msg, sizeof msg) != AF_OK) {
        CHECK(0, "cpu_exec_new: %s", msg);
        return 0;
    }
    CHECK(cpu_exec_run(e, in, out) == AF_OK, "run: %s", af_error_message());
    size_t bytes = cpu_exec_memory_bytes(e);
    cpu_exec_free(e);
    return bytes;
}

/* y = (embedding(W, ids) + H) W^T, seeded with G: dW = G^T (x + H) + scatter(G W, ids). */
static void test_tied(void) {
    static float w[V * D], h[N * D], g[N * V], ids[N], dw_fused[V * D], dw_plain[V * D];
    static double want[V * D];
    test_fill_uniform(&rng, w, V * D, -1, 1);
    test_fill_uniform(&rng, h, N * D, -1, 1);
    test_fill_uniform(&rng, g, N * V, -1, 1);
    for (int i = 0; i < N; i++) ids[i] = (float)(int)(test_uniform(&rng) * 9); /* rows 0..8, each several times */
    ids[3] = -1.0f;      /* names no row: dropped */
    ids[7] = (float)V;   /* past the table: dropped */
    ids[11] = 4.75f;     /* truncated to row 4 */
    for (int r = 0; r < V; r++)
        for (int k = 0; k < D; k++) {
            double s = 0;
            for (int i = 0; i < N; i++) {
                double xi = (double)h[i * D + k];
                int id = (int)ids[i];
                if (ids[i] > -1.0f && ids[i] < (float)V) xi += w[id * D + k];
                s += (double)g[i * V + r] * xi;
            }
            want[r * D + k] = s;
        }
    for (int i = 0; i < N; i++) { /* the embedding's path: rows of G W scattered by id */
        if (!(ids[i] > -1.0f && ids[i] < (float)V)) continue;
        int r = (int)ids[i];
        for (int k = 0; k < D; k++) {
            double s = 0;
            for (int j = 0; j < V; j++) s += (double)g[i * V + j] * w[j * D + k];
            want[r * D + k] += s;
        }
    }
    af_graph *gr = af_graph_new();
    af_graph_set_target(gr, AF_TARGET_CPU);
    af_tensor *wi = af_input(gr, "w", AF_F32, AF_SHAPE(V, D)), *ii = af_input(gr, "ids", AF_F32, AF_SHAPE(N));
    af_tensor *hi = af_input(gr, "h", AF_F32, AF_SHAPE(N, D)), *gi = af_input(gr, "g", AF_F32, AF_SHAPE(N, V));
    af_tensor *y = af_matmul(af_add(af_embedding(wi, ii), hi), wi, 0, 1), *in[4] = { wi, ii, hi, gi }, *out[1];
    CHECK(y != NULL, "graph: %s", af_error_message());
    CHECK(af_backward_from(gi, y, 1, &wi, out, NULL) == AF_OK, "backward: %s", af_error_message());
    compile_plan p;
    char msg[256];
    if (plan_build(&p, gr, 4, in, 1, out, msg, sizeof msg) != AF_OK) {
        CHECK(0, "plan_build: %s", msg);
        af_graph_free(gr);
        return;
    }
    fusion_count c = count_fusions(&p);
    CHECK(c.acc == 1 && c.absorbed >= 1, "tied table: %d in-place sums, %d absorbed (want 1, >= 1)", c.acc, c.absorbed);
    af_buffer inb[4] = { AF_BUF_F32(w, V * D), AF_BUF_F32(ids, N), AF_BUF_F32(h, N * D), AF_BUF_F32(g, N * V) };
    for (int threads = 1; threads <= 2; threads++) {
        af_buffer fo = AF_BUF_F32(dw_fused, V * D), po = AF_BUF_F32(dw_plain, V * D);
        memset(dw_fused, 0xff, sizeof dw_fused); /* NaN: every value must be written */
        size_t fused = run_exec(&p, true, threads, inb, &fo), plain = run_exec(&p, false, threads, inb, &po);
        int differ = 0;
        for (int j = 0; j < V * D; j++)
            differ += memcmp(&dw_fused[j], &dw_plain[j], sizeof(float)) != 0 && !(dw_fused[j] == 0 && dw_plain[j] == 0);
        CHECK(differ == 0, "%d threads: %d of %d gradient values differ from the unfused run's", threads, differ, V * D);
        check_close_scaled(threads == 1 ? "fused, 1 thread, against double" : "fused, 2 threads, against double",
                           dw_fused, want, V * D, 1e-5);
        CHECK(fused + (size_t)V * D * sizeof(float) <= plain, "%d threads: fused plan %zu bytes, unfused %zu: want at "
              "least one [V, D] table fewer", threads, fused, plain);
    }
    plan_free(&p);
    af_graph_free(gr);
}

/* Left alone: an untied table (embedding and classifier weights apart), and a sum whose
 * embedding part is requested too. */
static void test_not_fused(void) {
    af_graph *gr = af_graph_new();
    af_graph_set_target(gr, AF_TARGET_CPU);
    af_tensor *wi = af_input(gr, "w", AF_F32, AF_SHAPE(V, D)), *ci = af_input(gr, "c", AF_F32, AF_SHAPE(V, D));
    af_tensor *ii = af_input(gr, "ids", AF_F32, AF_SHAPE(N)), *gi = af_input(gr, "g", AF_F32, AF_SHAPE(N, V));
    af_tensor *y = af_matmul(af_embedding(wi, ii), ci, 0, 1), *ps[2] = { wi, ci }, *out[2], *in[4] = { wi, ci, ii, gi };
    CHECK(af_backward_from(gi, y, 2, ps, out, NULL) == AF_OK, "backward: %s", af_error_message());
    compile_plan p;
    char msg[256];
    if (plan_build(&p, gr, 4, in, 2, out, msg, sizeof msg) == AF_OK) {
        fusion_count c = count_fusions(&p);
        CHECK(c.acc == 0, "untied tables: %d in-place sums", c.acc);
        plan_free(&p);
    }
    af_graph_free(gr);
    /* tied, but the embedding's scatter is requested as well */
    gr = af_graph_new();
    af_graph_set_target(gr, AF_TARGET_CPU);
    wi = af_input(gr, "w", AF_F32, AF_SHAPE(V, D));
    ii = af_input(gr, "ids", AF_F32, AF_SHAPE(N));
    gi = af_input(gr, "g", AF_F32, AF_SHAPE(N, V));
    y = af_matmul(af_embedding(wi, ii), wi, 0, 1);
    af_tensor *in3[3] = { wi, ii, gi }, *dw;
    CHECK(af_backward_from(gi, y, 1, &wi, &dw, NULL) == AF_OK, "backward: %s", af_error_message());
    af_tensor *e = dw && dw->op == IR_OP_ADD ? (dw->src[0]->op == IR_OP_EMBEDDING_GRAD ? dw->src[0] : dw->src[1]) : NULL;
    CHECK(e && e->op == IR_OP_EMBEDDING_GRAD, "the tied gradient is add(dW, embedding_grad)");
    if (e && plan_build(&p, gr, 3, in3, 2, (af_tensor *[]){ dw, e }, msg, sizeof msg) == AF_OK) {
        fusion_count c = count_fusions(&p);
        CHECK(c.acc == 0, "scatter requested: %d in-place sums", c.acc);
        plan_free(&p);
    }
    af_graph_free(gr);
}

int main(void) {
    test_tied();
    test_not_fused();
    return check_finish("cpu_fuse_embed");
}
