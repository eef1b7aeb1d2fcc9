/* The net.plist program of sdpa (seed 004): the engine's SDPA layer takes the sequence
 * in C, so q, k and v ([B, heads, seq, d]) are transposed to [B, seq, heads, d] by
 * Transpose units, the SDPA unit reads them with the scale, a constant listed in the
 * network's Constants array and held in weights.0, as seed 004 says (the layer's
 * validator wants Scale constant), and the
 * optional mask [Sq, 1, Skv]; SubtractMax is true (the layer's default, false, gives a
 * wrong softmax), and the result is transposed back. */
#include "netplist/netplist.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <string.h>

/* Swaps C and H: [N, C, H, W] -> [N, H, C, W]. */
static netplist_unit *swap_ch(netplist_program *p, const char *bottom, int64_t out_c, char *err, size_t errn) {
    netplist_unit *u = netplist_add_unit(p, "Transpose", 1, &bottom, out_c, err, errn);
    if (!u) return NULL;
    plist_value *dims = plist_set(u->params, "TransposeDimensions", plist_array());
    plist_value *a = plist_push(dims, plist_dict()), *b = plist_push(dims, plist_dict());
    plist_set_str(a, "TransposeSourceDimension", "Channel");
    plist_set_str(a, "TransposeDestinationDimension", "Height");
    plist_set_str(b, "TransposeSourceDimension", "Height");
    plist_set_str(b, "TransposeDestinationDimension", "Channel");
    return u;
}

bool bridge_describe_sdpa(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    int64_t sq = t->src[0]->shape.dim[2], skv = t->src[1]->shape.dim[2], heads = t->shape.dim[1];
    int64_t longest = sq > skv ? sq : skv, shortest = sq < skv ? sq : skv;
    if (longest > AF_SDPA_NATIVE_MAX_SEQ || shortest >= AF_SDPA_NATIVE_MIN_BOTH) {
        snprintf(err, errn, "sdpa: Sq %lld, Skv %lld is outside the native layer's reliable range (max(Sq, Skv) <= %d, "
                 "min(Sq, Skv) < %d); build it with af_sdpa, which uses ordinary ops there",
                 (long long)sq, (long long)skv, AF_SDPA_NATIVE_MAX_SEQ, AF_SDPA_NATIVE_MIN_BOTH);
        return false;
    }
    netplist_unit *q = swap_ch(p, "x0", sq, err, errn);
    netplist_unit *k = q ? swap_ch(p, "x1", skv, err, errn) : NULL;
    netplist_unit *v = k ? swap_ch(p, "x2", skv, err, errn) : NULL;
    if (!v) return false;
    float scale = t->a.scalar;
    uint16_t h;
    ir_f32_to_f16_array(&scale, &h, 1);
    /* seed 004: "list Scale in the Constants array, backed by weights.0" */
    if (!netplist_add_constant_in(p, 0, false, "scale", (netplist_dims){1, 1, 1, 1}, &h, err, errn)) return false;
    const char *bottom[5] = {q->name, k->name, v->name, "scale", "x3"};
    netplist_unit *u = netplist_add_unit(p, "SDPA", t->nsrc + 1, bottom, sq, err, errn);
    if (!u) return false;
    plist_set_bool(u->params, "SubtractMax", true);
    return swap_ch(p, u->name, heads, err, errn) != NULL;
}

/* ---- readers ---- */

static af_tensor *swap_ch_ir(af_tensor *x) {
    static const int perm[4] = {0, 2, 1, 3};
    return af_transpose(x, perm);
}

bool bridge_read_transpose(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err,
                           size_t errn) {
    const plist_value *dims = plist_get_kind(u->params, "TransposeDimensions", PLIST_ARRAY);
    int perm[4] = {0, 1, 2, 3};
    for (int k = 0; dims && k < dims->n; k++) {
        int from = netplist_axis_index(plist_get_str(dims->items[k], "TransposeSourceDimension"));
        int to = netplist_axis_index(plist_get_str(dims->items[k], "TransposeDestinationDimension"));
        if (from < 0 || to < 0) {
            snprintf(err, errn, "net.plist: %s: TransposeDimensions entry %d names no axis", u->name, k);
            return false;
        }
        perm[to] = from;
    }
    bool is_perm = true;
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++) is_perm &= perm[a] != perm[b];
    if (nin != 1 || !dims || !is_perm) {
        snprintf(err, errn, "net.plist: %s: a Transpose reads one tensor and its TransposeDimensions must permute the axes",
                 u->name);
        return false;
    }
    return (*out = af_transpose(in[0], perm)) != NULL;
}

bool bridge_read_sdpa(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    const plist_value *sm = plist_get_kind(u->params, "SubtractMax", PLIST_BOOL);
    if (nin != 4 && nin != 5) {
        snprintf(err, errn, "net.plist: %s: SDPA reads query, key, value, scale and an optional mask; got %d", u->name, nin);
        return false;
    }
    if (!sm || !sm->b) { /* the layer's default softmax skips the max: not what the op computes */
        snprintf(err, errn, "net.plist: %s: SDPA without SubtractMax true computes an unstabilised softmax", u->name);
        return false;
    }
    af_tensor *scale = in[3];
    if (scale->op != IR_OP_CONST || af_shape_count(scale->shape) != 1) {
        snprintf(err, errn, "net.plist: %s: Scale is expected to be constant (list it in the network's Constants)", u->name);
        return false;
    }
    af_tensor *src[4] = {swap_ch_ir(in[0]), swap_ch_ir(in[1]), swap_ch_ir(in[2]), NULL};
    if (nin == 5) { /* [1, Sq, 1, Skv] -> [Sq, 1, Skv] */
        af_shape m = in[4]->shape;
        src[3] = af_reshape(in[4], AF_SHAPE(m.dim[1], m.dim[2], m.dim[3]));
    }
    ir_attrs a = {.scalar = scale->data[0]};
    af_tensor *y = ir_build(IR_OP_SDPA, nin - 1, src, &a);
    return (*out = y ? swap_ch_ir(y) : NULL) != NULL;
}
