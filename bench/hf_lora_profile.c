/* Where a LoRA step of a Hugging Face model spends its CPU time: the forward, the loss
 * and af_backward over the adapters, built as the trainer builds them (the graph told it
 * runs on the CPU, the base weights borrowed from the model), run through the CPU
 * executor with a hook after every node; prints the time per op kind and the slowest
 * node groups (the sum over RUNS runs after one warm-up). The optimizer update is not
 * included (Adam over the adapters is small).
 *   build/bench_hf_lora_profile DIR [seq [runs [threads [fp32|bf16 [rank]]]]]
 *   build/bench_hf_lora_profile /tmp/hflora/qwen3 256 1 2 bf16 */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_hf.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "cpu/gemm_bf16.h"
#include "hf/hf.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node_timer.h"

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [seq [runs [threads [fp32|bf16 [rank]]]]]\n", argv[0]); return 2; }
    int T = argc > 2 ? atoi(argv[2]) : 64, runs = argc > 3 ? atoi(argv[3]) : 1, threads = argc > 4 ? atoi(argv[4]) : 2;
    bool bf16 = argc > 5 && !strcmp(argv[5], "bf16");
    int rank = argc > 6 ? atoi(argv[6]) : 8;
    af_hf_model *m = af_hf_load(argv[1]);
    if (!m || af_hf_lora_add(m, rank, 2.0f * (float)rank, "all", 1)) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    int V = af_hf_vocab_size(m), n = af_hf_param_count(m);
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor **in = malloc(sizeof *in * (size_t)(2 + n)), **out = malloc(sizeof *out * (size_t)(1 + n));
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(1, T));
    in[1] = af_input(g, "target", AF_F32, AF_SHAPE(T, V));
    if (af_hf_params_new(g, m, in + 2, n) != n) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    af_tensor *logits = hf_model_forward(m, in[0], in + 2, true);
    af_loss *loss = logits ? af_softmax_cross_entropy(af_reshape(logits, AF_SHAPE(T, V)), in[1]) : NULL;
    out[0] = loss ? af_loss_value(loss) : NULL;
    if (!out[0] || af_backward(loss, n, in + 2, out + 1, NULL)) { fprintf(stderr, "%s\n", af_graph_error(g)); return 1; }
    compile_plan p;
    char msg[512];
    if (plan_build(&p, g, 2 + n, in, 1 + n, out, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    prof pr = { 0, calloc((size_t)p.nsched, sizeof(double)) };
    cpu_exec_opts o = { .threads = threads, .after_node = after, .hook_ctx = &pr, .bf16 = bf16 ? cpu_gemm_bf16_best() : 0 };
    cpu_exec *e;
    if (cpu_exec_new(&p, &o, &e, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    af_buffer *bin = malloc(sizeof *bin * (size_t)(2 + n)), *bout = malloc(sizeof *bout * (size_t)(1 + n));
    float *tok = malloc(sizeof(float) * (size_t)T), *y = calloc((size_t)T * V, sizeof(float)), lv;
    for (int i = 0; i < T; i++) {
        tok[i] = (float)(i * 7919 % V);
        y[(int64_t)i * V + ((i + 1) * 7919) % V] = 1;
    }
    bin[0] = AF_BUF_F32(tok, T);
    bin[1] = AF_BUF_F32(y, (int64_t)T * V);
    bout[0] = AF_BUF_F32(&lv, 1);
    feed_params(n, in, bin, bout);
    double total = 0, gflop = (double)p.flops * 1e-9;
    for (int r = 0; r <= runs; r++) {
        if (r == 1) memset(pr.node_s, 0, sizeof(double) * (size_t)p.nsched);
        double t0 = pr.last = now_s();
        cpu_exec_run(e, bin, bout);
        if (r) total += now_s() - t0;
    }
    printf("forward+backward: %.1f ms per run (%d runs, %d threads, %s, %d nodes, %.1f GFLOP), loss %.4f, arena %.0f MiB\n",
           1000 * total / runs, runs, threads, bf16 ? cpu_bf16_path_name(o.bf16) : "fp32", p.nsched, gflop, lv,
           (double)cpu_exec_memory_bytes(e) / 1048576.0);
    double by_op[IR_OP_COUNT] = { 0 };
    int count_op[IR_OP_COUNT] = { 0 };
    for (int i = 0; i < p.nsched; i++) {
        by_op[p.sched[i]->op] += pr.node_s[i];
        count_op[p.sched[i]->op]++;
    }
    for (int k = 0; k < IR_OP_COUNT; k++) {
        int best = -1;
        for (int j = 0; j < IR_OP_COUNT; j++)
            if (count_op[j] && (best < 0 || by_op[j] > by_op[best])) best = j;
        if (best < 0 || by_op[best] * 1000 < total) break; /* under 0.1% */
        printf("%-22s %9.2f ms %5.1f%% %6d nodes\n", ir_ops[best].name, 1000 * by_op[best] / runs, 100 * by_op[best] / total,
               count_op[best]);
        count_op[best] = 0;
    }
    printf("node groups (op, output <- operands), slowest first:\n");
    node_groups groups;
    if (groups_new(&groups, p.nsched)) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int k = 0; k < p.nsched; k++) {
        const af_tensor *t = p.sched[k];
        char sh[96], s0[96] = "", s1[96] = "", kk[320];
        shape_str(t->shape, sh, sizeof sh);
        if (t->nsrc > 0) shape_str(t->src[0]->shape, s0, sizeof s0);
        if (t->nsrc > 1) shape_str(t->src[1]->shape, s1, sizeof s1);
        snprintf(kk, sizeof kk, "%-14s %-16s <- %s%s%s %s%s%s", ir_ops[t->op].name, sh, s0,
                 t->op == IR_OP_MATMUL && t->a.ta ? "T" : "", t->nsrc > 0 && t->src[0]->op == IR_OP_CONST ? "c" : "", s1,
                 t->op == IR_OP_MATMUL && t->a.tb ? "T" : "", t->nsrc > 1 && t->src[1]->op == IR_OP_CONST ? "c" : "");
        groups_add(&groups, kk, pr.node_s[k], (double)plan_node_flops(t));
    }
    groups_print(&groups, runs, 25);
    groups_free(&groups);
    return 0;
}
