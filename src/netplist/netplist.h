/* net.plist programs (ANECIR netplists): the native hardware layers Apple's MIL frontend
 * never emits, reached by a hand-written program per bridge node (seed 004; the schema
 * is in ane-formats.md §5). A program here is one procedure, one network "net": its
 * inputs x0, x1, ... (the node's sources, in order), weight-backed constants, a chain
 * of units, and one output "y" read from the last unit. netplist_document turns it into
 * the plist value tree whose XML (plist_write_xml) is the net.plist file; weights.0 holds
 * SDPA's Scale (seed 004: "Constants array, backed by weights.0") and weights.1 the
 * other constants (DynamicSlice's start index).
 *
 * Adding a bridge op's unit (what the op table's OPF_BRIDGE rows need):
 *   1. a describe function, bridge_describe_fn below, in src/ane/bridge_<family>.c: it
 *      adds the op's unit(s) to a program whose inputs the caller already declared
 *      (netplist_add_unit, netplist_add_constant; Params via plist_set_*);
 *   2. one row BRIDGE(ID, "Type", describe, read) in src/netplist/bridge_units.def, where
 *      read maps a unit of that Type back to the op and its attributes, so the fake
 *      framework can run programs holding it (bridge_read_none: not yet).
 * bridge_unit_info(op) finds the row. */
#ifndef AF_ANE_NETPLIST_H
#define AF_ANE_NETPLIST_H
#include "netplist/plist.h"
#include "ir/ir.h"

#define NETPLIST_VERSION "1.0.10"
enum {
    NETPLIST_NAME = 32,       /* symbol length, NUL included */
    NETPLIST_MAX_BOTTOM = 8,  /* sources of one unit */
    NETPLIST_MAX_INPUTS = 8,
    NETPLIST_MAX_CONSTS = 8,
    NETPLIST_MAX_UNITS = 16,
};

/* A tensor as the engine lays it out: batch, channels, height, width (depth 1), fp16. */
typedef struct { int64_t n, c, h, w; } netplist_dims;

/* The engine's view of an IR shape: right-aligned into [N, C, H, W], with rank 2 read
 * as [C, W] (height 1, the layout rank and reduction layers use) and rank 1 as [W].
 * false when the rank is above 4. */
bool netplist_dims_of(af_shape s, netplist_dims *d);
int64_t netplist_dims_count(netplist_dims d);
/* The engine's name of axis `axis` of a rank-`rank` IR shape under netplist_dims_of:
 * "Batch", "Channel", "Height" or "Width"; NULL when it has none. And back: the index
 * (0..3) of a name in [N, C, H, W], or -1. */
const char *netplist_axis_name(int rank, int axis);
int netplist_axis_index(const char *name);
/* An IR shape [N, C, H, W] from dims. */
af_shape netplist_shape4(netplist_dims d);
/* The engine's row and plane strides in bytes for fp16 data: rows padded to 64 bytes,
 * planes to 64 bytes. */
int64_t netplist_row_stride(netplist_dims d);
int64_t netplist_plane_stride(netplist_dims d);

typedef struct {
    char name[NETPLIST_NAME];
    netplist_dims dims;
} netplist_input;

typedef struct {
    char name[NETPLIST_NAME];
    netplist_dims dims;
    int file;                 /* ConstantIndex: the weights file, 0 (weights.0) or 1 (weights.1) */
    bool u16;                 /* ConstantType UInt16 (an index constant), else Float16 */
    int64_t byte_offset;      /* into that file (ConstantByteOffset) */
} netplist_constant;

/* A program's weight files in memory: weights.0 and weights.1 (NULL, 0: empty). */
typedef struct {
    const uint8_t *bytes[2];
    size_t len[2];
} netplist_weights;

typedef struct {
    char name[NETPLIST_NAME];
    char type[NETPLIST_NAME];            /* Type: "SDPA", "Flatten", ... */
    int nbottom;
    char bottom[NETPLIST_MAX_BOTTOM][NETPLIST_NAME]; /* inputs, constants or earlier units */
    int64_t out_channels;                /* OutputChannels */
    bool out_u8;                         /* OutputType UInt8 (RadiusSearch's membership mask: seed 004
                                          * gives 2 bytes per W cell, the low byte the 0/1 flag), else
                                          * Float16; the program's output y follows its last unit */
    plist_value *params;                 /* Params dict (owned; empty dict when none) */
} netplist_unit;

typedef struct {
    int ninputs, nconsts, nunits;
    netplist_input inputs[NETPLIST_MAX_INPUTS];
    netplist_constant consts[NETPLIST_MAX_CONSTS];
    netplist_unit units[NETPLIST_MAX_UNITS];
    netplist_dims out;                   /* the output y, read from the last unit */
    unsigned char *weights0;             /* constants the seed puts in weights.0 (SDPA's Scale; owned) */
    size_t weights0_len;
    unsigned char *weights1;             /* the other constants' bytes (owned) */
    size_t weights1_len;
    af_family_id family;                 /* the engine family compiled for: describe refuses
                                          * what that family's compiler refuses */
} netplist_program;

void netplist_init(netplist_program *p);
void netplist_free(netplist_program *p);

/* Declares the next input (x0, x1, ...); false when there are NETPLIST_MAX_INPUTS. */
bool netplist_add_input(netplist_program *p, netplist_dims d);
/* Appends a unit named u<k> reading the given bottoms; its Params dict is empty. NULL
 * (message in err) when the program is full or a bottom names nothing declared. */
netplist_unit *netplist_add_unit(netplist_program *p, const char *type, int nbottom, const char *const *bottom,
                                 int64_t out_channels, char *err, size_t errn);
/* Declares a weight-backed constant (listed in the network's Constants array) holding
 * count fp16 values, appended to weights.1 at a 64-byte aligned offset. */
bool netplist_add_constant(netplist_program *p, const char *name, netplist_dims d, const uint16_t *fp16,
                           char *err, size_t errn);
/* The same in weights file `file` (0 or 1), of 16-bit values that are fp16 (u16 false) or
 * UInt16 integers (u16 true, ConstantType UInt16: an index constant). */
bool netplist_add_constant_in(netplist_program *p, int file, bool u16, const char *name, netplist_dims d,
                              const uint16_t *bits, char *err, size_t errn);
/* The program's own weight files. */
netplist_weights netplist_weights_of(const netplist_program *p);

/* The net.plist document of p (Version, Networks, ProcedureList, the network "net"),
 * or NULL with a message. */
plist_value *netplist_document(const netplist_program *p, char *err, size_t errn);

/* Reads a net.plist document back into a program: the single procedure's inputs, the
 * network's constants (resolved against weights1 when given) and units, the output.
 * false with a message naming what is missing or inconsistent. */
bool netplist_parse(const plist_value *doc, const netplist_weights *w, netplist_program *p, char *err, size_t errn);

/* The graph program p computes, built into g (netplist_graph.c): in[k] gets input k as
 * an fp16 [N, C, H, W] input, the constants are baked from weights1 (little-endian
 * fp16), each unit is its Type's reader (netplist_unit_reader) over its bottoms, and
 * *out is the last unit. false with a message naming the unit. */
bool netplist_graph(const netplist_program *p, const netplist_weights *w, af_graph *g, af_tensor **in,
                    af_tensor **out, char *err, size_t errn);

/* ---- bridge ops ---- */

/* Adds node t's unit(s) to p, whose inputs x0..x(nsrc-1) are t's sources with
 * netplist_dims_of their shapes (describe may change an input's dims to another view
 * of the same contiguous data) and p->out is netplist_dims_of t's shape; the last unit
 * added is the output. Returns false with a message where the real compiler fails for
 * p->family (the per-family gate: name the limit and the remedy). */
typedef bool (*bridge_describe_fn)(const af_tensor *t, netplist_program *p, char *err, size_t errn);
/* Builds what one unit of the row's Type computes, for the fake framework: in[k] is the
 * unit's bottom k as a rank-4 [N, C, H, W] tensor of one graph (an input, a constant
 * baked from weights.1, or an earlier unit's result); *out gets the unit's result as a
 * rank-4 [N, C, H, W] tensor built from IR ops (the op's own row through its builder or
 * ir_build, plus reshapes and transposes). Refuses Params it cannot honour. */
typedef bool (*bridge_read_fn)(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err,
                               size_t errn);

typedef struct {
    ir_op op;
    const char *type;          /* the unit Type the op writes */
    bridge_describe_fn describe;
    bridge_read_fn read;       /* bridge_read_none: programs holding it do not run on the fake framework */
} bridge_unit_row;

/* The start dynamic_slice node t reads for a start value (rounded half up, clamped):
 * what its program's UInt16 "start" constant in weights.1 holds. */
int64_t bridge_dslice_start(const af_tensor *t, float start);

/* Where each spelling the units write comes from (bridge_spellings.def): the table a
 * Mac probe iterates to check the UNVERIFIED rows against ANECCompile. */
typedef enum { BRIDGE_SEED, BRIDGE_REF, BRIDGE_UNVERIFIED } bridge_spelling_source;
typedef struct {
    const char *type, *field;   /* unit Type; "Params.<key>", "OutputType", "OutputChannels", ... */
    bridge_spelling_source source;
    const char *note;
} bridge_spelling;
extern const bridge_spelling bridge_spellings[]; /* terminated by a NULL type */

/* The reader of rows that have none: fails naming the unit type. */
bool bridge_read_none(const netplist_unit *u, af_tensor *const *in, int nin, af_tensor **out, char *err, size_t errn);
/* The row of a bridge op, or NULL when op has none. */
const bridge_unit_row *bridge_unit_info(ir_op op);
/* The row whose unit Type is type, or NULL. */
const bridge_unit_row *bridge_unit_by_type(const char *type);

/* The reader of a unit Type: a bridge row's, or one of the layout units bridge programs
 * use around their layer (Transpose); NULL when there is none. */
bridge_read_fn netplist_unit_reader(const char *type);

/* The whole program of bridge node t for an engine family: its inputs declared from its
 * sources, its units from its row's describe (which is also the op's per-family gate:
 * ane-sim's validate builds the program and discards it, so both engine targets refuse
 * the same nodes with the same message). false with a message (no row, a rank above 4,
 * the op's own refusal). */
bool netplist_for_node(const af_tensor *t, af_family_id family, netplist_program *p, char *err, size_t errn);
#endif
