/* Golden MIL: the built-in programs (an MLP training step, a conv block, an attention
 * block, seed 002's eight llama kernels at small shapes: llama-fwdAttn ... llama-clsBwd)
 * are emitted again and must match tests/golden/<name>/model.mil and
 * weights/weight.bin byte for byte. The goldens were produced by this emitter and
 * checked by reading them (spelling, argument order, offsets); regenerate after an
 * intended change with
 *     ./build/aneforge mil emit mlp-step --out tests/golden/mlp-step   (and conv, attention,
 *     llama-fwdAttn, ... : `aneforge mil --help` lists them)
 * and review the diff (tests/golden/handwritten/ holds goldens written by hand instead,
 * checked by test_mil_handwritten). The golden files are also loaded from disk (af_mil_load, the
 * weights resolved through @model_path) and must compute exactly what the graph
 * computes, and every BLOBFILE offset must name a record of the right size. */
#include "aneforge.h"
#include "mil/mil.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[len] = 0; *n = (size_t)len; }
    return b;
}

/* Line number of the first difference, for the message. */
static int first_diff_line(const char *a, size_t na, const char *b, size_t nb) {
    int line = 1;
    for (size_t i = 0; i < na && i < nb; i++) {
        if (a[i] != b[i]) return line;
        if (a[i] == '\n') line++;
    }
    return line;
}

static void run_fp16(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out, float **res) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *m = af_compile(g, nin, in, nout, out, &o);
    CHECK(m != NULL, "compile: %s", af_error_message());
    if (!m) return;
    af_buffer bi[16], bo[16];
    float *data[16];
    for (int i = 0; i < nin; i++) {
        int64_t n = af_shape_count(in[i]->shape);
        data[i] = malloc(sizeof(float) * (size_t)n);
        for (int64_t k = 0; k < n; k++) data[i][k] = (float)((k * 7 + i * 3) % 11) * 0.1f - 0.45f;
        bi[i] = AF_BUF_F32(data[i], n);
    }
    for (int k = 0; k < nout; k++) bo[k] = AF_BUF_F32(res[k], af_shape_count(out[k]->shape));
    CHECK(af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
    for (int i = 0; i < nin; i++) free(data[i]);
    af_model_free(m);
}

static void check_sample(const char *name) {
    mil_sample s;
    CHECK(mil_sample_build(name, &s) == AF_OK, "%s: build: %s", name, af_error_message());
    if (!s.g) return;
    char *text;
    size_t len, nb;
    milblob_writer *w;
    CHECK(mil_emit_mem(s.g, s.nin, s.in, s.nout, s.out, &text, &len, &w, NULL) == AF_OK, "%s: emit: %s", name, af_error_message());
    const uint8_t *blob = milblob_bytes(w, &nb);
    char path[1024], wpath[1024];
    snprintf(path, sizeof path, "%s/tests/golden/%s/model.mil", AF_SOURCE_DIR, name);
    snprintf(wpath, sizeof wpath, "%s/tests/golden/%s/weights/weight.bin", AF_SOURCE_DIR, name);
    size_t gl = 0, gw = 0;
    uint8_t *gold = slurp(path, &gl), *goldw = slurp(wpath, &gw);
    CHECK(gold != NULL, "%s: cannot read %s", name, path);
    CHECK(goldw != NULL, "%s: cannot read %s", name, wpath);
    if (gold)
        CHECK(gl == len && !memcmp(gold, text, len), "%s: model.mil differs from the golden at line %d (regenerate with aneforge mil emit %s --out tests/golden/%s and review the diff)",
              name, first_diff_line((const char *)gold, gl, text, len), name, name);
    if (goldw) CHECK(gw == nb && !memcmp(goldw, blob, nb), "%s: weight.bin differs from the golden (%zu vs %zu bytes)", name, gw, nb);

    /* Every BLOBFILE cites a record whose size fits its constant; the counts agree. */
    milblob *b = NULL;
    CHECK(milblob_open(blob, nb, &b) == AF_OK, "%s: weight file does not reopen: %s", name, af_error_message());
    int cites = 0;
    for (const char *p = text; (p = strstr(p, "offset = uint64(")) != NULL; p++) {
        unsigned long long off = strtoull(p + 16, NULL, 10);
        int64_t bytes = 0;
        CHECK(milblob_get(b, off, NULL, NULL, &bytes) == AF_OK && bytes > 0 && off % 64 == 0, "%s: BLOBFILE offset %llu names no record", name, off);
        cites++;
    }
    CHECK(cites == milblob_count(b), "%s: %d BLOBFILE constants but %d records", name, cites, milblob_count(b));
    milblob_free(b);

    /* The golden, read from disk, computes exactly what the graph computes. */
    af_graph *g2 = NULL;
    int nin2 = 0, nout2 = 0;
    af_tensor **in2 = NULL, **out2 = NULL;
    af_status st = af_mil_load(path, NULL, &g2, &nin2, &in2, &nout2, &out2);
    CHECK(st == AF_OK, "%s: af_mil_load: %s", name, af_error_message());
    if (st == AF_OK) {
        CHECK(nin2 == s.nin && nout2 == s.nout, "%s: %d/%d arguments/results came back, want %d/%d", name, nin2, nout2, s.nin, s.nout);
        af_tensor *order[16]; /* the golden's arguments are alphabetical: match by name */
        for (int i = 0; i < s.nin && nin2 == s.nin; i++) {
            order[i] = NULL;
            for (int k = 0; k < nin2; k++)
                if (!strcmp(af_tensor_name(in2[k]), af_tensor_name(s.in[i]))) order[i] = in2[k];
            CHECK(order[i] != NULL, "%s: argument %s is missing", name, af_tensor_name(s.in[i]));
        }
        float *want[16], *got[16];
        for (int k = 0; k < s.nout; k++) {
            want[k] = calloc((size_t)af_shape_count(s.out[k]->shape), sizeof(float));
            got[k] = calloc((size_t)af_shape_count(s.out[k]->shape), sizeof(float));
        }
        bool ok = nin2 == s.nin && nout2 == s.nout;
        for (int i = 0; ok && i < s.nin; i++) ok = order[i] != NULL;
        if (ok) {
            run_fp16(s.g, s.nin, s.in, s.nout, s.out, want);
            run_fp16(g2, s.nin, order, nout2, out2, got);
            for (int k = 0; k < s.nout; k++)
                CHECK(!memcmp(want[k], got[k], sizeof(float) * (size_t)af_shape_count(s.out[k]->shape)),
                      "%s: result %d differs between the graph and its golden MIL", name, k);
        }
        for (int k = 0; k < s.nout; k++) { free(want[k]); free(got[k]); }
        af_graph_free(g2);
    }
    free(gold);
    free(goldw);
    free(text);
    milblob_writer_free(w);
    af_graph_free(s.g);
}

int main(void) {
    for (int i = 0; mil_sample_names[i]; i++) check_sample(mil_sample_names[i]);
    return check_finish("mil_golden");
}
