/* The op table's ports and attributes (ops.def): every row's names are consistent (one
 * port per source, unique keys, defaults that parse), af_op_info gives the row, and
 * `aneforge op NAME --help` and `aneforge ops --json` show exactly the row's names for
 * every op; attribute values parse to the ir_attrs fields a hand-written reference says. */
#define _POSIX_C_SOURCE 200809L
#include "../tools/cmd_op.c"
#include "ir/ir.h" /* the op table itself, which the CLI reads through af_op_info */
#include "../tools/cmd_ops.c"
#include "../tools/cli_args.c"
#include "../tools/cli_env.c"
#include "../tools/mil_npy.c"
#include "../tools/cli_file.c"
#include "../tools/cli_out.c"

#include "support/check.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* What fn(argc, argv) printed on stdout (malloc'd), and its exit code in *rc. */
static char *captured(int (*fn)(int, char **), int argc, char **argv, const char *path, int *rc) {
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0) return NULL;
    dup2(fd, 1);
    close(fd);
    *rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    size_t len;
    char *s = test_read_file(path, &len);
    unlink(path);
    return s;
}

/* The row's port names split here, independently of ir_op_port: marks stripped. */
static int split_ports(const char *ports, char names[][32], char *mark) {
    int n = 0;
    *mark = 0;
    for (const char *p = ports; *p && n < 8;) {
        size_t len = strcspn(p, ",");
        snprintf(names[n], 32, "%.*s", (int)len, p);
        size_t l = strlen(names[n]);
        if (l && (names[n][l - 1] == '*' || names[n][l - 1] == '?')) *mark = names[n][l - 1], names[n][l - 1] = 0;
        n++;
        p += len + (p[len] == ',');
    }
    return n;
}

static bool is_word(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_') return false;
    return true;
}

static void check_row(int op) {
    const ir_op_info *o = &ir_ops[op];
    char names[8][32], mark;
    int np = split_ports(o->ports, names, &mark);
    if (o->flags & OPF_LEAF) {
        CHECK(np == 0 && !o->attrs, "%s: a leaf has no ports and no attributes", o->name);
        return;
    }
    if (o->arity >= 0) CHECK(np == o->arity && !mark, "%s: %d ports '%s' for arity %d", o->name, np, o->ports, o->arity);
    else CHECK(np >= 1 && mark, "%s: a variadic op's last port is 'x*' or 'name?', got '%s'", o->name, o->ports);
    CHECK(ir_op_nports((ir_op)op) == np, "%s: ir_op_nports %d, the row has %d", o->name, ir_op_nports((ir_op)op), np);
    for (int i = 0; i < np; i++) {
        CHECK(is_word(names[i]), "%s: port %d '%s' is not a lower-case word", o->name, i, names[i]);
        for (int j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]), "%s: port '%s' twice", o->name, names[i]);
        char buf[32];
        const char *got = ir_op_port((ir_op)op, i, buf, sizeof buf);
        if (mark == '*' && i == np - 1) CHECK(got && !strncmp(got, names[i], strlen(names[i])) && got[strlen(names[i])] == '0', "%s: variadic port %d is %s", o->name, i, got ? got : "NULL");
        else CHECK(got && !strcmp(got, names[i]), "%s: ir_op_port %d is %s, the row says %s", o->name, i, got ? got : "NULL", names[i]);
    }
    af_op_desc d;
    CHECK(af_op_info(op, &d) == AF_OK && !strcmp(d.name, o->name) && !strcmp(d.ports, o->ports) && d.arity == o->arity,
          "%s: af_op_info gives the row", o->name);
    int na = 0;
    for (const ir_attr_def *a = o->attrs; a && a->key; a++, na++) {
        CHECK(is_word(a->key) && *a->help, "%s: attribute %d has a key and a help text", o->name, na);
        for (const ir_attr_def *b = o->attrs; b != a; b++) CHECK(strcmp(a->key, b->key), "%s: attribute '%s' twice", o->name, a->key);
        ir_attrs at = { 0 };
        char err[200] = "";
        if (*a->def) CHECK(ir_attr_parse((ir_op)op, a->key, a->def, &at, 4, err, sizeof err), "%s: the default %s=%s: %s", o->name, a->key, a->def, err);
        CHECK(ir_op_attr((ir_op)op, a->key) == a, "%s: ir_op_attr finds '%s'", o->name, a->key);
        if (na < d.nattrs) CHECK(!strcmp(d.attrs[na].key, a->key) && !strcmp(d.attrs[na].value, a->def), "%s: af_op_info's attribute %d", o->name, na);
    }
    CHECK(na <= AF_OP_MAX_ATTRS && d.nattrs == na, "%s: %d attributes, af_op_info gives %d (max %d)", o->name, na, d.nattrs, AF_OP_MAX_ATTRS);
}

/* `aneforge op NAME --help` names the row's ports in order and lists exactly its attributes. */
static void check_help(int op, const char *tmp) {
    const ir_op_info *o = &ir_ops[op];
    if (o->flags & OPF_LEAF) return;
    char *argv[] = { "op", (char *)o->name, "--help" };
    int rc = -1;
    char *out = captured(cmd_op, 3, argv, tmp, &rc);
    CHECK(out && rc == 0, "op %s --help: exit code %d", o->name, rc);
    if (!out) return;
    char names[8][32], mark;
    int np = split_ports(o->ports, names, &mark);
    const char *line = strstr(out, "sources");
    const char *p = line ? line + 7 : out;
    for (int i = 0; i < np && line; i++) {
        const char *at = strstr(p, names[i]);
        CHECK(at && at < strchr(line, '\n'), "op %s --help: source '%s' (in order) on the sources line", o->name, names[i]);
        p = at ? at + strlen(names[i]) : p;
    }
    CHECK(line != NULL, "op %s --help: a sources line", o->name);
    /* attribute lines: "  KEY  TYPE  HELP" after "attributes:" */
    const char *attrs = strstr(out, "attributes:\n");
    int shown = 0;
    const ir_attr_def *a = o->attrs;
    for (const char *l = attrs ? attrs + 12 : NULL; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "  (none)", 8)) break;
        char key[64] = "";
        if (sscanf(l, " %63s", key) != 1) break;
        bool want = a && a->key && !strcmp(key, a->key);
        CHECK(want, "op %s --help: shows attribute '%s' where the row has '%s'", o->name, key, a && a->key ? a->key : "(no more)");
        if (a && a->key && *a->def) {
            char def[80];
            snprintf(def, sizeof def, "(default %s)", a->def);
            CHECK(strstr(l, def) && strstr(l, def) < strchr(l, '\n'), "op %s --help: '%s' shows %s", o->name, key, def);
        }
        if (a && a->key) a++;
        shown++;
    }
    CHECK(attrs && !(a && a->key), "op %s --help: every attribute of the row is shown (%d shown)", o->name, shown);
    free(out);
}

/* Values parse into the fields a hand-written reference names. */
static void check_parse(void) {
    ir_attrs a;
    char err[200];
    ir_attrs_default(IR_OP_REDUCE_SUM, &a);
    CHECK(ir_attr_parse(IR_OP_REDUCE_SUM, "axes", "0,-1", &a, 3, err, sizeof err) && a.ints[0] == 5 && a.naxes == 2, "axes 0,-1 of rank 3: mask 0b101");
    CHECK(!ir_attr_parse(IR_OP_REDUCE_SUM, "axes", "3", &a, 3, err, sizeof err) && strstr(err, "axes: axis 3 is out of range for rank 3"), "axis 3 of rank 3: %s", err);
    ir_attrs_default(IR_OP_SLICE_BY_SIZE, &a);
    bool all = true;
    for (int i = 0; i < AF_MAX_RANK; i++) all = all && a.sizes[i] == -1;
    CHECK(all, "slice_by_size: sizes default to -1 (to the end) on every axis");
    CHECK(ir_attr_parse(IR_OP_SLICE_BY_SIZE, "size", "2", &a, 3, err, sizeof err) && a.sizes[0] == 2 && a.sizes[1] == -1, "size=2: the rest to the end");
    ir_attrs_default(IR_OP_CONV, &a);
    CHECK(a.stride[0] == 1 && a.stride[1] == 1 && a.dilation[0] == 1 && a.dilation[1] == 1 && a.groups == 1 && a.pad[0] == 0, "conv defaults");
    CHECK(!ir_attr_parse(IR_OP_CONV, "stride", "3", &a, 4, err, sizeof err) && !strcmp(err, "stride takes two integers h,w, got '3'"), "stride=3: %s", err);
    ir_attrs_default(IR_OP_LRN, &a);
    CHECK(a.beta == 0.75f && a.eps == 1.0f && a.scalar == 0, "lrn defaults: beta 0.75, k 1");
    ir_attrs_default(IR_OP_DYNAMIC_SLICE, &a);
    CHECK(a.sizes[0] == 1, "dynamic_slice: size 1");
    ir_attrs_default(IR_OP_PIXEL_SHUFFLE, &a);
    CHECK(a.kernel[0] == 1 && a.kernel[1] == 1, "rearrange factors 1");
    CHECK(ir_attr_parse(IR_OP_TOPK, "k", "5", &a, 2, err, sizeof err) && a.ints[3] == 5, "top_k k in ints[3]");
    CHECK(ir_attr_parse(IR_OP_SCALED_ELEMENTWISE, "op", "max", &a, 2, err, sizeof err) && a.mode == AF_SEW_MAX, "op=max");
    CHECK(!ir_attr_parse(IR_OP_CAST, "to", "int8", &a, 2, err, sizeof err) && !strcmp(err, "to takes fp16 or fp32, not 'int8'"), "to=int8: %s", err);
    CHECK(!ir_attr_parse(IR_OP_LRN, "beta", "1e999", &a, 2, err, sizeof err) && strstr(err, "is not a number"), "beta=1e999: %s", err);
    CHECK(!ir_attr_parse(IR_OP_TRANSPOSE, "shape", "2,3", &a, 2, err, sizeof err) && !strcmp(err, "op transpose has no attribute 'shape'"),
          "transpose reads perm only: %s", err);
    CHECK(ir_op_attr(IR_OP_CONV_WEIGHT_GRAD, "kernel") && !ir_op_attr(IR_OP_CONV_TRANSPOSE, "groups"), "per-op lists: conv_weight_grad's kernel, no groups on conv_transpose");
    af_op_desc d;
    CHECK(af_op_info(-1, &d) == AF_ERR_INVALID && strstr(af_error_message(), "op -1 is not a row"), "af_op_info(-1): %s", af_error_message());
    CHECK(af_op_info(IR_OP_COUNT, &d) == AF_ERR_INVALID, "af_op_info past the table");
}

/* `aneforge ops --json` carries each row's ports and attribute keys. */
static void check_json(const char *tmp) {
    char *argv[] = { "ops", "--json" };
    int rc = -1;
    char *out = captured(cmd_ops, 2, argv, tmp, &rc);
    CHECK(out && rc == 0, "ops --json: exit code %d", rc);
    if (!out) return;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        char want[160];
        snprintf(want, sizeof want, "{\"name\": \"%s\",", ir_ops[op].name);
        const char *row = strstr(out, want), *end = row ? strchr(row, '\n') : NULL;
        CHECK(row && end, "ops --json: a row for %s", ir_ops[op].name);
        if (!row || !end) continue;
        snprintf(want, sizeof want, "\"ports\": \"%s\"", ir_ops[op].ports);
        CHECK(strstr(row, want) && strstr(row, want) < end, "ops --json %s: %s", ir_ops[op].name, want);
        for (const ir_attr_def *a = ir_ops[op].attrs; a && a->key; a++) {
            snprintf(want, sizeof want, "{\"key\": \"%s\"", a->key);
            CHECK(strstr(row, want) && strstr(row, want) < end, "ops --json %s: attribute %s", ir_ops[op].name, a->key);
        }
    }
    free(out);
}

int main(void) {
    char tmp[] = "/tmp/aneforge_op_table_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return check_finish("op_table");
    close(fd);
    for (int op = 0; op < IR_OP_COUNT; op++) {
        check_row(op);
        check_help(op, tmp);
    }
    check_parse();
    check_json(tmp);
    unlink(tmp);
    return check_finish("op_table");
}
