/* The op corpus: every op-table row, many shapes each, built through the public
 * builders, compiled for the CPU in fp32 and fp16 with 1 and 2 threads, and compared
 * with the independent double-precision reference (support/ref.c).
 *   fp32: |got - want| <= tol * scale, tol = 1e-5 unless the row justifies more, scale
 *         = the largest |want| of the output.
 *   fp16: the reference runs on fp16-rounded inputs and constants, rounds every node's
 *         result to fp16 (as the executor does), and must agree within 2 fp16 ulps of
 *         the output scale.
 * It also fails for any op-table row without a corpus case, checks af_run's buffer
 * size checks and that a model gives bit-identical results when run again. */
#include "aneforge.h"
#include "cpu/kernels.h"
#include "support/check.h"
#include "support/corpus_case.h"
#include "support/ref.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FP16_ULPS 2.0

static bool covered[IR_OP_COUNT];
static int ncases, nruns;
/* The largest error seen per mode, as a fraction of the tolerance, for the summary. */
static double worst_ratio[2];
static char worst_desc[2][300];

/* FNV-1a of the case's label and op: each case gets its own data, whatever the order. */
static unsigned long long seed_of(const char *label, ir_op op) {
    unsigned long long h = 1469598103934665603ULL ^ (unsigned long long)op;
    for (const char *p = label; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static void describe(const corpus_case *c, ir_op op, const corpus_graph *cg, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "%s/%s", ir_ops[op].name, c->label);
    for (int i = 0; i < cg->nin && k < n; i++) {
        k += (size_t)snprintf(buf + k, n - k, i ? " " : " in ");
        if (k < n) k += (size_t)ir_shape_str(cg->in[i]->shape, buf + k, n - k);
    }
}

/* The spacing of fp16 values at magnitude s (subnormal spacing below 2^-14). */
static double f16_ulp(double s) {
    if (s < 6.103515625e-05) return 5.9604644775390625e-08;
    int e;
    frexp(s, &e); /* s = m * 2^e, m in [0.5, 1): the binade starts at 2^(e-1) */
    return ldexp(1.0, e - 11);
}

/* Reference values of every tensor in the graph, in creation (topological) order.
 * Rounds exactly where the executor does: fed inputs and node results when the model
 * is fp16 or the tensor's dtype is fp16, constants when the model is fp16. */
static double **ref_graph(const corpus_graph *cg, bool fp16, const char *desc) {
    af_graph *g = cg->g;
    double **v = calloc((size_t)g->n, sizeof *v);
    if (!v) return NULL;
    for (int id = 0; id < g->n; id++) {
        af_tensor *t = g->t[id];
        int64_t n = af_shape_count(t->shape);
        bool round = fp16 || t->dtype == AF_F16;
        v[id] = malloc((size_t)n * sizeof **v + sizeof **v);
        if (!v[id]) goto fail;
        if (t->op == IR_OP_INPUT) {
            int k = 0;
            while (k < cg->nin && cg->in[k] != t) k++;
            if (k == cg->nin) goto fail; /* an input the case does not feed */
            for (int64_t i = 0; i < n; i++) v[id][i] = round ? af_round_f16(cg->data[k][i]) : cg->data[k][i];
        } else if (t->op == IR_OP_CONST) {
            for (int64_t i = 0; i < n; i++) v[id][i] = fp16 ? af_round_f16(t->data[i]) : t->data[i];
        } else {
            const double *src[8];
            if (t->nsrc > 8) goto fail;
            for (int k = 0; k < t->nsrc; k++) src[k] = v[t->src[k]->id];
            if (ref_eval(t, src, v[id]) != 0) {
                CHECK(0, "%s: the reference does not know op %s", desc, ir_ops[t->op].name);
                goto fail;
            }
            if (round)
                for (int64_t i = 0; i < n; i++) v[id][i] = af_round_f16((float)v[id][i]);
        }
    }
    return v;
fail:
    for (int id = 0; id < g->n; id++) free(v[id]);
    free(v);
    return NULL;
}

static void free_ref(double **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* One CHECK per output: reports the worst element when the tolerance is exceeded. */
static void compare(const char *desc, const char *mode, int threads, int k, const float *got, const double *want,
                    int64_t n, bool fp16, double tol32) {
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    double tol = fp16 ? FP16_ULPS * f16_ulp(scale) : tol32 * fmax(scale, FLT_MIN);
    int64_t worst = -1;
    double werr = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= tol) && (worst < 0 || err > werr || isnan(err))) { worst = i; werr = err; }
        if (err / tol > worst_ratio[fp16]) {
            worst_ratio[fp16] = err / tol;
            snprintf(worst_desc[fp16], sizeof worst_desc[fp16], "%.250s output %d", desc, k);
        }
    }
    CHECK(worst < 0, "%s [%s, %d threads] output %d element %lld: got %.9g want %.9g (err %.3g, tol %.3g, scale %.3g)",
          desc, mode, threads, k, (long long)(worst < 0 ? 0 : worst), worst < 0 ? 0.0 : got[worst],
          worst < 0 ? 0.0 : want[worst], werr, tol, scale);
}

/* af_run must refuse buffers whose element count differs from the compiled shape. */
static void check_wrong_sizes(af_model *m, const corpus_graph *cg, af_buffer *in, af_buffer *out, const char *desc) {
    if (cg->nin > 0) {
        in[0].count++;
        CHECK(af_run(m, in, out) == AF_ERR_SHAPE, "%s: af_run accepted an input buffer one element too long", desc);
        in[0].count--;
    }
    out[0].count--;
    CHECK(af_run(m, in, out) == AF_ERR_SHAPE, "%s: af_run accepted an output buffer one element short", desc);
    out[0].count++;
}

/* Runs a compiled model and checks it; in fp16 it also feeds fp16 buffers, which
 * must give the very same values. */
static void run_model(af_model *m, const corpus_graph *cg, double **ref, bool fp16, int threads, double tol32,
                      const char *desc) {
    const char *mode = fp16 ? "fp16" : "fp32";
    af_buffer in[CORPUS_MAX_IO], out[CORPUS_MAX_IO], again[CORPUS_MAX_IO];
    float *got[CORPUS_MAX_IO] = { 0 }, *got2[CORPUS_MAX_IO] = { 0 };
    uint16_t *hin[CORPUS_MAX_IO] = { 0 }, *hout[CORPUS_MAX_IO] = { 0 };
    bool ok = true;
    for (int i = 0; i < cg->nin; i++) in[i] = AF_BUF_F32(cg->data[i], af_shape_count(cg->in[i]->shape));
    for (int k = 0; k < cg->nout; k++) {
        int64_t n = af_shape_count(cg->out[k]->shape);
        got[k] = malloc((size_t)n * sizeof(float));
        got2[k] = malloc((size_t)n * sizeof(float));
        ok &= got[k] && got2[k];
        out[k] = AF_BUF_F32(got[k], n);
        again[k] = AF_BUF_F32(got2[k], n);
    }
    if (!ok) { CHECK(0, "%s: out of memory", desc); goto done; }
    af_status st = af_run(m, in, out);
    nruns++;
    CHECK(st == AF_OK, "%s [%s, %d threads]: af_run failed: %s", desc, mode, threads, af_error_message());
    if (st != AF_OK) goto done;
    for (int k = 0; k < cg->nout; k++)
        compare(desc, mode, threads, k, got[k], ref[cg->out[k]->id], af_shape_count(cg->out[k]->shape), fp16, tol32);

    /* The same model, run again, gives the same bits (no state leaks between runs). */
    st = af_run(m, in, again);
    CHECK(st == AF_OK, "%s: second af_run failed: %s", desc, af_error_message());
    for (int k = 0; st == AF_OK && k < cg->nout; k++)
        CHECK(!memcmp(got[k], got2[k], (size_t)out[k].count * sizeof(float)), "%s [%s, %d threads]: output %d changed on a second run",
              desc, mode, threads, k);

    if (threads == 1 && !fp16) check_wrong_sizes(m, cg, in, out, desc);
    if (threads == 1 && fp16) { /* fp16 host buffers in and out */
        af_buffer hb[CORPUS_MAX_IO], ho[CORPUS_MAX_IO];
        for (int i = 0; i < cg->nin && ok; i++) {
            hin[i] = malloc((size_t)in[i].count * sizeof(uint16_t) + 2);
            ok = hin[i] != NULL;
            for (int64_t j = 0; ok && j < in[i].count; j++) hin[i][j] = af_f32_to_f16(cg->data[i][j]);
            hb[i] = (af_buffer){ hin[i], AF_F16, in[i].count };
        }
        for (int k = 0; k < cg->nout && ok; k++) {
            hout[k] = malloc((size_t)out[k].count * sizeof(uint16_t) + 2);
            ok = hout[k] != NULL;
            ho[k] = (af_buffer){ hout[k], AF_F16, out[k].count };
        }
        if (!ok) { CHECK(0, "%s: out of memory", desc); goto done; }
        st = af_run(m, hb, ho);
        CHECK(st == AF_OK, "%s: af_run with fp16 buffers failed: %s", desc, af_error_message());
        for (int k = 0; st == AF_OK && k < cg->nout; k++) {
            int64_t bad = -1;
            for (int64_t j = 0; j < out[k].count && bad < 0; j++)
                if (af_f16_to_f32(hout[k][j]) != got[k][j] && !(isnan(got[k][j]) && isnan(af_f16_to_f32(hout[k][j])))) bad = j;
            CHECK(bad < 0, "%s: fp16 buffers give %g at element %lld, fp32 buffers %g", desc,
                  bad < 0 ? 0.0 : af_f16_to_f32(hout[k][bad]), (long long)bad, bad < 0 ? 0.0 : got[k][bad]);
        }
    }
done:
    for (int k = 0; k < CORPUS_MAX_IO; k++) { free(got[k]); free(got2[k]); free(hin[k]); free(hout[k]); }
}

static void run_case(const corpus_case *base, ir_op op) {
    corpus_case c = *base;
    c.op = op;
    corpus_graph cg = { .g = af_graph_new(), .rng = { seed_of(c.label, op) } };
    char desc[300];
    int failed_before = check_failed;
    if (!cg.g) { CHECK(0, "out of memory"); return; }
    c.build(&cg, &c);
    describe(&c, op, &cg, desc, sizeof desc);
    ncases++;
    const char *err = af_graph_error(cg.g);
    CHECK(!err, "%s: building failed: %s", desc, err ? err : "");
    bool found = false, kernels = true;
    for (int k = 0; k < cg.nout; k++) {
        CHECK(cg.out[k] != NULL, "%s: output %d is NULL", desc, k);
        if (!cg.out[k]) { corpus_graph_free(&cg); return; }
    }
    for (int id = 0; id < cg.g->n; id++) found |= cg.g->t[id]->op == op;
    CHECK(cg.nout > 0 && found, "%s: the case builds no %s node", desc, ir_ops[op].name);
    if (err || !found) { corpus_graph_free(&cg); return; }
    for (int id = 0; id < cg.g->n; id++) {
        ir_op o = cg.g->t[id]->op;
        if (!(ir_ops[o].flags & OPF_LEAF) && !cpu_kernels[o]) kernels = false;
    }
    CHECK(kernels, "%s: the graph holds an op without a CPU kernel", desc);
    if (!kernels) { corpus_graph_free(&cg); return; }

    for (int prec = 0; prec < 2; prec++) {
        bool fp16 = prec == 1;
        double **ref = ref_graph(&cg, fp16, desc);
        CHECK(ref != NULL, "%s: reference evaluation failed", desc);
        if (!ref) break;
        for (int threads = 1; threads <= 2; threads++) {
            af_compile_opts o = { .target = AF_TARGET_CPU, .precision = fp16 ? AF_PRECISION_FP16 : AF_PRECISION_FP32,
                                  .threads = threads };
            af_model *m = af_compile(cg.g, cg.nin, cg.in, cg.nout, cg.out, &o);
            CHECK(m != NULL, "%s: af_compile failed: %s", desc, af_error_message());
            if (!m) continue;
            run_model(m, &cg, ref, fp16, threads, c.tol32 > 0 ? c.tol32 : 1e-5, desc);
            af_model_free(m);
        }
        free_ref(ref, cg.g->n);
    }
    if (check_failed == failed_before)
        for (int id = 0; id < cg.g->n; id++) covered[cg.g->t[id]->op] = true;
    corpus_graph_free(&cg);
}

static void run_table(const corpus_case *t, int n) {
    for (int i = 0; i < n; i++) {
        if (!t[i].sweep) {
            run_case(&t[i], t[i].op);
            continue;
        }
        for (int op = 0; op < IR_OP_COUNT; op++)
            if (ir_ops[op].kind == ir_ops[t[i].op].kind) run_case(&t[i], (ir_op)op);
    }
}

/* Every row of the op table needs a case; INPUT and CONST count as covered by any case
 * that feeds an input or bakes a constant. */
static void check_coverage(void) {
    for (int op = 0; op < IR_OP_COUNT; op++) {
        bool leaf = ir_ops[op].flags & OPF_LEAF;
        CHECK(leaf || cpu_kernels[op], "op '%s' has no CPU kernel", ir_ops[op].name);
        CHECK(covered[op], "op '%s' has no passing corpus case: add rows to tests/support/corpus_*.c", ir_ops[op].name);
    }
}

/* Token ids above 2048 are not fp16 numbers (2049 rounds to 2048): a fed id must still
 * pick its own row at fp16 precision. Fractions truncate; ids outside [0, V) give zeros. */
static void check_embedding_ids(void) {
    enum { V = 3000 };
    float *tab = malloc(sizeof(float) * V * 2);
    if (!tab) { CHECK(0, "out of memory"); return; }
    for (int r = 0; r < V; r++) { tab[2 * r] = (float)(r % 7); tab[2 * r + 1] = (float)(r % 11); }
    const float ids[6] = { 2049, 2999, 2.7f, -1, 3000, 2051 };
    const float want_row[6] = { 2049, 2999, 2, -1, -1, 2051 };
    for (int prec = 0; prec < 2; prec++) {
        af_graph *g = af_graph_new();
        af_tensor *in = af_input(g, "ids", AF_F32, AF_SHAPE(6));
        af_tensor *y = af_embedding(af_const(g, "table", AF_SHAPE(V, 2), tab), in);
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = prec ? AF_PRECISION_FP16 : AF_PRECISION_FP32, .threads = 1 };
        af_model *m = af_compile(g, 1, &in, 1, &y, &o);
        float got[12] = { 0 };
        af_buffer bi = AF_BUF_F32(ids, 6), bo = AF_BUF_F32(got, 12);
        CHECK(m && af_run(m, &bi, &bo) == AF_OK, "embedding ids: compile/run failed: %s", af_error_message());
        for (int i = 0; i < 6; i++) {
            int r = (int)want_row[i];
            float w0 = r < 0 ? 0.0f : (float)(r % 7), w1 = r < 0 ? 0.0f : (float)(r % 11);
            CHECK(got[2 * i] == w0 && got[2 * i + 1] == w1, "embedding %s: id %g gave (%g, %g), want row %d (%g, %g)",
                  prec ? "fp16" : "fp32", ids[i], got[2 * i], got[2 * i + 1], r, w0, w1);
        }
        af_model_free(m);
        af_graph_free(g);
    }
    free(tab);
}

int main(void) {
    run_table(corpus_elementwise, corpus_elementwise_count);
    run_table(corpus_tensor, corpus_tensor_count);
    run_table(corpus_nn, corpus_nn_count);
    check_embedding_ids();
    check_coverage();
    printf("ops: %d cases, %d model runs\n", ncases, nruns);
    printf("ops: largest fp32 error %.2f of tolerance (%s)\n", worst_ratio[0], worst_desc[0]);
    printf("ops: largest fp16 error %.2f of tolerance (%s)\n", worst_ratio[1], worst_desc[1]);
    return check_finish("ops");
}
