/* The MIL round trip over the whole op corpus: every case (every op of every swept
 * family) is emitted as MIL text + weight file, parsed back into a fresh graph, and
 * both graphs are compiled for the CPU in fp16-storage numerics and run on the same
 * inputs. The outputs must be bit-identical: the emitter loses nothing, the reader
 * reads exactly what was written, and decomposed ops (norms) fuse back into the very
 * op they came from. Also fails for any op-table row no passing case covers; a CPU-only
 * row (OPF_CPU_ONLY) is covered instead by a case whose emission is refused as CPU-only. */
#include "aneforge.h"
#include "mil/mil.h"
#include "support/check.h"
#include "support/corpus_case.h"

#include <stdlib.h>
#include <string.h>

static bool covered[IR_OP_COUNT], refused_cpu_only[IR_OP_COUNT];
static int ncases, nbits;

static unsigned long long seed_of(const char *label, ir_op op) {
    unsigned long long h = 1469598103934665603ULL ^ (unsigned long long)op;
    for (const char *p = label; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static af_status run(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out, float *const *data,
                     float **res) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    if (!m) return AF_ERR_INVALID;
    af_buffer bi[CORPUS_MAX_IO], bo[CORPUS_MAX_IO];
    for (int i = 0; i < nin; i++) bi[i] = AF_BUF_F32(data[i], af_shape_count(in[i]->shape));
    for (int k = 0; k < nout; k++) bo[k] = AF_BUF_F32(res[k], af_shape_count(out[k]->shape));
    af_status st = af_run(m, bi, bo);
    af_model_free(m);
    return st;
}

/* Whether the graph computes op somewhere the outputs need (norms must fuse back). */
static bool has_op(const mil_module *m, ir_op op) {
    for (int i = 0; i < m->g->n; i++)
        if (m->g->t[i]->op == op) return true;
    return false;
}

static void run_case(const corpus_case *base, ir_op op) {
    corpus_case c = *base;
    c.op = op;
    corpus_graph cg = { .g = af_graph_new(), .rng = { seed_of(c.label, op) } };
    char desc[200];
    snprintf(desc, sizeof desc, "%s/%s", ir_ops[op].name, c.label);
    c.build(&cg, &c);
    ncases++;
    bool ok = !af_graph_error(cg.g) && cg.nout > 0;
    for (int k = 0; k < cg.nout; k++) ok &= cg.out[k] != NULL;
    CHECK(ok, "%s: building failed: %s", desc, af_graph_error(cg.g) ? af_graph_error(cg.g) : "no outputs");
    if (!ok) { corpus_graph_free(&cg); return; }

    mil_module m;
    af_status st = mil_roundtrip(cg.g, cg.nin, cg.in, cg.nout, cg.out, &m);
    if (ir_ops[op].flags & (OPF_CPU_ONLY | OPF_BRIDGE)) { /* no MIL form: emission must say so */
        const char *says = ir_ops[op].flags & OPF_BRIDGE ? "bridge op" : "CPU-only";
        bool said = st == AF_ERR_UNSUPPORTED && strstr(af_error_message(), says);
        CHECK(said, "%s: a %s must be refused by the MIL emitter as one, got %d: %s", desc, says, (int)st,
              af_error_message());
        refused_cpu_only[op] |= said;
        if (st == AF_OK) af_graph_free(m.g);
        corpus_graph_free(&cg);
        return;
    }
    CHECK(st == AF_OK, "%s: emit -> parse failed: %s", desc, af_error_message());
    if (st) { corpus_graph_free(&cg); return; }
    float *want[CORPUS_MAX_IO] = { 0 }, *got[CORPUS_MAX_IO] = { 0 };
    for (int k = 0; k < cg.nout; k++) {
        size_t n = (size_t)af_shape_count(cg.out[k]->shape);
        want[k] = calloc(n + 1, sizeof(float));
        got[k] = calloc(n + 1, sizeof(float));
        CHECK(ir_shape_eq(cg.out[k]->shape, m.out[k]->shape), "%s: output %d changed shape", desc, k);
    }
    st = run(cg.g, cg.nin, cg.in, cg.nout, cg.out, cg.data, want);
    CHECK(st == AF_OK, "%s: direct run failed: %s", desc, af_error_message());
    af_status st2 = run(m.g, m.nin, m.in, m.nout, m.out, cg.data, got);
    CHECK(st2 == AF_OK, "%s: run of the parsed program failed: %s", desc, af_error_message());
    bool same = st == AF_OK && st2 == AF_OK;
    for (int k = 0; same && k < cg.nout; k++) {
        int64_t n = af_shape_count(cg.out[k]->shape);
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&want[k][i], &got[k][i], sizeof(float))) {
                CHECK(0, "%s: output %d element %lld: direct %.9g, through MIL %.9g", desc, k, (long long)i, want[k][i], got[k][i]);
                same = false;
                break;
            }
            nbits++;
        }
    }
    if (op == IR_OP_RMS_NORM || op == IR_OP_LAYER_NORM || op == IR_OP_GROUP_NORM || op == IR_OP_CHANNEL_LAYER_NORM) {
        bool back = has_op(&m, op) || (op == IR_OP_CHANNEL_LAYER_NORM && cg.in[0]->shape.rank == 2 && has_op(&m, IR_OP_LAYER_NORM));
        CHECK(back, "%s: the decomposition did not fuse back into %s", desc, ir_ops[op].name);
        same &= back;
    }
    if (op == IR_OP_EMBEDDING || op == IR_OP_EMBEDDING_GRAD) { /* gather / scatter read back as the row */
        CHECK(has_op(&m, op), "%s: the MIL reader did not map the program back to %s", desc, ir_ops[op].name);
        same &= has_op(&m, op);
    }
    if (same)
        for (int id = 0; id < cg.g->n; id++) covered[cg.g->t[id]->op] = true;
    for (int k = 0; k < cg.nout; k++) { free(want[k]); free(got[k]); }
    af_graph_free(m.g);
    corpus_graph_free(&cg);
}

static void run_table(const corpus_case *t, int n) {
    for (int i = 0; i < n; i++) {
        if (!t[i].sweep) { run_case(&t[i], t[i].op); continue; }
        for (int op = 0; op < IR_OP_COUNT; op++)
            if (ir_ops[op].kind == ir_ops[t[i].op].kind) run_case(&t[i], (ir_op)op);
    }
}

int main(void) {
    run_table(corpus_elementwise, corpus_elementwise_count);
    run_table(corpus_tensor, corpus_tensor_count);
    run_table(corpus_nn, corpus_nn_count);
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ir_ops[op].flags & (OPF_CPU_ONLY | OPF_BRIDGE))
            CHECK(refused_cpu_only[op], "CPU-only or bridge op '%s' has no corpus case the MIL emitter refuses", ir_ops[op].name);
        else
            CHECK(covered[op], "op '%s' has no corpus case that survives the MIL round trip bit for bit", ir_ops[op].name);
    printf("mil_roundtrip: %d cases, %d output values compared bit for bit\n", ncases, nbits);
    return check_finish("mil_roundtrip");
}
