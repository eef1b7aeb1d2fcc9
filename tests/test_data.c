/* Data layer: IDX / CIFAR / npy readers on small synthetic files (no network, no real
 * datasets), every corruption rejected with a message naming the file, and SHA-256. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge_data.h"
#include "data/data.h"
#include "data/sha256.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];

static const char *tpath(const char *name) {
    static char bufs[32][512]; /* a ring, so a few paths can be alive at once */
    static int k;
    char *b = bufs[k++ & 31];
    snprintf(b, 512, "%s/%s", tmp, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    if (n) CHECK(fwrite(p, 1, n, f) == n, "write %s", path);
    fclose(f);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* An IDX ubyte file: magic 0x0800|rank, dims, then payload. Returns its length. */
static size_t make_idx(uint8_t *out, uint32_t magic, int rank, const uint32_t *dims,
                       const uint8_t *payload, size_t n) {
    put_be32(out, magic);
    for (int i = 0; i < rank; i++) put_be32(out + 4 + 4 * i, dims[i]);
    memcpy(out + 4 + 4 * rank, payload, n);
    return 4 + 4 * (size_t)rank + n;
}

/* Loading must fail, with a message that mentions `name` (and `also`, if given). */
static void expect_fail_idx(const char *img, const char *lab, const char *name, const char *also,
                            const char *what) {
    af_dataset *d = af_dataset_load_idx(img, lab);
    const char *msg = af_error_message();
    CHECK(d == NULL, "%s: load should fail", what);
    CHECK(strstr(msg, name) != NULL, "%s: message should name %s: \"%s\"", what, name, msg);
    if (also) CHECK(strstr(msg, also) != NULL, "%s: message should say \"%s\": \"%s\"", what, also, msg);
    af_dataset_free(d);
}

enum { N = 5, H = 3, W = 4 };

static void test_idx(void) {
    uint8_t pix[N * H * W], lab[N] = { 3, 0, 9, 1, 7 }, buf[4096];
    for (int i = 0; i < N * H * W; i++) pix[i] = (uint8_t)(i * 37 % 256);
    pix[0] = 0, pix[1] = 255;
    const char *img = tpath("img"), *lbl = tpath("lbl");
    uint32_t idim[3] = { N, H, W }, ldim[1] = { N };
    size_t ilen = make_idx(buf, 0x803, 3, idim, pix, sizeof pix);
    write_bytes(img, buf, ilen);
    uint8_t good_img[4096];
    memcpy(good_img, buf, ilen);
    write_bytes(lbl, buf, make_idx(buf, 0x801, 1, ldim, lab, N));

    af_dataset *d = af_dataset_load_idx(img, lbl);
    CHECK(d != NULL, "valid IDX loads: %s", af_error_message());
    if (d) {
        int c, h, w;
        af_dataset_sample_shape(d, &c, &h, &w);
        CHECK(af_dataset_count(d) == N && c == 1 && h == H && w == W, "shape %d %d %d", c, h, w);
        CHECK(af_dataset_classes(d) == 10, "classes");
        CHECK(memcmp(af_dataset_labels(d), lab, N) == 0, "labels");
        int64_t idx[3] = { 4, 0, 2 };
        float x[3 * H * W], oh[3 * 10];
        CHECK(af_dataset_batch(d, 3, idx, x, oh) == AF_OK, "batch: %s", af_error_message());
        int ok = 1;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < H * W; j++)
                ok &= x[i * H * W + j] == (float)pix[idx[i] * H * W + j] / 255.0f;
        CHECK(ok, "batch pixels scaled by 1/255");
        CHECK(x[H * W] == 0.0f && x[H * W + 1] == 1.0f, "0 -> 0.0 and 255 -> 1.0 exactly");
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 10; k++)
                CHECK(oh[i * 10 + k] == (k == lab[idx[i]] ? 1.0f : 0.0f), "one-hot row %d col %d", i, k);
        CHECK(af_dataset_batch(d, 1, idx, NULL, oh) == AF_OK, "either output may be NULL");
        CHECK(af_dataset_batch(d, 1, idx, x, NULL) == AF_OK, "either output may be NULL");
        CHECK(af_dataset_batch(d, 0, NULL, NULL, NULL) == AF_OK, "an empty batch is fine");
        int64_t bad[3] = { 1, N, 0 };
        x[H * W] = 7.0f;
        oh[2 * 10 + lab[0]] = 0.0f;
        CHECK(af_dataset_batch(d, 3, bad, x, oh) == AF_ERR_INVALID, "an out-of-range index is an error");
        CHECK(strstr(af_error_message(), "idx[1]") && strstr(af_error_message(), "out of range"),
              "bad index reported: %s", af_error_message());
        CHECK(x[H * W] == 0.0f && oh[10 + 3] == 0.0f, "out-of-range index gives a zero row");
        CHECK(x[2 * H * W + 1] == 1.0f && oh[2 * 10 + lab[0]] == 1.0f,
              "rows after a bad index are still written");
        CHECK(af_dataset_batch(d, -1, idx, x, oh) == AF_ERR_INVALID && strstr(af_error_message(), "negative"),
              "negative n: %s", af_error_message());
        CHECK(af_dataset_batch(d, 1, NULL, x, oh) == AF_ERR_INVALID && strstr(af_error_message(), "idx"),
              "NULL idx: %s", af_error_message());
        CHECK(af_dataset_batch(NULL, 1, idx, x, oh) == AF_ERR_INVALID && strstr(af_error_message(), "dataset"),
              "NULL dataset: %s", af_error_message());
    }
    af_dataset_free(d);
    af_dataset_free(NULL);

    /* Corruptions of the images file. */
    const char *bad = tpath("bad-images");
    write_bytes(bad, buf, 0);
    expect_fail_idx(bad, lbl, bad, "empty", "empty file");
    write_bytes(bad, good_img, 3);
    expect_fail_idx(bad, lbl, bad, "truncated", "truncated magic");
    write_bytes(bad, good_img, 12);
    expect_fail_idx(bad, lbl, bad, "truncated", "truncated dims");
    write_bytes(bad, good_img, ilen - 1);
    expect_fail_idx(bad, lbl, bad, "truncated", "truncated data");
    memcpy(buf, good_img, ilen);
    buf[ilen] = 0;
    write_bytes(bad, buf, ilen + 1);
    expect_fail_idx(bad, lbl, bad, "trailing", "trailing garbage");
    put_be32(buf, 0x12345678);
    write_bytes(bad, buf, ilen);
    expect_fail_idx(bad, lbl, bad, "magic", "bad magic");
    put_be32(buf, 0x00000d03); /* int32 element type */
    write_bytes(bad, buf, ilen);
    expect_fail_idx(bad, lbl, bad, "magic", "wrong element type");
    uint32_t d2[2] = { N, H * W };
    write_bytes(bad, buf, make_idx(buf, 0x802, 2, d2, pix, sizeof pix));
    expect_fail_idx(bad, lbl, bad, "dimensions", "rank 2 images");
    expect_fail_idx(lbl, lbl, lbl, "dimensions", "labels given as images");
    expect_fail_idx(img, img, img, "dimensions", "images given as labels");
    uint32_t dz[3] = { N, 0, W };
    write_bytes(bad, buf, make_idx(buf, 0x803, 3, dz, pix, 0));
    expect_fail_idx(bad, lbl, bad, "is 0", "zero dim");
    uint32_t dh[3] = { 0xffffffffu, 0xffffffffu, 0xffffffffu };
    write_bytes(bad, buf, make_idx(buf, 0x803, 3, dh, pix, sizeof pix));
    expect_fail_idx(bad, lbl, bad, NULL, "dims whose product overflows");
    const uint8_t gz[] = { 0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0 };
    const char *gzp = tpath("train-images-idx3-ubyte.gz");
    write_bytes(gzp, gz, sizeof gz);
    expect_fail_idx(gzp, lbl, gzp, "truncated gzip data", "a gzip header alone");
    const char *missing = tpath("no-such-file");
    expect_fail_idx(missing, lbl, missing, NULL, "missing images");
    expect_fail_idx(img, missing, missing, NULL, "missing labels");
    expect_fail_idx(img, NULL, "labels", NULL, "NULL labels path");

    /* Corruptions of the labels file. */
    const char *badl = tpath("bad-labels");
    uint8_t lab2[N];
    memcpy(lab2, lab, N);
    lab2[3] = 10;
    write_bytes(badl, buf, make_idx(buf, 0x801, 1, ldim, lab2, N));
    expect_fail_idx(img, badl, badl, "label 3", "label out of range");
    uint32_t l4[1] = { N - 1 };
    write_bytes(badl, buf, make_idx(buf, 0x801, 1, l4, lab, N - 1));
    expect_fail_idx(img, badl, badl, "labels", "count mismatch");

    /* Every truncation of a valid file fails cleanly. */
    int all = 1;
    for (size_t cut = 0; cut < ilen; cut++) {
        write_bytes(bad, good_img, cut);
        af_dataset *t = af_dataset_load_idx(bad, lbl);
        all &= t == NULL && strstr(af_error_message(), bad) != NULL;
        af_dataset_free(t);
    }
    CHECK(all, "every truncation rejected with the file name");
    remove(img), remove(lbl), remove(bad), remove(badl), remove(gzp);
}

static void make_cifar(uint8_t *rec, int n, int seed) {
    for (int r = 0; r < n; r++) {
        rec[r * 3073] = (uint8_t)((seed + r) % 10);
        for (int j = 0; j < 3072; j++) rec[r * 3073 + 1 + j] = (uint8_t)((j * 7 + r * 13 + seed) % 256);
    }
}

static void expect_fail_cifar(int n, const char *const *paths, const char *name, const char *also,
                              const char *what) {
    af_dataset *d = af_dataset_load_cifar(n, paths);
    const char *msg = af_error_message();
    CHECK(d == NULL, "%s: load should fail", what);
    CHECK(strstr(msg, name) != NULL, "%s: message should name %s: \"%s\"", what, name, msg);
    if (also) CHECK(strstr(msg, also) != NULL, "%s: message should say \"%s\": \"%s\"", what, also, msg);
    af_dataset_free(d);
}

static void test_cifar(void) {
    static uint8_t a[2 * 3073], b[3 * 3073];
    make_cifar(a, 2, 0);
    make_cifar(b, 3, 5);
    b[3073 * 2] = 9;
    const char *pa = tpath("data_batch_1.bin"), *pb = tpath("data_batch_2.bin");
    write_bytes(pa, a, sizeof a);
    write_bytes(pb, b, sizeof b);
    const char *paths[2] = { pa, pb };
    af_dataset *d = af_dataset_load_cifar(2, paths);
    CHECK(d != NULL, "valid CIFAR loads: %s", af_error_message());
    if (d) {
        int c, h, w;
        af_dataset_sample_shape(d, &c, &h, &w);
        CHECK(af_dataset_count(d) == 5 && c == 3 && h == 32 && w == 32, "cifar shape");
        const uint8_t want_lab[5] = { 0, 1, 5, 6, 9 };
        CHECK(memcmp(af_dataset_labels(d), want_lab, 5) == 0, "cifar labels in file order");
        static float x[2 * 3072];
        float oh[20];
        int64_t idx[2] = { 3, 1 };
        CHECK(af_dataset_batch(d, 2, idx, x, oh) == AF_OK, "cifar batch: %s", af_error_message());
        int ok = 1;
        for (int j = 0; j < 3072; j++) {
            ok &= x[j] == (float)b[3073 + 1 + j] / 255.0f;
            ok &= x[3072 + j] == (float)a[3073 + 1 + j] / 255.0f;
        }
        CHECK(ok, "cifar pixels in CHW order scaled by 1/255");
        CHECK(oh[6] == 1.0f && oh[10 + 1] == 1.0f, "cifar one-hot");
    }
    af_dataset_free(d);

    const char *bad = tpath("bad_batch.bin");
    const char *p2[2] = { pa, bad };
    write_bytes(bad, a, 0);
    expect_fail_cifar(2, p2, bad, "empty", "cifar empty file");
    write_bytes(bad, a, 3073 + 100);
    expect_fail_cifar(2, p2, bad, "truncated", "cifar truncated record");
    a[3073] = 10;
    write_bytes(bad, a, sizeof a);
    expect_fail_cifar(2, p2, bad, "label 10", "cifar label out of range");
    const uint8_t gz[3] = { 0x1f, 0x8b, 8 };
    write_bytes(bad, gz, 3);
    expect_fail_cifar(2, p2, bad, "gunzip it first", "cifar gzip");
    remove(bad);
    expect_fail_cifar(2, p2, bad, NULL, "cifar missing file");
    CHECK(af_dataset_load_cifar(0, p2) == NULL, "no files rejected");
    remove(pa), remove(pb);
}

/* af_dataset_load: the standard layout under a data dir, and the fetch hint. */
static void test_layout(void) {
    af_dataset *d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d == NULL && strstr(af_error_message(), "aneforge data fetch mnist") != NULL &&
          strstr(af_error_message(), "t10k-images-idx3-ubyte") != NULL,
          "missing MNIST says what to run: %s", af_error_message());
    d = af_dataset_load(AF_DATA_FASHION, tmp, 1);
    CHECK(d == NULL && strstr(af_error_message(), "aneforge data fetch fashion") != NULL,
          "missing Fashion says what to run: %s", af_error_message());
    d = af_dataset_load(AF_DATA_CIFAR10, tmp, 1);
    CHECK(d == NULL && strstr(af_error_message(), "data_batch_1.bin") != NULL, "missing CIFAR: %s",
          af_error_message());

    /* A full-size MNIST test split (7.8 MB) in <dir>/mnist/. */
    mkdir(tpath("mnist"), 0700);
    enum { NT = 10000, PIX = 28 * 28 };
    uint8_t *buf = malloc(16 + (size_t)NT * PIX);
    uint8_t *pix = malloc((size_t)NT * PIX), lab[NT];
    for (size_t i = 0; i < (size_t)NT * PIX; i++) pix[i] = (uint8_t)(i % 251);
    for (int i = 0; i < NT; i++) lab[i] = (uint8_t)(i % 10);
    uint32_t id[3] = { NT, 28, 28 }, ld[1] = { NT };
    const char *ip = tpath("mnist/t10k-images-idx3-ubyte"), *lp = tpath("mnist/t10k-labels-idx1-ubyte");
    write_bytes(ip, buf, make_idx(buf, 0x803, 3, id, pix, (size_t)NT * PIX));
    write_bytes(lp, buf, make_idx(buf, 0x801, 1, ld, lab, NT));
    d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d && af_dataset_count(d) == NT, "standard MNIST test split loads: %s", af_error_message());
    af_dataset_free(d);
    /* A subset of the split loads with its own count. */
    uint32_t small[3] = { 2, 28, 28 }, lsmall[1] = { 2 };
    write_bytes(ip, buf, make_idx(buf, 0x803, 3, small, pix, 2 * PIX));
    write_bytes(lp, buf, make_idx(buf, 0x801, 1, lsmall, lab, 2));
    d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d && af_dataset_count(d) == 2, "a 2-sample MNIST subset: %s", d ? "wrong count" : af_error_message());
    af_dataset_free(d);
    /* Right format, more samples than the split has: not MNIST. */
    size_t nbig = (size_t)10001 * PIX;
    uint8_t *zeros = calloc(nbig, 1), *big = malloc(nbig + 64);
    uint32_t many[3] = { 10001, 28, 28 }, lmany[1] = { 10001 };
    CHECK(zeros && big, "out of memory");
    if (zeros && big) {
        write_bytes(ip, big, make_idx(big, 0x803, 3, many, zeros, nbig));
        write_bytes(lp, big, make_idx(big, 0x801, 1, lmany, zeros, 10001));
        d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
        CHECK(d == NULL && strstr(af_error_message(), "split has 10000") != NULL, "10001 test samples: %s",
              d ? "loaded" : af_error_message());
        af_dataset_free(d);
    }
    free(zeros), free(big);
    remove(ip), remove(lp), rmdir(tpath("mnist"));
    free(buf), free(pix);
}

/* Writes a .npy with a hand-made header (version 1.0 or 2.0) and payload. */
static void write_npy_raw(const char *path, int major, const char *dict, const void *data, size_t n) {
    uint8_t buf[1024];
    size_t dl = strlen(dict), pre = major == 1 ? 10 : 12;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major, buf[7] = 0;
    size_t hl = dl;
    buf[8] = (uint8_t)hl, buf[9] = (uint8_t)(hl >> 8);
    if (major != 1) buf[10] = (uint8_t)(hl >> 16), buf[11] = (uint8_t)(hl >> 24);
    memcpy(buf + pre, dict, dl);
    memcpy(buf + pre + dl, data, n);
    write_bytes(path, buf, pre + dl + n);
}

static void expect_npy_fail(const char *path, const char *also, const char *what) {
    float *x = (float *)1;
    int rank = -1;
    int64_t dims[AF_MAX_RANK];
    af_status st = af_npy_read(path, &x, &rank, dims);
    CHECK(st != AF_OK && x == NULL, "%s: should fail", what);
    CHECK(strstr(af_error_message(), path) != NULL, "%s: names the file: %s", what, af_error_message());
    if (also) CHECK(strstr(af_error_message(), also) != NULL, "%s: says \"%s\": %s", what, also, af_error_message());
    if (st == AF_OK) free(x);
}

static void test_npy(void) {
    const char *p = tpath("a.npy");
    static const int64_t shapes[][1 + AF_MAX_RANK] = { /* rank, dims... */
        { 0 }, { 1, 0 }, { 1, 1 }, { 1, 7 }, { 2, 2, 3 }, { 3, 2, 3, 4 }, { 3, 3, 0, 2 },
        { 6, 1, 2, 1, 1, 1, 5 }, { 2, 100, 123 } };
    test_rng rng = { 42 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rank = (int)shapes[s][0];
        long n = 1;
        for (int i = 0; i < rank; i++) n *= (long)shapes[s][1 + i];
        float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
        test_fill_uniform(&rng, x, n, -10, 10);
        if (n > 3) x[0] = -0.0f, x[1] = INFINITY, x[2] = NAN, x[3] = 1e-45f;
        CHECK(af_npy_write(p, x, rank, &shapes[s][1]) == AF_OK, "write shape %zu: %s", s, af_error_message());
        struct stat sb;
        stat(p, &sb);
        CHECK((sb.st_size - 4 * n) % 64 == 0, "data starts 64-byte aligned");
        float *y = NULL;
        int r = -1;
        int64_t d[AF_MAX_RANK];
        CHECK(af_npy_read(p, &y, &r, d) == AF_OK, "read shape %zu: %s", s, af_error_message());
        CHECK(r == rank, "rank %d vs %d", r, rank);
        int same = y != NULL;
        for (int i = 0; same && i < rank; i++) same = d[i] == shapes[s][1 + i];
        if (same && n) same = memcmp(x, y, (size_t)n * sizeof *x) == 0;
        CHECK(same, "round trip shape %zu bit-exact", s);
        free(x), free(y);
    }
    /* The header is exactly numpy's. */
    int64_t d23[2] = { 2, 3 };
    float six[6] = { 1, 2, 3, 4, 5, 6 };
    CHECK(af_npy_write(p, six, 2, d23) == AF_OK, "write [2, 3]: %s", af_error_message());
    char head[128] = { 0 };
    FILE *f = fopen(p, "rb");
    if (f) { CHECK(fread(head, 1, 127, f) == 127, "read header"); fclose(f); }
    CHECK(memcmp(head, "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 69) == 0,
          "numpy header text");
    const int64_t ones7[7] = { 1, 1, 1, 1, 1, 1, 6 };
    CHECK(af_npy_write(p, six, AF_MAX_RANK + 1, ones7) == AF_ERR_INVALID && strstr(af_error_message(), "AF_MAX_RANK"),
          "rank AF_MAX_RANK + 1 rejected: %s", af_error_message());
    int64_t neg[1] = { -1 };
    CHECK(af_npy_write(p, six, 1, neg) != AF_OK, "negative dim rejected");
    CHECK(af_npy_write(tpath("no/such/dir.npy"), six, 2, d23) == AF_ERR_IO, "unwritable path");

    /* fp16: exact widening of normals, subnormals, zero signs, inf and nan (v1 and v2). */
    const uint16_t h[9] = { 0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0x8000, 0x3555, 0x7e00 };
    const float want[8] = { 1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 6.09755516052246094e-5f,
                            INFINITY, -0.0f, 0.333251953125f };
    uint8_t hb[18];
    for (int i = 0; i < 9; i++) hb[2 * i] = (uint8_t)h[i], hb[2 * i + 1] = (uint8_t)(h[i] >> 8);
    for (int major = 1; major <= 2; major++) {
        write_npy_raw(p, major, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 3), }  \n", hb, 18);
        float *y = NULL;
        int r;
        int64_t d[AF_MAX_RANK];
        CHECK(af_npy_read(p, &y, &r, d) == AF_OK, "fp16 v%d read: %s", major, af_error_message());
        if (y) {
            CHECK(r == 2 && d[0] == 3 && d[1] == 3, "fp16 shape");
            int ok = 1;
            for (int i = 0; i < 8; i++) ok &= memcmp(&y[i], &want[i], 4) == 0;
            CHECK(ok && isnan(y[8]), "fp16 values widened exactly");
        }
        free(y);
    }
    /* Key order and quotes are free; Python 2's 3L is accepted. */
    float one = 5.0f;
    write_npy_raw(p, 1, "{\"shape\": (1L,), 'fortran_order': False, 'descr': '<f4'}\n", &one, 4);
    float *y = NULL;
    int r;
    int64_t d[AF_MAX_RANK];
    CHECK(af_npy_read(p, &y, &r, d) == AF_OK && y && y[0] == 5.0f && r == 1 && d[0] == 1,
          "reordered keys: %s", af_error_message());
    free(y);

    static const struct { const char *dict; size_t n; const char *msg; } bad[] = {
        { "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 4, "'>f4'" },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", 8, "'<f8'" },
        { "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", 4, "not supported" },
        { "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n", 4, "Fortran" },
        { "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }\n", 4, "fortran_order" },
        { "{'descr': '<f4', 'fortran_order': False, }\n", 4, "lacks 'shape'" },
        { "{'fortran_order': False, 'shape': (1,), }\n", 4, "lacks 'descr'" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", 4, "'x'" },
        { "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4, "repeated" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1), }\n", 4, "tuple" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", 4, "tuple" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }\n", 4, "rank 9" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }\n", 4, "AF_MAX_RANK = 6" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", 4, "tuple" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "newline" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x\n", 4, "junk" },
        { "{'descr': '<f4 'fortran_order': False, 'shape': (1,), }\n", 4, "not supported" },
        { "{'descr': '<f4'; 'fortran_order': False, 'shape': (1,), }\n", 4, "malformed" },
        { "{'descr: '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4, NULL },
        { "['descr', '<f4']\n", 4, "not a dict" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 4, "data bytes" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 3, NULL },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 5, NULL },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000, 4000000000), }\n", 4, "truncated" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 8, "holds 4 bytes" },
        { "{'descr': '<f4',\n 'fortran_order': False, 'shape': (1,), }\n", 4, NULL },
    };
    const uint8_t zeros[8] = { 0 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_npy_raw(p, 1, bad[i].dict, zeros, bad[i].n);
        expect_npy_fail(p, bad[i].msg, bad[i].dict);
    }
    /* dims[AF_MAX_RANK] is all the reader fills: a rank-7 file is refused as unsupported
     * and the slots past the array are never written. */
    write_npy_raw(p, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 2), }\n", zeros, 8);
    int64_t guard[AF_MAX_RANK + 2];
    for (int i = 0; i < AF_MAX_RANK + 2; i++) guard[i] = -7;
    float *z7 = NULL;
    int r7 = -1;
    CHECK(af_npy_read(p, &z7, &r7, guard) == AF_ERR_UNSUPPORTED && z7 == NULL && r7 == 0,
          "rank 7 refused: %s", af_error_message());
    CHECK(strstr(af_error_message(), "rank 7") && strstr(af_error_message(), "reshape"),
          "the message names the rank and the fix: %s", af_error_message());
    CHECK(guard[AF_MAX_RANK] == -7 && guard[AF_MAX_RANK + 1] == -7, "nothing written past dims[AF_MAX_RANK]");
    free(z7);
    write_bytes(p, "\x93NUMPY\x03\x00\x10\x00\x00\x00", 12);
    expect_npy_fail(p, "version 3.0", "version 3.0");
    write_bytes(p, "\x93NUMPX\x01\x00\x10\x00", 10);
    expect_npy_fail(p, "magic", "bad magic");
    write_bytes(p, "\x93NUMPY\x01\x00\xff\x00{}\n", 13);
    expect_npy_fail(p, "past the end", "header length past EOF");
    write_bytes(p, "", 0);
    expect_npy_fail(p, "too short", "empty npy");
    remove(p);
    expect_npy_fail(p, NULL, "missing npy");
    /* Every truncation of a valid file fails cleanly. */
    CHECK(af_npy_write(p, six, 2, d23) == AF_OK, "write [2, 3]: %s", af_error_message());
    uint8_t full[256];
    f = fopen(p, "rb");
    size_t len = f ? fread(full, 1, sizeof full, f) : 0;
    if (f) fclose(f);
    int all = len == 128 + 24;
    for (size_t cut = 0; cut < len; cut++) {
        write_bytes(p, full, cut);
        float *z = NULL;
        all &= af_npy_read(p, &z, &r, d) != AF_OK && z == NULL;
    }
    CHECK(all, "every npy truncation rejected");
    remove(p);
}

static void check_digest(const void *msg, size_t n, const char *want) {
    uint8_t dg[32];
    char hex[65];
    data_sha256(msg, n, dg);
    data_sha256_hex(dg, hex);
    CHECK(strcmp(hex, want) == 0, "sha256 of %zu bytes: %s", n, hex);
    /* Streaming in uneven pieces gives the same digest. */
    data_sha256_ctx c;
    data_sha256_init(&c);
    const uint8_t *p = msg;
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 3 % 97 + 1)
        data_sha256_update(&c, p + off, step < n - off ? step : n - off);
    data_sha256_final(&c, dg);
    data_sha256_hex(dg, hex);
    CHECK(strcmp(hex, want) == 0, "streamed sha256 of %zu bytes: %s", n, hex);
}

static void test_sha256(void) {
    check_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_digest(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check_digest(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    char *ma = malloc(1000000);
    memset(ma, 'a', 1000000);
    check_digest(ma, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    const char *p = tpath("million-a");
    write_bytes(p, ma, 1000000);
    char hex[65];
    CHECK(data_sha256_file(p, hex) == AF_OK &&
          strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "file digest");
    remove(p);
    CHECK(data_sha256_file(p, hex) == AF_ERR_IO && strstr(af_error_message(), p), "missing file digest");
    free(ma);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/af_test_data_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_idx();
    test_cifar();
    test_layout();
    test_npy();
    test_sha256();
    CHECK(rmdir(tmp) == 0, "temp dir %s left empty", tmp);
    return check_finish("test_data");
}
