/* Where the built-in CNN's training step (af_net_cnn on MNIST-shaped input, softmax
 * cross-entropy, af_backward) spends its CPU time: the forward and backward graph built
 * as the trainer builds it (on a graph told it runs on the CPU), run through the CPU
 * executor with a hook after every node; time per op kind and per node, summed over
 * `runs` runs after one warm-up. With 1 thread the clock is the thread's CPU time, which
 * a busy machine disturbs less. The optimizer update is not included. The hook turns the
 * executor's fusion off, so the step as the backend runs it (fused) is timed separately.
 *   build/bench_cnn_profile [batch [runs [threads [fused_only]]]]
 *   build/bench_cnn_profile 128 20 1 */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node_timer.h"

int main(int argc, char **argv) {
    int B = argc > 1 ? atoi(argv[1]) : 128, runs = argc > 2 ? atoi(argv[2]) : 20, threads = argc > 3 ? atoi(argv[3]) : 1;
    int fused_only = argc > 4 && atoi(argv[4]); /* for perf record: only the fused runs */
    if (B < 1 || runs < 1 || threads < 1) { fprintf(stderr, "usage: bench_cnn_profile [batch [runs [threads]]]\n"); return 2; }
    if (threads == 1) clock_id = CLOCK_THREAD_CPUTIME_ID;
    af_net net = af_net_cnn(AF_SHAPE(1, 28, 28), 10, 1);
    af_net_set_input_norm(&net, 0.1307f, 0.3081f);
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    enum { MAXP = 16 };
    af_tensor *in[2 + MAXP], *out[1 + MAXP];
    in[0] = af_input(g, "x", AF_F32, AF_SHAPE(B, 1, 28, 28));
    in[1] = af_input(g, "target", AF_F32, AF_SHAPE(B, 10));
    int n = net.make_params(net.ctx, g, in + 2, MAXP);
    af_tensor *logits = net.forward(net.ctx, in[0], in + 2);
    af_loss *loss = af_softmax_cross_entropy(logits, in[1]);
    out[0] = af_loss_value(loss);
    if (n < 0 || af_backward(loss, n, in + 2, out + 1, NULL)) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    compile_plan p;
    char msg[512];
    if (plan_build(&p, g, 2 + n, in, 1 + n, out, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    prof pr = { 0, calloc((size_t)p.nsched, sizeof(double)) };
    cpu_exec_opts o = { .threads = threads, .after_node = after, .hook_ctx = &pr };
    cpu_exec *e;
    if (cpu_exec_new(&p, &o, &e, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    af_buffer bin[2 + MAXP], bout[1 + MAXP];
    float *x = malloc(sizeof(float) * (size_t)B * 784), *y = calloc((size_t)B * 10, sizeof(float)), lv;
    unsigned long long s = 1;
    for (int64_t i = 0; i < (int64_t)B * 784; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(s >> 40) / 16777216.0f;
    }
    for (int i = 0; i < B; i++) y[i * 10 + i % 10] = 1;
    bin[0] = AF_BUF_F32(x, (int64_t)B * 784);
    bin[1] = AF_BUF_F32(y, (int64_t)B * 10);
    bout[0] = AF_BUF_F32(&lv, 1);
    feed_params(n, in, bin, bout);
    double total = 0;
    for (int r = 0; r <= (fused_only ? 0 : runs); r++) {
        if (r == 1) memset(pr.node_s, 0, sizeof(double) * (size_t)p.nsched);
        double t0 = pr.last = now_s();
        cpu_exec_run(e, bin, bout);
        if (r) total += now_s() - t0;
    }
    /* The step as the cpu backend runs it: fused chains, no hook (the hook turns fusion off). */
    cpu_exec_opts of = { .threads = threads, .fuse = true };
    cpu_exec *ef;
    if (cpu_exec_new(&p, &of, &ef, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    double fused = 0;
    for (int r = 0; r <= runs; r++) {
        double t0 = now_s();
        cpu_exec_run(ef, bin, bout);
        if (r) fused += now_s() - t0;
    }
    printf("cnn batch %d, %d threads: fused step %.2f ms per run; per node (unfused) %.2f ms (%d runs, %d nodes), "
           "loss %.4f\n", B, threads, 1000 * fused / runs, 1000 * total / runs, runs, p.nsched, lv);
    for (int k = 0; k < p.nsched; k++) {
        const af_tensor *t = p.sched[k];
        char sh[96], s0[96] = "", s1[96] = "";
        shape_str(t->shape, sh, sizeof sh);
        if (t->nsrc > 0) shape_str(t->src[0]->shape, s0, sizeof s0);
        if (t->nsrc > 1) shape_str(t->src[1]->shape, s1, sizeof s1);
        double ms = 1000 * pr.node_s[k] / runs, fl = (double)plan_node_flops(t);
        printf("  %7.3f ms %5.1f%%  %-18s %-16s <- %s %s  %.1f GFLOP/s\n", ms, 100 * pr.node_s[k] / total,
               ir_ops[t->op].name, sh, s0, s1, ms > 0 ? fl / (ms * 1e-3) * 1e-9 : 0.0);
    }
    return 0;
}
