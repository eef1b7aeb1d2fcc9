/* libFuzzer target for the MIL reader. The input is MIL text, optionally followed by a
 * line "#WEIGHTS" and the bytes of the weight file that @model_path/weights/weight.bin
 * names. Whatever parses must then survive: its graph compiles and runs (when small),
 * and it emits back to MIL that parses again with the same arguments and results.
 *
 *   make fuzz            (builds build-fuzz/fuzz_mil and runs it on tests/corpus/mil)
 *   ./build-fuzz/fuzz_mil -max_total_time=600 build-fuzz/mil tests/corpus/mil */
#include "mil/mil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_mil: %s failed: %s\n", #c, af_error_message()); abort(); } } while (0)

static const char sep[] = "\n#WEIGHTS\n";

/* Small enough to run: every tensor at most 4096 elements, at most 256 nodes. */
static bool small(const af_graph *g) {
    if (g->n > 256) return false;
    for (int i = 0; i < g->n; i++)
        if (af_shape_count(g->t[i]->shape) > 4096) return false;
    return true;
}

static void run_once(const mil_module *m) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
    af_model *model = af_compile(m->g, m->nin, m->in, m->nout, m->out, &o);
    if (!model) return; /* a graph af_compile rejects is fine; it must not crash */
    af_buffer *in = calloc((size_t)m->nin + 1, sizeof *in), *out = calloc((size_t)m->nout + 1, sizeof *out);
    REQUIRE(in && out);
    for (int i = 0; i < m->nin; i++) {
        int64_t n = af_shape_count(m->in[i]->shape);
        float *d = calloc((size_t)n + 1, sizeof *d);
        REQUIRE(d);
        for (int64_t k = 0; k < n; k++) d[k] = (float)((k % 7) - 3) * 0.25f;
        in[i] = AF_BUF_F32(d, n);
    }
    for (int i = 0; i < m->nout; i++) {
        int64_t n = af_shape_count(m->out[i]->shape);
        out[i] = AF_BUF_F32(calloc((size_t)n + 1, sizeof(float)), n);
        REQUIRE(out[i].data);
    }
    REQUIRE(af_run(model, in, out) == AF_OK);
    for (int i = 0; i < m->nin; i++) free(in[i].data);
    for (int i = 0; i < m->nout; i++) free(out[i].data);
    free(in);
    free(out);
    af_model_free(model);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t tlen = size;
    const uint8_t *w = NULL;
    size_t wlen = 0;
    for (size_t i = 0; i + sizeof sep - 1 <= size; i++)
        if (!memcmp(data + i, sep, sizeof sep - 1)) {
            tlen = i;
            w = data + i + sizeof sep - 1;
            wlen = size - i - (sizeof sep - 1);
            break;
        }
    mil_blobsrc blob = { AF_MIL_WEIGHT_PATH, w, wlen };
    mil_read_opts o = { .source_name = "fuzz", .nblobs = w ? 1 : 0, .blobs = &blob };
    mil_module m;
    af_status st = mil_parse((const char *)data, tlen, &o, &m);
    if (st != AF_OK) {
        REQUIRE(m.g == NULL && af_error_message()[0]);
        return 0;
    }
    REQUIRE(m.g && m.nout >= 1 ? 1 : m.nout == 0);
    if (m.nout >= 1) {
        if (small(m.g)) run_once(&m);
        mil_module back;
        REQUIRE(mil_roundtrip(m.g, m.nin, m.in, m.nout, m.out, &back) == AF_OK);
        REQUIRE(back.nin == m.nin && back.nout == m.nout);
        for (int i = 0; i < m.nout; i++) REQUIRE(ir_shape_eq(back.out[i]->shape, m.out[i]->shape));
        af_graph_free(back.g);
    }
    af_graph_free(m.g);
    return 0;
}
