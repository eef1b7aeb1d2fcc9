/* net.plist units of the rearrange bridge ops (seed 004) on [N, C, H, W]: the Type
 * names the layer; the factors go in Params FactorY (along H) and FactorX (along W).
 * Seed 004 gives these layers' shape laws but not their Params keys: FactorX/FactorY
 * are this library's spelling, unverified against ANECCompile (listed UNVERIFIED in
 * bridge_spellings.def, the table a Mac probe checks; the output shape the
 * unit implies, OutputChannels and the input's dims, fixes them as well). */
#include "netplist/bridge_unit_util.h"

#include <stdio.h>

#include <string.h>

static const struct { ir_op op; const char *type; } layers[6] = {
    { IR_OP_PIXEL_SHUFFLE, "PixelShuffle" },     { IR_OP_PIXEL_UNSHUFFLE, "PixelUnshuffle" },
    { IR_OP_CHANNEL_TO_SPACE, "ChannelToSpace" }, { IR_OP_SPACE_TO_CHANNEL, "SpaceToChannel" },
    { IR_OP_SPACE_TO_BATCH, "SpaceToBatch" },     { IR_OP_BATCH_TO_SPACE, "BatchToSpace" },
};

bool bridge_describe_rearrange(const af_tensor *t, netplist_program *p, char *err, size_t errn) {
    const char *type = "";
    for (int i = 0; i < 6; i++)
        if (layers[i].op == t->op) type = layers[i].type;
    const char *b[1] = { "x0" };
    netplist_unit *u = bridge_unit(t, p, type, 1, b, err, errn);
    if (!u) return false;
    plist_set_int(u->params, "FactorY", t->a.kernel[0]);
    plist_set_int(u->params, "FactorX", t->a.kernel[1]);
    return true;
}

static bool decode_rearrange(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a, af_shape *shapes,
                           int *order, char *err, size_t errn) {
    (void)order;
    (void)nin;
    int64_t fy, fx;
    if (!bridge_param_int(u, "FactorY", &fy, err, errn) || !bridge_param_int(u, "FactorX", &fx, err, errn)) return false;
    *op = IR_OP_COUNT;
    for (int i = 0; i < 6; i++)
        if (!strcmp(layers[i].type, u->type)) *op = layers[i].op;
    *a = (ir_attrs){ .kernel = { (int)fy, (int)fx } };
    shapes[0] = bridge_shape_of(in[0], 4);
    return *op != IR_OP_COUNT;
}
bool bridge_read_rearrange(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn) {
    return bridge_read_decoded(decode_rearrange, u, in, nin, out, err, errn);
}
