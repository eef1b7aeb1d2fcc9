/* The bridge ops aneforge owns against NumPy: tests/fixtures/bridge (*.npy) were written
 * once by make_bridge_fixtures.py from the ops' definitions (float64, independent of the
 * library). Each case runs on the CPU in fp32 (1e-5 of the output scale; the structural
 * layers exactly) and on ane-sim as its own bridge segment in fp16 (2e-3 of the scale;
 * the structural layers exactly the fp16-rounded values). */
#include "ir/ir.h"
#include "aneforge_data.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int nin;
    int kind;      /* 0 sdpa, 1 flatten, 2 dropout, 3 broadcast, 4 input_view */
    float scale;   /* sdpa */
    int64_t p[2];  /* broadcast: axis, size; input_view: offset, size */
} fixture;

static const fixture cases[] = {
    {"sdpa_self", 3, 0, 0.35355339059327373f, {0}}, {"sdpa_decode", 4, 0, 0.25f, {0}}, {"sdpa_causal", 4, 0, 0.5f, {0}},
    {"flatten", 1, 1, 0, {0}}, {"dropout", 1, 2, 0, {0}}, {"broadcast", 1, 3, 0, {1, 4}}, {"input_view", 1, 4, 0, {5, 11}},
};

static float *load(const char *name, const char *part, af_shape *s) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/bridge/%s.%s.npy", AF_SOURCE_DIR, name, part);
    float *d = NULL;
    int rank = 0;
    int64_t dims[AF_MAX_RANK];
    if (af_npy_read(path, &d, &rank, dims) != AF_OK) return NULL;
    *s = af_shape_make(rank, dims);
    return d;
}

static af_tensor *build(const fixture *f, af_tensor **in) {
    switch (f->kind) {
    case 0: return af_sdpa(in[0], in[1], in[2], f->nin > 3 ? in[3] : NULL, f->scale);
    case 1: return af_flatten(in[0]);
    case 2: return af_dropout(in[0], 0);
    case 3: return af_broadcast(in[0], (int)f->p[0], f->p[1]);
    default: return af_input_view(in[0], f->p[0], f->p[1]);
    }
}

static void run_case(const fixture *f, af_target target) {
    bool engine = target != AF_TARGET_CPU;
    af_shape s[4], ys;
    float *x[4] = {0}, *want = load(f->name, "y", &ys);
    char part[16];
    af_graph *g = af_graph_new();
    af_tensor *in[4];
    bool ok = want != NULL;
    for (int k = 0; k < f->nin && ok; k++) {
        snprintf(part, sizeof part, "x%d", k);
        ok = (x[k] = load(f->name, part, &s[k])) != NULL;
        if (ok) in[k] = af_input(g, part, engine ? AF_F16 : AF_F32, s[k]);
    }
    CHECK(ok, "%s: fixture files missing (run make_bridge_fixtures.py)", f->name);
    af_tensor *y = ok ? build(f, in) : NULL;
    CHECK(!ok || (y && ir_shape_eq(af_tensor_shape(y), ys)), "%s: built shape differs from NumPy's: %s", f->name,
          af_graph_error(g) ? af_graph_error(g) : "");
    af_compile_opts o = {.target = target, .threads = 1};
    af_model *m = ok && y ? af_compile(g, f->nin, in, 1, &y, &o) : NULL;
    CHECK(!ok || !y || m, "%s: compile: %s", f->name, af_error_message());
    if (m) {
        int64_t n = af_shape_count(ys);
        float *got = malloc((size_t)n * sizeof *got);
        af_buffer bi[4], bo = AF_BUF_F32(got, n);
        for (int k = 0; k < f->nin; k++) bi[k] = AF_BUF_F32(x[k], af_shape_count(s[k]));
        CHECK(af_run(m, bi, &bo) == AF_OK, "%s: run: %s", f->name, af_error_message());
        double scale = 1e-30, err = 0;
        bool exact = f->kind != 0;
        for (int64_t i = 0; i < n; i++) {
            float w = engine && exact ? af_round_f16(want[i]) : want[i];
            scale = fmax(scale, fabs(w));
            err = fmax(err, fabs(got[i] - w));
        }
        double tol = exact ? 0 : engine ? 2e-3 * scale : 1e-5 * scale;
        CHECK(err <= tol, "%s on %s: worst error %.3g > %.3g", f->name, engine ? "ane-sim" : "cpu", err, tol);
        af_stats st;
        af_model_stats(m, &st);
        CHECK(st.segments == 1 && st.dispatches == (engine ? 1 : 0), "%s: one program (%lld segments, %lld dispatches)", f->name,
              (long long)st.segments, (long long)st.dispatches);
        free(got);
        af_model_free(m);
    }
    for (int k = 0; k < 4; k++) free(x[k]);
    free(want);
    af_graph_free(g);
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_case(&cases[i], AF_TARGET_CPU);
        run_case(&cases[i], AF_TARGET_ANE_SIM);
    }
    return check_finish("test_bridge_fixtures");
}
