/* `aneforge mil emit --llama-kernel` then `aneforge mil run` (through cmd_mil, compiled
 * in): the emitted fwdFFN and sdpaBwd2 kernels, fed .npy inputs, agree with naive
 * double-precision loops of seed 002's formulas to fp16 tolerance (RMSNorm over
 * channels, SwiGLU; the softmax backward dS = P (dP - sum P dP) / sqrt(hs) and
 * dQ = dS K, dK = dS^T Q with K shared by each group of query heads), and equal the
 * graph's own fp16 result bit for bit. Bad kernel names and shapes fail with a message. */
#define _POSIX_C_SOURCE 200809L
#include "../tools/cmd_mil.c"
#include "mil/mil.h" /* the samples and the reader, which the CLI reaches through the public API */
#include "aneforge_data.h"
#include "../tools/mil_npy.c"
#include "../tools/cli_file.c"

#include "support/check.h"

#include <math.h>
#include <unistd.h>

enum { D = 32, F = 48, S = 8, H = 4, KV = 2, HD = D / H };

static int mil(int n, const char **args) {
    char *argv[24];
    argv[0] = "mil";
    for (int i = 0; i < n && i < 23; i++) argv[i + 1] = (char *)args[i];
    fflush(stdout);
    return cmd_mil(n + 1, argv);
}

/* Writes each input of the kernel as dir/<name>.npy with values from fill, emits the
 * kernel to dir/k, runs it through the CLI into dir/out; *direct gets the graph's own
 * fp16 results. Returns 0 on success. */
typedef float (*fill_fn)(const char *name, int64_t i);

static int emit_and_run(const char *dir, const char *kernel, fill_fn fill, float ***direct, int *nout, mil_sample *s) {
    char kdir[700], model[800];
    snprintf(kdir, sizeof kdir, "%s/%s", dir, kernel);
    const char *emit[] = { "emit", "--llama-kernel", kernel, "--dim", "32", "--hidden", "48", "--heads", "4", "--kv-heads", "2",
                           "--seq", "8", "--batch", "1", "--out", kdir };
    CHECK(mil(17, emit) == 0, "mil emit --llama-kernel %s failed", kernel);
    lk_shape sh = { D, F, H, KV, S, 1, 16000 };
    if (mil_llama_kernel(kernel, &sh, s)) { CHECK(0, "%s", af_error_message()); return 1; }
    const char *run[40] = { "run" };
    int n = 1;
    snprintf(model, sizeof model, "%s/model.mil", kdir);
    run[n++] = model;
    char feeds[LK_MAXIO][800], outdir[800];
    float *data[LK_MAXIO];
    af_buffer bi[LK_MAXIO], bo[LK_MAXIO];
    for (int i = 0; i < s->nin; i++) {
        af_shape sh_i = s->in[i]->shape;
        int64_t cnt = af_shape_count(sh_i);
        data[i] = malloc(sizeof(float) * (size_t)cnt);
        for (int64_t j = 0; j < cnt; j++) data[i][j] = fill(af_tensor_name(s->in[i]), j);
        char path[760];
        snprintf(path, sizeof path, "%s/%s_%s.npy", dir, kernel, af_tensor_name(s->in[i]));
        CHECK(af_npy_write(path, data[i], sh_i.rank, sh_i.dim) == AF_OK, "%s", af_error_message());
        snprintf(feeds[i], sizeof feeds[i], "%s=%s", af_tensor_name(s->in[i]), path);
        run[n++] = "--in";
        run[n++] = feeds[i];
        bi[i] = AF_BUF_F32(data[i], cnt);
    }
    snprintf(outdir, sizeof outdir, "%s/%s-out", dir, kernel);
    run[n++] = "--out";
    run[n++] = outdir;
    CHECK(mil(n, run) == 0, "mil run %s failed", kernel);
    *nout = s->nout;
    *direct = calloc((size_t)s->nout, sizeof(float *));
    for (int k = 0; k < s->nout; k++) {
        (*direct)[k] = malloc(sizeof(float) * (size_t)af_shape_count(s->out[k]->shape));
        bo[k] = AF_BUF_F32((*direct)[k], af_shape_count(s->out[k]->shape));
    }
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *m = af_compile(s->g, s->nin, s->in, s->nout, s->out, &o);
    CHECK(m && af_run(m, bi, bo) == AF_OK, "direct run: %s", af_error_message());
    af_model_free(m);
    for (int i = 0; i < s->nin; i++) free(data[i]);
    return 0;
}

/* The CLI's result `name` (an output of the kernel): equal to the direct result, and
 * returned for the reference comparison. */
static float *cli_result(const char *dir, const char *kernel, const mil_sample *s, float **direct, const char *name) {
    for (int k = 0; k < s->nout; k++) {
        if (strcmp(af_tensor_name(s->out[k]), name)) continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s-out/%s.npy", dir, kernel, name);
        float *got = NULL;
        int r;
        int64_t d[AF_MAX_RANK];
        CHECK(af_npy_read(path, &got, &r, d) == AF_OK, "%s", af_error_message());
        int64_t n = af_shape_count(s->out[k]->shape);
        CHECK(got && !memcmp(got, direct[k], sizeof(float) * (size_t)n), "%s %s: mil run differs from the graph's fp16 run", kernel, name);
        return got;
    }
    CHECK(0, "%s has no output %s", kernel, name);
    return NULL;
}

static float ffn_fill(const char *name, int64_t i) {
    double salt = (double)(strlen(name) * 3 + (unsigned char)name[1]);
    double v = sin(0.37 * (double)i + salt);
    return (float)(!strcmp(name, "rms_ffn") ? 1.0 + 0.3 * v : !strcmp(name, "x2") ? v : 0.2 * v);
}

static void fwd_ffn(const char *dir) {
    mil_sample s;
    float **direct = NULL;
    int nout = 0;
    if (emit_and_run(dir, "fwdFFN", ffn_fill, &direct, &nout, &s)) return;
    float *ffn = cli_result(dir, "fwdFFN", &s, direct, "ffn");
    double worst = 0, scale = 0;
    for (int t = 0; ffn && t < S; t++) {
        double x[D], xn[D], ms = 0, gate[F];
        for (int c = 0; c < D; c++) { x[c] = ffn_fill("x2", c * S + t); ms += x[c] * x[c] / D; }
        for (int c = 0; c < D; c++) xn[c] = x[c] / sqrt(ms + 1e-5) * ffn_fill("rms_ffn", c);
        for (int f = 0; f < F; f++) {
            double h1 = 0, h3 = 0;
            for (int c = 0; c < D; c++) { h1 += ffn_fill("w1", f * D + c) * xn[c]; h3 += ffn_fill("w3", f * D + c) * xn[c]; }
            gate[f] = h1 / (1 + exp(-h1)) * h3;
        }
        for (int c = 0; c < D; c++) {
            double y = 0;
            for (int f = 0; f < F; f++) y += ffn_fill("w2", c * F + f) * gate[f];
            worst = fmax(worst, fabs(y - ffn[c * S + t]));
            scale = fmax(scale, fabs(y));
        }
    }
    CHECK(ffn && worst <= 4e-3 * scale + 1e-3, "fwdFFN ffn vs the naive reference: max difference %g (scale %g)", worst, scale);
    free(ffn);
    for (int k = 0; k < nout; k++) free(direct[k]);
    free(direct);
    af_graph_free(s.g);
}

/* probs: each query row a causal softmax over its keys; the rest centred values. */
static float sdpa_fill(const char *name, int64_t i) {
    if (!strcmp(name, "probs")) {
        int64_t key = i % S, q = (i / S) % S;
        return key <= q ? 1.0f / (float)(q + 1) : 0.0f;
    }
    return (float)(0.5 * sin(0.61 * (double)i + (double)strlen(name)));
}

static void sdpa_bwd2(const char *dir) {
    mil_sample s;
    float **direct = NULL;
    int nout = 0;
    if (emit_and_run(dir, "sdpaBwd2", sdpa_fill, &direct, &nout, &s)) return;
    float *dq = cli_result(dir, "sdpaBwd2", &s, direct, "dq"), *dk = cli_result(dir, "sdpaBwd2", &s, direct, "dk");
    /* probs, dp [H*S, S] (row h*S + query, column key); q [D, S], k [KV*HD, S] channel-first. */
    static double ds[H][S][S], rq[D][S], rk[KV * HD][S];
    memset(rq, 0, sizeof rq);
    memset(rk, 0, sizeof rk);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++) {
            double dot = 0;
            for (int j = 0; j < S; j++) dot += sdpa_fill("probs", (h * S + i) * S + j) * sdpa_fill("dp", (h * S + i) * S + j);
            for (int j = 0; j < S; j++)
                ds[h][i][j] = sdpa_fill("probs", (h * S + i) * S + j) * (sdpa_fill("dp", (h * S + i) * S + j) - dot) / sqrt((double)HD);
        }
    for (int h = 0; h < H; h++) {
        int g = h / (H / KV);
        for (int e = 0; e < HD; e++)
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                    rq[h * HD + e][i] += ds[h][i][j] * sdpa_fill("k", (g * HD + e) * S + j);
                    rk[g * HD + e][j] += ds[h][i][j] * sdpa_fill("q", (h * HD + e) * S + i);
                }
    }
    double worst = 0;
    for (int c = 0; dq && c < D; c++)
        for (int t = 0; t < S; t++) worst = fmax(worst, fabs(rq[c][t] - dq[c * S + t]));
    for (int c = 0; dk && c < KV * HD; c++)
        for (int t = 0; t < S; t++) worst = fmax(worst, fabs(rk[c][t] - dk[c * S + t]));
    CHECK(dq && dk && worst < 2e-3, "sdpaBwd2 dq, dk vs the naive reference: max difference %g", worst);
    free(dq);
    free(dk);
    for (int k = 0; k < nout; k++) free(direct[k]);
    free(direct);
    af_graph_free(s.g);
}

static void bad_requests(const char *dir) {
    char out[700];
    snprintf(out, sizeof out, "%s/bad", dir);
    const char *unknown[] = { "emit", "--llama-kernel", "fwdMoE", "--out", out };
    CHECK(mil(5, unknown) == 1, "an unknown kernel is refused");
    const char *shape[] = { "emit", "--llama-kernel", "fwdAttn", "--dim", "30", "--heads", "4", "--out", out };
    CHECK(mil(9, shape) == 1, "dim 30 over 4 heads is refused");
    const char *zero[] = { "emit", "--llama-kernel", "fwdAttn", "--seq", "0", "--out", out };
    CHECK(mil(7, zero) == 2, "--seq 0 is a usage error");
    const char *both[] = { "emit", "conv", "--llama-kernel", "fwdAttn", "--out", out };
    CHECK(mil(6, both) == 2, "a sample name and --llama-kernel together is a usage error");
}

int main(void) {
    char tmp[] = "/tmp/aneforge_llama_kernels_XXXXXX";
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    fwd_ffn(tmp);
    sdpa_bwd2(tmp);
    bad_requests(tmp);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_finish("llama_kernels_cli");
}
