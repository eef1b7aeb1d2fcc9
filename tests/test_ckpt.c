/* Checkpoints: round trips (empty, multi-MB and replaced records), every truncation and
 * every single-byte flip of a small file rejected cleanly, crafted files with a valid
 * checksum but a bad structure or a newer version, missing records, and crash safety
 * (a child saving in a loop is SIGKILLed at random moments; the file must always load). */
#define _POSIX_C_SOURCE 200809L
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE 1 /* mkdtemp and friends stay visible on macOS */
#endif
#include "support/check.h"
#include "train/ckpt.h"
#include "train/trainer_io.h"
#include "data/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmp[256];

static const char *tpath(const char *name) {
    static char bufs[16][512]; /* a ring, so a few paths can be alive at once */
    static int k;
    char *b = bufs[k++ & 15];
    snprintf(b, 512, "%s/%s", tmp, name);
    return b;
}

static uint8_t *read_all(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    uint8_t *b = malloc(cap);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    *len = n;
    return b;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    if (n) CHECK(fwrite(p, 1, n, f) == n, "write %s", path);
    fclose(f);
}

static int msg_has(const char *s) { return strstr(af_error_message(), s) != NULL; }

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the trailing SHA-256 so a crafted change passes the checksum. */
static void rehash(uint8_t *b, size_t n) { data_sha256(b, n - 32, b + n - 32); }

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Byte i of the pattern for seed: one mix() per 8 bytes (cheap under sanitizers too). */
static uint8_t pattern_byte(uint64_t word, size_t i) { return (uint8_t)(word >> (8 * (i & 7))); }

static void fill_pattern(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i & 7) == 0) w = mix(seed * 0x100000001b3ULL + i / 8);
        p[i] = pattern_byte(w, i);
    }
}

static int same_pattern(const uint8_t *p, size_t n, uint64_t seed) {
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i & 7) == 0) w = mix(seed * 0x100000001b3ULL + i / 8);
        if (p[i] != pattern_byte(w, i)) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- round trip */

/* Sizes of the big records. Unoptimized (Debug, sanitizer) builds hash ~10x slower, so
 * they use smaller ones to keep the test at a few seconds. */
#if defined(__OPTIMIZE__)
#define RT_BIG ((size_t)3 << 20)
#define RT_MOM ((size_t)5 << 20)
#define CRASH_BYTES ((size_t)4 << 20)
#else
#define RT_BIG ((size_t)2 << 20)
#define RT_MOM ((size_t)3 << 20)
#define CRASH_BYTES ((size_t)512 << 10)
#endif

static void test_roundtrip(void) {
    const size_t nbig = RT_BIG + 5, nmom = RT_MOM + 3;
    uint8_t *big = malloc(nbig), *mom = malloc(nmom), odd[13];
    fill_pattern(big, nbig, 1);
    fill_pattern(mom, nmom, 2);
    fill_pattern(odd, sizeof odd, 3);
    char name255[256];
    memset(name255, 'n', 255), name255[255] = 0;

    ckpt *c = ckpt_new();
    CHECK(c != NULL, "new");
    CHECK(ckpt_put(c, "weights", big, (int64_t)nbig) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, "empty", NULL, 0) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put_i64(c, "step", 12345) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put_str(c, "config", "lr=0.001\nbatch=128") == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, "moments", mom, (int64_t)RT_MOM / 2) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, "odd", odd, 13) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, name255, odd, 5) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put_str(c, "emptystr", "") == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put_i64(c, "min", INT64_MIN) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put_i64(c, "max", INT64_MAX) == AF_OK, "%s", af_error_message());
    /* Replacements: an int by another, a big record by a bigger one, a record by a smaller one. */
    CHECK(ckpt_put_i64(c, "step", -7) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, "moments", mom, (int64_t)nmom) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_put(c, "odd", odd + 10, 3) == AF_OK, "%s", af_error_message());
    CHECK(ckpt_count(c) == 10, "count %lld", (long long)ckpt_count(c));
    CHECK(ckpt_name(c, 2) && strcmp(ckpt_name(c, 2), "step") == 0, "replacement keeps position");
    CHECK(ckpt_name(c, 10) == NULL && ckpt_name(c, -1) == NULL, "name out of range");

    const char *p1 = tpath("rt.ckpt"), *p2 = tpath("rt2.ckpt");
    CHECK(ckpt_save(c, p1) == AF_OK, "save: %s", af_error_message());
    ckpt *d = NULL;
    CHECK(ckpt_load(p1, &d) == AF_OK && d, "load: %s", af_error_message());
    if (d) {
        int64_t n = -1, v = 0;
        const uint8_t *w = ckpt_get(d, "weights", &n);
        CHECK(w && n == (int64_t)nbig && memcmp(w, big, nbig) == 0, "weights round trip (%lld bytes)", (long long)n);
        CHECK(((uintptr_t)w & 7) == 0, "payload aligned");
        const uint8_t *m = ckpt_get(d, "moments", &n);
        CHECK(m && n == (int64_t)nmom && memcmp(m, mom, nmom) == 0, "replaced moments round trip");
        const void *e = ckpt_get(d, "empty", &n);
        CHECK(e != NULL && n == 0, "empty record is present with 0 bytes");
        CHECK(ckpt_get_i64(d, "step", &v) == AF_OK && v == -7, "step %lld: %s", (long long)v, af_error_message());
        CHECK(ckpt_get_i64(d, "min", &v) == AF_OK && v == INT64_MIN, "INT64_MIN");
        CHECK(ckpt_get_i64(d, "max", &v) == AF_OK && v == INT64_MAX, "INT64_MAX");
        const char *s = ckpt_get_str(d, "config");
        CHECK(s && strcmp(s, "lr=0.001\nbatch=128") == 0, "config string");
        s = ckpt_get_str(d, "emptystr");
        CHECK(s && *s == 0, "empty string");
        const uint8_t *o = ckpt_get(d, "odd", &n);
        CHECK(o && n == 3 && memcmp(o, odd + 10, 3) == 0, "odd replaced by 3 bytes");
        o = ckpt_get(d, name255, &n);
        CHECK(o && n == 5 && memcmp(o, odd, 5) == 0, "255-byte name");
        CHECK(ckpt_count(d) == 10, "loaded count");
        int order_ok = 1;
        for (int64_t i = 0; i < ckpt_count(c); i++) order_ok &= strcmp(ckpt_name(c, i), ckpt_name(d, i)) == 0;
        CHECK(order_ok, "file keeps record order");

        /* Saving what was loaded gives the same bytes. */
        CHECK(ckpt_save(d, p2) == AF_OK, "save 2: %s", af_error_message());
        size_t l1, l2;
        uint8_t *b1 = read_all(p1, &l1), *b2 = read_all(p2, &l2);
        CHECK(b1 && b2 && l1 == l2 && memcmp(b1, b2, l1) == 0, "deterministic bytes (%zu vs %zu)", l1, l2);
        CHECK(l1 % 8 == 0 && memcmp(b1, "AFCKPT01", 8) == 0, "magic and alignment");
        free(b1), free(b2);

        /* Replacing a record with a slice of itself copies before freeing the old one. */
        w = ckpt_get(d, "weights", &n);
        CHECK(ckpt_put(d, "weights", w + 1, n - 1) == AF_OK, "self put");
        w = ckpt_get(d, "weights", &n);
        CHECK(w && n == (int64_t)nbig - 1 && memcmp(w, big + 1, nbig - 1) == 0, "self put contents");
    }
    ckpt_free(d);
    ckpt_free(c);

    /* An empty checkpoint round-trips too. */
    c = ckpt_new();
    CHECK(ckpt_save(c, p1) == AF_OK, "save empty: %s", af_error_message());
    d = NULL;
    CHECK(ckpt_load(p1, &d) == AF_OK && d && ckpt_count(d) == 0, "load empty: %s", af_error_message());
    ckpt_free(d);
    ckpt_free(c);
    free(big), free(mom);
}

/* ---------------------------------------------------------------- bad arguments, I/O */

static void test_args(void) {
    ckpt *c = ckpt_new();
    char longname[300];
    memset(longname, 'x', 256), longname[256] = 0;
    CHECK(ckpt_put(c, longname, "a", 1) == AF_ERR_INVALID && msg_has("255"), "long name: %s", af_error_message());
    CHECK(ckpt_put(c, "", "a", 1) == AF_ERR_INVALID, "empty name");
    CHECK(ckpt_put(c, NULL, "a", 1) == AF_ERR_INVALID, "NULL name");
    CHECK(ckpt_put(c, "neg", "a", -1) == AF_ERR_INVALID && msg_has("neg"), "negative size: %s", af_error_message());
    CHECK(ckpt_put(c, "nul", NULL, 4) == AF_ERR_INVALID, "NULL data");
    CHECK(ckpt_put(NULL, "x", "a", 1) == AF_ERR_INVALID, "NULL ckpt");
    CHECK(ckpt_put_str(c, "s", NULL) == AF_ERR_INVALID, "NULL string");
    CHECK(ckpt_count(c) == 0, "nothing stored by failed puts");
    ckpt_put_i64(c, "k", 1);

    const char *nodir = tpath("no/such/dir/x.ckpt");
    CHECK(ckpt_save(c, nodir) == AF_ERR_IO && msg_has(nodir), "save into missing dir: %s", af_error_message());
    ckpt *d = (ckpt *)1;
    const char *missing = tpath("missing.ckpt");
    CHECK(ckpt_load(missing, &d) == AF_ERR_IO && d == NULL && msg_has(missing), "load missing: %s",
          af_error_message());
    CHECK(ckpt_load(tmp, &d) != AF_OK && d == NULL, "load a directory");

    /* A failing rename (path is a directory) leaves no temp file and no damage. */
    const char *sub = tpath("sub");
    CHECK(mkdir(sub, 0755) == 0, "mkdir");
    CHECK(ckpt_save(c, sub) == AF_ERR_IO && msg_has("rename"), "save over a directory: %s", af_error_message());
    DIR *dd = opendir(tmp);
    int strays = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) strays += strncmp(e->d_name, "sub.tmp.", 8) == 0;
    if (dd) closedir(dd);
    CHECK(strays == 0, "temp file removed after a failed save (%d left)", strays);
    rmdir(sub);
    ckpt_free(c);
}

/* ---------------------------------------------------------------- a small file to damage */

/* Records "ka" (int64), "kb" (string "hello"), "kcc" (13 bytes). Layout:
 * 0 header | 32 ka: hdr, name@48, payload@56 | 64 kb: hdr, name@80, payload@88 |
 * 96 kcc: hdr, name@112, payload@120..133, pad to 136 | 136 trailer | 168 end. */
static uint8_t *small_file(const char *path, size_t *len) {
    ckpt *c = ckpt_new();
    uint8_t thirteen[13];
    fill_pattern(thirteen, 13, 9);
    ckpt_put_i64(c, "ka", 42);
    ckpt_put_str(c, "kb", "hello");
    ckpt_put(c, "kcc", thirteen, 13);
    CHECK(ckpt_save(c, path) == AF_OK, "save small: %s", af_error_message());
    ckpt_free(c);
    uint8_t *b = read_all(path, len);
    CHECK(b && *len == 168, "small file is %zu bytes", *len);
    return b;
}

static void test_truncation(void) {
    size_t n;
    uint8_t *b = small_file(tpath("small.ckpt"), &n);
    if (!b) return;
    const char *tp = tpath("trunc.ckpt");
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        write_all(tp, b, len);
        ckpt *d = (ckpt *)1;
        af_status st = ckpt_load(tp, &d);
        if (st != AF_ERR_CORRUPT || d != NULL || !msg_has(tp)) {
            bad++;
            fprintf(stderr, "truncated to %zu: status %s, message '%s'\n", len, af_status_name(st), af_error_message());
        }
        if (st == AF_OK) ckpt_free(d);
    }
    CHECK(bad == 0, "%d of %zu truncations not rejected cleanly", bad, n);
    write_all(tp, b, 100);
    ckpt *d = NULL;
    CHECK(ckpt_load(tp, &d) != AF_OK && msg_has("truncated") && msg_has("168"), "truncation message: %s",
          af_error_message());
    /* Extra bytes at the end are rejected too. */
    uint8_t *ext = calloc(n + 8, 1);
    memcpy(ext, b, n);
    write_all(tp, ext, n + 1);
    CHECK(ckpt_load(tp, &d) == AF_ERR_CORRUPT && d == NULL, "one extra byte");
    write_all(tp, ext, n + 8);
    CHECK(ckpt_load(tp, &d) == AF_ERR_CORRUPT && d == NULL, "eight extra bytes");
    free(ext);
    free(b);
}

static void test_flips(void) {
    size_t n;
    uint8_t *b = small_file(tpath("small.ckpt"), &n);
    if (!b) return;
    const char *fp = tpath("flip.ckpt");
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    int bad = 0, tried = 0;
    for (size_t off = 0; off < n; off++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            b[off] ^= masks[m];
            write_all(fp, b, n);
            b[off] ^= masks[m];
            ckpt *d = (ckpt *)1;
            af_status st = ckpt_load(fp, &d);
            const char *want = off < 8 ? "bad magic" : "checksum";
            tried++;
            if (st != AF_ERR_CORRUPT || d != NULL || !msg_has(fp) || !msg_has(want)) {
                bad++;
                fprintf(stderr, "flip 0x%02x at %zu: status %s, message '%s'\n", masks[m], off, af_status_name(st),
                        af_error_message());
            }
            if (st == AF_OK) ckpt_free(d);
        }
    }
    CHECK(bad == 0, "%d of %d byte flips not rejected as corrupt", bad, tried);
    write_all(fp, b, n);
    ckpt *d = NULL;
    CHECK(ckpt_load(fp, &d) == AF_OK, "undamaged copy loads: %s", af_error_message());
    ckpt_free(d);
    free(b);
}

/* Files with a valid checksum but a newer version or a bad structure. */
static void expect_crafted(const uint8_t *orig, size_t n, size_t off, uint64_t v, int width, af_status want_st,
                           const char *want_msg) {
    uint8_t *b = malloc(n);
    memcpy(b, orig, n);
    put_le(b + off, v, width);
    rehash(b, n);
    const char *cp = tpath("crafted.ckpt");
    write_all(cp, b, n);
    ckpt *d = (ckpt *)1;
    af_status st = ckpt_load(cp, &d);
    CHECK(st == want_st && d == NULL && msg_has(cp) && msg_has(want_msg), "crafted @%zu=%llu: want %s '%s', got %s '%s'",
          off, (unsigned long long)v, af_status_name(want_st), want_msg, af_status_name(st), af_error_message());
    if (st == AF_OK) ckpt_free(d);
    free(b);
}

static void test_crafted(void) {
    size_t n;
    uint8_t *b = small_file(tpath("small.ckpt"), &n);
    if (!b || n != 168) {
        free(b);
        return;
    }
    expect_crafted(b, n, 8, 3, 4, AF_ERR_UNSUPPORTED, "written by format version 3; this build reads up to 1");
    expect_crafted(b, n, 8, 0, 4, AF_ERR_CORRUPT, "unknown format version 0");
    expect_crafted(b, n, 12, 1, 4, AF_ERR_CORRUPT, "unknown header flags");
    expect_crafted(b, n, 16, 1ULL << 60, 8, AF_ERR_CORRUPT, "record count");
    expect_crafted(b, n, 16, 4, 8, AF_ERR_CORRUPT, "record 3: header runs past");
    expect_crafted(b, n, 16, 2, 8, AF_ERR_CORRUPT, "40 stray bytes");
    expect_crafted(b, n, 24, 999, 8, AF_ERR_CORRUPT, "header says the file has 999 bytes");
    expect_crafted(b, n, 32, 0, 4, AF_ERR_CORRUPT, "record 0: name length 0");
    expect_crafted(b, n, 32, 300, 4, AF_ERR_CORRUPT, "record 0: name length 300");
    expect_crafted(b, n, 36, 5, 4, AF_ERR_CORRUPT, "reserved field");
    expect_crafted(b, n, 40, 1ULL << 62, 8, AF_ERR_CORRUPT, "record 0 ('ka'): payload of");
    expect_crafted(b, n, 40, 1000, 8, AF_ERR_CORRUPT, "runs past the end");
    expect_crafted(b, n, 72, 1000, 8, AF_ERR_CORRUPT, "record 1 ('kb'): payload of 1000 bytes");
    expect_crafted(b, n, 50, 7, 1, AF_ERR_CORRUPT, "nonzero padding after the name");
    expect_crafted(b, n, 93, 7, 1, AF_ERR_CORRUPT, "nonzero padding after the payload");
    expect_crafted(b, n, 80, 0, 1, AF_ERR_CORRUPT, "name holds a NUL");
    expect_crafted(b, n, 81, 'a', 1, AF_ERR_CORRUPT, "duplicate name 'ka'");
    expect_crafted(b, n, 96, 250, 4, AF_ERR_CORRUPT, "record 2: name runs past");

    /* Not a checkpoint at all; and an empty file. */
    const char *wp = tpath("wrong.ckpt");
    write_all(wp, "hello, world: this is not a checkpoint file at all....", 54);
    ckpt *d = (ckpt *)1;
    CHECK(ckpt_load(wp, &d) == AF_ERR_CORRUPT && d == NULL && msg_has(wp) && msg_has("not an aneforge checkpoint (bad magic)"),
          "wrong magic: %s", af_error_message());
    write_all(wp, "AF", 2);
    CHECK(ckpt_load(wp, &d) == AF_ERR_CORRUPT && msg_has("truncated"), "2-byte file: %s", af_error_message());
    write_all(wp, "", 0);
    CHECK(ckpt_load(wp, &d) == AF_ERR_CORRUPT && msg_has("truncated (0 bytes"), "empty file: %s", af_error_message());
    free(b);
}

/* ---------------------------------------------------------------- missing records */

static void test_missing(void) {
    size_t n;
    const char *sp = tpath("small.ckpt");
    free(small_file(sp, &n));
    ckpt *d = NULL;
    CHECK(ckpt_load(sp, &d) == AF_OK && d, "load: %s", af_error_message());
    if (!d) return;
    int64_t v = 99, bytes = 99;
    CHECK(ckpt_get_i64(d, "ka", &v) == AF_OK && v == 42, "ka");
    CHECK(ckpt_get_i64(d, "step", &v) == AF_ERR_INVALID && msg_has("'step'") && msg_has(sp) && msg_has("no record"),
          "missing int: %s", af_error_message());
    CHECK(ckpt_get_i64(d, "kb", &v) == AF_ERR_CORRUPT && msg_has("'kb' holds 5 bytes") && msg_has("8"),
          "mis-sized int: %s", af_error_message());
    CHECK(ckpt_get(d, "nope", &bytes) == NULL && bytes == 0 && msg_has("'nope'"), "missing raw");
    CHECK(ckpt_get_str(d, "cfg") == NULL && msg_has("'cfg'") && msg_has("no record"), "missing str: %s",
          af_error_message());
    const char *s = ckpt_get_str(d, "kb");
    CHECK(s && strcmp(s, "hello") == 0, "kb");
    ckpt_put_i64(d, "zeros", 0); /* 8 NUL bytes: not a string */
    CHECK(ckpt_get_str(d, "zeros") == NULL && msg_has("NUL"), "binary as string: %s", af_error_message());
    ckpt_free(d);

    ckpt *c = ckpt_new();
    CHECK(ckpt_get_i64(c, "x", &v) == AF_ERR_INVALID && msg_has("checkpoint: no record named 'x'"),
          "in-memory message: %s", af_error_message());
    ckpt_free(c);
}

/* ---------------------------------------------------------------- trainer import
 * Bad records that fuzz/fuzz_trainer_load.c found: a checkpoint that fails to load must
 * leave the trainer exactly as it was; one whose loss scale is not a positive finite
 * number (gradients are divided by it) or whose step counters are negative or near
 * INT64_MAX (steps advance them) must fail. */

static af_trainer *tiny_trainer(void) {
    af_net net = af_net_mlp(AF_SHAPE(4), 3, 2, 7);
    af_train_opts o = af_train_defaults();
    o.compile.target = AF_TARGET_CPU;
    o.batch = o.eval_batch = 2;
    o.dynamic_loss_scale = 1;
    o.loss_scale = 1024;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    CHECK(t != NULL, "tiny trainer: %s", af_error_message());
    return t;
}

static ckpt *state_of(af_trainer *t) {
    ckpt *c = ckpt_new();
    CHECK(c && tr_export(t, c) == AF_OK, "export: %s", af_error_message());
    return c;
}

static int same_records(const ckpt *a, const ckpt *b) {
    if (ckpt_count(a) != ckpt_count(b)) return 0;
    for (int64_t i = 0; i < ckpt_count(a); i++) {
        int64_t na, nb;
        const void *pa = ckpt_get(a, ckpt_name(a, i), &na), *pb = ckpt_get(b, ckpt_name(a, i), &nb);
        if (!pb || na != nb || memcmp(pa, pb, (size_t)na) != 0) return 0;
    }
    return 1;
}

/* A copy of src with record `name` replaced by (p, n), or left out when p is NULL. */
static ckpt *edited(const ckpt *src, const char *name, const void *p, int64_t n) {
    ckpt *c = ckpt_new();
    for (int64_t i = 0; c && i < ckpt_count(src); i++) {
        const char *nm = ckpt_name(src, i);
        int64_t bytes;
        const void *d = ckpt_get(src, nm, &bytes);
        if (strcmp(nm, name) != 0) ckpt_put(c, nm, d, bytes);
        else if (p) ckpt_put(c, nm, p, n);
    }
    return c;
}

static void test_trainer_import(void) {
    af_trainer *a = tiny_trainer(), *b = tiny_trainer();
    if (!a || !b) goto done;
    const float x[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1}, y[4] = {1, 0, 0, 1};
    CHECK(af_trainer_step(a, x, y, NULL) == AF_OK, "step: %s", af_error_message()); /* a now differs from b */
    ckpt *good = state_of(a), *before = state_of(b);
    const float nan = NAN, inf = INFINITY, zero = 0.0f, neg = -2.0f;
    uint8_t minus1[8], huge[8]; /* int64 records are little-endian */
    put_le(minus1, UINT64_MAX, 8);
    put_le(huge, INT64_MAX, 8);
    const struct { const char *name; const void *p; int64_t n; const char *msg; } bad[] = {
        {"adam_v.3", NULL, 0, "'adam_v.3' is missing"},   /* the last record the import reads */
        {"param.2", "abc", 3, "'param.2' holds 3 bytes"},
        {"trainer.scale", &nan, 4, "loss scale nan"},
        {"trainer.scale", &inf, 4, "loss scale inf"},
        {"trainer.scale", &zero, 4, "loss scale 0 "},
        {"trainer.scale", &neg, 4, "loss scale -2"},
        {"trainer.step", &minus1, 8, "'trainer.step' is -1"},
        {"trainer.step", &huge, 8, "'trainer.step' is 9223372036854775807"}, /* step + 1 would overflow */
        {"trainer.skipped", &minus1, 8, "'trainer.skipped' is -1"},
        {"trainer.clean_run", &huge, 8, "'trainer.clean_run' is 9223372036854775807"},
        {"trainer.skipped_consecutive", &minus1, 8, "'trainer.skipped_consecutive' is -1"},
    };
    const char *path = tpath("import.ckpt");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ckpt *e = edited(good, bad[i].name, bad[i].p, bad[i].n);
        CHECK(e && ckpt_save(e, path) == AF_OK, "save case %zu: %s", i, af_error_message());
        af_status st = af_trainer_load(b, path);
        CHECK(st == AF_ERR_CORRUPT && msg_has(bad[i].msg), "case %zu (%s): status %d, message: %s", i, bad[i].name,
              (int)st, af_error_message());
        ckpt *now = state_of(b);
        CHECK(same_records(now, before), "case %zu (%s): the failed load changed the trainer", i, bad[i].name);
        ckpt_free(now);
        ckpt_free(e);
    }
    CHECK(ckpt_save(good, path) == AF_OK && af_trainer_load(b, path) == AF_OK, "good load: %s", af_error_message());
    ckpt *now = state_of(b);
    CHECK(same_records(now, good), "a good load gives the saved state");
    ckpt_free(now);
    ckpt_free(good);
    ckpt_free(before);
done:
    af_trainer_free(a);
    af_trainer_free(b);
}

/* A load writes the moments, so the host optimizer must forget the bounds its updates
 * kept on them (host_opt.c's screen proves a step finite from those bounds and then
 * skips the pass that checks it). b steps once (its bounds: small), then loads a's state
 * with adam_m.0 at +-3e38 and adam_v.0 at 0 (finite, so the load takes them). The next
 * batch has a zero input feature, so some of param 0's gradients are 0, their v stays 0
 * and w - lr_t m / (sqrt(v) + eps) overflows: the step must be skipped, the state kept.
 * planted: tr_import without tr_forget_state_bounds -> the step stores inf. */
static void test_load_forgets_state_bounds(void) {
    af_trainer *a = tiny_trainer(), *b = tiny_trainer();
    if (!a || !b) goto done;
    const float x[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1}, y[4] = {1, 0, 0, 1};
    CHECK(af_trainer_step(a, x, y, NULL) == AF_OK && af_trainer_step(b, x, y, NULL) == AF_OK, "steps: %s", af_error_message());
    ckpt *good = state_of(a), *e = NULL, *loaded = NULL, *after = NULL;
    int64_t bytes = 0;
    CHECK(ckpt_get(good, "adam_m.0", &bytes) && bytes > 0, "adam_m.0 is in the checkpoint");
    float *big = malloc((size_t)bytes), *zero = calloc(1, (size_t)bytes);
    for (int64_t j = 0; big && j < bytes / 4; j++) big[j] = j % 2 ? -3e38f : 3e38f;
    const char *path = tpath("bounds.ckpt");
    ckpt *e1 = big ? edited(good, "adam_m.0", big, bytes) : NULL;
    e = e1 && zero ? edited(e1, "adam_v.0", zero, bytes) : NULL;
    ckpt_free(e1);
    CHECK(e && ckpt_save(e, path) == AF_OK && af_trainer_load(b, path) == AF_OK, "load: %s", af_error_message());
    loaded = state_of(b);
    const float x2[8] = {1, 0, 0.5f, 3, -1, 0, 2, 1}; /* feature 1 is 0 in both samples */
    af_step_info info = { 0 };
    CHECK(af_trainer_step(b, x2, y, &info) == AF_OK, "step after the load: %s", af_error_message());
    CHECK(info.skipped_now == 1, "the step whose update overflows was taken (skipped_now %d)", info.skipped_now);
    after = state_of(b);
    static const char *const rec[3] = { "param.0", "adam_m.0", "adam_v.0" };
    for (int k = 0; k < 3; k++) {
        int64_t na = 0, nb = 0;
        const float *pa = ckpt_get(loaded, rec[k], &na), *pb = ckpt_get(after, rec[k], &nb);
        CHECK(pa && pb && na == nb && memcmp(pa, pb, (size_t)na) == 0, "%s changed on a skipped step", rec[k]);
        for (int64_t j = 0; pb && j < nb / 4; j++)
            if (!isfinite(pb[j])) { CHECK(0, "%s[%lld] is %g", rec[k], (long long)j, (double)pb[j]); break; }
    }
    ckpt_free(after);
    ckpt_free(loaded);
    ckpt_free(e);
    ckpt_free(good);
    free(big);
    free(zero);
done:
    af_trainer_free(a);
    af_trainer_free(b);
}

/* ---------------------------------------------------------------- crash safety */


#define CRASH_ROUNDS 20

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static af_status save_gen(ckpt *c, uint8_t *buf, const char *path, int64_t gen) {
    fill_pattern(buf, CRASH_BYTES, (uint64_t)gen);
    af_status st = ckpt_put_i64(c, "gen", gen);
    if (st == AF_OK) st = ckpt_put(c, "big", buf, (int64_t)CRASH_BYTES);
    if (st == AF_OK) st = ckpt_save(c, path);
    return st;
}

/* Saves new generations (round+1)*1e6 + j forever; the parent kills it. */
static void crash_child(const char *path, int round) {
    alarm(30); /* never outlive a parent that died */
    ckpt *c = ckpt_new();
    uint8_t *buf = malloc(CRASH_BYTES);
    if (!c || !buf || ckpt_put_str(c, "note", "written by a child") != AF_OK) _exit(2);
    for (int64_t j = 0; j < 100000; j++)
        if (save_gen(c, buf, path, (int64_t)(round + 1) * 1000000 + j) != AF_OK) {
            fprintf(stderr, "child save failed: %s\n", af_error_message());
            _exit(3);
        }
    _exit(0);
}

static void test_crash_safety(void) {
    char path[512], own[640];
    snprintf(path, sizeof path, "%s", tpath("crash.ckpt")); /* outlives the tpath ring */
    const char *base = "crash.ckpt";
    size_t bl = strlen(base);
    uint8_t *buf = malloc(CRASH_BYTES);
    ckpt *c = ckpt_new();
    /* Kill delays scale with how long one save takes here (sanitizers, slow disks). */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(save_gen(c, buf, path, 0) == AF_OK, "initial save: %s", af_error_message());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double save_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (save_ms < 2) save_ms = 2;
    if (save_ms > 400) save_ms = 400;

    test_rng rng = {20240607};
    int64_t known = 0;
    pid_t allowed[CRASH_ROUNDS + 1]; /* pids whose temp files may still be there */
    int nallowed = 0, saw_new = 0, saw_temp = 0, bad_temps = 0, bad_loads = 0;
    for (int round = 0; round < CRASH_ROUNDS; round++) {
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid < 0) break;
        if (pid == 0) crash_child(path, round);
        /* Mostly within the first save or two; every 4th round long enough for a few. */
        double ms = round % 4 == 3 ? 3.0 * save_ms : 0.5 + 2.0 * save_ms * test_uniform(&rng);
        sleep_ms(ms);
        kill(pid, SIGKILL);
        int ws = 0;
        CHECK(waitpid(pid, &ws, 0) == pid, "waitpid");
        CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "round %d: child ended by itself (status 0x%x)", round, ws);

        ckpt *d = NULL;
        af_status st = ckpt_load(path, &d);
        int64_t gen = -1, n = 0;
        const uint8_t *big = NULL;
        if (st == AF_OK) {
            ckpt_get_i64(d, "gen", &gen);
            big = ckpt_get(d, "big", &n);
        }
        int from_child = gen / 1000000 == round + 1;
        int ok = st == AF_OK && (gen == known || (from_child && gen >= known)) && big &&
                 n == (int64_t)CRASH_BYTES && same_pattern(big, CRASH_BYTES, (uint64_t)gen);
        if (!ok) {
            bad_loads++;
            fprintf(stderr, "round %d (killed after %.1f ms): status %s '%s', gen %lld (known %lld)\n", round, ms,
                    af_status_name(st), af_error_message(), (long long)gen, (long long)known);
        }
        ckpt_free(d);
        if (gen != known && gen >= 0) saw_new++;
        if (gen >= 0) known = gen;

        /* A child whose save we saw has swept the temp files of every earlier (dead) child. */
        if (from_child) nallowed = 0;
        allowed[nallowed++] = pid;
        DIR *dd = opendir(tmp);
        int temps = 0;
        for (struct dirent *e; dd && (e = readdir(dd));) {
            if (strncmp(e->d_name, base, bl) != 0 || strcmp(e->d_name, base) == 0) continue;
            temps++;
            int fine = 0;
            if (strncmp(e->d_name + bl, ".tmp.", 5) == 0) {
                long tp = strtol(e->d_name + bl + 5, NULL, 10);
                for (int i = 0; i < nallowed; i++) fine |= tp == (long)allowed[i];
            }
            if (!fine) {
                bad_temps++;
                fprintf(stderr, "round %d: unexpected file %s\n", round, e->d_name);
            }
        }
        if (dd) closedir(dd);
        snprintf(own, sizeof own, "%s.tmp.%ld", path, (long)pid);
        struct stat sb;
        saw_temp += stat(own, &sb) == 0;
    }
    CHECK(bad_loads == 0, "%d of %d rounds left a file that does not load as the old or new version", bad_loads,
          CRASH_ROUNDS);
    CHECK(bad_temps == 0, "%d unexpected temp files", bad_temps);

    /* One more save sweeps every dead child's temp file. */
    CHECK(save_gen(c, buf, path, 1) == AF_OK, "final save: %s", af_error_message());
    DIR *dd = opendir(tmp);
    int left = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) left += strncmp(e->d_name, "crash.ckpt.", 11) == 0;
    if (dd) closedir(dd);
    CHECK(left == 0, "%d temp files left after a clean save", left);
    printf("crash safety: %d rounds (one save %.1f ms), %d saw a new version, %d killed mid-save (own temp file left)\n",
           CRASH_ROUNDS, save_ms, saw_new, saw_temp);
    ckpt_free(c);
    free(buf);
}

/* ---------------------------------------------------------------- main */

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[1024];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/af_ckpt_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip();
    test_args();
    test_truncation();
    test_flips();
    test_crafted();
    test_missing();
    test_trainer_import();
    test_load_forgets_state_bounds();
    test_crash_safety();
    remove_tree(tmp);
    return check_finish("ckpt");
}
