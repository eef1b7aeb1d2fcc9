/* aneforge export --format coreml: a Core ML package from a 'train --save' checkpoint of
 * the mlp or cnn, a llama (checkpoint or llama2.c file), a MIL program, or a built-in
 * MIL program. */
#include "cli.h"
#include "cli_args.h"
#include "aneforge.h"
#include "aneforge_coreml.h"
#include "llama_ckpt.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge export", fmt, a); }

/* A llama (a 'train llama --save' checkpoint or a llama2.c model file): the stateless
 * forward over seq token ids (fp16 inputs: exact only up to 2048), logits [1, seq*vocab]. */
static af_status from_llama(const char *path, int seq, int batch, const af_coreml_opts *o, const char *out) {
    af_llama_weights *w = llama_model_load(path);
    if (!w) return af_fail(AF_ERR_INVALID, "%s", af_error_message());
    const af_llama_config *c = af_llama_weights_config(w);
    af_status st = AF_OK;
    if (c->vocab_size > 2048)
        st = af_fail(AF_ERR_UNSUPPORTED, "%s: vocabulary %d: the package's fp16 token input holds ids up to 2048 exactly", path, c->vocab_size);
    else if (seq > c->seq_len)
        st = af_fail(AF_ERR_INVALID, "--seq %d is longer than the model's %d", seq, c->seq_len);
    if (!st) {
        af_net net = af_net_llama(w, seq ? seq : c->seq_len);
        st = net.forward ? af_coreml_export_net(&net, batch, NULL, o, out) : af_fail(AF_ERR_INVALID, "%s", af_error_message());
        af_net_free(&net);
    }
    af_llama_weights_free(w);
    return st;
}

/* A llama as a decode program with its KV cache in Core ML states (iOS 18). */
static af_status from_llama_kv(const char *path, int max_seq, const af_coreml_opts *o, const char *out) {
    af_llama_weights *w = llama_model_load(path);
    if (!w) return af_fail(AF_ERR_INVALID, "%s", af_error_message());
    af_status st = af_coreml_export_llama_kv(w, max_seq, o, out);
    af_llama_weights_free(w);
    return st;
}

/* The checkpoint's model rebuilt, its trained weights read back, and exported. */
static af_status from_ckpt(const char *path, int seq, int batch, const af_coreml_opts *o, const char *out) {
    af_checkpoint *c = NULL;
    af_status st = af_checkpoint_load(path, &c);
    if (st || !af_checkpoint_get_str(c, "cli.model")) { /* not a 'train mlp|cnn' checkpoint: a llama? */
        af_checkpoint_free(c);
        return from_llama(path, seq, batch, o, out);
    }
    const char *model = af_checkpoint_get_str(c, "cli.model"), *data = af_checkpoint_get_str(c, "cli.data");
    if (!model || !data || (strcmp(model, "mlp") && strcmp(model, "cnn")) ||
        (strcmp(data, "mnist") && strcmp(data, "fashion") && strcmp(data, "cifar10"))) {
        af_checkpoint_free(c);
        return af_fail(AF_ERR_INVALID, "%s is not a 'train mlp|cnn --save' checkpoint (for a llama checkpoint use --format llama2c)", path);
    }
    bool cifar = !strcmp(data, "cifar10");
    af_shape sample = cifar ? AF_SHAPE(3, 32, 32) : AF_SHAPE(1, 28, 28);
    af_net net = !strcmp(model, "mlp") ? af_net_mlp(sample, 128, 10, 1) : af_net_cnn(sample, 10, 1);
    af_net_set_input_norm(&net, !strcmp(data, "mnist") ? 0.1307f : !strcmp(data, "fashion") ? 0.2860f : 0.4734f,
                          !strcmp(data, "mnist") ? 0.3081f : !strcmp(data, "fashion") ? 0.3530f : 0.2516f);
    af_train_opts to = af_train_defaults();
    af_trainer *t = af_trainer_new(&net, &to);
    st = t ? af_trainer_import(t, c) : af_fail(AF_ERR_INVALID, "%s", af_error_message());
    af_checkpoint_free(c);
    int n = t ? af_trainer_num_params(t) : 0;
    float **w = calloc((size_t)n + 1, sizeof *w);
    if (!st && !w) st = AF_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        af_tensor *p = af_trainer_param(t, i);
        int64_t k = 1;
        af_shape s = af_tensor_shape(p);
        for (int d = 0; d < s.rank; d++) k *= s.dim[d];
        if (!(w[i] = malloc(sizeof(float) * (size_t)k))) st = AF_ERR_NOMEM;
        else st = af_trainer_read_param(t, i, w[i]);
    }
    if (!st) st = af_coreml_export_net(&net, batch, (const float *const *)w, o, out);
    for (int i = 0; w && i < n; i++) free(w[i]);
    free(w);
    af_trainer_free(t);
    af_net_free(&net);
    return st;
}

#define MAX_CLASSES 65536

static char *dup(const char *s) {
    char *p = malloc(strlen(s) + 1);
    return p ? strcpy(p, s) : NULL;
}

/* --classes A..B: the integer labels A, A+1, ..., B (int64 labels in the package). */
static int classes_range(const char *v, char ***labels, int *n) {
    long a, b;
    const char *dots = strstr(v, "..");
    char first[32];
    if (!dots || dots == v || (size_t)(dots - v) >= sizeof first) return -1;
    memcpy(first, v, (size_t)(dots - v));
    first[dots - v] = 0;
    if (cli_parse_long(first, -(1L << 30), 1L << 30, &a) || cli_parse_long(dots + 2, -(1L << 30), 1L << 30, &b) || b < a ||
        b - a >= MAX_CLASSES)
        return -1;
    *n = (int)(b - a + 1);
    *labels = calloc((size_t)*n, sizeof **labels);
    for (int i = 0; *labels && i < *n; i++) {
        char t[32];
        snprintf(t, sizeof t, "%ld", a + i);
        if (!((*labels)[i] = dup(t))) return -1;
    }
    return *labels ? 0 : -1;
}

/* --labels FILE: one label a line (blank lines skipped, a trailing \r dropped). */
static int labels_file(const char *path, char ***labels, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "aneforge export: cannot open labels file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    *n = 0;
    *labels = calloc(MAX_CLASSES, sizeof **labels);
    int rc = *labels ? 0 : -1;
    while (!rc && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (*n == MAX_CLASSES) {
            fprintf(stderr, "aneforge export: %s has more than %d labels\n", path, MAX_CLASSES);
            rc = -1;
        } else if (!((*labels)[(*n)++] = dup(line))) rc = -1;
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "aneforge export: cannot read %s\n", path);
        rc = -1;
    }
    if (!rc && !*n) {
        fprintf(stderr, "aneforge export: %s holds no labels (one a line)\n", path);
        rc = -1;
    }
    fclose(f);
    return rc;
}

static void free_labels(char **labels, int n) {
    for (int i = 0; labels && i < n; i++) free(labels[i]);
    free(labels);
}

static int export_main(int argc, char **argv, char ***labels, int *nlabels);

int cmd_export_coreml(int argc, char **argv) {
    char **labels = NULL;
    int nlabels = 0;
    int rc = export_main(argc, argv, &labels, &nlabels);
    free_labels(labels, nlabels);
    return rc;
}

static int export_main(int argc, char **argv, char ***labels, int *nlabels) {
    const char *ckpt = NULL, *mil = NULL, *sample = NULL, *out = NULL;
    long batch = 1, seq = 0, max_seq = 0;
    bool kv = false;
    af_coreml_opts o = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (k[0] != '-') return bad("unexpected argument '%s'", k);
        if (!strcmp(k, "--kv-cache")) { kv = true; continue; }
        if (!v) return bad("%s needs a value", k);
        i++;
        if (!strcmp(k, "--format")) continue;
        else if (!strcmp(k, "--ckpt")) ckpt = v;
        else if (!strcmp(k, "--mil")) mil = v;
        else if (!strcmp(k, "--sample")) sample = v;
        else if (!strcmp(k, "-o") || !strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--batch")) { if (cli_parse_long(v, 1, 65536, &batch)) return bad("--batch is 1..65536, not '%s'", v); }
        else if (!strcmp(k, "--max-seq")) { if (cli_parse_long(v, 1, 1 << 20, &max_seq)) return bad("--max-seq is a positive length, not '%s'", v); }
        else if (!strcmp(k, "--seq")) { if (cli_parse_long(v, 1, 1 << 20, &seq)) return bad("--seq is a positive length, not '%s'", v); }
        else if (!strcmp(k, "--ios")) {
            long ios;
            if (cli_parse_long(v, 15, 18, &ios))
                return bad("--ios (the deployment target) is 15 to 18 (iOS 15..18 / macOS 12..15), not '%s'", v);
            o.ios = (int)ios;
        } else if (!strcmp(k, "--author")) o.author = v;
        else if (!strcmp(k, "--license")) o.license = v;
        else if (!strcmp(k, "--model-version")) o.version = v;
        else if (!strcmp(k, "--description")) o.description = v;
        else if (!strcmp(k, "--precision")) {
            if (strcmp(v, "fp16") && strcmp(v, "fp32")) return bad("--precision is fp16 or fp32, not '%s'", v);
            o.precision = !strcmp(v, "fp32") ? 32 : 16;
        } else if (!strcmp(k, "--classes") || !strcmp(k, "--labels")) {
            if (*labels) return bad("%s", "give one of --classes and --labels, once");
            if (!strcmp(k, "--classes") && classes_range(v, labels, nlabels))
                return bad("--classes is a range of integer labels such as 0..9, not '%s'", v);
            if (!strcmp(k, "--labels") && labels_file(v, labels, nlabels)) return 2;
            o.nclasses = *nlabels;
            o.class_labels = (const char *const *)*labels;
        } else return bad("unknown option '%s'", k);
    }
    if (!out) return bad("%s", "-o is required: the package to write, e.g. Model.mlpackage");
    if (!!ckpt + !!mil + !!sample != 1) return bad("%s", "give exactly one of --ckpt, --mil and --sample");
    if (kv && !ckpt) return bad("%s", "--kv-cache exports a llama: give --ckpt (a 'train llama --save' checkpoint or a llama2.c model file)");
    if (!kv && max_seq) return bad("%s", "--max-seq is the KV cache's length: it goes with --kv-cache (the stateless forward takes --seq)");
    af_status st;
    if (kv) st = from_llama_kv(ckpt, (int)max_seq, &o, out);
    else if (ckpt) st = from_ckpt(ckpt, (int)seq, (int)batch, &o, out);
    else if (mil) {
        af_graph *g;
        int nin, nout;
        af_tensor **in, **res;
        struct stat sb; /* a package (folder) or .mlmodel is imported, else MIL text */
        size_t k = strlen(mil);
        bool pkg = (!stat(mil, &sb) && S_ISDIR(sb.st_mode)) || (k > 8 && !strcmp(mil + k - 8, ".mlmodel"));
        st = pkg ? af_coreml_load(mil, &g, &nin, &in, &nout, &res) : af_mil_load(mil, NULL, &g, &nin, &in, &nout, &res);
        if (!st) st = af_coreml_export(g, nin, in, nout, res, &o, out);
        af_graph_free(g);
    } else {
        af_mil_sample s = { 0 };
        st = af_mil_sample_build(sample, &s);
        if (!st) st = af_coreml_export(s.g, s.nin, s.in, s.nout, s.out, &o, out);
        af_graph_free(s.g);
    }
    if (st) {
        fprintf(stderr, "aneforge export: %s\n", af_error_message());
        return 1;
    }
    printf("wrote %s (Manifest.json, Data/com.apple.CoreML/model.mlmodel, Data/com.apple.CoreML/weights/weight.bin)\n", out);
    return 0;
}
