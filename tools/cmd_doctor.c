/* aneforge doctor: checks, step by step, that this machine can run programs on the
 * Neural Engine, and says what failed and what to try. The steps: the chip and its
 * engine family, loading the AppleNeuralEngine framework (--framework PATH, else
 * $ANEFORGE_ANE_FRAMEWORK, else the system's), compiling a one-op MIL program (an add
 * of two inputs) through the runtime, running it and checking every value. */
#include "cli.h"
#include "aneforge.h"
#include "ane/darwin/ane_runtime.h"
#include "engine/family.h"
#include "mil/mil.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C 16
#define S 32 /* [1, C, 1, S]: 1 KiB per surface, a row of 64 bytes */

int cmd_doctor_probe(const char *framework, const char *out, int quick);
int cmd_doctor_compare(const char *path, const char *family);

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge doctor [--framework PATH]\n"
               "       aneforge doctor --probe [-o FILE.json] [--quick] [--framework PATH]\n"
               "       aneforge doctor --compare FILE.json [--family NAME]\n\n"
               "Checks the Neural Engine step by step: chip and engine family, loading the\n"
               "AppleNeuralEngine framework, compiling and running a one-op program.\n"
               "  --framework PATH  the framework library (default: $ANEFORGE_ANE_FRAMEWORK, else\n"
               "                    %s)\n"
               "  --probe           measure the engine's limits into a family file (default chip.json),\n"
               "                    one step per process; run again to resume after an interruption\n"
               "  -o FILE.json      where --probe writes\n"
               "  --quick           fewer repetitions (a few minutes)\n"
               "  --compare FILE    list where the simulator's family differs from FILE\n"
               "  --family NAME     the family to compare with (default: FILE's base)\n"
               "Exit status 0 when every step passes (--compare: no field differs), 1 otherwise.\n", ANE_RT_SYSTEM_FRAMEWORK);
}

static int failed(const char *step, const char *what, const char *try_this) {
    printf("%-10s FAILED: %s\n", step, what);
    printf("\nwhat to try: %s\n", try_this);
    return 1;
}

static void print_device(const ane_rt_device *d) {
    const ane_family_info *fi = ane_family_info_of(d->family);
    if (d->chip[0]) printf("%-10s %s%s%s%s\n", "chip", d->chip, d->model[0] ? " (" : "", d->model, d->model[0] ? ")" : "");
    else printf("%-10s not reported (not macOS)\n", "chip");
    printf("%-10s %s\n", "engine", d->subtype[0] ? d->subtype : "subtype not reported");
    if (fi) printf("%-10s %s (%s)\n", "family", fi->name, fi->chips);
    else printf("%-10s unknown\n", "family");
}

/* Emits y = a + b for a, b of [1, C, 1, S] fp16: the MIL text and the ports. */
static af_status one_op(char **mil, size_t *len, ane_rt_ports *ports, int order[2]) {
    af_graph *g = af_graph_new();
    af_tensor *in[2] = { af_input(g, "a", AF_F16, AF_SHAPE(1, C, 1, S)), af_input(g, "b", AF_F16, AF_SHAPE(1, C, 1, S)) };
    af_tensor *out[1] = { af_add(in[0], in[1]) };
    milblob_writer *blob = NULL;
    af_status st = g ? mil_emit_mem(g, 2, in, 1, out, mil, len, &blob, order) : AF_ERR_NOMEM;
    milblob_writer_free(blob);
    af_graph_free(g);
    *ports = (ane_rt_ports){ .nin = 2, .nout = 1, .in_count = { C * S, C * S }, .out_count = { C * S } };
    return st;
}

static int run_checks(const char *path, const char *source) {
    ane_rt_device dev;
    ane_rt_device_info(&dev);
    printf("%-10s %s (%s)\n", "framework", path ? path : ANE_RT_SYSTEM_FRAMEWORK, source);
    if (ane_rt_open(path)) {
        print_device(&dev);
#if defined(__APPLE__)
        const char *hint = "the private framework is missing or moved: this needs macOS 14 or later on Apple Silicon "
                           "(an Intel Mac has no Neural Engine); check that the path exists, or name another with --framework";
#else
        const char *hint = "this is not macOS, so there is no Neural Engine to load. To exercise the runtime here, "
                           "point it at the fake framework the build makes: aneforge doctor --framework "
                           "build/fake_ane/AppleNeuralEngine.so (or set ANEFORGE_ANE_FRAMEWORK)";
#endif
        return failed("load", af_error_message(), hint);
    }
    printf("%-10s ok\n", "load");
    ane_rt_device_info(&dev);
    print_device(&dev);

    char *mil = NULL;
    size_t len = 0;
    ane_rt_ports ports;
    int order[2];
    if (one_op(&mil, &len, &ports, order))
        return failed("emit", af_error_message(), "this is a bug in aneforge's MIL emitter: please report it");
    ane_rt_program *p = NULL;
    int64_t before = ane_rt_compile_count();
    af_status st = ane_rt_compile(mil, len, NULL, 0, &ports, &p);
    free(mil);
    if (st)
        return failed("compile", af_error_message(),
                      "the framework loaded but refused a one-op program. Make sure nothing else in this process "
                      "compiled ~100 programs (restart it), check the aned messages in Console.app, and report the "
                      "macOS version with this output");
    printf("%-10s ok (%lld real compile%s; budget %lld per process)\n", "compile", (long long)(ane_rt_compile_count() - before),
           ane_rt_compile_count() - before == 1 ? "" : "s", (long long)ane_rt_compile_budget());

    float a[C * S], b[C * S], y[C * S];
    uint16_t ha[C * S], hb[C * S], hy[C * S];
    for (int i = 0; i < C * S; i++) { /* small multiples of 1/4: every sum is exact in fp16 */
        a[i] = (float)(i % 29 - 14) * 0.25f;
        b[i] = (float)(i % 11) * 0.5f;
    }
    ir_f32_to_f16_array(a, ha, C * S);
    ir_f32_to_f16_array(b, hb, C * S);
    const uint16_t *in[2] = { order[0] == 0 ? ha : hb, order[0] == 0 ? hb : ha };
    uint16_t *out[1] = { hy };
    st = ane_rt_eval(p, in, out);
    ane_rt_release(p);
    if (st)
        return failed("run", af_error_message(),
                      "the program compiled and loaded but did not run: report this output; surfaces of a few KiB "
                      "are known to work, so this points at the framework or its daemon");
    ir_f16_to_f32_array(hy, y, C * S);
    int wrong = 0, first = -1;
    for (int i = 0; i < C * S; i++)
        if ((double)y[i] != (double)a[i] + (double)b[i] && wrong++ == 0) first = i;
    if (wrong) {
        char what[200];
        snprintf(what, sizeof what, "%d of %d values are wrong (first at %d: %g, want %g)", wrong, C * S, first, y[first],
                 (double)a[first] + (double)b[first]);
        return failed("run", what,
                      "the engine ran but returned wrong values: all zeros usually means the surfaces were not "
                      "bound (input order or size); report this output");
    }
    printf("%-10s ok (a + b on [1, %d, 1, %d] fp16: all %d values exact)\n", "run", C, S, C * S);
    printf("\nThe Neural Engine runtime works here.\n");
    return 0;
}

int cmd_doctor(int argc, char **argv) {
    const char *path = NULL, *source = "the system framework", *out = "chip.json", *compare = NULL, *family = NULL;
    int probe = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--framework") && i + 1 < argc) {
            path = argv[++i];
            source = "--framework";
        } else if (!strcmp(argv[i], "--probe")) {
            probe = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--compare") && i + 1 < argc) {
            compare = argv[++i];
        } else if (!strcmp(argv[i], "--family") && i + 1 < argc) {
            family = argv[++i];
        } else {
            fprintf(stderr, "aneforge doctor: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    const char *env = getenv("ANEFORGE_ANE_FRAMEWORK");
    if (!path && env && *env) {
        path = env;
        source = "$ANEFORGE_ANE_FRAMEWORK";
    }
    if (compare) return cmd_doctor_compare(compare, family);
    if (probe) return cmd_doctor_probe(path, out, quick);
    fflush(stdout);
    int rc = run_checks(path, source);
    fflush(stdout);
    return rc;
}
