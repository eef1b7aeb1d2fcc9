/* Engine families as data: the built-in families, read from their family files, hold
 * exactly the values of the table they replaced (written out below as the reference);
 * a family file loads as `ane-sim:FILE.json` and its limits are the walls the simulator
 * enforces; the newer families mark their unknowns; and every kind of bad file is
 * refused with a message naming what is wrong. */
#define _POSIX_C_SOURCE 200809L
#include "aneforge.h"
#include "engine/family.h"
#include "engine/family_file.h"
#include "support/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef AF_SOURCE_DIR
#define AF_SOURCE_DIR "."
#endif

/* The table src/engine/family.c held before the families became files. */
static const struct { af_family_id id; const char *name, *chips; int64_t spatial, axis, rank, kw, crop, hang; } old[] = {
    { AF_FAMILY_A13, "A13", "M1", 16384, 65536, 5, 13, 1, 1 },
    { AF_FAMILY_A14, "A14", "M2", 16384, 65536, 5, 15, 1, 0 },
    { AF_FAMILY_A15, "A15", "M3", 16384, 65536, 5, 15, 0, 0 },
    { AF_FAMILY_A16, "A16", "M4/M5", 65536, 65536, 5, 15, 0, 0 },
};

static void test_builtin_unchanged(void) {
    for (int i = 0; i < 4; i++) {
        const ane_family_info *fi = ane_family_info_of(old[i].id);
        CHECK(fi != NULL, "family %d is missing", (int)old[i].id);
        if (!fi) continue;
        CHECK(!strcmp(fi->name, old[i].name) && !strcmp(fi->chips, old[i].chips), "%s: name/chips %s %s", old[i].name, fi->name, fi->chips);
        CHECK(fi->max_spatial == old[i].spatial && fi->max_axis == old[i].axis && fi->max_rank == old[i].rank &&
                  fi->max_kernel_w == old[i].kw && fi->crop_dma_saturates == old[i].crop &&
                  fi->compile_hangs_on_large_batch == old[i].hang && fi->wide_row_max == 16384 && fi->compile_budget == 119,
              "%s: a limit differs from the table it replaced", old[i].name);
        CHECK(fi->unknown == 1u << 8, "%s: only surface_align may be unknown in a built-in family (mask %x)", old[i].name, fi->unknown);
        /* the fields issue 30 added: the runtime's 64 inputs, about 2 GB of weights, and the
         * accumulator's 32752 (the constant ane-sim applied before it was a field) */
        CHECK(fi->max_inputs == 64 && fi->max_weight_bytes == (int64_t)1 << 31 && fi->matmul_overflow == 32752,
              "%s: max_inputs %lld, max_weight_bytes %lld, matmul_overflow %lld", old[i].name, (long long)fi->max_inputs,
              (long long)fi->max_weight_bytes, (long long)fi->matmul_overflow);
    }
    af_family_id f;
    CHECK(ane_family_parse("m5", &f) == AF_OK && f == AF_FAMILY_A16, "m5 still means A16");
    CHECK(ane_family_parse("a17", &f) == AF_OK && ane_family_info_of(f) && !strcmp(ane_family_info_of(f)->name, "A17"), "a17 is built in");
    const ane_family_info *a17 = ane_family_info_of(f);
    CHECK(a17 && (a17->unknown & 1u << 3) && a17->max_kernel_w == 15 && a17->max_spatial == 65536,
          "A17's kernel width is unknown (marked) and stands in from A16");
    CHECK(a17 && (a17->unknown & 7u << 9) == 7u << 9 && a17->max_inputs == 64 && a17->matmul_overflow == 32752,
          "A17's input count, program size and overflow point are unknown (marked) and stand in from A16");
    CHECK(ane_family_parse("h17", &f) == AF_OK && ane_family_info_of(f)->surface_align == 128, "h17's 128-byte alignment (PR #35)");
}

static const char *tmpdir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A made-up family as ane-sim's target: its kernel-width and extent limits are the walls. */
static void test_loaded_family_walls(void) {
    char spec[600];
    snprintf(spec, sizeof spec, "ane-sim:%s/tests/fake_ane/families/z9.json", AF_SOURCE_DIR);
    af_target t;
    af_family_id fam;
    CHECK(af_target_parse(spec, &t, &fam) == AF_OK && t == AF_TARGET_ANE_SIM, "%s: %s", spec, af_error_message());
    CHECK(!strcmp(af_family_name_of(fam), "Z9"), "the loaded family is named by its file: %s", af_family_name_of(fam));
    af_family_id again;
    CHECK(af_target_parse(spec, NULL, &again) == AF_OK && again == fam, "the same file twice is the same family");

    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F16, AF_SHAPE(1, 1, 1, 64));
    af_tensor *k7 = af_conv(x, af_const_fill(g, AF_SHAPE(1, 1, 1, 7), 0.5f), NULL, NULL, NULL, 1);
    af_tensor *k8 = af_conv(x, af_const_fill(g, AF_SHAPE(1, 1, 1, 8), 0.5f), NULL, NULL, NULL, 1);
    af_compile_opts o = { .target = AF_TARGET_ANE_SIM, .family = fam, .threads = 1 };
    af_model *m = af_compile(g, 1, &x, 1, &k7, &o);
    CHECK(m != NULL, "kernel width 7 passes on Z9: %s", af_error_message());
    af_model_free(m);
    m = af_compile(g, 1, &x, 1, &k8, &o);
    CHECK(!m && strstr(af_error_message(), "kernel width 8 exceeds 7 on Z9"), "kernel width 8 is walled on Z9: %s", af_error_message());
    af_model_free(m);
    /* program size: 1500032 bytes of constants (fp16) compile on Z9, 64 more do not */
    for (int extra = 0; extra <= 1; extra++) {
        int64_t c = 1500032 / 64 + extra; /* channels of 32 fp16 values */
        float *data = calloc((size_t)c * 32, sizeof *data);
        af_tensor *cx = af_input(g, "cx", AF_F16, AF_SHAPE(1, c, 1, 32));
        af_tensor *cy = af_mul(cx, af_const(g, "big", AF_SHAPE(1, c, 1, 32), data));
        m = af_compile(g, 1, &cx, 1, &cy, &o);
        if (!extra) CHECK(m != NULL, "1500032 bytes of weights pass on Z9: %s", af_error_message());
        else
            CHECK(!m && strstr(af_error_message(), "the program-size limit at const 'big'") &&
                      strstr(af_error_message(), "reach 1500096 bytes (fp16) with this one, over the 1500032 bytes one program holds on Z9"),
                  "1500096 bytes are walled on Z9: %s", m ? "it compiled" : af_error_message());
        af_model_free(m);
        free(data);
    }
    af_tensor *w = af_input(g, "w", AF_F16, AF_SHAPE(1, 12001));
    af_tensor *y = af_adds(w, 1.0f);
    m = af_compile(g, 1, &w, 1, &y, &o);
    CHECK(!m && strstr(af_error_message(), "exceeds 12000 on Z9"), "W = 12001 is walled on Z9: %s", af_error_message());
    af_model_free(m);
    af_graph_free(g);
}

/* A file that is written round-trips through the reader member for member; integers
 * are exact up to 2^53 - 1, and a longer one reads as a number, never a rounded integer. */
static void test_roundtrip(void) {
    ff_doc d = { 0 };
    CHECK(ff_set_str(&d, "format", "aneforge-family 1") == AF_OK && ff_set_str(&d, "name", "Q\"1\\") == AF_OK &&
              ff_set_int(&d, "max_spatial", -9007199254740991LL) == AF_OK && ff_set_null(&d, "x") == AF_OK,
          "building a document");
    char path[512];
    snprintf(path, sizeof path, "%s/family_roundtrip.json", tmpdir());
    CHECK(ff_write(path, &d) == AF_OK, "write: %s", af_error_message());
    ff_doc r;
    CHECK(ff_read(path, &r) == AF_OK, "read back: %s", af_error_message());
    CHECK(r.n == 4 && !strcmp(ff_get(&r, "name")->str, "Q\"1\\") && ff_get(&r, "max_spatial")->i == -9007199254740991LL &&
              ff_get(&r, "x")->type == FF_NULL,
          "the members read back as written");
    ff_free(&r);
    ff_free(&d);
    remove(path);
    static const char big[] = "{\"a\": 9007199254740991, \"b\": 9007199254740993, \"c\": -99999999999999999999}";
    CHECK(ff_parse("big.json", (const uint8_t *)big, strlen(big), &r) == AF_OK, "big integers parse: %s", af_error_message());
    CHECK(ff_get(&r, "a")->type == FF_INT && ff_get(&r, "a")->i == 9007199254740991LL && ff_get(&r, "b")->type == FF_NUM &&
              ff_get(&r, "c")->type == FF_NUM && ff_get(&r, "c")->num == -1e20,
          "2^53 - 1 is an exact integer; 2^53 + 1 and -1e20 are numbers");
    ff_free(&r);
}

/* Each bad file: refused, with the message naming the problem. */
static void test_bad_files(void) {
    static const char *base = "\"format\": \"aneforge-family 1\", \"name\": \"B\", \"chips\": \"b\"";
    static const char *fields = "\"max_spatial\": 100, \"max_axis\": 200, \"max_rank\": 4, \"max_kernel_w\": 3, \"wide_row_max\": 50, "
                                "\"crop_dma_saturates\": 0, \"compile_hangs_on_large_batch\": 0, \"compile_budget\": 9, \"surface_align\": 0";
    /* where: "line " for what ir_json refuses (with its column), "member \"x\"" or
     * "the document" for what only a family file refuses. */
    struct { const char *body, *want, *where; } cases[] = {
        { "{%s, %s}", NULL, NULL },
        { "{%s, %s, \"max_rank\": 3}", "duplicate key \"max_rank\"", "line 1 col " },
        { "{%s, %s, \"x\": {}}", "nested objects and arrays are not part of a family file", "member \"x\"" },
        { "{%s, %s, \"x\": [1]}", "nested objects and arrays are not part of a family file", "member \"x\"" },
        { "{%s, %s} x", "bytes after the document", "line 1 col " },
        { "{%s, %s", "expected ',' or '}'", "line 1 col " },
        { "{%s, %s, \"op.add\": 01}", "leading zero", "line 1 col " },
        { "{%s, %s, \"op.add\": 1e999}", "number out of range", "line 1 col " },
        { "{%s, %s, \"op.add\": 1.}", "digit expected after '.'", "line 1 col " },
        { "{%s, %s, \"op.add\": tru}", "expected a value", "line 1 col " },
        { "{%s, %s, \"note\": \"a\\u0000b\"}", "NUL byte", "member \"note\"" },
        { "{%s, %s, \"\": 1}", "empty key", "t.json: empty key" },
        { "{%s, %s, \"note\": \"a\tb\"}", "control character", "line 1 col " },
        { "[1, 2]", "not a JSON object", "the document" },
        { " \"a family\" ", "not a JSON object", "the document" },
    };
    char text[2048], path[512];
    snprintf(path, sizeof path, "%s/family_bad.json", tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, cases[i].body, base, fields);
        ff_doc d;
        af_status st = ff_parse("t.json", (const uint8_t *)text, strlen(text), &d);
        if (!cases[i].want) {
            CHECK(st == AF_OK, "case %zu must parse: %s", i, af_error_message());
            ff_free(&d);
            continue;
        }
        CHECK(st == AF_ERR_CORRUPT && strstr(af_error_message(), cases[i].want) && !strncmp(af_error_message(), "t.json: ", 8) &&
                  strstr(af_error_message(), cases[i].where),
              "case %zu: want '%s' at '%s', got: %s", i, cases[i].want, cases[i].where, af_error_message());
    }
    /* A multi-line file: the reader's position is a line and column. */
    static const char multi[] = "{\n  \"a\": 1,\n  \"a\": 2\n}\n";
    ff_doc d;
    CHECK(ff_parse("m.json", (const uint8_t *)multi, strlen(multi), &d) == AF_ERR_CORRUPT &&
              strstr(af_error_message(), "m.json: line 3 col ") && strstr(af_error_message(), "duplicate key \"a\""),
          "a duplicate on line 3 is named there: %s", af_error_message());
    /* Family-level checks, through ane-sim's target parse. */
    struct { const char *body, *want; } fams[] = {
        { "{\"format\": \"x\", \"name\": \"B\", \"chips\": \"b\"}", "not a family file" },
        { "{%s, \"bogus\": 1}", "unknown key \"bogus\"" },
        { "{%s, \"max_spatial\": 100}", "no \"max_axis\"" },
        { "{%s, \"max_spatial\": 0, \"max_axis\": 1, \"max_rank\": 4, \"max_kernel_w\": 3, \"wide_row_max\": 5, \"crop_dma_saturates\": 0, "
          "\"compile_hangs_on_large_batch\": 0, \"compile_budget\": 9, \"surface_align\": 0}", "\"max_spatial\" (largest W, H and matmul K) must be an integer in 1.." },
        { "{%s, \"max_spatial\": null, \"max_axis\": 1, \"max_rank\": 4, \"max_kernel_w\": 3, \"wide_row_max\": 5, \"crop_dma_saturates\": 0, "
          "\"compile_hangs_on_large_batch\": 0, \"compile_budget\": 9, \"surface_align\": 0}", "names no \"base\"" },
        { "{%s, \"base\": \"Q1\", \"max_spatial\": 1}", "base family \"Q1\" is not built in" },
        { "{%s, \"max_spatial\": 99999999999999999999, \"max_axis\": 1, \"max_rank\": 4, \"max_kernel_w\": 3, \"wide_row_max\": 5, "
          "\"crop_dma_saturates\": 0, \"compile_hangs_on_large_batch\": 0, \"compile_budget\": 9, \"surface_align\": 0}",
          "\"max_spatial\" (largest W, H and matmul K) must be an integer in 1.." },
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        snprintf(text, sizeof text, fams[i].body, base);
        write_text(path, text);
        char spec[600];
        snprintf(spec, sizeof spec, "ane-sim:%s", path);
        CHECK(af_target_parse(spec, NULL, NULL) != AF_OK && strstr(af_error_message(), fams[i].want),
              "family case %zu: want '%s', got: %s", i, fams[i].want, af_error_message());
    }
    CHECK(af_target_parse("ane-sim:/nonexistent/chip.json", NULL, NULL) == AF_ERR_INVALID &&
              strstr(af_error_message(), "/nonexistent/chip.json"),
          "a missing file is named: %s", af_error_message());
    remove(path);
}

int main(void) {
    test_builtin_unchanged();
    test_loaded_family_walls();
    test_roundtrip();
    test_bad_files();
    return check_finish("family_files");
}
