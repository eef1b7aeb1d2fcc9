/* aneforge ops: the op table with what each layer provides for every row. */
#include "cli.h"
#include "cpu/kernels.h"
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

static const char *yes(bool b) { return b ? "yes" : "-"; }

int cmd_ops(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: aneforge ops [--json]\n\nPrints every op-table row: name, arity, family, and whether it has\n"
                   "an fp32 and an fp16 CPU kernel, a VJP, a MIL lowering, a bridge unit, and target restrictions.\n");
            return 0;
        } else {
            fprintf(stderr, "aneforge ops: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (json) printf("[\n");
    else printf("%-20s %-6s %-8s %-5s %-5s %-8s %-5s %-6s %s\n", "op", "arity", "family", "fp32", "fp16", "vjp", "mil", "bridge", "target");
    for (int op = 0; op < AF_OP_COUNT; op++) {
        const af_op_info *o = &af_ops[op];
        bool leaf = o->flags & OPF_LEAF;
        bool k = leaf || cpu_kernels[op];
        const char *vjp = leaf ? "leaf" : (o->flags & OPF_ZEROGRAD) ? "zero" : "-";
        if (json)
            printf("  {\"name\": \"%s\", \"arity\": %d, \"family\": \"%s\", \"fp32\": %s, \"fp16\": %s, \"vjp\": \"%s\", "
                   "\"mil\": null, \"bridge\": null, \"target\": null}%s\n",
                   o->name, o->arity, af_family_name(o->family), k ? "true" : "false", k ? "true" : "false", vjp,
                   op + 1 < AF_OP_COUNT ? "," : "");
        else
            printf("%-20s %-6d %-8s %-5s %-5s %-8s %-5s %-6s %s\n", o->name, o->arity, af_family_name(o->family), yes(k),
                   yes(k), vjp, "-", "-", "-");
    }
    if (json) printf("]\n");
    return 0;
}
