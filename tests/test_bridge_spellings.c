/* The spellings table (src/netplist/bridge_spellings.def) against what the bridge units
 * write: every bridge op's program is built, and every Params key, empty Params,
 * UInt8 OutputType, UInt16 or weights.0 constant it holds must have a row for its unit
 * Type; every row must name something some program writes (no stale rows); and the
 * spellings no source gives (the rearrange factors, Flatten's OutputChannels,
 * Dropout's empty Params, RadiusSearch's UInt8 output, DynamicSlice's start constant)
 * are marked UNVERIFIED, the rows a Mac probe checks against ANECCompile. */
#include "netplist/netplist.h"
#include "support/check.h"

#include <string.h>

static int nrows;
static int seen[256];

static const bridge_spelling *row(const char *type, const char *field) {
    for (int k = 0; bridge_spellings[k].type; k++)
        if (!strcmp(bridge_spellings[k].type, type) && !strcmp(bridge_spellings[k].field, field)) {
            seen[k] = 1;
            return &bridge_spellings[k];
        }
    return NULL;
}

static void need(const char *what, const char *type, const char *field) {
    CHECK(row(type, field) != NULL, "%s: %s writes %s, which bridge_spellings.def has no row for", what, type, field);
}

static void check_program(const char *what, af_tensor *t) {
    netplist_program p;
    char err[400] = "";
    CHECK(t && netplist_for_node(t, AF_FAMILY_A16, &p, err, sizeof err), "%s: %s", what, t ? err : "not built");
    if (!t || err[0]) return;
    for (int k = 0; k < p.nunits; k++) {
        const netplist_unit *u = &p.units[k];
        char field[80];
        if (u->params->n == 0) need(what, u->type, "Params");
        for (int i = 0; i < u->params->n; i++) {
            snprintf(field, sizeof field, "Params.%s", u->params->keys[i]);
            need(what, u->type, field);
        }
        if (u->out_u8) need(what, u->type, "OutputType");
        row(u->type, "OutputChannels"); /* written by every unit */
        for (int c = 0; c < p.nconsts; c++)
            for (int b = 0; b < u->nbottom; b++)
                if (!strcmp(u->bottom[b], p.consts[c].name)) {
                    if (p.consts[c].u16) need(what, u->type, "ConstantType");
                    if (p.consts[c].file == 0) need(what, u->type, "ConstantIndex");
                }
    }
    netplist_free(&p);
}

int main(void) {
    for (nrows = 0; bridge_spellings[nrows].type; nrows++) {}
    CHECK(nrows > 0 && nrows <= 256, "%d rows", nrows);
    af_graph *g = af_graph_new();
#define IN(name, ...) af_input(g, name, AF_F16, AF_SHAPE(__VA_ARGS__))
    af_tensor *x = IN("x", 3, 10), *img = IN("i", 1, 12, 2, 4), *pts = IN("p", 20, 3), *cen = IN("c", 4, 3);
    float start = 1;
    struct { const char *what; af_tensor *t; } nodes[] = {
        { "sort", af_sort(x, 1, 1, 0) }, { "top_k", af_top_k(x, 5, 0, 1, 1) },
        { "arg_min_max", af_arg_min_max(IN("a", 3, 4, 5), 0, 0) }, { "global_arg_min_max", af_global_arg_min_max(IN("b", 3, 4, 5), -2, 1) },
        { "pixel_shuffle", af_pixel_shuffle(img, 2, 3) }, { "pixel_unshuffle", af_pixel_unshuffle(IN("u", 1, 2, 4, 6), 2, 3) },
        { "channel_to_space", af_channel_to_space(img, 2, 3) }, { "space_to_channel", af_space_to_channel(IN("v", 1, 2, 4, 6), 2, 3) },
        { "space_to_batch", af_space_to_batch(IN("w", 1, 2, 4, 6), 2, 3) }, { "batch_to_space", af_batch_to_space(IN("z", 6, 2, 2, 3), 2, 3) },
        { "cross_product", af_cross_product(IN("e", 4, 3), IN("f", 4, 3)) },
        { "cross_correlation", af_cross_correlation(IN("m", 5, 6), IN("n", 2, 3)) },
        { "cost_volume", af_cost_volume(IN("aux", 6), IN("ref", 9), 3) },
        { "fps", af_furthest_point_sampling(pts, 6, 0) }, { "radius_search", af_radius_search(pts, cen, 1.0f) },
        { "dynamic_slice", af_dynamic_slice(IN("d", 3, 4), af_const(g, "s", AF_SHAPE(1), &start), -1, 2) },
        { "lrn", af_lrn(IN("l", 1, 5, 2, 3), 0.3f, 0.75f, 2.0f) }, { "minmax_norm", af_minmax_norm(IN("mm", 4, 6), -2, 0.0625f) },
        { "scaled_elementwise", af_scaled_elementwise(IN("s1", 1, 2, 3, 4), IN("s2", 1, 2, 3, 4), AF_SEW_MAX, -1.5f) },
        { "sdpa", af_sdpa(IN("q", 1, 4, 3, 8), IN("k", 1, 4, 10, 8), IN("vv", 1, 4, 10, 8), NULL, 0.25f) },
        { "flatten", af_flatten(IN("fl", 2, 3, 4)) }, { "dropout", af_dropout(IN("dr", 2, 3, 4), 0.0f) },
        { "broadcast", af_broadcast(IN("br", 3, 1), 1, 5) }, { "input_view", af_input_view(IN("iv", 3, 4), 2, 5) },
    };
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) check_program(nodes[i].what, nodes[i].t);
    CHECK(!af_graph_error(g), "building the nodes: %s", af_graph_error(g));
    for (int k = 0; k < nrows; k++)
        CHECK(seen[k], "row %s %s names nothing any bridge program writes", bridge_spellings[k].type, bridge_spellings[k].field);
    const char *unverified[][2] = {
        { "PixelShuffle", "Params.FactorY" }, { "PixelShuffle", "Params.FactorX" }, { "BatchToSpace", "Params.FactorX" },
        { "Flatten", "OutputChannels" },      { "Dropout", "Params" },              { "RadiusSearch", "OutputType" },
        { "DynamicSlice", "ConstantType" },
    };
    for (size_t i = 0; i < sizeof unverified / sizeof unverified[0]; i++) {
        const bridge_spelling *r = row(unverified[i][0], unverified[i][1]);
        CHECK(r && r->source == BRIDGE_UNVERIFIED, "%s %s must be marked UNVERIFIED", unverified[i][0], unverified[i][1]);
    }
    af_graph_free(g);
    return check_finish("bridge_spellings");
}
