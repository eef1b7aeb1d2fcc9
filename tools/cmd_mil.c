/* aneforge mil: write Apple MIL programs and run them on the CPU.
 *   mil emit NAME --out DIR        writes DIR/model.mil and DIR/weights/weight.bin
 *   mil run MODEL.mil [--weights DIR] [--function NAME] --in NAME=FILE.npy ... --out DIR [--fp32]
 *   mil check MODEL.mil [--weights DIR] [--function NAME]
 * `run` executes with the engine's fp16 numerics (every op's result rounded to fp16)
 * unless --fp32; inputs are matched to function arguments by name, and each returned
 * value is written as DIR/<name>.npy with its declared dtype (bool, int8 ... int32, fp16, fp32). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "cli.h"
#include "aneforge.h"
#include "aneforge_coreml.h"
#include "aneforge_llama.h"
#include "cli_file.h"
#include "mil_npy.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge mil emit NAME --out DIR\n"
               "       aneforge mil emit --llama-kernel KERNEL [--dim D --hidden F --heads H --kv-heads K --seq S --batch B\n"
               "                         --vocab-block V] --out DIR\n"
               "       aneforge mil run MODEL.mil [--weights DIR] [--function NAME] --in NAME=FILE.npy ... --out DIR [--fp32]\n"
               "       aneforge mil check MODEL.mil [--weights DIR] [--function NAME]\n\n"
               "emit   writes a built-in program as DIR/model.mil and DIR/weights/weight.bin;\n"
               "       NAME is one of:");
    for (int i = 0; af_mil_sample_name(i); i++) fprintf(f, " %s", af_mil_sample_name(i));
    fprintf(f, " (mlp-step is a whole training step:\n"
               "       forward, cross-entropy, backward and the SGD update)\n"
               "--llama-kernel writes one of seed 002's transformer kernels as the pipeline plan compiles it\n"
               "       (fwdAttn, fwdFFN, ffnBwd, sdpaBwd1, sdpaBwd2, qkvBwd, clsFwd, clsBwd; fp16 [B, C, 1, S] ports,\n"
               "       every weight an argument) for the given shapes (default stories15m's: dim 288, hidden 768,\n"
               "       6 heads, 6 KV heads, seq 256, batch 1, classifier block 16000 rows)\n"
               "       MODEL may also be a Core ML package (Model.mlpackage) or its model.mlmodel: an mlProgram\n"
               "       (docs/coreml.md); 'aneforge run' is the same as 'mil run'\n"
               "run    parses a MIL program (program(1)..(1.5), opsets ios15..ios18 and CoreML5..CoreML9) and its weight files,\n"
               "       feeds each function argument from a NumPy .npy file, runs it on the CPU with the\n"
               "       engine's fp16 numerics (--fp32: in fp32) and writes every returned value as\n"
               "       DIR/<name>.npy with its declared dtype (bool, int8, uint8, int16, uint16, int32, fp16, fp32;\n"
               "       inputs may be any numeric .npy whose values fit). BLOBFILE paths @model_path/weights/... are\n"
               "       looked up in --weights (default: the weights/ folder beside MODEL.mil). --function runs that\n"
               "       function of a program with several (default: main)\n"
               "check  parses a program and lists its arguments and results\n");
}

static void shape_text(af_shape s, char *buf, size_t n) { cli_shape_str(s, buf, n); }

/* A read program as `mil run` and `mil check` use it: the arrays are filled from the
 * public accessors (af_mil_arg ...) and owned here; the tensors and strings belong to p. */
typedef struct {
    af_mil_program *p;
    af_graph *g;
    int nin, nout, nguards;
    af_tensor **in, **out, **guard_idx;
    const char **in_names, **out_names, **in_types, **out_types;
} cli_mil;

static void module_free(cli_mil *m) {
    af_mil_close(m->p);
    free(m->in), free(m->out), free(m->guard_idx);
    free(m->in_names), free(m->out_names), free(m->in_types), free(m->out_types);
    memset(m, 0, sizeof *m);
}

/* A Core ML package (a folder) or model file (.mlmodel) rather than MIL text. */
static bool is_coreml(const char *path) {
    struct stat sb;
    size_t n = strlen(path);
    return (!stat(path, &sb) && S_ISDIR(sb.st_mode)) || (n > 8 && !strcmp(path + n - 8, ".mlmodel"));
}

/* Reads path (MIL text, or a Core ML package); prints the error and returns 1 on failure. */
static int load(const char *path, const char *weights, const char *function, cli_mil *m) {
    memset(m, 0, sizeof *m);
    if (is_coreml(path) && weights) {
        fprintf(stderr, "aneforge mil: --weights does not apply to a Core ML package (its weights are inside)\n");
        return 1;
    }
    af_status st = is_coreml(path) ? af_coreml_open(path, function, &m->p) : af_mil_open(path, weights, function, &m->p);
    if (st) { fprintf(stderr, "aneforge mil: %s\n", af_error_message()); return 1; }
    m->g = af_mil_graph(m->p);
    m->nin = af_mil_num_args(m->p), m->nout = af_mil_num_results(m->p), m->nguards = af_mil_num_index_checks(m->p);
    size_t ni = (size_t)m->nin + 1, no = (size_t)m->nout + 1;
    m->in = calloc(ni, sizeof *m->in), m->in_names = calloc(ni, sizeof(char *)), m->in_types = calloc(ni, sizeof(char *));
    m->out = calloc(no, sizeof *m->out), m->out_names = calloc(no, sizeof(char *)), m->out_types = calloc(no, sizeof(char *));
    m->guard_idx = calloc((size_t)m->nguards + 1, sizeof *m->guard_idx);
    if (!m->in || !m->in_names || !m->in_types || !m->out || !m->out_names || !m->out_types || !m->guard_idx) {
        fprintf(stderr, "aneforge mil: out of memory\n");
        module_free(m);
        return 1;
    }
    for (int i = 0; i < m->nin; i++) m->in[i] = af_mil_arg(m->p, i, &m->in_names[i], &m->in_types[i]);
    for (int i = 0; i < m->nout; i++) m->out[i] = af_mil_result(m->p, i, &m->out_names[i], &m->out_types[i]);
    for (int i = 0; i < m->nguards; i++) m->guard_idx[i] = af_mil_index_tensor(m->p, i);
    return 0;
}

/* --dim and friends: a positive int, or a usage error. */
static int shape_flag(const char *k, const char *v, af_llama_kernel_shape *sh) {
    static const struct { const char *flag; size_t off; } flags[] = {
        { "--dim", offsetof(af_llama_kernel_shape, dim) },       { "--hidden", offsetof(af_llama_kernel_shape, hidden) },
        { "--heads", offsetof(af_llama_kernel_shape, heads) },   { "--kv-heads", offsetof(af_llama_kernel_shape, kv_heads) },
        { "--seq", offsetof(af_llama_kernel_shape, seq) },       { "--batch", offsetof(af_llama_kernel_shape, batch) },
        { "--vocab-block", offsetof(af_llama_kernel_shape, vocab_block) },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strcmp(k, flags[i].flag)) continue;
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (!v || *end || n < 1 || n > 1 << 20) {
            fprintf(stderr, "aneforge mil emit: %s wants a positive integer, not '%s'\n", k, v ? v : "");
            return -1;
        }
        *(int *)((char *)sh + flags[i].off) = (int)n;
        return 1;
    }
    return 0;
}

static int cmd_emit(int argc, char **argv) {
    const char *name = NULL, *out = NULL, *kernel = NULL;
    af_llama_kernel_shape sh = { 288, 768, 6, 6, 256, 1, 16000 };
    for (int i = 1; i < argc; i++) {
        int r = i + 1 < argc ? shape_flag(argv[i], argv[i + 1], &sh) : 0;
        if (r < 0) return 2;
        if (r) { i++; continue; }
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--llama-kernel") && i + 1 < argc) kernel = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else { fprintf(stderr, "aneforge mil emit: unexpected '%s' (try --help)\n", argv[i]); return 2; }
    }
    if ((!name && !kernel) || (name && kernel) || !out) { usage(stderr); return 2; }
    af_mil_sample s;
    af_status st = kernel ? af_mil_llama_kernel(kernel, &sh, &s) : af_mil_sample_build(name, &s);
    if (st) { fprintf(stderr, "aneforge mil emit: %s\n", af_error_message()); return 1; }
    st = af_mil_emit(s.g, s.nin, s.in, s.nout, s.out, out);
    af_graph_free(s.g);
    if (st) { fprintf(stderr, "aneforge mil emit: %s\n", af_error_message()); return 1; }
    printf("wrote %s/model.mil and %s/weights/weight.bin\n", out, out);
    return 0;
}

static int cmd_check(int argc, char **argv) {
    const char *path = NULL, *weights = NULL, *function = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--weights") && i + 1 < argc) weights = argv[++i];
        else if (!strcmp(argv[i], "--function") && i + 1 < argc) function = argv[++i];
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else { fprintf(stderr, "aneforge mil check: unexpected '%s' (try --help)\n", argv[i]); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    cli_mil m;
    if (load(path, weights, function, &m)) return 1;
    char s[160];
    for (int i = 0; i < m.nin; i++) { shape_text(af_tensor_shape(m.in[i]), s, sizeof s); printf("argument %s %s %s\n", m.in_names[i], m.in_types[i], s); }
    for (int i = 0; i < m.nout; i++) { shape_text(af_tensor_shape(m.out[i]), s, sizeof s); printf("result   %s %s %s\n", m.out_names[i], m.out_types[i], s); }
    printf("%d graph nodes\n", af_graph_size(m.g));
    module_free(&m);
    return 0;
}

static int cmd_run(int argc, char **argv) {
    const char *path = NULL, *weights = NULL, *outdir = NULL, *function = NULL;
    bool fp32 = false;
    int nfeeds = 0;
    char **feeds = calloc((size_t)argc + 1, sizeof *feeds);
    if (!feeds) return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--weights") && i + 1 < argc) weights = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) outdir = argv[++i];
        else if (!strcmp(argv[i], "--function") && i + 1 < argc) function = argv[++i];
        else if (!strcmp(argv[i], "--in") && i + 1 < argc) feeds[nfeeds++] = argv[++i];
        else if (!strcmp(argv[i], "--fp32")) fp32 = true;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else { fprintf(stderr, "aneforge mil run: unexpected '%s' (try --help)\n", argv[i]); free(feeds); return 2; }
    }
    if (!path || !outdir) { usage(stderr); free(feeds); return 2; }
    cli_mil m;
    if (load(path, weights, function, &m)) { free(feeds); return 1; }
    int rc = 1, nres = 0, nheld = m.nout, *guard_of = NULL; /* res holds nheld entries, NULL or malloc'd */
    af_model *model = NULL;
    af_tensor **outs = NULL;
    float **data = calloc((size_t)m.nin + 1, sizeof *data), **res = calloc((size_t)m.nout + 1, sizeof *res);
    af_buffer *bi = calloc((size_t)m.nin + 1, sizeof *bi), *bo = calloc((size_t)m.nout + 1, sizeof *bo);
    if (!data || !res || !bi || !bo) goto done;
    for (int f = 0; f < nfeeds; f++) { /* every --in names an argument */
        char *eq = strchr(feeds[f], '=');
        int k = -1;
        for (int i = 0; eq && i < m.nin; i++)
            if (strlen(m.in_names[i]) == (size_t)(eq - feeds[f]) && !strncmp(m.in_names[i], feeds[f], (size_t)(eq - feeds[f]))) k = i;
        if (k < 0) { fprintf(stderr, "aneforge mil run: --in %s names no function argument (want NAME=FILE.npy)\n", feeds[f]); goto done; }
        if (data[k]) { fprintf(stderr, "aneforge mil run: argument %s is fed twice\n", m.in_names[k]); goto done; }
        int rank;
        int64_t dims[AF_MAX_RANK];
        char err[400];
        if (mil_npy_read(eq + 1, m.in_types[k], &data[k], &rank, dims, err, sizeof err)) { fprintf(stderr, "aneforge mil run: %s\n", err); goto done; }
        af_shape want = af_tensor_shape(m.in[k]), got = { .rank = rank };
        bool same = rank == want.rank;
        for (int i = 0; same && i < rank; i++) same = dims[i] == want.dim[i];
        if (!same) {
            char a[120], b[120];
            memcpy(got.dim, dims, sizeof(int64_t) * (size_t)rank);
            shape_text(want, a, sizeof a);
            shape_text(got, b, sizeof b);
            fprintf(stderr, "aneforge mil run: argument %s is %s but %s holds %s\n", m.in_names[k], a, eq + 1, b);
            goto done;
        }
        bi[k] = AF_BUF_F32(data[k], af_shape_count(want));
    }
    for (int i = 0; i < m.nin; i++)
        if (!data[i]) {
            char a[120];
            shape_text(af_tensor_shape(m.in[i]), a, sizeof a);
            fprintf(stderr, "aneforge mil run: no --in for argument %s %s\n", m.in_names[i], a);
            goto done;
        }
    /* Gather and scatter indices known only at run time: those fed as arguments are
     * checked now, the others come back as extra results checked after the run. */
    nres = m.nout;
    if (!(outs = calloc((size_t)(m.nout + m.nguards) + 1, sizeof *outs)) ||
        !(guard_of = calloc((size_t)(m.nout + m.nguards) + 1, sizeof *guard_of)))
        goto done;
    memcpy(outs, m.out, sizeof *outs * (size_t)m.nout);
    for (int i = 0; i < m.nguards; i++) {
        int k = -1;
        for (int j = 0; j < m.nin; j++)
            if (m.in[j] == m.guard_idx[i]) k = j;
        if (k >= 0 && af_mil_check_indices(m.p, i, data[k])) { fprintf(stderr, "aneforge mil run: %s\n", af_error_message()); goto done; }
        if (k < 0) guard_of[nres] = i, outs[nres++] = m.guard_idx[i];
    }
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = fp32 ? AF_PRECISION_FP32 : AF_PRECISION_FP16 };
    if (!(model = af_compile(m.g, m.nin, m.in, nres, outs, &o))) { fprintf(stderr, "aneforge mil run: %s\n", af_error_message()); goto done; }
    float **nr = realloc(res, sizeof *res * ((size_t)nres + 1));
    af_buffer *nb = nr ? realloc(bo, sizeof *bo * ((size_t)nres + 1)) : NULL;
    if (nr) res = nr;
    if (nb) bo = nb;
    if (!nr || !nb) goto done;
    for (int i = m.nout; i < nres; i++) res[i] = NULL;
    nheld = nres;
    for (int i = 0; i < nres; i++) {
        int64_t n = af_shape_count(af_tensor_shape(outs[i]));
        if (!(res[i] = malloc(sizeof(float) * (size_t)(n + 1)))) goto done;
        bo[i] = AF_BUF_F32(res[i], n);
    }
    if (af_run(model, bi, bo)) { fprintf(stderr, "aneforge mil run: %s\n", af_error_message()); goto done; }
    for (int i = m.nout; i < nres; i++)
        if (af_mil_check_indices(m.p, guard_of[i], res[i])) { fprintf(stderr, "aneforge mil run: %s\n", af_error_message()); goto done; }
    if (mkdir(outdir, 0777) && errno != EEXIST) { fprintf(stderr, "aneforge mil run: cannot create %s: %s\n", outdir, strerror(errno)); goto done; }
    for (int i = 0; i < m.nout; i++) {
        size_t n = strlen(outdir) + strlen(m.out_names[i]) + 8;
        char *p = malloc(n), s[120];
        if (!p) goto done;
        snprintf(p, n, "%s/%s.npy", outdir, m.out_names[i]);
        char err[400];
        int st = mil_npy_write(p, m.out_types[i], res[i], af_tensor_shape(m.out[i]).rank, af_tensor_shape(m.out[i]).dim, err, sizeof err);
        shape_text(af_tensor_shape(m.out[i]), s, sizeof s);
        if (!st) printf("%s %s %s -> %s\n", m.out_names[i], m.out_types[i], s, p);
        free(p);
        if (st) { fprintf(stderr, "aneforge mil run: %s\n", err); goto done; }
    }
    rc = 0;
done:
    for (int i = 0; data && i < m.nin; i++) free(data[i]);
    for (int i = 0; res && i < nheld; i++) free(res[i]);
    free(outs);
    free(guard_of);
    free(data);
    free(res);
    free(bi);
    free(bo);
    free(feeds);
    af_model_free(model);
    module_free(&m);
    return rc;
}

int cmd_run_package(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    return cmd_run(argc, argv);
}

int cmd_mil(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "emit")) return cmd_emit(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check")) return cmd_check(argc - 1, argv + 1);
    fprintf(stderr, "aneforge mil: unknown subcommand '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
