/* Helpers of the kin tests: see kin.h. */
#include "support/kin.h"
#include "support/check.h"
#include "support/ref.h"

#include <math.h>
#include <stdlib.h>

int kin_run(const kin_graph *k, bool fp16, int threads, float **out) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = fp16 ? AF_PRECISION_FP16 : AF_PRECISION_FP32,
                          .threads = threads };
    af_model *m = af_compile(k->g, k->nin, k->in, k->nout, k->out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return -1;
    af_buffer bi[KIN_MAX_IO], bo[KIN_MAX_IO];
    for (int i = 0; i < k->nin; i++) bi[i] = AF_BUF_F32(k->data[i], af_shape_count(af_tensor_shape(k->in[i])));
    for (int i = 0; i < k->nout; i++) {
        int64_t n = af_shape_count(af_tensor_shape(k->out[i]));
        out[i] = malloc(sizeof(float) * (size_t)n);
        bo[i] = AF_BUF_F32(out[i], n);
    }
    af_status st = af_run(m, bi, bo);
    CHECK(st == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
    return st == AF_OK ? 0 : -1;
}

int kin_ref(const kin_graph *k, bool fp16, double **ref) {
    af_graph *g = k->g;
    double **v = calloc((size_t)g->n, sizeof *v);
    int rc = 0;
    for (int id = 0; id < g->n && rc == 0; id++) {
        af_tensor *t = g->t[id];
        int64_t n = af_shape_count(t->shape);
        bool round = fp16 || t->dtype == AF_F16;
        v[id] = malloc(sizeof(double) * (size_t)(n + 1));
        if (t->op == IR_OP_INPUT) {
            int i = 0;
            while (i < k->nin && k->in[i] != t) i++;
            if (i == k->nin) { rc = -1; break; }
            for (int64_t j = 0; j < n; j++) v[id][j] = round ? af_round_f16(k->data[i][j]) : k->data[i][j];
        } else if (t->op == IR_OP_CONST) {
            for (int64_t j = 0; j < n; j++) v[id][j] = fp16 ? af_round_f16(t->data[j]) : t->data[j];
        } else {
            const double *src[16];
            for (int s = 0; s < t->nsrc && s < 16; s++) src[s] = v[t->src[s]->id];
            if (t->nsrc > 16 || ref_eval(t, src, v[id]) != 0) {
                CHECK(0, "the reference does not know op %s", ir_ops[t->op].name);
                rc = -1;
                break;
            }
            if (round)
                for (int64_t j = 0; j < n; j++) v[id][j] = af_round_f16((float)v[id][j]);
        }
    }
    for (int i = 0; rc == 0 && i < k->nout; i++) {
        int64_t n = af_shape_count(k->out[i]->shape);
        ref[i] = malloc(sizeof(double) * (size_t)n);
        for (int64_t j = 0; j < n; j++) ref[i][j] = v[k->out[i]->id][j];
    }
    for (int id = 0; id < g->n; id++) free(v[id]);
    free(v);
    return rc;
}

int kin_check(const kin_graph *k, bool fp16, int threads, double abs_tol, double rel_tol, const char *what) {
    float *got[KIN_MAX_IO] = { 0 };
    double *want[KIN_MAX_IO] = { 0 };
    int bad = 0;
    if (kin_run(k, fp16, threads, got) == 0 && kin_ref(k, fp16, want) == 0) {
        for (int i = 0; i < k->nout; i++) {
            int64_t n = af_shape_count(k->out[i]->shape);
            int64_t first = -1, nbad = 0;
            for (int64_t j = 0; j < n; j++) {
                double err = fabs((double)got[i][j] - want[i][j]);
                bool same_inf = isinf((float)want[i][j]) && got[i][j] == (float)want[i][j]; /* beyond fp32's range */
                if (!same_inf && !(err <= abs_tol + rel_tol * fabs(want[i][j]))) {
                    if (first < 0) first = j;
                    nbad++;
                }
            }
            CHECK(nbad == 0, "%s [%s, %d threads] output %d: %lld of %lld elements off, first [%lld] got %.9g want %.9g", what,
                  fp16 ? "fp16" : "fp32", threads, i, (long long)nbad, (long long)n, (long long)first,
                  first < 0 ? 0.0 : got[i][first], first < 0 ? 0.0 : want[i][first]);
            bad += (int)nbad;
        }
    } else {
        bad = 1;
    }
    for (int i = 0; i < k->nout; i++) { free(got[i]); free(want[i]); }
    return bad;
}
