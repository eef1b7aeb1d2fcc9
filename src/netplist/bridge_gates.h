/* The engine compiler's limits on the bridge ops (seed 004): what ANECCompile refuses
 * for each net.plist unit, checked by each unit's describe (bridge_unit_util.c), which
 * both engine backends run on every bridge segment, so the error names the limit and
 * the fix. */
#ifndef AF_ANE_BRIDGE_GATES_H
#define AF_ANE_BRIDGE_GATES_H
#include "engine/family.h"
#include "ir/ir.h"

#include <stdbool.h>

/* The largest index count whose indices fp16 holds exactly (0 .. 2047). */
#define AF_BRIDGE_MAX_INDEX_RANGE 2048
#define AF_BRIDGE_FPS_MAX_K 1024
#define AF_BRIDGE_FPS_MAX_N 8192
#define AF_BRIDGE_LRN_MAX_C 15

typedef struct {
    const char *wall;   /* the limit's name */
    const char *remedy;
    char detail[300];
} ane_gate_fail;

/* False when family fi's compiler accepts node t (any op: non-bridge ops pass); else
 * true with the refusal in *f. */
bool ane_bridge_gate(const af_tensor *t, const ane_family_info *fi, ane_gate_fail *f);
/* The gate as a net.plist describe step: true when family accepts t, else false with
 * "<limit> on <family>: <detail>. Remedy: <remedy>" in err. */
bool ane_bridge_gate_msg(const af_tensor *t, af_family_id family, char *err, size_t errn);
#endif
