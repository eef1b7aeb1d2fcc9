/* The bridge ops (seed 004) against NumPy: tests/fixtures/bridge/make_bridge_op_fixtures.py
 * wrote inputs and results (TensorFlow's and PyTorch's own reshape/transpose recipes for
 * the rearranges, np.cross, np.einsum, a sliding-window correlation, PyTorch's
 * local_response_norm, a vectorised furthest point sampling) into tests/fixtures/bridge/.
 * Each case builds the op with the public API and runs it on the CPU in fp32 and fp16
 * and on ane-sim (A16, the op as its own segment; shapes the engine refuses must be
 * refused with a remedy), comparing index and shuffle results bit for bit (every input
 * is fp16-exact), the rest within 1e-5 (fp32) or 4e-3 (fp16) of the result's scale.
 * Then: fused ops around three bridge ops run on ane-sim as seven segments with the
 * CPU's result; the engine gates on A13 and A16; exact fp16 indices to 2047; the
 * builders' refusals, each checked by the words of its message. */
#include "aneforge.h"
#include "aneforge_data.h"
#include "support/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/bridge"

/* af_npy_read gives NumPy's 0-d arrays rank 1: a scalar result matches one value. */
static bool same_shape(const af_tensor *t, af_shape s) {
    af_shape a = af_tensor_shape(t);
    if (a.rank == 0) return af_shape_count(s) == 1;
    if (a.rank != s.rank) return false;
    for (int i = 0; i < a.rank; i++)
        if (a.dim[i] != s.dim[i]) return false;
    return true;
}

typedef struct {
    float *d;
    int rank;
    int64_t dims[AF_MAX_RANK];
} arr;

static arr load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", FIXDIR, name);
    arr a = { 0 };
    af_status st = af_npy_read(path, &a.d, &a.rank, a.dims);
    CHECK(st == AF_OK, "read %s: %s (regenerate with /usr/bin/python3 tests/fixtures/bridge/make_bridge_op_fixtures.py)", path, af_error_message());
    if (st) a.d = NULL;
    return a;
}

typedef af_tensor *(*build_fn)(af_graph *g, af_tensor *const *in);

typedef struct {
    const char *name;
    const char *in[2];  /* fixture names of the fed inputs */
    const char *want;   /* fixture name of the result */
    bool exact;
    build_fn build;
    bool engine_refuses; /* the ane-sim run is refused by a gate (batch > 1, ...) */
} fcase;

static af_tensor *b_sort_values(af_graph *g, af_tensor *const *in) { (void)g; return af_sort(in[0], 1, 0, 0); }
static af_tensor *b_sort_indices(af_graph *g, af_tensor *const *in) { (void)g; return af_sort(in[0], 0, 1, 1); }
static af_tensor *b_topk_values(af_graph *g, af_tensor *const *in) { (void)g; return af_top_k(in[0], 5, 2, 1, 0); }
static af_tensor *b_topk_indices(af_graph *g, af_tensor *const *in) { (void)g; return af_top_k(in[0], 2, 0, 0, 1); }
static af_tensor *b_arg_spatial(af_graph *g, af_tensor *const *in) { (void)g; return af_arg_min_max(in[0], 0, 1); }
static af_tensor *b_arg_channel(af_graph *g, af_tensor *const *in) { (void)g; return af_arg_min_max(in[0], 1, 0); }
static af_tensor *b_garg_w(af_graph *g, af_tensor *const *in) { (void)g; return af_global_arg_min_max(in[0], -1, 1); }
static af_tensor *b_garg_h(af_graph *g, af_tensor *const *in) { (void)g; return af_global_arg_min_max(in[0], -2, 0); }
static af_tensor *b_garg_c(af_graph *g, af_tensor *const *in) { (void)g; return af_global_arg_min_max(in[0], 0, 1); }
static af_tensor *b_ps(af_graph *g, af_tensor *const *in) { (void)g; return af_pixel_shuffle(in[0], 2, 3); }
static af_tensor *b_c2s(af_graph *g, af_tensor *const *in) { (void)g; return af_channel_to_space(in[0], 2, 3); }
static af_tensor *b_pu(af_graph *g, af_tensor *const *in) { (void)g; return af_pixel_unshuffle(in[0], 3, 2); }
static af_tensor *b_s2c(af_graph *g, af_tensor *const *in) { (void)g; return af_space_to_channel(in[0], 3, 2); }
static af_tensor *b_s2b(af_graph *g, af_tensor *const *in) { (void)g; return af_space_to_batch(in[0], 2, 3); }
static af_tensor *b_b2s(af_graph *g, af_tensor *const *in) { (void)g; return af_batch_to_space(in[0], 2, 3); }
static af_tensor *b_cross(af_graph *g, af_tensor *const *in) { (void)g; return af_cross_product(in[0], in[1]); }
static af_tensor *b_xcorr(af_graph *g, af_tensor *const *in) { (void)g; return af_cross_correlation(in[0], in[1]); }
static af_tensor *b_cost(af_graph *g, af_tensor *const *in) { (void)g; return af_cost_volume(in[0], in[1], 4); }
static af_tensor *b_fps(af_graph *g, af_tensor *const *in) { (void)g; return af_furthest_point_sampling(in[0], 9, 0); }
static af_tensor *b_fps_idx(af_graph *g, af_tensor *const *in) { (void)g; return af_furthest_point_sampling(in[0], 9, 1); }
static af_tensor *b_radius(af_graph *g, af_tensor *const *in) { (void)g; return af_radius_search(in[0], in[1], 2.0f); }
static af_tensor *dslice(af_graph *g, af_tensor *x, float start) { return af_dynamic_slice(x, af_const(g, "start", AF_SHAPE(1), &start), 1, 4); }
static af_tensor *b_dslice2(af_graph *g, af_tensor *const *in) { return dslice(g, in[0], 2.0f); }
static af_tensor *b_dslice76(af_graph *g, af_tensor *const *in) { return dslice(g, in[0], 7.6f); }
static af_tensor *b_dslice_neg(af_graph *g, af_tensor *const *in) { return dslice(g, in[0], -3.0f); }
static af_tensor *b_lrn(af_graph *g, af_tensor *const *in) { (void)g; return af_lrn(in[0], 0.3f, 0.75f, 1.0f); }
static af_tensor *b_local_rn(af_graph *g, af_tensor *const *in) { (void)g; return af_local_response_norm(in[0], 3, 0.5f, 0.75f, 1.0f); }
static af_tensor *b_minmax_w(af_graph *g, af_tensor *const *in) { (void)g; return af_minmax_norm(in[0], -1, 0.0625f); }
static af_tensor *b_minmax_h(af_graph *g, af_tensor *const *in) { (void)g; return af_minmax_norm(in[0], -2, 0.0625f); }
static af_tensor *b_sew_add(af_graph *g, af_tensor *const *in) { (void)g; return af_scaled_elementwise(in[0], in[1], AF_SEW_ADD, 0.5f); }
static af_tensor *b_sew_min(af_graph *g, af_tensor *const *in) { (void)g; return af_scaled_elementwise(in[0], in[1], AF_SEW_MIN, -1.5f); }
static af_tensor *b_sew_max(af_graph *g, af_tensor *const *in) { (void)g; return af_scaled_elementwise(in[0], in[1], AF_SEW_MAX, 2.0f); }
#define EINSUM2(fn, eq) static af_tensor *fn(af_graph *g, af_tensor *const *in) { return af_einsum(g, eq, 2, in); }
#define EINSUM1(fn, eq) static af_tensor *fn(af_graph *g, af_tensor *const *in) { return af_einsum(g, eq, 1, in); }
EINSUM2(b_es_native, "nchw,nwhu->nchu")
EINSUM2(b_es_matmul, "ij,jk->ik")
EINSUM2(b_es_attn, "bhqd,bhkd->bhqk")
EINSUM2(b_es_perm, "bij,jkb->kbi")
EINSUM2(b_es_outer, "i,j->ij")
EINSUM2(b_es_dot, "i,i->")
EINSUM2(b_es_sumout, "abc,cd->ad")
EINSUM1(b_es_transpose, "ijk->kij")
EINSUM1(b_es_total, "ij->")

static const fcase cases[] = {
    { "sort values", { "sort_x" }, "sort_values_k1_asc", true, b_sort_values, false },
    { "sort indices", { "sort_x" }, "sort_indices_k0_desc", true, b_sort_indices, false },
    { "top_k values", { "topk_x" }, "topk_values_k5_lane2_max", true, b_topk_values, false },
    { "top_k indices", { "topk_x" }, "topk_indices_k2_lane0_min", true, b_topk_indices, false },
    { "arg_min_max spatial", { "argmm_x" }, "argmm_spatial_max", true, b_arg_spatial, false },
    { "arg_min_max channel", { "argmm_x" }, "argmm_channel_min", true, b_arg_channel, false },
    { "global_arg_min_max W", { "garg_x" }, "garg_w_max", true, b_garg_w, false },
    { "global_arg_min_max H", { "garg_x" }, "garg_h_min", true, b_garg_h, false },
    { "global_arg_min_max C", { "garg_x" }, "garg_c_max", true, b_garg_c, false },
    { "pixel_shuffle", { "rearr_deep" }, "rearr_pixel_shuffle_2x3", true, b_ps , true },
    { "channel_to_space", { "rearr_deep" }, "rearr_channel_to_space_2x3", true, b_c2s , true },
    { "pixel_unshuffle", { "rearr_wide" }, "rearr_pixel_unshuffle_3x2", true, b_pu , true },
    { "space_to_channel", { "rearr_wide" }, "rearr_space_to_channel_3x2", true, b_s2c , true },
    { "space_to_batch", { "rearr_one" }, "rearr_space_to_batch_2x3", true, b_s2b, false },
    { "space_to_batch batch 2", { "rearr_wide" }, "rearr_space_to_batch_2x3_wide", true, b_s2b , true },
    { "batch_to_space", { "rearr_tall" }, "rearr_batch_to_space_2x3", true, b_b2s , true },
    { "cross_product", { "geom_cross_a", "geom_cross_b" }, "geom_cross", false, b_cross, false },
    { "cross_correlation", { "geom_xcorr_x", "geom_xcorr_t" }, "geom_xcorr", false, b_xcorr, false },
    { "cost_volume", { "geom_cost_aux", "geom_cost_ref" }, "geom_cost_r4", false, b_cost, false },
    { "furthest_point_sampling", { "geom_points" }, "geom_fps_k9", true, b_fps, false },
    { "furthest_point_sampling indices", { "geom_points" }, "geom_fps_idx_k9", true, b_fps_idx , true },
    { "radius_search", { "geom_points", "geom_centroids" }, "geom_radius_2", true, b_radius, false },
    { "dynamic_slice start 2", { "geom_dslice_x" }, "geom_dslice_s2", true, b_dslice2 , true },
    { "dynamic_slice start 7.6 clamped", { "geom_dslice_x" }, "geom_dslice_s7_6", true, b_dslice76 , true },
    { "dynamic_slice start -3 clamped", { "geom_dslice_x" }, "geom_dslice_sneg", true, b_dslice_neg , true },
    { "lrn", { "norm_x" }, "norm_lrn_a03_b075_k1", false, b_lrn, false },
    { "local_response_norm (PyTorch)", { "norm_x" }, "norm_local_response_norm_s3", false, b_local_rn, false },
    { "minmax_norm W", { "norm_mm_x" }, "norm_minmax_w", false, b_minmax_w, false },
    { "minmax_norm H", { "norm_mm_x" }, "norm_minmax_h", false, b_minmax_h, false },
    { "scaled_elementwise add", { "norm_sew_x", "norm_sew_z" }, "norm_sew_add", true, b_sew_add, false },
    { "scaled_elementwise min", { "norm_sew_x", "norm_sew_z" }, "norm_sew_min", true, b_sew_min, false },
    { "scaled_elementwise max", { "norm_sew_x", "norm_sew_z" }, "norm_sew_max", true, b_sew_max, false },
    { "einsum native", { "einsum_native_0", "einsum_native_1" }, "einsum_native_y", false, b_es_native, false },
    { "einsum ij,jk->ik", { "einsum_matmul_0", "einsum_matmul_1" }, "einsum_matmul_y", false, b_es_matmul, false },
    { "einsum bhqd,bhkd->bhqk", { "einsum_attn_0", "einsum_attn_1" }, "einsum_attn_y", false, b_es_attn, false },
    { "einsum bij,jkb->kbi", { "einsum_perm_0", "einsum_perm_1" }, "einsum_perm_y", false, b_es_perm, false },
    { "einsum i,j->ij", { "einsum_outer_0", "einsum_outer_1" }, "einsum_outer_y", false, b_es_outer, false },
    { "einsum i,i->", { "einsum_dot_0", "einsum_dot_1" }, "einsum_dot_y", false, b_es_dot, false },
    { "einsum abc,cd->ad", { "einsum_sumout_0", "einsum_sumout_1" }, "einsum_sumout_y", false, b_es_sumout, false },
    { "einsum ijk->kij", { "einsum_transpose_0" }, "einsum_transpose_y", false, b_es_transpose, false },
    { "einsum ij->", { "einsum_total_0" }, "einsum_total_y", false, b_es_total, false },
};

static void run_fixture(const fcase *c) {
    arr in[2] = { 0 }, want = load(c->want);
    int nin = c->in[1] ? 2 : 1;
    for (int i = 0; i < nin; i++) in[i] = load(c->in[i]);
    if (!want.d || !in[0].d || (nin == 2 && !in[1].d)) goto done;
    for (int prec = 0; prec < 3; prec++) { /* cpu fp32, cpu fp16, ane-sim (fp16, the op as its own segment) */
        bool sim = prec == 2;
        af_graph *g = af_graph_new();
        af_tensor *x[2];
        for (int i = 0; i < nin; i++) x[i] = af_input(g, i ? "b" : "a", sim ? AF_F16 : AF_F32, af_shape_make(in[i].rank, in[i].dims));
        af_tensor *y = c->build(g, x);
        af_shape ws = af_shape_make(want.rank, want.dims);
        CHECK(y && same_shape(y, ws), "%s: built %s", c->name, y ? "a result of another shape" : af_graph_error(g));
        af_compile_opts o = { .target = sim ? AF_TARGET_ANE_SIM : AF_TARGET_CPU, .family = AF_FAMILY_A16,
                              .precision = prec ? AF_PRECISION_FP16 : AF_PRECISION_FP32, .threads = 1 };
        af_model *m = y ? af_compile(g, nin, x, 1, &y, &o) : NULL;
        CHECK(!sim || !c->engine_refuses || !m, "%s (ane-sim): compiled, but the engine's gate should refuse it", c->name);
        if (sim && !m && c->engine_refuses) { /* a shape the engine's gate refuses (batch 2, ...) */
            CHECK(strstr(af_error_message(), "Remedy:"), "%s (ane-sim): refused without a remedy: %s", c->name, af_error_message());
            af_graph_free(g);
            continue;
        }
        if (sim && m) {
            af_stats st;
            af_model_stats(m, &st);
            CHECK(st.segments == 1, "%s (ane-sim): %lld segments for one op", c->name, (long long)st.segments);
        }
        int64_t n = af_shape_count(ws);
        float *got = calloc((size_t)n + 1, sizeof *got);
        af_buffer bi[2], bo = AF_BUF_F32(got, n);
        for (int i = 0; i < nin; i++) bi[i] = AF_BUF_F32(in[i].d, af_shape_count(af_shape_make(in[i].rank, in[i].dims)));
        CHECK(m && af_run(m, bi, &bo) == AF_OK, "%s: compile/run failed: %s", c->name, af_error_message());
        double scale = 1e-6, err = 0;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want.d[i]));
        int64_t bad = -1;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs((double)got[i] - want.d[i]);
            if (c->exact ? got[i] != want.d[i] : e > err) { err = fmax(err, e); if (bad < 0 || c->exact) bad = i; }
        }
        double tol = c->exact ? 0 : (prec ? 4e-3 : 1e-5) * scale;
        CHECK(err <= tol && (!c->exact || bad < 0), "%s (%s): max error %.3g over tolerance %.3g (element %lld: %g, want %g)", c->name,
              sim ? "ane-sim" : prec ? "fp16" : "fp32", err, tol, (long long)bad, bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want.d[bad] : 0.0);
        free(got);
        af_model_free(m);
        af_graph_free(g);
    }
done:
    for (int i = 0; i < nin; i++) free(in[i].d);
    free(want.d);
}

/* ---------------------------------------------------------------- engine gates */

typedef af_tensor *(*gate_fn)(af_tensor *x, int variant);

/* Compiles f(x) for ane-sim on family fam with x an fp16 input of shape s; returns
 * NULL when it compiled, else the message. */
static const char *engine_refusal(af_shape s, gate_fn f, int variant, af_family_id fam, char *buf, size_t n) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, s), *y = f(x, variant);
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    af_model *m = y ? af_compile(g, 1, &x, 1, &y, &o) : NULL;
    const char *r = NULL;
    if (!m) { snprintf(buf, n, "%s", y ? af_error_message() : af_graph_error(g)); r = buf; }
    af_model_free(m);
    af_graph_free(g);
    return r;
}

static af_tensor *g_topk(af_tensor *x, int k) { return af_top_k(x, k, 0, 1, 0); }
static af_tensor *g_sort_idx(af_tensor *x, int v) { (void)v; return af_sort(x, 0, 0, 1); }
static af_tensor *g_arg(af_tensor *x, int channel) { return af_arg_min_max(x, channel, 1); }
static af_tensor *g_garg(af_tensor *x, int axis) { return af_global_arg_min_max(x, axis, 1); }
static af_tensor *g_ps(af_tensor *x, int v) { (void)v; return af_pixel_shuffle(x, 2, 2); }
static af_tensor *g_b2s(af_tensor *x, int v) { (void)v; return af_batch_to_space(x, 2, 2); }
static af_tensor *g_fps(af_tensor *x, int k) { return af_furthest_point_sampling(x, k, 0); }
static af_tensor *g_fps_idx(af_tensor *x, int k) { return af_furthest_point_sampling(x, k, 1); }
static af_tensor *g_lrn(af_tensor *x, int v) { (void)v; return af_lrn(x, 0.1f, 0.75f, 1.0f); }
static af_tensor *g_dslice(af_tensor *x, int size) {
    const float s = 1;
    return af_dynamic_slice(x, af_const(af_tensor_graph(x), "s", AF_SHAPE(1), &s), -1, size);
}

typedef struct {
    const char *what;
    af_shape s;
    gate_fn f;
    int variant;
    const char *refusal; /* words the message must hold, or NULL: it compiles */
} gcase;

static void check_gates(void) {
    const gcase gc[] = {
        { "top_k k=3", AF_SHAPE(2, 16), g_topk, 3, "top_k k wall" },
        { "top_k k=4", AF_SHAPE(2, 16), g_topk, 4, "k = 3 and k = 4" },
        { "top_k k=5", AF_SHAPE(2, 16), g_topk, 5, NULL },
        { "top_k k=2", AF_SHAPE(2, 16), g_topk, 2, NULL },
        { "sort W=2048", AF_SHAPE(1, 2048), g_sort_idx, 0, NULL },
        { "sort W=2049", AF_SHAPE(1, 2049), g_sort_idx, 0, "fp16 index limit" },
        { "arg_min_max spatial 64x33", AF_SHAPE(1, 2, 64, 33), g_arg, 0, "fp16 index limit" },
        { "arg_min_max spatial 64x32", AF_SHAPE(1, 2, 64, 32), g_arg, 0, NULL },
        { "arg_min_max channel 3000", AF_SHAPE(1, 3000, 1, 2), g_arg, 1, "exact only below 2048" },
        { "global_arg_min_max axis N", AF_SHAPE(2, 3, 4, 5), g_garg, 0, "Dimension rule" },
        { "global_arg_min_max axis C", AF_SHAPE(2, 3, 4, 5), g_garg, 1, NULL },
        { "pixel_shuffle batch 2", AF_SHAPE(2, 4, 3, 3), g_ps, 0, "batch-1 rule" },
        { "pixel_shuffle batch 1", AF_SHAPE(1, 4, 3, 3), g_ps, 0, NULL },
        { "batch_to_space to batch 2", AF_SHAPE(8, 1, 2, 2), g_b2s, 0, "batch-1 rule" },
        { "batch_to_space to batch 1", AF_SHAPE(4, 1, 2, 2), g_b2s, 0, NULL },
        { "fps k=1025", AF_SHAPE(2000, 3), g_fps, 1025, "k <= 1024" },
        { "fps N=8193", AF_SHAPE(8193, 3), g_fps, 4, "N <= 8192" },
        { "fps k=1024 N=8192", AF_SHAPE(8192, 3), g_fps, 1024, NULL },
        { "fps indices", AF_SHAPE(100, 3), g_fps_idx, 4, "not their indices" },
        { "lrn C=16", AF_SHAPE(1, 16, 2, 2), g_lrn, 0, "C <= 15" },
        { "lrn C=15", AF_SHAPE(1, 15, 2, 2), g_lrn, 0, NULL },
        { "dynamic_slice size 2 of 4", AF_SHAPE(3, 4), g_dslice, 2, NULL },
        { "dynamic_slice size 3 of 4", AF_SHAPE(3, 4), g_dslice, 3, "dynamic-slice variant rule" },
        { "dynamic_slice size 2 of 5", AF_SHAPE(3, 5), g_dslice, 2, "size 2 along the last axis of extent 4" },
    };
    const af_family_id fams[2] = { AF_FAMILY_A13, AF_FAMILY_A16 };
    char buf[1200];
    for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++)
        for (int f = 0; f < 2; f++) {
            const char *why = engine_refusal(gc[i].s, gc[i].f, gc[i].variant, fams[f], buf, sizeof buf);
            if (gc[i].refusal)
                CHECK(why && strstr(why, gc[i].refusal) && strstr(why, "Remedy:"), "gate %s (family %d): want a refusal naming '%s', got %s",
                      gc[i].what, (int)fams[f], gc[i].refusal, why ? why : "a compiled model");
            else
                CHECK(!why, "gate %s (family %d): refused: %s", gc[i].what, (int)fams[f], why);
        }
}

/* Indices up to 2047 are fp16 numbers: a W = 2048 argsort in fp16 numerics is exact. */
static void check_fp16_indices(void) {
    enum { W = 2048 };
    float *key = malloc(sizeof(float) * W), *got = malloc(sizeof(float) * W);
    for (int i = 0; i < W; i++) key[i] = (float)((i * 37) % W); /* a permutation of 0..2047, fp16-exact */
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(1, W)), *y = af_sort(x, 0, 0, 1);
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *m = af_compile(g, 1, &x, 1, &y, &o);
    af_buffer bi = AF_BUF_F32(key, W), bo = AF_BUF_F32(got, W);
    CHECK(m && af_run(m, &bi, &bo) == AF_OK, "fp16 argsort: %s", af_error_message());
    int wrong = 0;
    for (int j = 0; j < W; j++) wrong += key[(int)got[j]] != (float)j || got[j] != floorf(got[j]);
    CHECK(wrong == 0, "fp16 argsort of 2048 keys: %d positions wrong", wrong);
    af_model_free(m);
    af_graph_free(g);
    free(key);
    free(got);
}

/* ---------------------------------------------------------------- builder refusals */

typedef af_tensor *(*refuse_fn)(af_graph *g);
static af_tensor *in4(af_graph *g, int64_t n, int64_t c, int64_t h, int64_t w) { return af_input(g, "x", AF_F32, AF_SHAPE(n, c, h, w)); }
static af_tensor *r_sew_sub(af_graph *g) { af_tensor *x = in4(g, 1, 2, 3, 4); return af_scaled_elementwise(x, x, AF_SEW_SUB, 2); }
static af_tensor *r_sew_mult(af_graph *g) { af_tensor *x = in4(g, 1, 2, 3, 4); return af_scaled_elementwise(x, x, AF_SEW_MULT, 2); }
static af_tensor *r_minmax_c(af_graph *g) { return af_minmax_norm(in4(g, 1, 2, 3, 4), 1, 0); }
static af_tensor *r_b2s(af_graph *g) { return af_batch_to_space(in4(g, 6, 2, 3, 4), 2, 2); }
static af_tensor *r_s2b(af_graph *g) { return af_space_to_batch(in4(g, 1, 2, 5, 4), 2, 2); }
static af_tensor *r_ps(af_graph *g) { return af_pixel_shuffle(in4(g, 1, 6, 3, 4), 2, 2); }
static af_tensor *r_topk(af_graph *g) { return af_top_k(af_input(g, "x", AF_F32, AF_SHAPE(2, 5)), 6, 0, 1, 0); }
static af_tensor *r_lane(af_graph *g) { return af_sort(af_input(g, "x", AF_F32, AF_SHAPE(2, 5)), 2, 0, 0); }
static af_tensor *r_cost(af_graph *g) {
    return af_cost_volume(af_input(g, "a", AF_F32, AF_SHAPE(6)), af_input(g, "r", AF_F32, AF_SHAPE(8)), 3);
}
static af_tensor *r_es_letters(af_graph *g) {
    af_tensor *a = af_input(g, "a", AF_F32, AF_SHAPE(2, 3));
    return af_einsum(g, "ii->i", 1, &a);
}
static af_tensor *r_es_arrow(af_graph *g) {
    af_tensor *a = af_input(g, "a", AF_F32, AF_SHAPE(2, 3));
    return af_einsum(g, "ij", 1, &a);
}
static af_tensor *r_es_size(af_graph *g) {
    af_tensor *ab[2] = { af_input(g, "a", AF_F32, AF_SHAPE(2, 3)), af_input(g, "b", AF_F32, AF_SHAPE(4, 5)) };
    return af_einsum(g, "ij,jk->ik", 2, ab);
}
static af_tensor *r_es_rank(af_graph *g) {
    af_tensor *a = af_input(g, "a", AF_F32, AF_SHAPE(2, 3));
    return af_einsum(g, "ijk->k", 1, &a);
}

static void check_refusals(void) {
    const struct { const char *what; refuse_fn f; const char *words; } rc[] = {
        { "scaled_elementwise Sub", r_sew_sub, "af_muls(af_sub(x, z), scale)" },
        { "scaled_elementwise Mult", r_sew_mult, "ignores the scale of Mult" },
        { "minmax_norm channel", r_minmax_c, "rejects the channel dimension" },
        { "batch_to_space 6 by 2x2", r_b2s, "does not divide by fy * fx = 4" },
        { "space_to_batch H=5 by 2", r_s2b, "must divide by fy = 2" },
        { "pixel_shuffle C=6 by 2x2", r_ps, "C = 6 does not divide" },
        { "top_k k > W", r_topk, "k = 6 must be in 1..5" },
        { "sort key lane", r_lane, "key_lane 2 is not a channel" },
        { "cost_volume short ref", r_cost, "needs Wa + max_disparity = 9" },
        { "einsum repeated letter", r_es_letters, "distinct letters a-z" },
        { "einsum no arrow", r_es_arrow, "\"->\"" },
        { "einsum sizes", r_es_size, "letter 'j' is 3 in operand 0 but 4" },
        { "einsum rank", r_es_rank, "rank 2 but its term" },
    };
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
        af_graph *g = af_graph_new();
        af_tensor *y = rc[i].f(g);
        const char *e = af_graph_error(g);
        CHECK(!y && e && strstr(e, rc[i].words), "%s: want an error naming '%s', got %s", rc[i].what, rc[i].words, e ? e : "a tensor");
        af_graph_free(g);
    }
}

/* Fused ops around three bridge ops (pixel_shuffle, minmax_norm, sort) on ane-sim: seven
 * segments (four fused regions, three bridge programs) giving the CPU's fp16 result. */
static void check_mixed(void) {
    float xv[48];
    test_rng r = { 7 };
    test_fill_uniform(&r, xv, 48, -2, 2);
    float *res[2];
    af_stats st[2];
    for (int sim = 0; sim < 2; sim++) {
        af_graph *g = af_graph_new();
        af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 8, 2, 3));
        af_tensor *h = af_pixel_shuffle(af_muls(x, 0.5f), 2, 2);                  /* [1, 2, 4, 6] */
        h = af_minmax_norm(af_adds(h, 1.0f), -1, 0.01f);
        af_tensor *y = af_muls(af_sort(af_reshape(af_relu(h), AF_SHAPE(2, 24)), 0, 1, 0), 2.0f);
        af_compile_opts o = { .target = sim ? AF_TARGET_ANE_SIM : AF_TARGET_CPU, .family = AF_FAMILY_A13,
                              .precision = AF_PRECISION_FP16, .threads = 1 };
        af_model *m = af_compile(g, 1, &x, 1, &y, &o);
        res[sim] = calloc(48, sizeof(float));
        af_buffer bi = AF_BUF_F32(xv, 48), bo = AF_BUF_F32(res[sim], 48);
        CHECK(m && af_run(m, &bi, &bo) == AF_OK, "mixed graph (%s): %s", sim ? "ane-sim" : "cpu", af_error_message());
        af_model_stats(m, &st[sim]);
        af_model_free(m);
        af_graph_free(g);
    }
    CHECK(st[1].segments == 7 && st[1].segment_bytes > 0, "mixed graph on ane-sim: %lld segments moving %lld bytes, want 7",
          (long long)st[1].segments, (long long)st[1].segment_bytes);
    CHECK(st[0].segments == 1, "mixed graph on the cpu: %lld segments, want 1 (no cut)", (long long)st[0].segments);
    double err = 0;
    for (int i = 0; i < 48; i++) err = fmax(err, fabs(res[0][i] - res[1][i]));
    CHECK(err <= 4e-3, "mixed graph: ane-sim differs from the cpu by %g", err);
    free(res[0]);
    free(res[1]);
}

int main(void) {
    check_mixed();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_fixture(&cases[i]);
    check_gates();
    check_fp16_indices();
    check_refusals();
    return check_finish("bridge_ops");
}
