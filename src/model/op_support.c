/* The op table across the layers, as public calls (aneforge.h): building a row by name
 * with attributes as text, and what each layer provides for it. At the model layer
 * because it asks every layer below (CPU kernels, MIL, net.plist, the engine's walls). */
#include "aneforge.h"
#include "cpu/kernels.h"
#include "engine/walls.h"
#include "ir/ir.h"
#include "mil/opinfo.h"
#include "netplist/netplist.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int af_op_find(const char *name) {
    for (int op = 0; name && op < IR_OP_COUNT; op++)
        if (!strcmp(ir_ops[op].name, name)) return op;
    return -1;
}

const char *af_op_port(int op, int k, char *buf, size_t n) {
    if (op < 0 || op >= IR_OP_COUNT || !buf) return NULL;
    return ir_op_port((ir_op)op, k, buf, n);
}

af_status af_op_build(int op, int nsrc, af_tensor *const *src, int nattrs, const char *const *attrs, af_tensor **out,
                      int *bad_attr) {
    if (bad_attr) *bad_attr = -1;
    if (out) *out = NULL;
    if (!out || op < 0 || op >= IR_OP_COUNT || nsrc < 1 || !src || !src[0] || (nattrs > 0 && !attrs))
        return ir_fail(AF_ERR_INVALID, "af_op_build: op %d, %d sources: want a row of the op table, at least one "
                                       "source and out not NULL", op, nsrc);
    if (ir_ops[op].flags & OPF_LEAF)
        return ir_fail(AF_ERR_INVALID, "af_op_build: %s is a leaf (an input or a constant), not an op", ir_ops[op].name);
    ir_attrs a;
    ir_attrs_default((ir_op)op, &a);
    for (int i = 0; i < nattrs; i++) {
        char key[64], err[200];
        const char *eq = attrs[i] ? strchr(attrs[i], '=') : NULL;
        if (!eq || eq == attrs[i] || (size_t)(eq - attrs[i]) >= sizeof key) {
            if (bad_attr) *bad_attr = i;
            return ir_fail(AF_ERR_INVALID, "attribute '%s' is not KEY=VALUE", attrs[i] ? attrs[i] : "(null)");
        }
        memcpy(key, attrs[i], (size_t)(eq - attrs[i]));
        key[eq - attrs[i]] = 0;
        bool ok = ir_op_attr((ir_op)op, key) != NULL;
        if (!ok) snprintf(err, sizeof err, "op %s has no attribute '%s'", ir_ops[op].name, key);
        else ok = ir_attr_parse((ir_op)op, key, eq + 1, &a, src[0]->shape.rank, err, sizeof err);
        if (!ok) {
            if (bad_attr) *bad_attr = i;
            return ir_fail(AF_ERR_INVALID, "%s", err);
        }
    }
    /* The defaults the op's own builder applies. */
    if (op == IR_OP_DYNAMIC_SLICE && nsrc > 1 && src[1]) src[1]->flags |= IR_TF_EXACT; /* as af_dynamic_slice */
    if ((op == IR_OP_SDPA || op == IR_OP_CAUSAL_ATTENTION || op == IR_OP_CAUSAL_ATTENTION_GRAD) && a.scalar == 0 &&
        src[0]->shape.rank == 4)
        a.scalar = 1.0f / sqrtf((float)src[0]->shape.dim[3]); /* as af_sdpa */
    af_graph *g = src[0]->g;
    *out = ir_build((ir_op)op, nsrc, src, &a);
    if (!*out) {
        const char *e = af_graph_error(g);
        return ir_fail(AF_ERR_INVALID, "%s", e ? e : "af_op_build: the node could not be built");
    }
    return AF_OK;
}

static const char *vjp_text(int op) {
    unsigned f = ir_ops[op].flags;
    if (f & OPF_LEAF) return "leaf";
    if (f & OPF_ZEROGRAD) return "zero";
    if (f & OPF_NODIFF) return "none"; /* made only in backward graphs */
    return af_op_has_vjp(op) ? "yes" : "MISSING";
}

af_status af_op_support_info(int op, af_op_support *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_op_support_info: out is NULL");
    if (op < 0 || op >= IR_OP_COUNT)
        return ir_fail(AF_ERR_INVALID, "af_op_support_info: op %d is not a row of the op table (0..%d)", op, IR_OP_COUNT - 1);
    const bridge_unit_row *unit = bridge_unit_info((ir_op)op);
    *out = (af_op_support){ .cpu_kernel = (ir_ops[op].flags & OPF_LEAF) || cpu_kernels[op],
                            .vjp = vjp_text(op),
                            .mil = mil_op_lowering(op),
                            .bridge_unit = unit ? unit->type : NULL,
                            .engine_restrictions = ane_rules_op_restrictions(op) };
    return AF_OK;
}

const char *af_mil_coreml_op(int i, int *read) {
    bool r = false;
    const char *name = mil_coreml_op(i, &r);
    if (read) *read = name && r;
    return name;
}
