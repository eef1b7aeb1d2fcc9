/* Segmenting a plan around its bridge ops (OPF_BRIDGE, seed 004). On the engine targets
 * a bridge op cannot share a program with other ops: it is a native layer reached by a
 * net.plist program of its own. The plan becomes an ordered list of segments, each a
 * small graph of its own compiled on its own input shapes: fused regions (the ordinary
 * ops between bridges, one program each) and bridge segments (one bridge node each).
 * The host keeps every value that crosses a segment boundary as an array and feeds it
 * to the segments that read it. Target-neutral: backends never see a mixed plan. */
#ifndef AF_COMPILE_SEGMENT_H
#define AF_COMPILE_SEGMENT_H
#include "compile/plan.h"

typedef enum { SEG_FUSED, SEG_BRIDGE } seg_kind;

typedef struct {
    seg_kind kind;
    af_graph *g;        /* the segment's own graph (owned): inputs, baked constants, its nodes */
    int nin, nout;
    af_tensor **in;     /* inputs of g, in the order the segment is fed */
    af_tensor **out;    /* outputs of g */
    int *in_value;      /* per input: the host value it reads */
    int *out_value;     /* per output: the host value it writes */
    int nnodes;         /* nodes of the plan it runs */
} segment;

/* Host values: the model's inputs first (value i = plan input i), then every segment
 * output in order. */
typedef struct {
    int nseg;
    segment *seg;
    int nvalues;
    const af_tensor **value;   /* the plan's tensor behind each value */
    int *model_out_value;      /* per plan output: its value (an input's, or a segment output's) */
} segment_plan;

/* True when the plan holds a bridge op (it must be segmented on engine targets). */
bool plan_has_bridge(const compile_plan *p);

/* Cuts p into segments: maximal runs of ordinary nodes in schedule order, and one
 * segment per bridge node. fp16_boundaries: values crossing a cut are fp16 inputs of
 * the segments that read them (engine programs take fp16 ports; the model's own inputs
 * keep their dtype). AF_OK, or the status with the reason in msg. */
af_status segment_plan_build(const compile_plan *p, segment_plan *sp, bool fp16_boundaries, char *msg, size_t n);
void segment_plan_free(segment_plan *sp);
#endif
