/* aneforge doctor: checks, step by step, that this machine can run programs on the
 * Neural Engine, and says what failed and what to try. The steps: the chip and its
 * engine family, loading the AppleNeuralEngine framework (--framework PATH, else
 * $ANEFORGE_ANE_FRAMEWORK, else the system's), compiling a one-op program (an add of two
 * inputs) for the ane target, running it and checking every value. Only public calls:
 * the runtime's diagnostics (af_ane_open, af_ane_device_info) and af_compile / af_run. */
#include "cli.h"
#include "aneforge.h"

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
               "Exit status 0 when every step passes (--compare: no field differs), 1 otherwise.\n", af_ane_system_framework());
}

static int failed(const char *step, const char *what, const char *try_this) {
    printf("%-10s FAILED: %s\n", step, what);
    printf("\nwhat to try: %s\n", try_this);
    return 1;
}

static void print_device(const af_ane_device *d) {
    if (d->chip[0]) printf("%-10s %s%s%s%s\n", "chip", d->chip, d->model[0] ? " (" : "", d->model, d->model[0] ? ")" : "");
    else printf("%-10s not reported (not macOS)\n", "chip");
    printf("%-10s %s\n", "engine", d->subtype[0] ? d->subtype : "subtype not reported");
    if (d->family_chips) printf("%-10s %s (%s)\n", "family", af_family_name_of(d->family), d->family_chips);
    else printf("%-10s unknown\n", "family");
}

/* y = a + b for a, b of [1, C, 1, S] fp16, compiled for the ane target; NULL on failure. */
static af_model *one_op(const char *path, af_graph **g) {
    *g = af_graph_new();
    if (!*g) return NULL;
    af_tensor *in[2] = { af_input(*g, "a", AF_F16, AF_SHAPE(1, C, 1, S)), af_input(*g, "b", AF_F16, AF_SHAPE(1, C, 1, S)) };
    af_tensor *out[1] = { af_add(in[0], in[1]) };
    af_compile_opts o = { .target = AF_TARGET_ANE, .threads = 1, .ane_framework = path };
    return af_compile(*g, 2, in, 1, out, &o);
}

static int run_checks(const char *path, const char *source) {
    af_ane_device dev;
    af_ane_device_info(&dev);
    printf("%-10s %s (%s)\n", "framework", path ? path : af_ane_system_framework(), source);
    if (af_ane_open(path)) {
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
    af_ane_device_info(&dev);
    print_device(&dev);

    int64_t before = dev.compiles;
    af_graph *g = NULL;
    af_model *m = one_op(path, &g);
    if (!m) {
        af_graph_free(g);
        return failed("compile", af_error_message(),
                      "the framework loaded but refused a one-op program. Make sure nothing else in this process "
                      "compiled ~100 programs (restart it), check the aned messages in Console.app, and report the "
                      "macOS version with this output");
    }
    af_ane_device_info(&dev);
    printf("%-10s ok (%lld real compile%s; budget %lld per process)\n", "compile", (long long)(dev.compiles - before),
           dev.compiles - before == 1 ? "" : "s", (long long)dev.compile_budget);
    printf("%-10s %s\n", "entry", dev.compile_entry ? dev.compile_entry : "unknown");

    float a[C * S], b[C * S], y[C * S];
    for (int i = 0; i < C * S; i++) { /* small multiples of 1/4: every sum is exact in fp16 */
        a[i] = (float)(i % 29 - 14) * 0.25f;
        b[i] = (float)(i % 11) * 0.5f;
    }
    af_buffer in[2] = { AF_BUF_F32(a, C * S), AF_BUF_F32(b, C * S) }, out[1] = { AF_BUF_F32(y, C * S) };
    af_status st = af_run(m, in, out);
    af_model_free(m);
    af_graph_free(g);
    if (st)
        return failed("run", af_error_message(),
                      "the program compiled and loaded but did not run: report this output; surfaces of a few KiB "
                      "are known to work, so this points at the framework or its daemon");
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
