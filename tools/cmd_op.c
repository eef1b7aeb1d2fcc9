#define _POSIX_C_SOURCE 200809L /* mkdir */
/* aneforge op NAME: runs one op-table row, fused or bridge, on .npy inputs.
 *   aneforge op NAME --in SRC=FILE.npy ... [--attr KEY=VALUE ...] [--target T] [--fp32|--fp16] [--out DIR]
 * The node is built with the library's own validation (af_op_build), so a bad shape or
 * attribute fails with the op's own message; results print as a summary and, with
 * --out, are written as DIR/y.npy (float32). */
#include "cli.h"
#include "cli_args.h"
#include "cli_env.h"
#include "mil_npy.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "cli_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CMD "aneforge op"
#define MAX_IN 8

/* The names of op's sources, as --in takes them: the ports column of the op table. */
static const char *source_name(int op, int k, char *buf, size_t n) {
    const char *s = af_op_port(op, k, buf, n);
    return s ? s : "?";
}

/* The entries of the ports column ("x*" and "mask?" count one each). */
static int nports(const af_op_desc *d) {
    if (!*d->ports) return 0;
    int n = 1;
    for (const char *p = d->ports; *p; p++) n += *p == ',';
    return n;
}

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge op NAME --in SRC=FILE.npy ... [--attr KEY=VALUE ...] [--target T] [--fp32|--fp16] [--out DIR]\n"
               "       aneforge op NAME --help     the op's sources and attributes\n\n"
               "Runs one op of the op table (`aneforge ops` lists them), fused or bridge, on .npy inputs\n"
               "(any numeric dtype, read as float), and prints the result's shape and first values.\n"
               "  --in SRC=FILE.npy   a source by its name (NAME --help lists them) or its index\n"
               "  --attr KEY=VALUE    an attribute; lists are comma-separated (--attr axes=0,-1)\n"
               "  --target T          cpu (default), ane-sim[:m1..m5] or ane (ANEFORGE_TARGET also works)\n"
               "  --fp32 | --fp16     numerics (default: fp32 on cpu, fp16 on the engines)\n"
               "  --out DIR           also write the result as DIR/y.npy (float32)\n");
}

/* The op's row: its sources and attributes as the op table (af_op_info) gives them. */
static void op_help(int op) {
    af_op_desc d;
    if (af_op_info(op, &d) != AF_OK) return;
    printf("op %s (kind %s%s): sources", d.name, d.kind, d.bridge ? ", a net.plist bridge op" : "");
    char buf[32];
    const char *nm;
    for (int k = 0; k < nports(&d) && (nm = af_op_port(op, k, buf, sizeof buf)); k++) {
        const char *end = d.ports + strlen(d.ports) - 1; /* the last port's mark: "x*" or "mask?" */
        bool last = k + 1 == nports(&d);
        printf(last && *end == '?' ? " [%s]" : " %s", nm);
        if (last && *end == '*') printf(" %.*s1 ... (any number)", (int)strlen(nm) - 1, nm);
    }
    printf("\nattributes:\n");
    for (int i = 0; i < d.nattrs; i++) {
        const af_op_attr *a = &d.attrs[i];
        printf("  %-14s %-11s %s", a->key, a->type, a->help);
        printf(*a->value ? " (default %s)\n" : "\n", a->value);
    }
    if (!d.nattrs) printf("  (none)\n");
}

/* Checks one --attr's form and key against the op's row; 0, or 2 after printing the
 * problem (the value is checked by af_op_build). */
static int check_attr(const af_op_desc *d, const char *kv) {
    char key[64];
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) return cli_usage_error(CMD, "--attr needs KEY=VALUE, got '%s'", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    for (int i = 0; i < d->nattrs; i++)
        if (!strcmp(d->attrs[i].key, key)) return 0;
    return cli_usage_error(CMD, "op %s has no attribute '%s' (aneforge op %s --help lists them)", d->name, key, d->name);
}

static void summary(const char *name, const float *y, af_shape s) {
    char sh[120];
    int64_t n = af_shape_count(s);
    cli_shape_str(s, sh, sizeof sh);
    printf("%s %s:", name, sh);
    for (int64_t i = 0; i < n && i < 16; i++) printf(" %.6g", y[i]);
    printf("%s\n", n > 16 ? " ..." : "");
}

int cmd_op(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int op = af_op_find(argv[1]);
    if (op < 0) return cli_usage_error(CMD, "unknown op '%s' (aneforge ops lists the op table)", argv[1]);
    af_op_desc desc;
    af_op_info(op, &desc);
    if (desc.leaf) return cli_usage_error(CMD, "%s is a leaf (an input or a constant), not an op to run", argv[1]);
    const char *in_spec[MAX_IN] = { 0 }, *attrs[32], *target = NULL, *outdir = NULL;
    int nattr = 0, nin_given = 0, precision = -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { op_help(op); return 0; }
        if (!strcmp(a, "--fp32") || !strcmp(a, "--fp16")) { precision = a[4] == '1' ? AF_PRECISION_FP16 : AF_PRECISION_FP32; continue; }
        if (!v) return cli_usage_error(CMD, "%s", cli_missing_value_message(usage, a));
        i++;
        if (!strcmp(a, "--target")) target = v;
        else if (!strcmp(a, "--out")) outdir = v;
        else if (!strcmp(a, "--attr")) {
            if (nattr == 32) return cli_usage_error(CMD, "more than 32 --attr");
            attrs[nattr++] = v;
        } else if (!strcmp(a, "--in")) {
            const char *eq = strchr(v, '=');
            char buf[16];
            int k = -1;
            const char *nm;
            for (int j = 0; eq && j < MAX_IN && k < 0 && (nm = af_op_port(op, j, buf, sizeof buf)); j++) {
                char idx[16];
                snprintf(idx, sizeof idx, "%d", j);
                if ((strlen(nm) == (size_t)(eq - v) && !strncmp(v, nm, (size_t)(eq - v))) || (strlen(idx) == (size_t)(eq - v) && !strncmp(v, idx, (size_t)(eq - v)))) k = j;
            }
            if (!eq || k < 0) return cli_usage_error(CMD, "--in '%s': give SRC=FILE.npy with SRC a source of %s (aneforge op %s --help)", v, argv[1], argv[1]);
            if (!in_spec[k]) nin_given++;
            in_spec[k] = eq + 1;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    int nsrc = desc.arity, np = nports(&desc);
    if (nsrc < 0) /* variadic: "x*" takes what was given, an optional last port ("mask?") counts when given */
        nsrc = strchr(desc.ports, '*') ? nin_given : in_spec[np - 1] ? np : np - 1;
    char buf[16];
    if (nsrc < 1) return cli_usage_error(CMD, "%s takes any number of sources: give --in x0=FILE.npy, x1=...", argv[1]);
    for (int k = 0; k < nsrc; k++)
        if (!in_spec[k]) return cli_usage_error(CMD, "%s needs source '%s' (--in %s=FILE.npy)", argv[1], source_name(op, k, buf, sizeof buf), source_name(op, k, buf, sizeof buf));

    af_compile_opts o = { .target = AF_TARGET_CPU };
    char err[400];
    if (target && af_target_parse(target, &o.target, &o.family) != AF_OK)
        return cli_usage_error(CMD, "--target '%s' is not a target: use cpu, ane-sim[:m1..m5] or ane", target);
    if (cli_env_compile(&o, target != NULL, err, sizeof err)) return cli_usage_error(CMD, "%s", err);
    o.precision = AF_PRECISION_DEFAULT; /* the target's own default, said explicitly below */
    o.precision = precision >= 0 ? (af_precision)precision : af_compile_opts_fp16(&o) ? AF_PRECISION_FP16 : AF_PRECISION_FP32;

    int rc = 1;
    float *data[MAX_IN] = { 0 }, *y = NULL;
    af_graph *g = af_graph_new();
    af_model *m = NULL;
    af_tensor *src[MAX_IN] = { 0 }, *out = NULL;
    for (int k = 0; k < nsrc; k++) {
        int rank;
        int64_t dims[AF_MAX_RANK];
        if (mil_npy_read(in_spec[k], "fp32", &data[k], &rank, dims, err, sizeof err)) {
            fprintf(stderr, CMD ": %s\n", err); /* err names the file */
            goto done;
        }
        src[k] = af_input(g, source_name(op, k, buf, sizeof buf), af_target_is_engine(o.target) ? AF_F16 : AF_F32, af_shape_make(rank, dims));
    }
    for (int i = 0; i < nattr; i++)
        if (check_attr(&desc, attrs[i])) { rc = 2; goto done; }
    int bad = -1;
    if (af_op_build(op, nsrc, src, nattr, attrs, &out, &bad)) {
        if (bad >= 0) { cli_usage_error(CMD, "--attr %s", af_error_message()); rc = 2; }
        else fprintf(stderr, CMD ": %s\n", af_error_message());
        goto done;
    }
    m = af_compile(g, nsrc, src, 1, &out, &o);
    if (!m) { fprintf(stderr, CMD ": compiling %s for %s: %s\n", argv[1], target ? target : "cpu", af_error_message()); goto done; }
    af_buffer bi[MAX_IN], bo;
    for (int k = 0; k < nsrc; k++) bi[k] = AF_BUF_F32(data[k], af_shape_count(af_tensor_shape(src[k])));
    int64_t n = af_shape_count(af_tensor_shape(out));
    y = malloc((size_t)n * sizeof *y + sizeof *y);
    bo = AF_BUF_F32(y, n);
    if (!y || af_run(m, bi, &bo) != AF_OK) { fprintf(stderr, CMD ": running %s: %s\n", argv[1], af_error_message()); goto done; }
    summary(argv[1], y, af_tensor_shape(out));
    if (outdir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/y.npy", outdir);
        if (mkdir(outdir, 0777) && errno != EEXIST) { fprintf(stderr, CMD ": cannot create %s: %s\n", outdir, strerror(errno)); goto done; }
        if (af_npy_write(path, y, af_tensor_shape(out).rank, af_tensor_shape(out).dim) != AF_OK) { fprintf(stderr, CMD ": %s\n", af_error_message()); goto done; }
        printf("wrote %s\n", path);
    }
    rc = 0;
done:
    for (int k = 0; k < MAX_IN; k++) free(data[k]);
    free(y);
    af_model_free(m);
    af_graph_free(g);
    return rc;
}
