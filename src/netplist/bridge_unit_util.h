/* Helpers the bridge ops' net.plist describe and read functions share
 * (bridge_rank.c, bridge_rearrange.c, bridge_geometry.c, bridge_norm.c). */
#ifndef AF_ANE_BRIDGE_UNIT_UTIL_H
#define AF_ANE_BRIDGE_UNIT_UTIL_H
#include "netplist/netplist.h"

/* One unit of type reading the given bottoms, OutputChannels p->out.c; NULL with the
 * message in err. Runs the op's engine gate first (bridge_gates.c). */
netplist_unit *bridge_unit(const af_tensor *t, netplist_program *p, const char *type, int nbottom, const char *const *bottom,
                           char *err, size_t errn);
/* fp16 bit pattern of v, for the Params the engine parses as fp16 tokens. */
int64_t bridge_f16_bits(float v);
float bridge_f16_value(int64_t bits);
/* The IR shape of rank `rank` that netplist_dims_of maps to d (right-aligned). */
af_shape bridge_shape_of(netplist_dims d, int rank);
/* An integer or string Param of u, or a message naming the missing key. */
bool bridge_param_int(const netplist_unit *u, const char *key, int64_t *v, char *err, size_t errn);
const char *bridge_param_str(const netplist_unit *u, const char *key, char *err, size_t errn);
/* The index of s among n names, or -1 with a message. */
int bridge_pick(const char *s, const char *const *names, int n, const char *key, char *err, size_t errn);

/* What a unit computes, as an op: its attributes and its sources' IR shapes from the
 * bottoms' dims; order[k] is the bottom the op's source k reads (identity unless set). */
typedef bool (*bridge_decode_fn)(const netplist_unit *u, const netplist_dims *in, int nin, ir_op *op, ir_attrs *a,
                                 af_shape *shapes, int *order, char *err, size_t errn);
/* A bridge_read_fn from a decoder: the bottoms reshaped to the op's source shapes, the
 * op built with ir_build, its result reshaped to the [N, C, H, W] the op's own describe
 * gives its output. */
bool bridge_read_decoded(bridge_decode_fn decode, const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out,
                         char *err, size_t errn);
#endif
