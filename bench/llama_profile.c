/* Where a llama training step's CPU time goes: builds the forward, loss and af_backward
 * graph of a llama2.c-architecture model (as the trainer does, on a graph told it runs on
 * the CPU), runs it through the CPU executor with a hook after every node, and prints the
 * time per op kind and the slowest nodes (median-free: the sum over --runs runs after one
 * warm-up; with 1 thread, CPU time, which a busy machine disturbs less). The optimizer
 * update is not included (it is elementwise over the params). With runs 0 it only prints
 * the step's GFLOP as JSON (all nodes; and the products alone, less recomputation).
 * With bf16 1 the matmul products run as under --precision bf16 (the CPU's best bf16
 * path; refused where it has none), and the count of weight packings taken from the
 * forward (gemm_bf16.h's cache) is printed, and the time the matmul nodes' bf16 products
 * spend packing and in the kernel in the fused runs (cpu_bf16_stats_time).
 *   build/bench_llama_profile [dim layers heads kv_heads hidden vocab seq batch [runs [threads [bf16]]]]
 *   build/bench_llama_profile 288 6 6 6 768 512 256 4 3 2 */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_llama.h"
#include "compile/plan.h"
#include "cpu/cpu_exec.h"
#include "cpu/gemm_bf16.h"
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAXP = 2 + 9 * 64 };

#include "node_timer.h"

int main(int argc, char **argv) {
    int v[11] = { 288, 6, 6, 6, 768, 512, 256, 4, 3, 2, 0 };
    for (int i = 1; i < argc && i <= 11; i++) v[i - 1] = atoi(argv[i]);
    af_llama_config c = { v[0], v[4], v[1], v[2], v[3], v[5], v[6], 1 };
    int T = v[6], B = v[7], runs = v[8], threads = v[9], V = c.vocab_size;
    if (threads == 1) clock_id = CLOCK_THREAD_CPUTIME_ID;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    float *d = af_llama_weights_data(w);
    unsigned long long s = 1;
    for (int64_t i = 0, count = af_llama_weight_count(&c); i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = ((float)(s >> 40) / 16777216.0f - 0.5f) * 0.04f;
    }
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *in[2 + MAXP], *out[1 + MAXP];
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T));
    in[1] = af_input(g, "target", AF_F32, AF_SHAPE(B * T, V));
    int n = af_llama_params_new(g, w, in + 2, MAXP);
    af_tensor *logits = af_llama(&c, in[0], in + 2);
    af_loss *loss = af_softmax_cross_entropy(af_reshape(logits, AF_SHAPE(B * T, V)), in[1]);
    out[0] = af_loss_value(loss);
    if (af_backward(loss, n, in + 2, out + 1, NULL)) { fprintf(stderr, "%s\n", af_error_message()); return 1; }
    compile_plan p;
    char msg[512];
    if (plan_build(&p, g, 2 + n, in, 1 + n, out, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    if (runs == 0) { /* the step's arithmetic only, as JSON (compare_llama's floor) */
        double plan = 0, products = 0;
        for (int i = 0; i < p.nsched; i++) {
            const af_tensor *t = p.sched[i];
            double f = (double)plan_node_flops(t);
            plan += f;
            /* the multiply-adds any implementation must do: the matmuls and the attention's
             * products, less the one product our attention gradient recomputes (QK^T) */
            if (t->op == IR_OP_MATMUL || t->op == IR_OP_MATMUL_W || t->op == IR_OP_CAUSAL_ATTENTION) products += f;
            if (t->op == IR_OP_CAUSAL_ATTENTION_GRAD) products += f * 4 / 5;
        }
        printf("{\"gflop_plan\":%.3f,\"gflop_products\":%.3f}\n", plan * 1e-9, products * 1e-9);
        return 0;
    }
    prof pr = { 0, calloc((size_t)p.nsched, sizeof(double)) };
    cpu_exec_opts o = { .threads = threads, .after_node = after, .hook_ctx = &pr, .bf16 = v[10] ? cpu_gemm_bf16_best() : 0 };
    if (v[10] && !o.bf16) { fprintf(stderr, "bf16: this CPU has neither AMX-BF16 nor AVX512-BF16\n"); return 1; }
    cpu_exec *e;
    if (cpu_exec_new(&p, &o, &e, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
    af_buffer bin[2 + MAXP], bout[1 + MAXP];
    float *tok = malloc(sizeof(float) * (size_t)(B * T)), *y = calloc((size_t)B * T * V, sizeof(float)), lv;
    for (int i = 0; i < B * T; i++) {
        tok[i] = (float)(i * 7 % V);
        y[(int64_t)i * V + (i * 7 + 1) % V] = 1;
    }
    bin[0] = AF_BUF_F32(tok, B * T);
    bin[1] = AF_BUF_F32(y, (int64_t)B * T * V);
    bout[0] = AF_BUF_F32(&lv, 1);
    feed_params(n, in, bin, bout);
    double total = 0;
    for (int r = 0; r <= runs; r++) {
        if (r == 1) memset(pr.node_s, 0, sizeof(double) * (size_t)p.nsched);
        double t0 = pr.last = now_s();
        cpu_exec_run(e, bin, bout);
        if (r) total += now_s() - t0;
    }
    double by_op[IR_OP_COUNT] = { 0 }, flops_op[IR_OP_COUNT] = { 0 };
    int count_op[IR_OP_COUNT] = { 0 };
    for (int i = 0; i < p.nsched; i++) {
        by_op[p.sched[i]->op] += pr.node_s[i];
        count_op[p.sched[i]->op]++;
        flops_op[p.sched[i]->op] += (double)plan_node_flops(p.sched[i]);
    }
    printf("forward+backward: %.1f ms per run (%d runs, %d threads, %d nodes, %s), loss %.4f\n", 1000 * total / runs, runs,
           threads, p.nsched, o.bf16 ? cpu_bf16_path_name((cpu_bf16_path)o.bf16) : "fp32", lv);
    { /* the same step as training runs it: fusion on, no hooks (they turn fusion off) */
        cpu_exec_opts of = o;
        of.after_node = NULL;
        of.hook_ctx = NULL;
        of.fuse = true;
        cpu_exec *ef;
        if (cpu_exec_new(&p, &of, &ef, msg, sizeof msg)) { fprintf(stderr, "%s\n", msg); return 1; }
        af_buffer fout[1 + MAXP];
        float flv;
        fout[0] = AF_BUF_F32(&flv, 1);
        for (int i = 0; i < n; i++)
            fout[1 + i] = AF_BUF_F32(malloc((size_t)bout[1 + i].count * sizeof(float)), bout[1 + i].count);
        double ftotal = 0, worst = 0;
        int64_t pack0 = 0, kern0 = 0, pack1 = 0, kern1 = 0;
        for (int r = 0; r <= runs; r++) {
            if (r == 1) cpu_bf16_stats_time(&pack0, &kern0); /* after the warm-up run */
            double t0 = now_s();
            cpu_exec_run(ef, bin, fout);
            if (r) ftotal += now_s() - t0;
        }
        cpu_bf16_stats_time(&pack1, &kern1);
        for (int i = 0; i < n; i++) { /* each gradient against the unfused run's, relative to its largest value */
            const float *a = bout[1 + i].data, *b = fout[1 + i].data;
            double big = 0, diff = 0;
            for (int64_t j = 0; j < bout[1 + i].count; j++) {
                big = fmax(big, fabs(a[j]));
                diff = fmax(diff, fabs((double)a[j] - b[j]));
            }
            if (big > 0 && diff / big > worst) worst = diff / big;
            free(fout[1 + i].data);
        }
        printf("fused, no hooks: %.1f ms per run, loss %.4f, gradients within %.1e of the unfused run's; executor memory "
               "%.1f MiB against %.1f unfused\n",
               1000 * ftotal / runs, flv, worst, cpu_exec_memory_bytes(ef) / 1048576.0, cpu_exec_memory_bytes(e) / 1048576.0);
        if (o.bf16 && runs > 0) /* the matmul nodes' bf16 products, their packing and their kernel */
            printf("bf16 matmul products in the fused runs: packing %.1f ms, kernel %.1f ms per run\n",
                   (double)(pack1 - pack0) / 1e6 / runs, (double)(kern1 - kern0) / 1e6 / runs);
        cpu_exec_free(ef);
    }
    if (o.bf16) {
        int64_t packed, reused, packed_a, reused_a;
        cpu_bf16_stats(&packed, &reused);
        cpu_bf16_stats_a(&packed_a, &reused_a);
        printf("bf16: right operands %lld packed, %lld taken from the cache; left %lld packed, %lld taken (%d runs)\n",
               (long long)packed, (long long)reused, (long long)packed_a, (long long)reused_a, runs + 1);
    }
    printf("%-22s %9s %6s %6s %9s\n", "op", "ms/run", "share", "nodes", "GFLOP/s");
    for (int k = 0; k < IR_OP_COUNT; k++) {
        int best = -1;
        for (int j = 0; j < IR_OP_COUNT; j++)
            if (count_op[j] && (best < 0 || by_op[j] > by_op[best])) best = j;
        if (best < 0) break;
        double ms = 1000 * by_op[best] / runs;
        printf("%-22s %9.2f %5.1f%% %6d %9.1f\n", ir_ops[best].name, ms, 100 * by_op[best] / total, count_op[best],
               by_op[best] > 0 ? flops_op[best] * runs / by_op[best] * 1e-9 : 0);
        count_op[best] = 0;
    }
    /* Nodes grouped by op, output and operand shapes (and matmul transposes), slowest first. */
    printf("node groups (op, output <- operands), slowest first:\n");
    node_groups groups;
    if (groups_new(&groups, p.nsched)) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int k = 0; k < p.nsched; k++) {
        const af_tensor *t = p.sched[k];
        char sh[96], s0[96] = "", s1[96] = "", kk[320];
        shape_str(t->shape, sh, sizeof sh);
        if (t->nsrc > 0) shape_str(t->src[0]->shape, s0, sizeof s0);
        if (t->nsrc > 1) shape_str(t->src[1]->shape, s1, sizeof s1);
        snprintf(kk, sizeof kk, "%-14s %-16s <- %s%s %s%s", ir_ops[t->op].name, sh, s0,
                 t->op == IR_OP_MATMUL && t->a.ta ? "T" : "", s1, t->op == IR_OP_MATMUL && t->a.tb ? "T" : "");
        groups_add(&groups, kk, pr.node_s[k], (double)plan_node_flops(t));
    }
    groups_print(&groups, runs, 30);
    groups_free(&groups);
    return 0;
}
