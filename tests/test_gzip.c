/* The gzip reader (src/data/gzip.c) and the compressed datasets it serves: data made
 * by zlib's compressor comes back byte for byte, concatenated members are joined, and
 * truncation, a bad CRC, trailing bytes and output past the cap (a gzip bomb) are each
 * refused with their own message; af_dataset_load reads NAME.gz when NAME is absent,
 * checks its decompressed SHA-256 against the table and caps it at the split's size. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge_data.h"
#include "data/data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmp[256];

static const char *tpath(const char *name) {
    static char bufs[16][512];
    static int k;
    char *b = bufs[k++ & 15];
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

/* One gzip member of in[0..n) made by zlib's compressor (the independent direction);
 * malloc'd, its length in *out_n. */
static uint8_t *gz(const uint8_t *in, size_t n, size_t *out_n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
    *out_n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

/* data_gunzip must fail with a message holding `want` (and naming the file). */
static void expect_fail(const uint8_t *in, size_t n, size_t cap, const char *want, const char *what) {
    uint8_t *out = (uint8_t *)1;
    size_t len = 7;
    af_status st = data_gunzip("bad.gz", in, n, cap, &out, &len);
    const char *msg = af_error_message();
    CHECK(st == AF_ERR_CORRUPT && out == NULL && len == 0, "%s: refused (status %d)", what, (int)st);
    CHECK(strstr(msg, "bad.gz") && strstr(msg, want), "%s: message says \"%s\": \"%s\"", what, want, msg);
}

static void test_gunzip(void) {
    enum { N = 100000 };
    uint8_t *data = malloc(N);
    unsigned long long s = 12345;
    for (int i = 0; i < N; i++) { /* half noise, half runs: both kinds of deflate block */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        data[i] = i < N / 2 ? (uint8_t)(s >> 56) : (uint8_t)(i / 1000);
    }
    size_t zn;
    uint8_t *z = gz(data, N, &zn), *out;
    size_t len;
    CHECK(data_gunzip("ok.gz", z, zn, N, &out, &len) == AF_OK && len == N && !memcmp(out, data, N),
          "round trip at a cap of exactly the size: %s", af_error_message());
    free(out);
    /* Two members, as `cat a.gz b.gz` makes: the contents joined. */
    uint8_t *two = malloc(2 * zn);
    memcpy(two, z, zn), memcpy(two + zn, z, zn);
    CHECK(data_gunzip("two.gz", two, 2 * zn, 2 * N, &out, &len) == AF_OK && len == 2 * N &&
          !memcmp(out, data, N) && !memcmp(out + N, data, N), "two members joined: %s", af_error_message());
    free(out);
    expect_fail(two, 2 * zn, 2 * N - 1, "more than 199999 bytes", "two members past the cap");
    free(two);
    /* An empty member */
    size_t en;
    uint8_t *e = gz(data, 0, &en);
    CHECK(data_gunzip("empty.gz", e, en, 16, &out, &len) == AF_OK && len == 0, "empty member: %s",
          af_error_message());
    free(out), free(e);

    expect_fail(z, zn, N - 1, "more than 99999 bytes", "one byte past the cap");
    expect_fail(z, zn - 1, N, "truncated gzip data", "last byte missing");
    expect_fail(z, zn / 2, N, "truncated gzip data", "half the file");
    expect_fail(z, 10, N, "truncated gzip data", "the header only");
    uint8_t *bad = malloc(zn + 3);
    memcpy(bad, z, zn);
    bad[zn - 8] ^= 1; /* the CRC-32 */
    expect_fail(bad, zn, N, "damaged gzip data", "a wrong CRC");
    memcpy(bad, z, zn);
    bad[zn / 2] ^= 0x55; /* the deflate stream itself */
    expect_fail(bad, zn, N, "gzip data", "a flipped byte mid-stream");
    memcpy(bad, z, zn);
    memcpy(bad + zn, "xyz", 3);
    expect_fail(bad, zn + 3, N, "3 bytes of trailing garbage", "trailing bytes");
    memcpy(bad, z, zn);
    bad[0] = 0x1e;
    expect_fail(bad, zn, N, "not a gzip file", "wrong magic");
    expect_fail(bad, 1, N, "not a gzip file", "one byte");
    free(bad), free(z), free(data);

    /* A bomb: 64 MiB of zeros in ~64 KB stops at a 1 MiB cap. */
    size_t big = (size_t)64 << 20;
    uint8_t *zeros = calloc(big, 1);
    if (zeros) {
        uint8_t *bomb = gz(zeros, big, &zn);
        free(zeros);
        CHECK(zn < big / 500, "the bomb compresses (%zu bytes)", zn);
        expect_fail(bomb, zn, (size_t)1 << 20, "more than 1048576 bytes", "gzip bomb");
        free(bomb);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void write_gz(const char *path, const uint8_t *data, size_t n) {
    size_t zn;
    uint8_t *z = gz(data, n, &zn);
    write_bytes(path, z, zn);
    free(z);
}

/* af_dataset_load_idx and af_dataset_load on compressed IDX files. */
static void test_datasets(void) {
    enum { N = 3, PIX = 28 * 28 };
    uint8_t img[16 + N * PIX], lab[8 + N];
    put_be32(img, 0x803), put_be32(img + 4, N), put_be32(img + 8, 28), put_be32(img + 12, 28);
    for (int i = 0; i < N * PIX; i++) img[16 + i] = (uint8_t)(i * 7 % 256);
    put_be32(lab, 0x801), put_be32(lab + 4, N);
    lab[8] = 7, lab[9] = 2, lab[10] = 1;
    CHECK(mkdir(tpath("mnist"), 0700) == 0, "mkdir");
    const char *ig = tpath("mnist/t10k-images-idx3-ubyte.gz"), *lg = tpath("mnist/t10k-labels-idx1-ubyte.gz");
    write_gz(ig, img, sizeof img);
    write_gz(lg, lab, sizeof lab);

    /* Given by path: any IDX, compressed, reads as the plain file would. */
    af_dataset *d = af_dataset_load_idx(ig, lg);
    CHECK(d && af_dataset_count(d) == N && af_dataset_labels(d)[0] == 7 && af_dataset_labels(d)[2] == 1,
          "compressed IDX by path: %s", d ? "wrong content" : af_error_message());
    float x[PIX];
    int64_t idx = 2;
    if (d) {
        af_dataset_batch(d, 1, &idx, x, NULL);
        CHECK(x[5] == (float)img[16 + 2 * PIX + 5] / 255.0f, "pixel of sample 2");
    }
    af_dataset_free(d);

    /* In the layout: a .gz must be the standard file, verified by its SHA-256. */
    d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d == NULL && strstr(af_error_message(), "t10k-images-idx3-ubyte.gz: decompressed SHA-256") &&
          strstr(af_error_message(), "expected 0fa7898d509279e4"),
          "a compressed subset fails the digest check: %s", d ? "loaded" : af_error_message());
    af_dataset_free(d);
    /* The plain file is preferred when both exist (a subset there is fine). */
    const char *ip = tpath("mnist/t10k-images-idx3-ubyte"), *lp = tpath("mnist/t10k-labels-idx1-ubyte");
    write_bytes(ip, img, sizeof img);
    write_bytes(lp, lab, sizeof lab);
    d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d && af_dataset_count(d) == N, "plain files win over .gz: %s", d ? "wrong count" : af_error_message());
    af_dataset_free(d);
    remove(ip), remove(lp);

    /* A compressed labels file larger than the split's (8 + 10000 bytes) stops at the cap. */
    size_t nl = 8 + 10000 + 1;
    uint8_t *many = calloc(nl, 1);
    put_be32(many, 0x801), put_be32(many + 4, 10001);
    write_gz(lg, many, nl);
    free(many);
    write_bytes(ip, img, sizeof img);
    d = af_dataset_load(AF_DATA_MNIST, tmp, 0);
    CHECK(d == NULL && strstr(af_error_message(), "t10k-labels-idx1-ubyte.gz: decompresses to more than 10008 bytes"),
          "labels past the split's size: %s", d ? "loaded" : af_error_message());
    af_dataset_free(d);
    remove(ip), remove(ig), remove(lg);
    CHECK(rmdir(tpath("mnist")) == 0, "mnist dir emptied");
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/af_test_gzip_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_gunzip();
    test_datasets();
    CHECK(rmdir(tmp) == 0, "temp dir %s left empty", tmp);
    return check_finish("test_gzip");
}
