/* Builders of the bridge ops (seed 004): they fill the attributes each op reads
 * (ir_attrs) and leave validation to the shape rules (shape_bridge_ops.c). */
#include "ir/ir.h"

static af_tensor *one(ir_op op, af_tensor *x, ir_attrs *a) { return ir_build(op, 1, &x, a); }
static af_tensor *two(ir_op op, af_tensor *x, af_tensor *y, ir_attrs *a) {
    af_tensor *s[2] = { x, y };
    return ir_build(op, 2, s, a);
}

/* Rank: ints[0] key lane, ints[1] descending/largest/max, ints[2] indices, ints[3] k. */
af_tensor *af_sort(af_tensor *x, int key_lane, int descending, int indices) {
    ir_attrs a = { .ints = { key_lane, descending != 0, indices != 0 } };
    return one(IR_OP_SORT, x, &a);
}
af_tensor *af_top_k(af_tensor *x, int k, int key_lane, int largest, int indices) {
    ir_attrs a = { .ints = { key_lane, largest != 0, indices != 0, k } };
    return one(IR_OP_TOPK, x, &a);
}
af_tensor *af_arg_min_max(af_tensor *x, int channel, int max) {
    ir_attrs a = { .ints = { channel != 0, max != 0 } };
    return one(IR_OP_ARGMINMAX, x, &a);
}
af_tensor *af_global_arg_min_max(af_tensor *x, int axis, int max) {
    ir_attrs a = { .axis = axis, .ints = { 0, max != 0 } };
    return one(IR_OP_GLOBAL_ARGMINMAX, x, &a);
}

/* Rearrange: kernel = {fy, fx}. */
static af_tensor *rearrange(ir_op op, af_tensor *x, int fy, int fx) {
    ir_attrs a = { .kernel = { fy, fx } };
    return one(op, x, &a);
}
af_tensor *af_pixel_shuffle(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_PIXEL_SHUFFLE, x, fy, fx); }
af_tensor *af_pixel_unshuffle(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_PIXEL_UNSHUFFLE, x, fy, fx); }
af_tensor *af_channel_to_space(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_CHANNEL_TO_SPACE, x, fy, fx); }
af_tensor *af_space_to_channel(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_SPACE_TO_CHANNEL, x, fy, fx); }
af_tensor *af_space_to_batch(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_SPACE_TO_BATCH, x, fy, fx); }
af_tensor *af_batch_to_space(af_tensor *x, int fy, int fx) { return rearrange(IR_OP_BATCH_TO_SPACE, x, fy, fx); }

/* Geometry. */
af_tensor *af_cross_product(af_tensor *a, af_tensor *b) { return two(IR_OP_CROSS_PRODUCT, a, b, NULL); }
af_tensor *af_cross_correlation(af_tensor *x, af_tensor *tmpl) { return two(IR_OP_CROSS_CORRELATION, x, tmpl, NULL); }
af_tensor *af_cost_volume(af_tensor *aux, af_tensor *ref, int max_disparity) {
    ir_attrs a = { .ints = { max_disparity } };
    return two(IR_OP_COST_VOLUME, aux, ref, &a);
}
af_tensor *af_furthest_point_sampling(af_tensor *points, int k, int indices) {
    ir_attrs a = { .ints = { k, indices != 0 } };
    return one(IR_OP_FPS, points, &a);
}
af_tensor *af_radius_search(af_tensor *points, af_tensor *centroids, float radius) {
    ir_attrs a = { .scalar = radius };
    return two(IR_OP_RADIUS_SEARCH, points, centroids, &a);
}
/* start is a whole number: a fed or baked one is held exactly at every precision. */
af_tensor *af_dynamic_slice(af_tensor *x, af_tensor *start, int axis, int64_t size) {
    if (start && (start->op == IR_OP_INPUT || start->op == IR_OP_CONST)) start->flags |= IR_TF_EXACT;
    ir_attrs a = { .axis = axis, .sizes = { size } };
    return two(IR_OP_DYNAMIC_SLICE, x, start, &a);
}

/* Normalization: lrn scalar = alpha, eps = k, beta; minmax_norm axis, eps;
 * scaled_elementwise mode = af_sew_op, scalar = scale. */
af_tensor *af_lrn(af_tensor *x, float alpha, float beta, float k) {
    ir_attrs a = { .scalar = alpha, .beta = beta, .eps = k };
    return one(IR_OP_LRN, x, &a);
}
af_tensor *af_minmax_norm(af_tensor *x, int axis, float eps) {
    ir_attrs a = { .axis = axis, .eps = eps };
    return one(IR_OP_MINMAX_NORM, x, &a);
}
af_tensor *af_scaled_elementwise(af_tensor *x, af_tensor *z, af_sew_op op, float scale) {
    ir_attrs a = { .mode = (int)op, .scalar = scale };
    return two(IR_OP_SCALED_ELEMENTWISE, x, z, &a);
}
