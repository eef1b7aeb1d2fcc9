/* The ane backend (AF_TARGET_ANE) end to end against the fake AppleNeuralEngine
 * framework: af_compile lowers to MIL, the darwin runtime compiles and runs it, af_run
 * moves fp16 in and out. The fake executes what it compiles as ane-sim models the
 * engine of the subtype it reports, so every result must equal ane-sim's through MIL
 * bit for bit, and every program ane-sim refuses the ane target refuses too.
 *   ops      every op-table row of the op corpus
 *   family   the family comes from the device; naming another one is refused
 *   state    resident state: bind, write, read, and runs that advance it
 *   budget   a spent compile budget is a clear af_compile error, not a crash
 *   budget_reload  epochs that rebuild their programs run past a small budget: what the
 *            daemon still has compiled reloads without compiling (issue 30)
 *   train    the MLP's resident, device and host plans on ane:m1 leave the weights
 *            ane-sim:m1 leaves, with one dispatch per resident step
 *   bridges  a graph with three bridge ops (support/bridge_mix.h) runs as 7 segments,
 *            its bridges as net.plist programs through the runtime, bit for bit as on
 *            ane-sim, with the same accounting */
#include "aneforge.h"
#include "ane/darwin/ane_probe_ops.h"
#include "ane/darwin/ane_runtime.h"
#include "engine/family_file.h"
#include "mil/opinfo.h"
#include "engine/family.h"
#include "engine/walls.h"
#include "fake_ane_control.h"
#include "support/bridge_mix.h"
#include "support/check.h"
#include "support/corpus_case.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void (*set_subtype)(const char *);
static int ncases, nsame, nrefused;
/* The family ane-sim compiles for and the one the fake's device reports: A16 both, or
 * in the probed case the probe's file and the subtype's family. */
static af_family_id sim_family = AF_FAMILY_A16, device_family = AF_FAMILY_A16;
static bool probed;
static bool covered[IR_OP_COUNT], refused_cpu_only[IR_OP_COUNT];
/* Ops whose case both targets refused: enough for an op the engine documents as
 * rejected (its `aneforge ops` restriction starts "rejected:"), e.g. embedding_grad. */
static bool refused[IR_OP_COUNT];

static af_compile_opts ane_opts(af_family_id fam) {
    return (af_compile_opts){ .target = AF_TARGET_ANE, .family = fam, .threads = 1, .ane_framework = AF_FAKE_ANE };
}
static af_compile_opts sim_opts(af_family_id fam) {
    return (af_compile_opts){ .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1, .via_mil = 1 };
}

static unsigned long long seed_of(const char *label, ir_op op) {
    unsigned long long h = 1469598103934665603ULL ^ (unsigned long long)op;
    for (const char *p = label; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* Compiles and runs; NULL model (with the message kept) when compiling fails. */
static af_model *compile_run(const corpus_graph *cg, const af_compile_opts *o, float **res, char *why, size_t n) {
    af_model *m = af_compile(cg->g, cg->nin, cg->in, cg->nout, cg->out, o);
    if (!m) { snprintf(why, n, "%s", af_error_message()); return NULL; }
    af_buffer bi[CORPUS_MAX_IO], bo[CORPUS_MAX_IO];
    for (int i = 0; i < cg->nin; i++) bi[i] = AF_BUF_F32(cg->data[i], af_shape_count(cg->in[i]->shape));
    for (int k = 0; k < cg->nout; k++) bo[k] = AF_BUF_F32(res[k], af_shape_count(cg->out[k]->shape));
    af_status st = af_run(m, bi, bo);
    CHECK(st == AF_OK, "af_run: %s", af_error_message());
    return m;
}

static void run_case(const corpus_case *base, ir_op op) {
    corpus_case c = *base;
    c.op = op;
    corpus_graph cg = { .g = af_graph_new(), .rng = { seed_of(c.label, op) } };
    c.build(&cg, &c);
    if (af_graph_error(cg.g) || cg.nout == 0) { corpus_graph_free(&cg); return; } /* test_ops reports these */
    /* Engine programs take fp16: say so in the graph, as the trainer does. */
    for (int i = 0; i < cg.nin; i++)
        if (!(cg.in[i]->flags & IR_TF_PARAM)) cg.in[i]->dtype = AF_F16;
    ncases++;
    float *a[CORPUS_MAX_IO] = { 0 }, *b[CORPUS_MAX_IO] = { 0 };
    for (int k = 0; k < cg.nout; k++) {
        size_t n = (size_t)af_shape_count(cg.out[k]->shape) + 1;
        a[k] = calloc(n, sizeof(float));
        b[k] = calloc(n, sizeof(float));
    }
    af_compile_opts oa = ane_opts(AF_FAMILY_DEFAULT), os = sim_opts(sim_family);
    char why_a[900] = "", why_s[900] = "";
    af_model *ma = compile_run(&cg, &oa, a, why_a, sizeof why_a);
    af_model *ms = compile_run(&cg, &os, b, why_s, sizeof why_s);
    if (cg.nin == 0) { /* a request needs an input surface (the framework's validation); ane-sim has no requests */
        CHECK(!ma && strstr(why_a, "no inputs"), "%s/%s: a program without inputs must be refused by the ane target: %s",
              ir_ops[op].name, c.label, ma ? "it compiled" : why_a);
        af_model_free(ma);
        af_model_free(ms);
        for (int k = 0; k < cg.nout; k++) { free(a[k]); free(b[k]); }
        corpus_graph_free(&cg);
        return;
    }
    CHECK(!ma == !ms, "%s/%s: ane %s but ane-sim %s", ir_ops[op].name, c.label, ma ? "compiles" : why_a, ms ? "compiles" : why_s);
    if (ir_ops[op].flags & OPF_CPU_ONLY) { /* both backends refuse it by name, through `unsupported` */
        bool said = !ma && !ms && strstr(why_a, "CPU-only") && strstr(why_s, "CPU-only");
        CHECK(said, "%s/%s: a CPU-only op must be refused as CPU-only by ane (%s) and ane-sim (%s)", ir_ops[op].name,
              c.label, ma ? "compiled" : why_a, ms ? "compiled" : why_s);
        refused_cpu_only[op] |= said;
    }
    if (!ma && !ms) {
        nrefused++;
        refused[op] = true;
        if (getenv("ANE_TEST_VERBOSE")) printf("refused %s/%s: %s\n", ir_ops[op].name, c.label, why_s);
    }
    if (ma && ms) {
        CHECK(af_model_family(ma) == device_family, "%s: the family is not the device's", c.label);
        bool same = true;
        for (int k = 0; k < cg.nout && same; k++)
            same = !memcmp(a[k], b[k], sizeof(float) * (size_t)af_shape_count(cg.out[k]->shape));
        CHECK(same, "%s/%s: the ane target and ane-sim through MIL differ", ir_ops[op].name, c.label);
        if (same) {
            nsame++;
            for (int id = 0; id < cg.g->n; id++) covered[cg.g->t[id]->op] = true;
        }
        af_stats st;
        af_model_stats(ma, &st);
        CHECK(st.dispatches == 1 && st.engine_flops >= 0 && st.host_flops == 0, "%s: accounting %lld dispatches",
              c.label, (long long)st.dispatches);
    }
    af_model_free(ma);
    af_model_free(ms);
    for (int k = 0; k < cg.nout; k++) { free(a[k]); free(b[k]); }
    corpus_graph_free(&cg);
}

static void run_table(const corpus_case *t, int n) {
    for (int i = 0; i < n; i++) {
        if (!t[i].sweep) { run_case(&t[i], t[i].op); continue; }
        for (int op = 0; op < IR_OP_COUNT; op++)
            if (ir_ops[op].kind == ir_ops[t[i].op].kind) run_case(&t[i], (ir_op)op);
    }
}

static void test_ops(void) {
    /* Hundreds of programs in one process: lift the runtime's, the fake daemon's and
     * ane-sim's per-process budgets (each is tested on its own elsewhere). */
    ane_rt_set_compile_budget(1 << 20);
    af_ane_budget_set_limits(NULL, 1 << 20, 1 << 20);
    run_table(corpus_elementwise, corpus_elementwise_count);
    run_table(corpus_tensor, corpus_tensor_count);
    run_table(corpus_nn, corpus_nn_count);
    for (int op = 0; op < IR_OP_COUNT && !probed; op++)
    {
        const char *why = ane_rules_op_restrictions(op);
        bool rejected = refused[op] && why && !strncmp(why, "rejected:", 9);
        if (ir_ops[op].flags & OPF_CPU_ONLY)
            CHECK(refused_cpu_only[op], "CPU-only op '%s' has no case both engine backends refuse", ir_ops[op].name);
        else
            CHECK(covered[op] || rejected, "op '%s' never ran on the ane target", ir_ops[op].name);
    }
    printf("ane ops: %d cases, %d bit-identical to ane-sim, %d refused by both\n", ncases, nsame, nrefused);
}

/* The probe's op table (op.<name> in $AF_PROBED_FAMILY) against ane-sim loaded with the
 * probe's file: every row of the op table has a verdict, and each row's probe program
 * (probe_op_build) gets the same one on ane-sim as the probe got from the fake: refused,
 * or compared with the CPU within PROBE_OP_PASS_ERR (pass) or not (wrong). */
static void test_probe_ops(const char *path) {
    ff_doc doc;
    memset(&doc, 0, sizeof doc);
    CHECK(ff_read(path, &doc) == AF_OK, "reading %s: %s", path, af_error_message());
    int covered = 0, agree = 0, npass = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        char key[80];
        snprintf(key, sizeof key, "op.%s", ir_ops[op].name);
        const ff_member *m = ff_get(&doc, key);
        const char *v = m && m->type == FF_STR ? m->str : NULL;
        CHECK(v != NULL, "the probe file has no verdict for op '%s'", ir_ops[op].name);
        if (!v) continue;
        covered++;
        const char *want = "cpu-only";
        double err = 0;
        if (!(ir_ops[op].flags & OPF_CPU_ONLY)) {
            af_graph *g = af_graph_new();
            probe_op_prog p;
            af_status st = probe_op_build(g, op, &p);
            CHECK(st == AF_OK, "op %s has no probe program: %s", ir_ops[op].name, af_error_message());
            af_compile_opts os = sim_opts(sim_family), oc = { .target = AF_TARGET_CPU, .threads = 1 };
            af_model *ms = st ? NULL : af_compile(g, p.nin, p.in, 1, &p.out, &os);
            af_model *mc = ms ? af_compile(g, p.nin, p.in, 1, &p.out, &oc) : NULL;
            want = "refused";
            if (ms && mc) {
                int64_t n = af_shape_count(p.out->shape);
                float *y = calloc((size_t)n + 1, sizeof *y), *ref = calloc((size_t)n + 1, sizeof *ref);
                af_buffer bi[PROBE_OP_MAX_IN], bs = AF_BUF_F32(y, n), bc = AF_BUF_F32(ref, n);
                for (int k = 0; k < p.nin; k++) bi[k] = AF_BUF_F32(p.val[k], af_shape_count(p.in[k]->shape));
                CHECK(af_run(ms, bi, &bs) == AF_OK && af_run(mc, bi, &bc) == AF_OK, "op %s: a run failed: %s", ir_ops[op].name,
                      af_error_message());
                err = probe_op_rel_err(y, ref, n);
                want = err <= PROBE_OP_PASS_ERR ? "pass" : "wrong";
                free(y);
                free(ref);
            }
            af_model_free(ms);
            af_model_free(mc);
            if (!st) probe_op_free(&p);
            af_graph_free(g);
        }
        bool same = !strncmp(v, want, strlen(want));
        CHECK(same, "op %s: the probe recorded \"%s\", ane-sim with its file gives %s (max rel err %g)", ir_ops[op].name, v,
              want, err);
        agree += same;
        npass += !strncmp(v, "pass", 4);
    }
    CHECK(covered == IR_OP_COUNT, "the probe recorded %d of the op table's %d rows", covered, IR_OP_COUNT);
    printf("probe ops: %d of the op table's %d rows recorded, %d agree with ane-sim (%d pass)\n", covered, IR_OP_COUNT, agree,
           npass);
    ff_free(&doc);
}

/* y = a * b + c on fp16 inputs. */
static af_graph *small_graph(af_tensor **in, af_tensor **out) {
    af_graph *g = af_graph_new();
    in[0] = af_input(g, "a", AF_F16, AF_SHAPE(4, 16));
    in[1] = af_input(g, "b", AF_F16, AF_SHAPE(4, 16));
    in[2] = af_input(g, "c", AF_F16, AF_SHAPE(4, 16));
    *out = af_add(af_mul(in[0], in[1]), in[2]);
    return g;
}

static void test_family(void) {
    af_tensor *in[3], *out;
    af_graph *g = small_graph(in, &out);
    set_subtype("h13");
    af_compile_opts o = ane_opts(AF_FAMILY_DEFAULT);
    af_model *m = af_compile(g, 3, in, 1, &out, &o);
    CHECK(m && af_model_family(m) == AF_FAMILY_A13, "ane on an h13 device: family %d (%s)", m ? (int)af_model_family(m) : -1,
          m ? "" : af_error_message());
    af_model_free(m);
    o = ane_opts(AF_FAMILY_A16);
    m = af_compile(g, 3, in, 1, &out, &o);
    CHECK(!m && strstr(af_error_message(), "A13") && strstr(af_error_message(), "ane-sim"),
          "naming A16 on an A13 device must be refused with the way out: %s", m ? "compiled" : af_error_message());
    af_model_free(m);
    o = ane_opts(AF_FAMILY_A13);
    m = af_compile(g, 3, in, 1, &out, &o);
    CHECK(m != NULL, "naming the device's own family: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* acc' = acc + x, acc resident: after k runs of x = 1 it holds init + k. */
static void test_state(void) {
    af_graph *g = af_graph_new();
    af_tensor *acc = af_input(g, "acc", AF_F16, AF_SHAPE(8, 32)), *x = af_input(g, "x", AF_F16, AF_SHAPE(8, 32));
    af_tensor *next = af_add(acc, x), *total = af_reduce_sum(next, 2, (int[]){ 0, 1 }, 0);
    af_tensor *in[2] = { acc, x }, *out[2] = { next, total };
    af_compile_opts o = ane_opts(AF_FAMILY_DEFAULT);
    af_model *m = af_compile(g, 2, in, 2, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) { af_graph_free(g); return; }
    float init[256], ones[256], got[256], sum = 0;
    for (int i = 0; i < 256; i++) { init[i] = (float)(i % 7) * 0.5f; ones[i] = 1.0f; }
    CHECK(af_model_bind_state(m, 0, 0, init) == AF_OK, "bind: %s", af_error_message());
    for (int k = 0; k < 3; k++) {
        af_buffer bi[2] = { { NULL, AF_F32, 0 }, AF_BUF_F32(ones, 256) }, bo[2] = { { NULL, AF_F32, 0 }, AF_BUF_F32(&sum, 1) };
        CHECK(af_run(m, bi, bo) == AF_OK, "run %d: %s", k, af_error_message());
    }
    CHECK(af_model_read_state(m, 0, got) == AF_OK, "read: %s", af_error_message());
    int bad = 0;
    double want_sum = 0;
    for (int i = 0; i < 256; i++) {
        bad += got[i] != init[i] + 3.0f;
        want_sum += init[i] + 3.0;
    }
    CHECK(bad == 0, "resident state after 3 runs: %d of 256 wrong (e.g. %g, want %g)", bad, got[0], init[0] + 3.0f);
    /* reduce_sum accumulates in fp16 on the engine: 256 terms near 1150 lose up to 1% */
    CHECK(fabs(sum - want_sum) <= want_sum * 1e-2, "the last run's sum %g, want %g", sum, want_sum);
    CHECK(af_model_write_state(m, 0, ones) == AF_OK && af_model_read_state(m, 0, got) == AF_OK && got[5] == 1.0f,
          "write then read state");
    af_stats st;
    af_model_stats(m, &st);
    CHECK(st.dispatches == 3 && st.bytes_in == 3 * 2 * 256 && st.bytes_out == 3 * 2, "accounting: %lld dispatches, %lld in, %lld out",
          (long long)st.dispatches, (long long)st.bytes_in, (long long)st.bytes_out);
    af_model_free(m);
    af_graph_free(g);
}

static void test_budget(void) {
    ane_rt_set_compile_budget(2);
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 16));
    af_model *m[3] = { 0 };
    af_compile_opts o = ane_opts(AF_FAMILY_DEFAULT);
    for (int k = 0; k < 3; k++) { /* three different programs */
        af_tensor *y = af_muls(x, (float)(k + 2));
        m[k] = af_compile(g, 1, &x, 1, &y, &o);
    }
    CHECK(m[0] && m[1] && !m[2], "two compiles fit a budget of 2, the third must fail");
    CHECK(!m[2] && strstr(af_error_message(), "budget") != NULL, "the error names the budget: %s", af_error_message());
    af_tensor *again = af_muls(x, 2.0f); /* the first program again: a cache hit, no compile */
    af_model *hit = af_compile(g, 1, &x, 1, &again, &o);
    CHECK(hit != NULL, "a cached program compiles nothing: %s", af_error_message());
    for (int k = 0; k < 3; k++) af_model_free(m[k]);
    af_model_free(hit);
    af_graph_free(g);
}

static char budget_log[2048];
static void keep_budget_log(af_log_level level, const char *msg, void *user) {
    (void)level; (void)user;
    size_t k = strlen(budget_log);
    snprintf(budget_log + k, sizeof budget_log - k, "%s\n", msg);
}

/* One epoch: the same three programs (x * 2, x * 3, x * 4) built, compiled, run and freed
 * anew, as a trainer that rebuilds its plans each epoch does; each result must equal
 * ane-sim's through MIL. Returns the compiles its models report. */
static int64_t budget_epoch(int epoch) {
    int64_t compiles = 0;
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 16));
    float in[64], a[64], b[64];
    test_rng r = { 40 + (uint64_t)epoch };
    test_fill_uniform(&r, in, 64, -2, 2);
    for (int k = 0; k < 3; k++) {
        af_tensor *y = af_muls(x, (float)(k + 2));
        af_compile_opts oa = ane_opts(AF_FAMILY_DEFAULT), os = sim_opts(AF_FAMILY_A16);
        af_model *ma = af_compile(g, 1, &x, 1, &y, &oa);
        char why[1024];
        snprintf(why, sizeof why, "%s", ma ? "" : af_error_message());
        af_model *ms = af_compile(g, 1, &x, 1, &y, &os);
        CHECK(ma && ms, "epoch %d, program %d: %s", epoch, k, ma ? af_error_message() : why);
        if (!ma || !ms) { af_model_free(ma); af_model_free(ms); continue; }
        af_buffer bi = AF_BUF_F32(in, 64), ba = AF_BUF_F32(a, 64), bs = AF_BUF_F32(b, 64);
        CHECK(af_run(ma, &bi, &ba) == AF_OK && af_run(ms, &bi, &bs) == AF_OK && !memcmp(a, b, sizeof a),
              "epoch %d, program %d: the ane target and ane-sim differ (%s)", epoch, k, af_error_message());
        af_stats st;
        af_model_stats(ma, &st);
        compiles += st.compiles;
        af_model_free(ma);
        af_model_free(ms);
    }
    af_graph_free(g);
    return compiles;
}

/* Past a small budget ($FAKE_ANE_COMPILE_BUDGET=4 for the fake daemon, 4 for the
 * runtime): six epochs ask for 18 compiles of 3 programs; the daemon still has each
 * compiled, so they reload without compiling and every epoch runs. A new program past
 * the budget is refused with a message naming the family file's compile_budget, and
 * the old ones still reload after that. */
static void test_budget_reload(void) {
    ane_rt_set_compile_budget(4);
    af_set_log(keep_budget_log, NULL);
    int64_t before = ane_rt_compile_count(), reported = 0;
    for (int e = 0; e < 6; e++) reported += budget_epoch(e);
    CHECK(ane_rt_compile_count() - before == 3 && reported == 3 && ane_rt_reload_count() == 15,
          "6 epochs of 3 programs: %lld real compiles (%lld reported), %lld reloads; want 3 and 15",
          (long long)(ane_rt_compile_count() - before), (long long)reported, (long long)ane_rt_reload_count());
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(4, 16));
    af_tensor *y4 = af_adds(x, 1.0f), *y5 = af_adds(x, 2.0f);
    af_compile_opts o = ane_opts(AF_FAMILY_DEFAULT);
    af_model *m4 = af_compile(g, 1, &x, 1, &y4, &o);
    CHECK(m4 != NULL, "the fourth program fits the budget of 4: %s", af_error_message());
    af_model *m5 = af_compile(g, 1, &x, 1, &y5, &o);
    const char *msg = af_error_message();
    char budget[120];
    snprintf(budget, sizeof budget, "the A16 family file's compile_budget is %lld compiles per process",
             (long long)ane_family_info_of(AF_FAMILY_A16)->compile_budget);
    CHECK(!m5 && strstr(msg, "compiled 4 programs, its budget (4;") && strstr(msg, budget) && strstr(msg, "restart the process") &&
              strstr(msg, "doctor --probe"),
          "a new program past the budget: the message must name the budget and the family file's: %s", m5 ? "it compiled" : msg);
    printf("%s\n", msg);
    CHECK(strstr(budget_log, "compile budget spent (4 compiles;") && strstr(budget_log, budget),
          "the log must say the budget is spent: %s", budget_log);
    CHECK(budget_epoch(6) == 0, "after the budget is spent, programs compiled before still reload");
    af_model_free(m4);
    af_graph_free(g);
    af_set_log(NULL, NULL);
}

/* Two separable blobs in 16 dimensions, 2 classes, one-hot targets. */
static void make_data(int n, float *x, float *y, test_rng *r) {
    for (int i = 0; i < n; i++) {
        int c = i % 2;
        for (int d = 0; d < 16; d++) x[i * 16 + d] = (c ? 0.8f : -0.8f) * (d < 8 ? 1.0f : -1.0f) + (float)(2.0 * test_uniform(r) - 1.0);
        y[i * 2] = c == 0;
        y[i * 2 + 1] = c == 1;
    }
}

static void train_one(af_plan plan) {
    enum { B = 32, STEPS = 24 };
    static float x[B * STEPS * 16], y[B * STEPS * 2];
    test_rng r = { 7 };
    make_data(B * STEPS, x, y, &r);
    float *w[2][8] = { { 0 } };
    int64_t count[8] = { 0 };
    int np[2] = { 0, 0 };
    double loss[2] = { 0, 0 };
    af_stats st[2];
    for (int t = 0; t < 2; t++) {
        af_net net = af_net_mlp(AF_SHAPE(16), 32, 2, 5);
        af_train_opts o = af_train_defaults();
        o.plan = plan;
        o.batch = B;
        o.eval_batch = B;
        o.lr = 0.01f;
        o.loss_scale = 128.0f;
        o.compile = t == 0 ? ane_opts(AF_FAMILY_A13) : sim_opts(AF_FAMILY_A13);
        af_trainer *tr = af_trainer_new(&net, &o);
        af_net_free(&net);
        CHECK(tr != NULL, "%s trainer on %s: %s", af_plan_name(plan), t ? "ane-sim" : "ane", af_error_message());
        if (!tr) return;
        int k = af_trainer_steps_per_call(tr);
        for (int s = 0; s + k <= STEPS; s += k) {
            af_step_info info;
            CHECK(af_trainer_step(tr, x + s * B * 16, y + s * B * 2, &info) == AF_OK, "step: %s", af_error_message());
            loss[t] = info.loss;
        }
        af_trainer_stats(tr, &st[t]);
        np[t] = af_trainer_num_params(tr);
        for (int i = 0; i < np[t] && i < 8; i++) {
            count[i] = af_shape_count(af_tensor_shape(af_trainer_param(tr, i)));
            w[t][i] = malloc(sizeof(float) * (size_t)count[i]);
            CHECK(af_trainer_read_param(tr, i, w[t][i]) == AF_OK, "read_param: %s", af_error_message());
        }
        af_trainer_free(tr);
    }
    CHECK(np[0] == np[1] && np[0] > 0, "parameter counts %d and %d", np[0], np[1]);
    int differ = 0;
    for (int i = 0; i < np[0] && i < 8; i++) differ += memcmp(w[0][i], w[1][i], (size_t)count[i] * sizeof(float)) != 0;
    CHECK(differ == 0, "%s: %d parameters differ between ane:m1 and ane-sim:m1", af_plan_name(plan), differ);
    CHECK(loss[0] == loss[1] && loss[0] < 0.5, "%s: last loss ane %g, ane-sim %g (must match and be < 0.5)", af_plan_name(plan),
          loss[0], loss[1]);
    CHECK(st[0].dispatches == st[1].dispatches, "%s: dispatches ane %lld, ane-sim %lld", af_plan_name(plan),
          (long long)st[0].dispatches, (long long)st[1].dispatches);
    if (plan == AF_PLAN_RESIDENT)
        CHECK(st[0].dispatches == STEPS && st[0].host_flops == 0, "resident: %lld dispatches for %d steps, %lld host FLOPs",
              (long long)st[0].dispatches, STEPS, (long long)st[0].host_flops);
    CHECK(st[0].compiles <= 4 + 2 * 4, "%s: %lld compiles", af_plan_name(plan), (long long)st[0].compiles);
    printf("%s on ane:m1: loss %.4f, %lld dispatches, %lld compiles, weights bit-identical to ane-sim:m1\n", af_plan_name(plan),
           loss[0], (long long)st[0].dispatches, (long long)st[0].compiles);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 8; i++) free(w[t][i]);
}

static void test_train(void) {
    set_subtype("h13");
    train_one(AF_PLAN_RESIDENT);
    train_one(AF_PLAN_DEVICE);
    train_one(AF_PLAN_HOST);
    train_one(AF_PLAN_UNROLLED);
}

static void test_bridges(void) {
    bridge_mix g = bridge_mix_build();
    float x[96], a0[288], a1[96], s0[288], s1[96];
    for (int i = 0; i < 96; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    af_compile_opts oa = ane_opts(AF_FAMILY_DEFAULT), os = sim_opts(AF_FAMILY_A16);
    os.via_mil = 0;
    int64_t before = ane_rt_compile_count();
    af_model *ma = af_compile(g.g, 1, &g.x, 2, g.out, &oa);
    CHECK(ma != NULL, "ane: %s", af_error_message());
    af_model *ms = af_compile(g.g, 1, &g.x, 2, g.out, &os);
    CHECK(ms != NULL, "ane-sim: %s", af_error_message());
    if (ma && ms) {
        af_buffer in = AF_BUF_F32(x, 96), oa_[2] = {AF_BUF_F32(a0, 288), AF_BUF_F32(a1, 96)},
                  os_[2] = {AF_BUF_F32(s0, 288), AF_BUF_F32(s1, 96)};
        CHECK(af_run(ma, &in, oa_) == AF_OK, "ane run: %s", af_error_message());
        CHECK(af_run(ms, &in, os_) == AF_OK, "ane-sim run: %s", af_error_message());
        CHECK(!memcmp(a0, s0, sizeof a0) && !memcmp(a1, s1, sizeof a1), "the ane target and ane-sim differ");
        af_stats sa, ss;
        af_model_stats(ma, &sa);
        af_model_stats(ms, &ss);
        CHECK(sa.segments == 7 && ss.segments == 7, "segments: ane %lld, ane-sim %lld", (long long)sa.segments,
              (long long)ss.segments);
        CHECK(sa.dispatches == 7 && sa.segment_bytes == ss.segment_bytes && sa.segment_bytes > 0,
              "ane: %lld dispatches, %lld segment bytes (ane-sim %lld)", (long long)sa.dispatches,
              (long long)sa.segment_bytes, (long long)ss.segment_bytes);
        CHECK(sa.compiles == 7 && ane_rt_compile_count() - before == 7, "ane: 7 programs compiled (4 MIL, 3 net.plist), "
              "got %lld", (long long)sa.compiles);
    }
    af_model_free(ma);
    af_model_free(ms);
    af_graph_free(g.g);

    /* radius_search's UInt8 membership mask through the net.plist runtime: the fake
     * writes each flag into the low byte of a 2-byte cell and the backend reads that byte
     * back; checked against a naive L2 ball query (points on a grid, no ties at r). */
    af_graph *rg = af_graph_new();
    af_tensor *pts = af_input(rg, "p", AF_F16, AF_SHAPE(12, 3)), *cen = af_input(rg, "c", AF_F16, AF_SHAPE(4, 3));
    af_tensor *rs = af_radius_search(pts, cen, 1.5f);
    float p[36], c[12], got[48];
    for (int i = 0; i < 36; i++) p[i] = (float)((i * 7) % 5) - 2.0f;
    for (int i = 0; i < 12; i++) c[i] = p[i]; /* the first 4 points are the centroids: each has a member */
    af_model *mr = rs ? af_compile(rg, 2, (af_tensor *[]){ pts, cen }, 1, &rs, &oa) : NULL;
    CHECK(mr != NULL, "radius_search on ane: %s", af_error_message());
    if (mr) {
        af_buffer in2[2] = { AF_BUF_F32(p, 36), AF_BUF_F32(c, 12) }, o = AF_BUF_F32(got, 48);
        CHECK(af_run(mr, in2, &o) == AF_OK, "radius_search run: %s", af_error_message());
        int bad = 0, ones = 0;
        for (int i = 0; i < 12; i++)
            for (int j = 0; j < 4; j++) {
                double d2 = 0;
                for (int k = 0; k < 3; k++) d2 += ((double)p[3 * i + k] - c[3 * j + k]) * ((double)p[3 * i + k] - c[3 * j + k]);
                float want = d2 <= 1.5 * 1.5 ? 1.0f : 0.0f;
                bad += got[4 * i + j] != want;
                ones += want == 1.0f;
            }
        CHECK(bad == 0 && ones > 0 && ones < 48, "radius_search via the fake: %d of 48 cells differ (%d members)", bad, ones);
    }
    af_model_free(mr);
    af_graph_free(rg);

    /* dynamic_slice with a run-time start: the start goes into the program's weights.1
     * constant, so a new start recompiles once and the same start again does not */
    af_graph *dg = af_graph_new();
    af_tensor *dx = af_input(dg, "x", AF_F16, AF_SHAPE(3, 4)), *ds = af_input(dg, "s", AF_F16, AF_SHAPE(1));
    af_tensor *dy = af_dynamic_slice(dx, ds, -1, 2);
    af_model *md = dy ? af_compile(dg, 2, (af_tensor *[]){ dx, ds }, 1, &dy, &oa) : NULL;
    CHECK(md != NULL, "dynamic_slice on ane: %s", af_error_message());
    float xv[12], starts[4] = { 0, 2, 2, 1.4f }, dout[6];
    for (int i = 0; i < 12; i++) xv[i] = (float)(i * 3 - 5);
    af_stats ds0;
    if (md) af_model_stats(md, &ds0);
    for (int r = 0; md && r < 4; r++) {
        af_buffer in2[2] = { AF_BUF_F32(xv, 12), AF_BUF_F32(&starts[r], 1) }, o = AF_BUF_F32(dout, 6);
        CHECK(af_run(md, in2, &o) == AF_OK, "dynamic_slice run %d: %s", r, af_error_message());
        int st = r == 3 ? 1 : (int)starts[r], bad = 0; /* 1.4 rounds to 1 */
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) bad += dout[2 * i + j] != xv[4 * i + st + j];
        CHECK(bad == 0, "dynamic_slice start %g: %d values differ from x[:, %d:%d]", (double)starts[r], bad, st, st + 2);
    }
    if (md) {
        af_stats s1;
        af_model_stats(md, &s1);
        CHECK(s1.compiles - ds0.compiles == 2, "starts 0, 2, 2, 1 after compiling for 0: %lld recompiles, want 2",
              (long long)(s1.compiles - ds0.compiles));
    }
    af_model_free(md);
    af_graph_free(dg);
}

/* One program per family-file limit a compiler refuses for, each within aneforge's
 * A16 walls (an h16 device) but past the made-up Z9's (the fake's compiler,
 * $FAKE_ANE_FAMILY) that gives no reason (macOS 26): the error must name the op, the
 * limit with its value in the A16 family file, what to try and the probe. */
typedef struct {
    const char *field, *op, *remedy;
    af_tensor *(*build)(af_graph *g, af_tensor **x);
} diag_case;

static af_tensor *d_rank(af_graph *g, af_tensor **x) { /* Z9: rank <= 4 */
    *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 2, 2, 2, 8));
    return af_adds(*x, 1.0f);
}
static af_tensor *d_spatial(af_graph *g, af_tensor **x) { /* Z9: W <= 12000 */
    *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 13000));
    return af_adds(*x, 1.0f);
}
static af_tensor *d_axis(af_graph *g, af_tensor **x) { /* Z9: every axis <= 30000 */
    *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 31000, 1, 1));
    return af_adds(*x, 1.0f);
}
static af_tensor *d_kernel(af_graph *g, af_tensor **x) { /* Z9: kernel width <= 7 */
    *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 512));
    return af_conv(*x, af_const_fill(g, AF_SHAPE(1, 1, 1, 10), 0.5f), NULL, NULL, NULL, 1);
}
static af_tensor *d_wide_row(af_graph *g, af_tensor **x) { /* Z9: a concat reads rows of <= 5000 */
    *x = af_input(g, "x", AF_F16, AF_SHAPE(2, 3000));
    af_tensor *rows[2] = { af_reshape(af_adds(*x, 1.0f), AF_SHAPE(1, 6000)), af_reshape(af_muls(*x, 2.0f), AF_SHAPE(1, 6000)) };
    return af_concat(2, rows, 0);
}

static void test_diagnose(void *h) {
    int (*fake_set)(const char *, long);
    *(void **)&fake_set = dlsym(h, "fake_ane_set");
    CHECK(fake_set && fake_set("diagnostics", 0), "the fake has the diagnostics switch");
    static const diag_case cases[] = {
        { "max_rank", "add", "fold leading axes", d_rank },
        { "max_spatial", "add", "split the axis", d_spatial },
        { "max_axis", "add", "split the axis", d_axis },
        { "max_kernel_w", "conv", "split the kernel", d_kernel },
        { "wide_row_max", "reshape", "keep each tensor's natural row width", d_wide_row },
    };
    const ane_family_info *fi = ane_family_info_of(AF_FAMILY_A16);
    int covered_fields = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const diag_case *c = &cases[i];
        af_graph *g = af_graph_new();
        af_tensor *x = NULL, *y = c->build(g, &x);
        af_compile_opts o = ane_opts(AF_FAMILY_DEFAULT);
        af_model *m = af_compile(g, 1, &x, 1, &y, &o);
        const char *msg = af_error_message();
        int64_t value = -1;
        for (int f = 0; f < ane_family_nfields; f++)
            if (!strcmp(ane_family_fields[f].key, c->field)) value = ane_family_get(fi, f);
        char cause[80], limit[120];
        snprintf(cause, sizeof cause, "Likely cause: %s '", c->op);
        snprintf(limit, sizeof limit, "of %s = %lld in the A16 family file", c->field, (long long)value);
        bool ok = !m && strstr(msg, "Validation diagnostics: none") && strstr(msg, cause) && strstr(msg, limit) &&
                  strstr(msg, c->remedy) && strstr(msg, "doctor --probe");
        CHECK(ok, "%s: the refusal must name the op (%s), the limit (%s), the remedy and the probe: %s", c->field, cause, limit,
              m ? "it compiled" : msg);
        if (getenv("ANE_TEST_VERBOSE")) printf("%s: %s\n", c->field, msg);
        covered_fields += ok;
        af_model_free(m);
        af_graph_free(g);
    }
    CHECK(covered_fields == 5, "%d of the 5 refusal limits diagnosed", covered_fields);
}

int main(int argc, char **argv) {
    const char *tmp = getenv("TMPDIR"); /* where the runtime stages programs, as macOS's always exists */
    if (tmp) mkdir(tmp, 0700);
    void *h = dlopen(AF_FAKE_ANE, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", AF_FAKE_ANE, dlerror());
    if (!h) return check_finish("ane_backend");
    *(void **)&set_subtype = dlsym(h, "fake_ane_set_subtype");
    CHECK(set_subtype != NULL, "the fake exports fake_ane_set_subtype");
    if (!set_subtype) return check_finish("ane_backend");
    const char *which = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(which, "all");
    if (all || !strcmp(which, "ops")) test_ops();
    if (!strcmp(which, "diagnose")) test_diagnose(h);
    if (!strcmp(which, "probed")) {
        /* The fake configured as a chip ($FAKE_ANE_FAMILY) against ane-sim loaded with what
         * doctor --probe measured of it ($AF_PROBED_FAMILY): the same pass/refuse table and
         * the same numbers on every corpus case (tests/fake_ane/probe_chips.sh). */
        const char *path = getenv("AF_PROBED_FAMILY");
        char spec[1024];
        snprintf(spec, sizeof spec, "ane-sim:%s", path ? path : "");
        af_compile_opts oa = ane_opts(AF_FAMILY_DEFAULT);
        CHECK(path && af_target_parse(spec, NULL, &sim_family) == AF_OK, "AF_PROBED_FAMILY=%s: %s", path ? path : "(unset)",
              af_error_message());
        CHECK(af_compile_family(&oa, &device_family) == AF_OK, "the fake's device family: %s", af_error_message());
        probed = true;
        if (path) test_ops();
        if (path) test_probe_ops(path);
    }
    if (all || !strcmp(which, "family")) test_family();
    if (all || !strcmp(which, "state")) test_state();
    if (all || !strcmp(which, "train")) test_train();
    if (!strcmp(which, "state_copy") || !strcmp(which, "train_copy")) {
        /* resident state copied between separate surfaces (ane_rt_set_state_alias(0), the
         * chip probe's fallback) against a framework that refuses an aliased request */
        int (*fake_set)(const char *, long);
        *(void **)&fake_set = dlsym(h, "fake_ane_set");
        CHECK(fake_set && fake_set("alias_surfaces", 0), "the fake exports fake_ane_set");
        ane_rt_set_state_alias(0);
        if (which[0] == 's') test_state();
        else test_train();
    }
    if (all || !strcmp(which, "bridges")) test_bridges();
    if (all || !strcmp(which, "budget")) test_budget(); /* last: it spends the budget */
    if (!strcmp(which, "budget_reload")) test_budget_reload();
    return check_finish("ane_backend");
}
