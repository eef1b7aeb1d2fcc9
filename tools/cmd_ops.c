/* aneforge ops: the op table with what each layer provides for every row. */
#include "cli.h"
#include "cli_out.h"
#include "aneforge.h"
#include "netplist/netplist.h"
#include "mil/opinfo.h"
#include "engine/walls.h"
#include "cpu/kernels.h"
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

static const char *vjp_text(int op) {
    unsigned f = ir_ops[op].flags;
    if (f & OPF_LEAF) return "leaf";
    if (f & OPF_ZEROGRAD) return "zero";
    if (f & OPF_NODIFF) return "none"; /* made only in backward graphs */
    return af_op_has_vjp(op) ? "yes" : "MISSING";
}

/* JSON string or null (the CLI's shared writer, cli_out.h). */
static void json_str(const char *s) { cli_json_str(stdout, s); }

/* The row's sources and attributes (af_op_info, as `aneforge op NAME --help` shows them). */
static void json_row(int op) {
    af_op_desc d;
    if (af_op_info(op, &d) != AF_OK) return;
    printf(", \"ports\": ");
    json_str(d.ports);
    printf(", \"attrs\": [");
    for (int i = 0; i < d.nattrs; i++) {
        printf("%s{\"key\": ", i ? ", " : "");
        json_str(d.attrs[i].key);
        printf(", \"type\": ");
        json_str(d.attrs[i].type);
        printf(", \"default\": ");
        json_str(*d.attrs[i].value ? d.attrs[i].value : NULL);
        printf(", \"help\": ");
        json_str(d.attrs[i].help);
        putchar('}');
    }
    putchar(']');
}

/* Core ML's MIL op set and whether `aneforge mil run` reads each op. */
static int list_mil(bool markdown) {
    bool read;
    int yes = 0, all = 0;
    if (markdown) printf("| MIL op | read |\n|---|---|\n");
    for (int i = 0; mil_coreml_op(i, &read); i++, all++) {
        yes += read;
        if (markdown) printf("| `%s` | %s |\n", mil_coreml_op(i, NULL), read ? "yes" : "no");
        else printf("%-34s %s\n", mil_coreml_op(i, NULL), read ? "yes" : "-");
    }
    if (!markdown) printf("%d of Core ML's %d MIL ops are read by `aneforge mil run`\n", yes, all);
    return 0;
}

int cmd_ops(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mil")) return list_mil(i + 1 < argc && !strcmp(argv[i + 1], "--markdown"));
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: aneforge ops [--json]\n       aneforge ops --mil [--markdown]\n\n"
                   "Prints every op-table row: name, arity, kind, whether it has an fp32\n"
                   "and an fp16 CPU kernel, its VJP (yes, zero = piecewise constant, leaf), its MIL lowering,\n"
                   "its bridge unit, and the Neural Engine target restrictions; --json adds its sources\n"
                   "(ports) and attributes, as `aneforge op NAME --help` shows them.\n"
                   "--mil lists Core ML's MIL op set (iOS 15..18, from coremltools' op definitions) and\n"
                   "whether `aneforge mil run` reads each op.\n");
            return 0;
        } else {
            fprintf(stderr, "aneforge ops: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (json) printf("[\n");
    else printf("%-19s %-5s %-7s %-4s %-4s %-5s %-22s %-26s %s\n", "op", "arity", "kind", "fp32", "fp16", "vjp", "mil", "bridge", "target restrictions");
    for (int op = 0; op < IR_OP_COUNT; op++) {
        const ir_op_info *o = &ir_ops[op];
        bool k = (o->flags & OPF_LEAF) || cpu_kernels[op];
        const char *mil = mil_op_lowering(op), *rule = ane_rules_op_restrictions(op);
        const bridge_unit_row *unit = bridge_unit_info((ir_op)op); /* the net.plist unit Type */
        const char *bridge = unit ? unit->type : NULL;
        if (json) {
            printf("  {\"name\": \"%s\", \"arity\": %d, \"kind\": \"%s\", \"fp32\": %s, \"fp16\": %s, \"vjp\": \"%s\", \"mil\": ",
                   o->name, o->arity, ir_op_kind_name(o->kind), k ? "true" : "false", k ? "true" : "false", vjp_text(op));
            json_str(mil);
            printf(", \"bridge\": ");
            json_str(bridge);
            printf(", \"target\": ");
            json_str(rule);
            json_row(op);
            printf("}%s\n", op + 1 < IR_OP_COUNT ? "," : "");
        } else {
            printf("%-19s %-5d %-7s %-4s %-4s %-5s %-22s %-26s %s\n", o->name, o->arity, ir_op_kind_name(o->kind), k ? "yes" : "-",
                   k ? "yes" : "-", vjp_text(op), mil ? mil : "-", bridge ? bridge : "-", rule ? rule : "-");
        }
    }
    if (json) printf("]\n");
    return 0;
}
