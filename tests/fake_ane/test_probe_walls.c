/* The fake framework configured as the made-up chip Z9 ($FAKE_ANE_FAMILY =
 * tests/fake_ane/families/z9.json) enforces the walls the chip probe bisects, as a
 * family file gives them:
 *   surface_align 64   evaluate refuses a surface whose rows (the whole 1-D surface) are
 *                      not a multiple of 64 bytes, and runs one that is (the runtime's
 *                      own 128-byte steps, and odd multiples of 64 through the probe's
 *                      knob), with x + x computed exactly;
 *   max_inputs 24      the fake's compiler takes 24 inputs and refuses 25, naming the
 *                      limit;
 *   matmul_overflow    a matmul output of 20000 comes back finite, 20001 as +inf.
 * Each ran against the fake before the fields existed: every surface ran, 25 inputs
 * compiled, and 20001 came back finite (the fixed 32752 of the built-in families). */
#define _DEFAULT_SOURCE 1
#include "ane/darwin/ane_ports.h"
#include "ane/darwin/ane_runtime.h"
#include "fake_ane_control.h"
#include "ir/fp16.h"
#include "ir/ir.h"
#include "mil/mil.h"
#include "support/check.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef AF_FAKE_ANE
#error "AF_FAKE_ANE must name the fake framework library"
#endif

/* Compiles out from in[0..nin) through the runtime (weights as the MIL cites them). */
static af_status compile(af_graph *g, int nin, af_tensor **in, af_tensor *out, ane_rt_program **p) {
    char *mil = NULL;
    size_t len = 0, wn = 0;
    milblob_writer *blob = NULL;
    int order[64];
    af_status st = mil_emit_mem(g, nin, in, 1, &out, &mil, &len, &blob, order);
    CHECK(st == AF_OK, "emit: %s", af_error_message());
    if (st) return st;
    ane_rt_ports ports = { .nin = nin, .nout = 1, .out_count = { af_shape_count(af_tensor_shape(out)) } };
    for (int k = 0; k < nin; k++) ports.in_count[k] = af_shape_count(af_tensor_shape(in[order[k]]));
    const uint8_t *w = milblob_bytes(blob, &wn);
    st = ane_rt_compile(mil, len, milblob_writer_count(blob) ? w : NULL, milblob_writer_count(blob) ? wn : 0, &ports, p);
    free(mil);
    milblob_writer_free(blob);
    return st;
}

/* x + x on [1, 1, 1, 32] evaluated on surfaces sized in odd multiples of step bytes
 * (0: the runtime's default); returns the status and checks the numbers when it runs. */
static af_status run_add(size_t step) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 32));
    af_tensor *y = af_add(x, x);
    ane_rt_set_surface_step(step, step != 0);
    ane_rt_program *p = NULL;
    af_status st = compile(g, 1, &x, y, &p);
    ane_rt_set_surface_step(0, false);
    float xf[32], yf[32];
    uint16_t xh[32], yh[32];
    for (int i = 0; i < 32; i++) xf[i] = (float)(i - 16) * 0.25f;
    ir_f32_to_f16_array(xf, xh, 32);
    const uint16_t *ins[1] = { xh };
    uint16_t *outs[1] = { yh };
    if (!st) st = ane_rt_eval(p, ins, outs);
    if (!st) {
        ir_f16_to_f32_array(yh, yf, 32);
        int bad = 0;
        for (int i = 0; i < 32; i++) bad += yf[i] != 2 * xf[i]; /* exact: a doubling of a quarter */
        CHECK(!bad, "x + x on %zu-byte steps: %d values wrong", step, bad);
    }
    ane_rt_release(p);
    af_graph_free(g);
    return st;
}

static void test_surface_align(void) {
    CHECK(run_add(0) == AF_OK, "the runtime's 128-byte steps must run on a 64-byte chip: %s", af_error_message());
    CHECK(run_add(64) == AF_OK, "odd multiples of 64 bytes must run: %s", af_error_message());
    for (size_t step = 2; step < 64; step *= 2) {
        af_status st = run_add(step);
        CHECK(st != AF_OK && strstr(af_error_message(), "rows, not a multiple of 64") &&
                  strstr(af_error_message(), "IOSurface rows aligned to 64 bytes"),
              "surfaces in odd multiples of %zu bytes must be refused naming the 64-byte alignment: %s", step,
              st ? af_error_message() : "it ran");
    }
}

static void test_inputs(void) {
    for (int n = 24; n <= 25; n++) {
        af_graph *g = af_graph_new();
        af_tensor *in[25], *sum = NULL;
        for (int k = 0; k < n; k++) {
            char name[8];
            snprintf(name, sizeof name, "x%d", k);
            in[k] = af_input(g, name, AF_F16, AF_SHAPE(1, 1, 1, 32));
            sum = sum ? af_add(sum, in[k]) : in[k];
        }
        ane_rt_program *p = NULL;
        af_status st = compile(g, n, in, sum, &p);
        if (n == 24) CHECK(st == AF_OK, "24 inputs must compile on Z9: %s", af_error_message());
        else
            CHECK(st != AF_OK && strstr(af_error_message(), "input-count limit") &&
                      strstr(af_error_message(), "the program has 25 inputs; Z9 binds at most 24"),
                  "25 inputs must be refused naming the limit: %s", st ? af_error_message() : "it compiled");
        ane_rt_release(p);
        af_graph_free(g);
    }
}

/* (a + b) formed in the accumulator of a [1, 2] @ ones[2, 1] matmul. */
static void test_overflow(void) {
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 2));
    af_tensor *y = af_matmul(x, af_const_fill(g, AF_SHAPE(2, 1), 1.0f), 0, 0);
    ane_rt_program *p = NULL;
    CHECK(compile(g, 1, &x, y, &p) == AF_OK, "the matmul compiles: %s", af_error_message());
    static const struct { float a, b; int finite; } cases[] = { { 19984, 16, 1 }, { 19984, 17, 0 }, { -19984, -16, 1 }, { -19984, -17, 0 } };
    for (size_t i = 0; p && i < sizeof cases / sizeof cases[0]; i++) {
        float xf[2] = { cases[i].a, cases[i].b }, yf;
        uint16_t xh[2], yh;
        ir_f32_to_f16_array(xf, xh, 2);
        const uint16_t *ins[1] = { xh };
        uint16_t *outs[1] = { &yh };
        CHECK(ane_rt_eval(p, ins, outs) == AF_OK, "eval: %s", af_error_message());
        ir_f16_to_f32_array(&yh, &yf, 1);
        double want = (double)cases[i].a + cases[i].b;
        CHECK(cases[i].finite ? yf == (float)want : isinf(yf) && (yf > 0) == (want > 0),
              "%g + %g: got %g, want %s", (double)cases[i].a, (double)cases[i].b, (double)yf, cases[i].finite ? "it" : "inf");
    }
    ane_rt_release(p);
    af_graph_free(g);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    if (tmp) mkdir(tmp, 0700);
    const char *fam = getenv("FAKE_ANE_FAMILY");
    CHECK(fam && strstr(fam, "z9.json"), "run with FAKE_ANE_FAMILY naming tests/fake_ane/families/z9.json");
    CHECK(ane_rt_open(AF_FAKE_ANE) == AF_OK, "ane_rt_open(%s): %s", AF_FAKE_ANE, af_error_message());
    test_surface_align();
    test_inputs();
    test_overflow();
    return check_finish("probe_walls");
}
