/* The public calls the CLI uses instead of internal headers, each against an independent
 * reference: af_sgemm against a double loop (every transpose), the thread pool covering
 * [0, n) once, SHA-256 of FIPS 180-2's "abc", gzip of bytes made by Python's gzip, the
 * MNIST file table, whole-file reads and writes (a failed write leaves the old file),
 * af_fail, a checkpoint with the caller's own records around a trainer's, the op table
 * by name (af_op_build against a naive sum, a bad attribute named), the MIL program
 * accessors on an emitted sample, and the step cost model's calibration identity (the
 * baked plan reproduces each published ms/step). Only public headers are included. */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "support/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[64];

static const char *tpath(const char *name) {
    static char buf[8][160];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, 160, "%s/%s", tmp, name);
    return b;
}

static int has(const char *needle) { return strstr(af_error_message(), needle) != NULL; }

static void test_sgemm(void) {
    enum { M = 7, N = 9, K = 13 };
    test_rng r = { 11 };
    float a[M * K], b[K * N], c[M * N], c0[M * N];
    test_fill_uniform(&r, a, M * K, -1, 1);
    test_fill_uniform(&r, b, K * N, -1, 1);
    test_fill_uniform(&r, c0, M * N, -1, 1);
    af_thread_pool *pool = af_thread_pool_new(3);
    CHECK(pool != NULL, "pool: %s", af_error_message());
    af_cpu_info ci;
    af_cpu_info_get(&ci);
    CHECK(ci.model && ci.features && ci.gemm_path && ci.gemm_kernel && ci.cores >= 1 && ci.gemm_mr > 0 && ci.gemm_nr > 0,
          "cpu info incomplete");
    for (int impl = 0; impl < 2; impl++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                /* A is stored [M, K] or, transposed, [K, M]; the same values either way */
                float at[M * K], bt[K * N];
                for (int i = 0; i < M; i++)
                    for (int k = 0; k < K; k++) at[ta ? k * M + i : i * K + k] = a[i * K + k];
                for (int k = 0; k < K; k++)
                    for (int j = 0; j < N; j++) bt[tb ? j * K + k : k * N + j] = b[k * N + j];
                memcpy(c, c0, sizeof c);
                af_status st = af_sgemm((af_gemm_impl)impl, pool, ta, tb, M, N, K, 0.5f, at, ta ? M : K, bt, tb ? K : N,
                                        2.0f, c, N);
                if (impl == AF_GEMM_BLAS && !ci.blas_available) {
                    CHECK(st == AF_ERR_UNSUPPORTED && has("no BLAS"), "BLAS without one: %s", af_error_message());
                    continue;
                }
                CHECK(st == AF_OK, "sgemm impl %d: %s", impl, af_error_message());
                double worst = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + j];
                        double want = 0.5 * s + 2.0 * c0[i * N + j];
                        worst = fmax(worst, fabs(want - c[i * N + j]));
                    }
                CHECK(worst < 1e-5, "sgemm impl %d ta %d tb %d: off by %g", impl, ta, tb, worst);
            }
    CHECK(af_sgemm(AF_GEMM_KERNEL, NULL, 0, 0, 2, 2, 2, 1, NULL, 2, b, 2, 0, c, 2) == AF_ERR_INVALID && has("must not be NULL"),
          "NULL A: %s", af_error_message());
    af_thread_pool_free(pool);
}

typedef struct { int hits[1000]; } cover;
static void mark(void *ctx, int64_t b, int64_t e) {
    cover *c = ctx;
    for (int64_t i = b; i < e; i++) c->hits[i]++; /* ranges are disjoint: no two threads share an i */
}

static void test_pool(void) {
    for (int threads = 1; threads <= 4; threads += 3) {
        af_thread_pool *p = af_thread_pool_new(threads);
        cover c = { { 0 } };
        af_thread_pool_for(p, 1000, 7, mark, &c);
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= c.hits[i] == 1;
        CHECK(ok, "%d threads: every index once", threads);
        af_thread_pool_free(p);
    }
    cover c = { { 0 } };
    af_thread_pool_for(NULL, 1000, 1, mark, &c);
    CHECK(c.hits[0] == 1 && c.hits[999] == 1, "no pool: the calling thread does it all");
}

static void test_files_digests(void) {
    char hex[65];
    af_sha256("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc) = %s", hex);
    FILE *f = fopen(tpath("abc.txt"), "wb");
    CHECK(f && fwrite("abc", 1, 3, f) == 3, "write abc");
    if (f) fclose(f);
    CHECK(af_sha256_file(tpath("abc.txt"), hex) == AF_OK && !strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
          "sha256 of the file: %s", hex);

    /* gzip.compress(b"hello, aneforge\n", mtime=0) */
    static const uint8_t gz[] = { 0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48,
                                  0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0x48, 0xcc, 0x4b, 0x4d, 0xcb, 0x2f, 0x4a,
                                  0x4f, 0xe5, 0x02, 0x00, 0x54, 0xb9, 0xe5, 0x9a, 0x10, 0x00, 0x00, 0x00 };
    uint8_t *out = NULL;
    size_t n = 0;
    CHECK(af_gunzip("x.gz", gz, sizeof gz, 1024, &out, &n) == AF_OK && n == 16 && !memcmp(out, "hello, aneforge\n", 16),
          "gunzip: %s", af_error_message());
    af_free(out);
    CHECK(af_gunzip("x.gz", gz, sizeof gz, 8, &out, &n) != AF_OK && has("x.gz"), "a cap below the output: %s", af_error_message());

    const char *name, *sum;
    CHECK(af_dataset_file(AF_DATA_MNIST, 2, &name, &sum) == AF_OK && !strcmp(name, "t10k-images-idx3-ubyte") && strlen(sum) == 64,
          "MNIST file 2");
    CHECK(af_dataset_file(AF_DATA_CIFAR10, 0, &name, &sum) == AF_ERR_INVALID && has("only MNIST and Fashion-MNIST"),
          "CIFAR has no table: %s", af_error_message());

    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(af_read_file(tpath("abc.txt"), NULL, &data, &len) == AF_OK && len == 3 && !memcmp(data, "abc", 3), "read whole");
    af_free(data);
    CHECK(af_read_file(tpath("none.txt"), "make it with X", &data, &len) == AF_ERR_IO && has("none.txt") && has("make it with X"),
          "missing file with hint: %s", af_error_message());
    CHECK(af_read_file(tmp, NULL, &data, &len) == AF_ERR_IO && has("not a regular file"), "a directory: %s", af_error_message());
    CHECK(af_open_regular(tmp, "log", 0, NULL) == -1 && has("log "), "af_open_regular on a directory: %s", af_error_message());

    /* whole-file writes: a failed one (ok = 0) leaves the old content */
    FILE *w = af_write_open(tpath("abc.txt"));
    CHECK(w && fwrite("xyz!", 1, 4, w) == 4, "write_open: %s", af_error_message());
    CHECK(af_write_close(w, tpath("abc.txt"), 0) == AF_ERR_IO, "close not ok");
    CHECK(af_read_file(tpath("abc.txt"), NULL, &data, &len) == AF_OK && len == 3 && !memcmp(data, "abc", 3),
          "a failed write must leave the file as it was");
    af_free(data);
    w = af_write_open(tpath("abc.txt"));
    CHECK(w && fwrite("xyz!", 1, 4, w) == 4 && af_write_close(w, tpath("abc.txt"), 1) == AF_OK, "write whole");
    CHECK(af_read_file(tpath("abc.txt"), NULL, &data, &len) == AF_OK && len == 4 && !memcmp(data, "xyz!", 4), "written whole");
    af_free(data);
    remove(tpath("abc.txt"));

    CHECK(af_fail(AF_ERR_CORRUPT, "%s: record %d", "f.bin", 7) == AF_ERR_CORRUPT && !strcmp(af_error_message(), "f.bin: record 7"),
          "af_fail: %s", af_error_message());
}

static void test_checkpoint(void) {
    af_net net = af_net_mlp(AF_SHAPE(4), 3, 2, 7);
    af_train_opts o = af_train_defaults();
    o.batch = o.eval_batch = 2;
    af_trainer *t = af_trainer_new(&net, &o), *u = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t && u, "trainers: %s", af_error_message());
    if (!t || !u) return;
    float x[8] = { 1, 0, 0, 1, 0, 1, 1, 0 }, y[4] = { 1, 0, 0, 1 };
    af_step_info info;
    CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step: %s", af_error_message());
    af_checkpoint *c = af_checkpoint_new();
    uint64_t rng = 0x1234567890abcdefULL;
    CHECK(c && af_trainer_export(t, c) == AF_OK && af_checkpoint_put_str(c, "app.data", "mnist") == AF_OK &&
              af_checkpoint_put_i64(c, "app.pos", 42) == AF_OK && af_checkpoint_put(c, "app.rng", &rng, sizeof rng) == AF_OK &&
              af_checkpoint_save(c, tpath("run.ckpt")) == AF_OK,
          "save with own records: %s", af_error_message());
    af_checkpoint_free(c);
    c = NULL;
    CHECK(af_checkpoint_load(tpath("run.ckpt"), &c) == AF_OK && c, "load: %s", af_error_message());
    int64_t pos = 0, bytes = 0;
    const void *r = c ? af_checkpoint_get(c, "app.rng", &bytes) : NULL;
    CHECK(c && af_checkpoint_get_i64(c, "app.pos", &pos) == AF_OK && pos == 42 && r && bytes == 8 && !memcmp(r, &rng, 8) &&
              !strcmp(af_checkpoint_get_str(c, "app.data"), "mnist"),
          "own records back");
    CHECK(c && !af_checkpoint_get(c, "app.none", &bytes) && bytes == 0 && has("app.none"), "a missing record: %s", af_error_message());
    /* the other trainer, never stepped, takes t's weights from the file */
    CHECK(c && af_trainer_import(u, c) == AF_OK, "import: %s", af_error_message());
    int same = 1;
    for (int i = 0; i < af_trainer_num_params(t); i++) {
        float a[64], b[64];
        af_shape s = af_tensor_shape(af_trainer_param(t, i));
        af_trainer_read_param(t, i, a);
        af_trainer_read_param(u, i, b);
        same &= !memcmp(a, b, sizeof(float) * (size_t)af_shape_count(s));
    }
    CHECK(same, "imported weights differ from the exported ones");
    double ph[AF_NPHASES];
    af_trainer_phase_seconds(t, ph);
    CHECK(ph[AF_PHASE_STEP] >= 0 && ph[AF_PHASE_OPTIMIZER] >= 0 && ph[AF_PHASE_COMPILE] >= 0, "phase seconds");
    CHECK(af_trainer_loss_scale(t) == info.loss_scale && af_trainer_metric_source(t) == info.metric_source,
          "the trainer's scale and metric source are the step's");
    af_checkpoint_free(c);
    af_trainer_free(t);
    af_trainer_free(u);
    remove(tpath("run.ckpt"));
}

static void test_op_by_name(void) {
    int op = af_op_find("reduce_sum");
    CHECK(op >= 0 && af_op_find("no_such_op") == -1, "af_op_find");
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(3, 4));
    const char *attrs[2] = { "axes=-1", "keep_dims=1" };
    af_tensor *y = NULL;
    int bad = 7;
    CHECK(af_op_build(op, 1, &x, 2, attrs, &y, &bad) == AF_OK && y && bad == -1, "build: %s", af_error_message());
    af_shape s = y ? af_tensor_shape(y) : (af_shape){ 0 };
    CHECK(s.rank == 2 && s.dim[0] == 3 && s.dim[1] == 1, "reduce_sum over the last axis, kept: rank %d", s.rank);
    af_model *m = y ? af_compile(g, 1, &x, 1, &y, NULL) : NULL;
    float xv[12], yv[3];
    for (int i = 0; i < 12; i++) xv[i] = (float)(i * i % 7) - 2.5f;
    af_buffer bi = AF_BUF_F32(xv, 12), bo = AF_BUF_F32(yv, 3);
    CHECK(m && af_run(m, &bi, &bo) == AF_OK, "run: %s", af_error_message());
    for (int r = 0; r < 3; r++) {
        double want = 0;
        for (int c = 0; c < 4; c++) want += xv[r * 4 + c];
        CHECK_NEAR(yv[r], want, 1e-5, "row sum");
    }
    af_model_free(m);
    const char *wrong[2] = { "keep_dims=1", "axes=banana" };
    CHECK(af_op_build(op, 1, &x, 2, wrong, &y, &bad) == AF_ERR_INVALID && bad == 1 && !y && has("axes"),
          "a bad value is named: %d %s", bad, af_error_message());
    const char *unknown[1] = { "colour=red" };
    CHECK(af_op_build(op, 1, &x, 1, unknown, &y, &bad) == AF_ERR_INVALID && bad == 0 && has("no attribute 'colour'"),
          "an unknown key: %s", af_error_message());
    char buf[16];
    int concat = af_op_find("concat");
    CHECK(concat >= 0 && af_op_port(concat, 2, buf, sizeof buf) && !strcmp(buf, "x2"), "a variadic port is numbered: %s", buf);
    af_op_support sup;
    int mm = af_op_find("matmul");
    CHECK(af_op_support_info(mm, &sup) == AF_OK && sup.cpu_kernel && !strcmp(sup.vjp, "yes") && sup.mil, "matmul's support");
    CHECK(af_op_support_info(-1, &sup) == AF_ERR_INVALID && has("not a row"), "op -1: %s", af_error_message());
    int read = -1;
    CHECK(af_mil_coreml_op(0, &read) && (read == 0 || read == 1), "Core ML op 0");
    af_graph_free(g);
}

static void test_mil_program(void) {
    af_mil_sample s;
    CHECK(af_mil_sample_name(0) && af_mil_sample_build("conv", &s) == AF_OK, "sample: %s", af_error_message());
    af_graph_free(s.g);
    CHECK(af_mil_sample_build("nope", &s) == AF_ERR_INVALID && has("nope"), "unknown sample: %s", af_error_message());
    CHECK(af_mil_sample_build("conv", &s) == AF_OK && af_mil_emit(s.g, s.nin, s.in, s.nout, s.out, tpath("conv")) == AF_OK,
          "emit: %s", af_error_message());
    int nin = s.nin, nout = s.nout;
    af_graph_free(s.g);
    af_mil_program *p = NULL;
    CHECK(af_mil_open(tpath("conv/model.mil"), NULL, NULL, &p) == AF_OK && p, "open: %s", af_error_message());
    CHECK(af_mil_num_args(p) == nin && af_mil_num_results(p) == nout, "ports %d %d", af_mil_num_args(p), af_mil_num_results(p));
    const char *name = NULL, *dtype = NULL;
    CHECK(af_mil_arg(p, 0, &name, &dtype) && name && !strcmp(dtype, "fp16"), "argument 0 is fp16: %s", dtype ? dtype : "?");
    CHECK(!af_mil_arg(p, nin, NULL, NULL) && af_mil_graph(p), "past the last argument");
    CHECK(af_mil_num_index_checks(p) == 0 && af_mil_check_indices(p, 0, NULL) == AF_ERR_INVALID, "no index checks");
    af_mil_close(p);
    CHECK(af_mil_open(tpath("conv/none.mil"), NULL, NULL, &p) == AF_ERR_IO && !p && has("none.mil"), "missing: %s", af_error_message());
}

static void test_cost(void) {
    af_llama_config c;
    CHECK(af_llama_preset("stories110m", 32000, &c) == AF_OK, "preset");
    int published = 0;
    for (int i = 0; i < af_llama_chip_count(); i++) {
        const af_llama_chip *ch = af_llama_chip_at(i);
        af_llama_cost r;
        CHECK(af_llama_cost_estimate(&c, 256, 1, AF_LLAMA_COST_BAKED, 0, i, 1000, &r) == AF_OK, "estimate: %s", af_error_message());
        CHECK_NEAR(r.step_ms, r.engine_ms + r.host_ms + r.io_ms + r.dispatch_ms, 1e-9, "step is the sum of its terms");
        if (ch->published) {
            published++;
            CHECK_NEAR(r.step_ms, ch->ms_step, 1e-6 * ch->ms_step, "the baked plan reproduces the published ms/step");
        }
    }
    CHECK(published > 0 && !af_llama_chip_at(af_llama_chip_count()), "chips");
    CHECK(!strcmp(af_llama_cost_plan_name(AF_LLAMA_COST_RESIDENT), "resident"), "plan name");
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/af_test_public_%d", (int)getpid());
    CHECK(mkdir(tmp, 0700) == 0, "mkdir %s", tmp);
    test_sgemm();
    test_pool();
    test_files_digests();
    test_checkpoint();
    test_op_by_name();
    test_mil_program();
    test_cost();
    af_ane_device d;
    CHECK(af_ane_device_info(&d) == AF_OK || d.compile_budget > 0, "device info: %s", af_error_message());
    CHECK(d.compile_budget > 0 && d.compiles >= 0 && af_ane_system_framework()[0] == '/', "budget and framework path");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return check_finish("public_calls");
}
