/* The bridge ops' net.plist units (src/ane/bridge_*.c): for each op, the unit
 * netplist_for_node writes is checked against values derived by hand from seed 004 and
 * ane-formats.md §5 (Type, Bottom order, OutputChannels, the input's dims, every Param,
 * fp16 parameters as bit patterns: 0.3 * C=5 -> fp16(1.5) = 0x3E00, 0.0625 -> 0x2C00,
 * 0.5 -> 0x3800, -1.5 -> 0xBE00); then the document is parsed back, the row's reader
 * turns the unit into an op again, and that op run on the CPU must give the original
 * node's values bit for bit. Also: every OPF_BRIDGE row has a unit row, and describe
 * refuses what the engine gate refuses. */
#include "netplist/netplist.h"
#include "support/check.h"
#include "support/corpus_case.h" /* SH: shapes as constant initializers */

#include <stdlib.h>
#include <string.h>

typedef af_tensor *(*build_fn)(af_graph *g, af_tensor **in);
typedef void (*params_fn)(plist_value *d);

typedef struct {
    const char *name;
    int nin;
    af_shape in[2];
    build_fn build;
    const char *type;
    const char *bottom[2];
    int64_t out_channels;
    netplist_dims in0;        /* the first input's dims in the program */
    params_fn params;
} ucase;

#define IN1(s) 1, { s }
#define IN2(a, b) 2, { a, b }

static af_tensor *b_sort(af_graph *g, af_tensor **x) { (void)g; return af_sort(x[0], 1, 1, 0); }
static void p_sort(plist_value *d) {
    plist_set_str(d, "Direction", "Descending");
    plist_set_str(d, "SortDimension", "Width");
    plist_set_str(d, "VectorDimension", "Channel");
    plist_set_int(d, "SortIndices", 1);
    plist_set_bool(d, "Indices", false);
}
static af_tensor *b_topk(af_graph *g, af_tensor **x) { (void)g; return af_top_k(x[0], 5, 0, 0, 1); }
static void p_topk(plist_value *d) {
    plist_set_str(d, "Type", "Min");
    plist_set_int(d, "K", 5);
    plist_set_str(d, "SortDimension", "Width");
    plist_set_str(d, "VectorDimension", "Channel");
    plist_set_int(d, "SortIndices", 0);
    plist_set_bool(d, "Indices", true);
}
static af_tensor *b_arg(af_graph *g, af_tensor **x) { (void)g; return af_arg_min_max(x[0], 0, 1); }
static void p_argminmax(plist_value *d, const char *mode, int64_t kw, int64_t kh) {
    plist_set_str(d, "Mode", mode);
    plist_set_int(d, "KernelWidth", kw);
    plist_set_int(d, "KernelHeight", kh);
    plist_set_int(d, "PadTop", 0);
    plist_set_int(d, "PadBot", 0);
    plist_set_int(d, "PadLeft", 0);
    plist_set_int(d, "PadRight", 0);
}
static void p_arg(plist_value *d) { p_argminmax(d, "SpatialArgMax", 5, 4); } /* the whole 4 x 5 plane */
static af_tensor *b_argc(af_graph *g, af_tensor **x) { (void)g; return af_arg_min_max(x[0], 1, 0); }
static void p_argc(plist_value *d) { p_argminmax(d, "ChannelArgMin", 1, 1); }
static af_tensor *b_garg(af_graph *g, af_tensor **x) { (void)g; return af_global_arg_min_max(x[0], -2, 1); }
static void p_garg(plist_value *d) { plist_set_str(d, "Type", "Max"); plist_set_str(d, "Dimension", "Height"); }
static af_tensor *b_ps(af_graph *g, af_tensor **x) { (void)g; return af_pixel_shuffle(x[0], 2, 3); }
static af_tensor *b_b2s(af_graph *g, af_tensor **x) { (void)g; return af_batch_to_space(x[0], 2, 3); }
static af_tensor *b_pu(af_graph *g, af_tensor **x) { (void)g; return af_pixel_unshuffle(x[0], 2, 3); }
static af_tensor *b_c2s(af_graph *g, af_tensor **x) { (void)g; return af_channel_to_space(x[0], 2, 3); }
static af_tensor *b_s2c(af_graph *g, af_tensor **x) { (void)g; return af_space_to_channel(x[0], 2, 3); }
static af_tensor *b_s2b(af_graph *g, af_tensor **x) { (void)g; return af_space_to_batch(x[0], 2, 3); }
static void p_factors(plist_value *d) { plist_set_int(d, "FactorY", 2); plist_set_int(d, "FactorX", 3); }
static af_tensor *b_cross(af_graph *g, af_tensor **x) { (void)g; return af_cross_product(x[0], x[1]); }
static af_tensor *b_xcorr(af_graph *g, af_tensor **x) { (void)g; return af_cross_correlation(x[0], x[1]); }
static af_tensor *b_cost(af_graph *g, af_tensor **x) { (void)g; return af_cost_volume(x[0], x[1], 3); }
static void p_none(plist_value *d) { (void)d; }
static af_tensor *b_fps(af_graph *g, af_tensor **x) { (void)g; return af_furthest_point_sampling(x[0], 6, 0); }
static void p_fps(plist_value *d) { plist_set_int(d, "CentroidCount", 6); plist_set_str(d, "DistanceMetric", "L2"); }
static af_tensor *b_radius(af_graph *g, af_tensor **x) { (void)g; return af_radius_search(x[0], x[1], 1.25f); }
static void p_radius(plist_value *d) { plist_set_real(d, "Radius", 1.25); }
static af_tensor *b_dslice(af_graph *g, af_tensor **x) { (void)g; return af_dynamic_slice(x[0], x[1], -1, 2); }
static void p_dslice(plist_value *d) { plist_set_str(d, "Dimension", "Width"); plist_set_int(d, "SliceSize", 2); }
static af_tensor *b_lrn(af_graph *g, af_tensor **x) { (void)g; return af_lrn(x[0], 0.3f, 0.75f, 2.0f); }
static void p_lrn(plist_value *d) {
    plist_set_int(d, "Alpha", 0x3E00); /* fp16(0.3 * 5) = fp16(1.5) */
    plist_set_real(d, "Beta", 0.75);
    plist_set_real(d, "K", 2.0);
    plist_set_int(d, "KernelChannel", 5);
}
static af_tensor *b_minmax(af_graph *g, af_tensor **x) { (void)g; return af_minmax_norm(x[0], -2, 0.0625f); }
static void p_minmax(plist_value *d) { plist_set_str(d, "Dimension", "Height"); plist_set_int(d, "Epsilon", 0x2C00); }
static af_tensor *b_sew(af_graph *g, af_tensor **x) { (void)g; return af_scaled_elementwise(x[0], x[1], AF_SEW_MAX, -1.5f); }
static void p_sew(plist_value *d) { plist_set_str(d, "Type", "Max"); plist_set_int(d, "Scale", 0xBE00); }
static af_tensor *b_sew_add(af_graph *g, af_tensor **x) { (void)g; return af_scaled_elementwise(x[0], x[1], AF_SEW_ADD, 0.5f); }
static void p_sew_add(plist_value *d) { plist_set_str(d, "Type", "Add"); plist_set_int(d, "Scale", 0x3800); }

static const ucase cases[] = {
    { "sort", IN1(SH(3, 10)), b_sort, "Sort", { "x0" }, 3, { 1, 3, 1, 10 }, p_sort },
    { "top_k batched", IN1(SH(2, 3, 10)), b_topk, "TopK", { "x0" }, 1, { 2, 3, 1, 10 }, p_topk },
    { "arg_min_max spatial", IN1(SH(1, 3, 4, 5)), b_arg, "ArgMinMax", { "x0" }, 3, { 1, 3, 4, 5 }, p_arg },
    { "arg_min_max channel", IN1(SH(3, 4, 5)), b_argc, "ArgMinMax", { "x0" }, 1, { 1, 3, 4, 5 }, p_argc },
    { "global_arg_min_max", IN1(SH(3, 4, 5)), b_garg, "GlobalArgMinMax", { "x0" }, 3, { 1, 3, 4, 5 }, p_garg },
    { "pixel_shuffle", IN1(SH(1, 12, 2, 3)), b_ps, "PixelShuffle", { "x0" }, 2, { 1, 12, 2, 3 }, p_factors },
    { "batch_to_space", IN1(SH(6, 2, 2, 3)), b_b2s, "BatchToSpace", { "x0" }, 2, { 6, 2, 2, 3 }, p_factors },
    { "pixel_unshuffle", IN1(SH(1, 2, 4, 6)), b_pu, "PixelUnshuffle", { "x0" }, 12, { 1, 2, 4, 6 }, p_factors },
    { "channel_to_space", IN1(SH(1, 12, 2, 3)), b_c2s, "ChannelToSpace", { "x0" }, 2, { 1, 12, 2, 3 }, p_factors },
    { "space_to_channel", IN1(SH(1, 2, 4, 6)), b_s2c, "SpaceToChannel", { "x0" }, 12, { 1, 2, 4, 6 }, p_factors },
    { "space_to_batch", IN1(SH(1, 2, 4, 6)), b_s2b, "SpaceToBatch", { "x0" }, 2, { 1, 2, 4, 6 }, p_factors },
    { "cross_product", IN2(SH(4, 3), SH(4, 3)), b_cross, "CrossProduct", { "x0", "x1" }, 4, { 1, 4, 1, 3 }, p_none },
    { "cross_correlation", IN2(SH(5, 6), SH(2, 3)), b_xcorr, "CrossCorrelation", { "x0", "x1" }, 1, { 1, 1, 5, 6 }, p_none },
    { "cost_volume", IN2(SH(6), SH(9)), b_cost, "CostVolume", { "x0", "x1" }, 4, { 1, 1, 1, 6 }, p_none },
    { "furthest_point_sampling", IN1(SH(20, 3)), b_fps, "FurthestPointSampling", { "x0" }, 3, { 1, 1, 20, 3 }, p_fps },
    { "radius_search", IN2(SH(20, 3), SH(4, 3)), b_radius, "RadiusSearch", { "x1", "x0" }, 1, { 1, 1, 20, 3 }, p_radius },
    { "dynamic_slice", IN2(SH(3, 4), SH(1)), b_dslice, "DynamicSlice", { "x0", "start" }, 3, { 1, 3, 1, 4 }, p_dslice },
    { "lrn", IN1(SH(1, 5, 2, 3)), b_lrn, "LocalResponseNormalization", { "x0" }, 5, { 1, 5, 2, 3 }, p_lrn },
    { "minmax_norm rank 2", IN1(SH(4, 6)), b_minmax, "MinMaxNormalization", { "x0" }, 1, { 1, 1, 4, 6 }, p_minmax },
    { "scaled_elementwise max", IN2(SH(1, 2, 3, 4), SH(1, 2, 3, 4)), b_sew, "ScaledElementWise", { "x0", "x1" }, 2,
      { 1, 2, 3, 4 }, p_sew },
    { "scaled_elementwise add", IN2(SH(1, 2, 3, 4), SH(1, 2, 3, 4)), b_sew_add, "ScaledElementWise", { "x0", "x1" }, 2,
      { 1, 2, 3, 4 }, p_sew_add },
};

static float *values(af_shape s, unsigned seed) {
    int64_t n = af_shape_count(s);
    float *v = malloc((size_t)n * sizeof *v + sizeof *v);
    test_rng r = { seed };
    for (int64_t i = 0; i < n; i++) v[i] = (float)(int)(test_uniform(&r) * 9) - 4; /* whole numbers: ties, exact fp16 */
    return v;
}

/* Runs y (its graph's inputs in, fed data) on the CPU in fp32 into a new buffer. */
static float *run(af_graph *g, int nin, af_tensor **in, float **data, af_tensor *y) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, nin, in, 1, &y, &o);
    int64_t n = af_shape_count(y->shape);
    float *out = calloc((size_t)n + 1, sizeof *out);
    af_buffer bi[2], bo = AF_BUF_F32(out, n);
    for (int k = 0; k < nin; k++) bi[k] = AF_BUF_F32(data[k], af_shape_count(in[k]->shape));
    CHECK(m && af_run(m, bi, &bo) == AF_OK, "run: %s", af_error_message());
    af_model_free(m);
    return out;
}

/* The document parsed back, its unit read into an op, run on the original data. */
static void check_read_back(const ucase *c, const netplist_program *p, af_tensor *t, float **data, const float *want) {
    char err[400] = "";
    plist_value *doc = netplist_document(p, err, sizeof err);
    netplist_program q;
    bool ok = doc && netplist_parse(doc, (const netplist_weights[]){ netplist_weights_of(p) }, &q, err, sizeof err);
    CHECK(ok, "%s: the document does not parse back: %s", c->name, err);
    plist_free(doc);
    if (!ok) return;
    const netplist_unit *u = &q.units[q.nunits - 1];
    /* the unit's bottoms as [N, C, H, W] inputs, fed the data of the sources they name
     * (x<k>, or the start the runtime writes into DynamicSlice's constant) */
    af_graph *g = af_graph_new();
    af_tensor *in[2] = { 0 };
    float *feed[2] = { 0 };
    for (int b = 0; b < u->nbottom && b < 2; b++) {
        netplist_dims d = { 1, 1, 1, 1 };
        for (int k = 0; k < q.ninputs; k++)
            if (!strcmp(q.inputs[k].name, u->bottom[b])) d = q.inputs[k].dims;
        for (int k = 0; k < q.nconsts; k++)
            if (!strcmp(q.consts[k].name, u->bottom[b])) d = q.consts[k].dims;
        in[b] = af_input(g, u->bottom[b], AF_F32, AF_SHAPE(d.n, d.c, d.h, d.w));
        feed[b] = data[u->bottom[b][0] == 'x' ? u->bottom[b][1] - '0' : 1];
    }
    af_tensor *y = NULL;
    const bridge_unit_row *row = bridge_unit_by_type(u->type);
    ok = row && row->read(u, in, u->nbottom, &y, err, sizeof err);
    CHECK(ok && y, "%s: the unit does not read back: %s", c->name, err);
    if (ok && y) {
        CHECK(y->shape.rank == 4 && af_shape_count(y->shape) == af_shape_count(t->shape), "%s: the read-back result has another size", c->name);
        bool found = false;
        for (int id = 0; id < g->n; id++) found |= g->t[id]->op == t->op;
        CHECK(found, "%s: the read-back graph holds no %s node", c->name, ir_ops[t->op].name);
        if (af_shape_count(y->shape) == af_shape_count(t->shape)) {
            float *got = run(g, u->nbottom, in, feed, y);
            CHECK(!memcmp(got, want, sizeof(float) * (size_t)af_shape_count(t->shape)), "%s: the read-back unit computes other values", c->name);
            free(got);
        }
    }
    af_graph_free(g);
    netplist_free(&q);
}

static void check_case(const ucase *c, unsigned seed) {
    af_graph *g = af_graph_new();
    af_tensor *in[2];
    float *data[2] = { 0 };
    for (int k = 0; k < c->nin; k++) {
        in[k] = af_input(g, k ? "b" : "a", AF_F32, c->in[k]);
        data[k] = values(c->in[k], seed + (unsigned)k);
    }
    if (c->build == b_dslice) data[1][0] = 1; /* a start inside [0, 4 - 2] */
    af_tensor *t = c->build(g, in);
    CHECK(t != NULL, "%s: %s", c->name, af_graph_error(g));
    netplist_program p;
    char err[400] = "";
    bool ok = t && netplist_for_node(t, AF_FAMILY_A13, &p, err, sizeof err);
    CHECK(ok, "%s: netplist_for_node: %s", c->name, err);
    if (ok) {
        const netplist_unit *u = &p.units[p.nunits - 1];
        plist_value *want = plist_dict();
        c->params(want);
        CHECK(p.nunits == 1 && !strcmp(u->type, c->type), "%s: unit type %s, want %s", c->name, u->type, c->type);
        CHECK(u->nbottom == (c->bottom[1] ? 2 : 1) && !strcmp(u->bottom[0], c->bottom[0]) && (!c->bottom[1] || !strcmp(u->bottom[1], c->bottom[1])),
              "%s: Bottom %s %s", c->name, u->bottom[0], u->nbottom > 1 ? u->bottom[1] : "");
        CHECK(u->out_channels == c->out_channels, "%s: OutputChannels %lld, want %lld", c->name, (long long)u->out_channels, (long long)c->out_channels);
        CHECK(!memcmp(&p.inputs[0].dims, &c->in0, sizeof c->in0), "%s: input dims [%lld %lld %lld %lld]", c->name, (long long)p.inputs[0].dims.n,
              (long long)p.inputs[0].dims.c, (long long)p.inputs[0].dims.h, (long long)p.inputs[0].dims.w);
        CHECK(plist_equal(u->params, want), "%s: Params differ from the hand-derived ones", c->name);
        plist_free(want);
        float *y = run(g, c->nin, in, data, t);
        check_read_back(c, &p, t, data, y);
        free(y);
        netplist_free(&p);
    }
    for (int k = 0; k < c->nin; k++) free(data[k]);
    af_graph_free(g);
}

/* describe is the per-family gate: it refuses what the compiler refuses. */
static void check_refusals(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(2, 16)), *lrn_x = af_input(g, "l", AF_F32, AF_SHAPE(1, 16, 2, 2));
    af_tensor *pts = af_input(g, "p", AF_F32, AF_SHAPE(50, 3));
    struct { af_tensor *t; const char *words; } r[] = {
        { af_top_k(x, 4, 0, 1, 0), "top_k k wall" },
        { af_lrn(lrn_x, 0.1f, 0.75f, 1.0f), "LRN channel limit on A13" },
        { af_furthest_point_sampling(pts, 4, 1), "not their indices" },
        { af_pixel_shuffle(af_input(g, "q", AF_F32, AF_SHAPE(2, 4, 2, 2)), 2, 2), "batch-1 rule" },
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        netplist_program p;
        char err[400] = "";
        bool ok = r[i].t && netplist_for_node(r[i].t, AF_FAMILY_A13, &p, err, sizeof err);
        CHECK(!ok && strstr(err, r[i].words) && strstr(err, "Remedy:"), "refusal %zu: want '%s', got %s", i, r[i].words, ok ? "a program" : err);
        if (ok) netplist_free(&p);
    }
    af_graph_free(g);
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 17u + 5u * (unsigned)i);
    check_refusals();
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ir_ops[op].flags & OPF_BRIDGE) {
            const bridge_unit_row *row = bridge_unit_info((ir_op)op);
            CHECK(row && bridge_unit_by_type(row->type) == row, "bridge op %s has no net.plist unit row (src/netplist/bridge_units.def)", ir_ops[op].name);
        }
    return check_finish("bridge_units");
}
