/* aneforge ops: the op table with what each layer provides for every row. */
#include "cli.h"
#include "cli_out.h"
#include "aneforge.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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
    int read;
    int yes = 0, all = 0;
    if (markdown) printf("| MIL op | read |\n|---|---|\n");
    for (int i = 0; af_mil_coreml_op(i, &read); i++, all++) {
        yes += read;
        if (markdown) printf("| `%s` | %s |\n", af_mil_coreml_op(i, NULL), read ? "yes" : "no");
        else printf("%-34s %s\n", af_mil_coreml_op(i, NULL), read ? "yes" : "-");
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
    for (int op = 0; op < af_op_count(); op++) {
        af_op_desc o;
        af_op_support sup;
        if (af_op_info(op, &o) || af_op_support_info(op, &sup)) continue;
        bool k = sup.cpu_kernel;
        const char *mil = sup.mil, *rule = sup.engine_restrictions;
        const char *bridge = sup.bridge_unit; /* the net.plist unit Type */
        if (json) {
            printf("  {\"name\": \"%s\", \"arity\": %d, \"kind\": \"%s\", \"fp32\": %s, \"fp16\": %s, \"vjp\": \"%s\", \"mil\": ",
                   o.name, o.arity, o.kind, k ? "true" : "false", k ? "true" : "false", sup.vjp);
            json_str(mil);
            printf(", \"bridge\": ");
            json_str(bridge);
            printf(", \"target\": ");
            json_str(rule);
            json_row(op);
            printf("}%s\n", op + 1 < af_op_count() ? "," : "");
        } else {
            printf("%-19s %-5d %-7s %-4s %-4s %-5s %-22s %-26s %s\n", o.name, o.arity, o.kind, k ? "yes" : "-",
                   k ? "yes" : "-", sup.vjp, mil ? mil : "-", bridge ? bridge : "-", rule ? rule : "-");
        }
    }
    if (json) printf("]\n");
    return 0;
}
