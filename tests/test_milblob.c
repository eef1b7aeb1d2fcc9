/* MILBlob writer and reader: byte-exact against coremltools' layout (the reference's
 * worked examples), round trips for every dtype, and a table of corrupt files that
 * must each fail with a message naming the problem and never crash. */
#include "mil/milblob.h"
#include "support/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static void wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }
static int all_zero(const uint8_t *p, size_t n) { for (size_t i = 0; i < n; i++) if (p[i]) return 0; return 1; }
static int has(const char *s) { return strstr(af_error_message(), s) != NULL; }

/* The little-endian bytes of a float, built from its bit pattern, not the host's memory. */
static void f32_le(float f, uint8_t *out) { uint32_t u; memcpy(&u, &f, 4); wr32(out, u); }

/* coremltools' test: two fp32 [500] constants land at record offsets 64 and 2176. */
static void test_two_fp32_constants(void) {
    float a[500], b[500];
    for (int i = 0; i < 500; i++) { a[i] = (float)i * 0.25f; b[i] = -(float)i; }
    milblob_writer *w = milblob_writer_new();
    int64_t o1 = milblob_add(w, AF_MILBLOB_FP32, a, sizeof a);
    int64_t o2 = milblob_add(w, AF_MILBLOB_FP32, b, sizeof b);
    CHECK(o1 == 64 && o2 == 2176, "offsets %lld %lld, want 64 2176", (long long)o1, (long long)o2);
    size_t n;
    const uint8_t *p = milblob_bytes(w, &n);
    CHECK(n == 2240 + 2000, "file size %zu, want 4240 (no trailing padding)", n);

    /* An independent expected image, field by field. */
    uint8_t *want = calloc(1, 4240);
    wr32(want, 2); wr32(want + 4, 2);
    const uint64_t recs[2] = {64, 2176};
    for (int r = 0; r < 2; r++) {
        uint8_t *m = want + recs[r];
        m[0] = 0xEF; m[1] = 0xBE; m[2] = 0xAD; m[3] = 0xDE;
        wr32(m + 4, 2); wr64(m + 8, 2000); wr64(m + 16, recs[r] + 64);
        for (int i = 0; i < 500; i++) f32_le(r ? b[i] : a[i], m + 64 + 4 * i);
    }
    CHECK(n == 4240 && memcmp(p, want, 4240) == 0, "bytes differ from the expected coremltools image");
    CHECK(rd32(p) == 2 && rd32(p + 4) == 2 && all_zero(p + 8, 56), "header: count 2, version 2, zeros");
    CHECK(rd32(p + 64) == 0xDEADBEEFu && p[64] == 0xEF && rd32(p + 2176) == 0xDEADBEEFu, "sentinels");
    CHECK(rd64(p + 64 + 16) == 128 && rd64(p + 2176 + 16) == 2240, "data offsets 128, 2240");
    CHECK(rd64(p + 64 + 24) == 0 && all_zero(p + 64 + 32, 32), "record 0 padding/reserved zero");
    CHECK(all_zero(p + 2128, 48), "gap 2128..2175 is zero-filled");
    CHECK(milblob_writer_count(w) == 2, "writer count");

    milblob *rb = NULL;
    CHECK(milblob_open(p, n, &rb) == AF_OK, "reopen: %s", af_error_message());
    milblob_dtype dt = (milblob_dtype)0; const void *d = NULL; int64_t nb = 0;
    CHECK(milblob_get(rb, 2176, &dt, &d, &nb) == AF_OK && dt == AF_MILBLOB_FP32 && nb == 2000 &&
          memcmp(d, want + 2240, 2000) == 0, "get 2176");
    CHECK(((uintptr_t)d % 4) == 0, "payload pointer is float-aligned");
    milblob_free(rb);
    free(want);
    milblob_writer_free(w);
}

/* Reference §3.5: fp16 [1, 2, -0.5], fp32 i*0.25 (500), int8 x7, uint4 [1,2,3,4,15]
 * -> records 64, 192, 2304, 2432 and a 2499-byte file; uint4 is 3 bytes, 4 pad bits. */
static void test_four_blob_reference(void) {
    const uint16_t h[3] = {0x3C00, 0x4000, 0xB800};
    uint8_t hb[6]; for (int i = 0; i < 3; i++) { hb[2 * i] = (uint8_t)h[i]; hb[2 * i + 1] = (uint8_t)(h[i] >> 8); }
    uint8_t fb[2000]; for (int i = 0; i < 500; i++) f32_le((float)i * 0.25f, fb + 4 * i);
    const int8_t i8[7] = {-3, -2, -1, 0, 1, 2, 127};
    const uint8_t u4[5] = {1, 2, 3, 4, 15};
    uint8_t packed[3];
    milblob_pack_bits(u4, 5, 4, packed);
    CHECK(packed[0] == 0x21 && packed[1] == 0x43 && packed[2] == 0x0F, "uint4 packing %02x %02x %02x",
          packed[0], packed[1], packed[2]);
    milblob_writer *w = milblob_writer_new();
    int64_t o[4] = {milblob_add(w, AF_MILBLOB_FP16, hb, 6), milblob_add(w, AF_MILBLOB_FP32, fb, 2000),
                    milblob_add(w, AF_MILBLOB_INT8, i8, 7), milblob_add_packed(w, AF_MILBLOB_UINT4, packed, 5)};
    CHECK(o[0] == 64 && o[1] == 192 && o[2] == 2304 && o[3] == 2432, "offsets %lld %lld %lld %lld",
          (long long)o[0], (long long)o[1], (long long)o[2], (long long)o[3]);
    size_t n;
    const uint8_t *p = milblob_bytes(w, &n);
    CHECK(n == 2499, "file size %zu, want 2499", n);
    CHECK(rd32(p) == 4 && rd32(p + 2432 + 4) == 11 && rd64(p + 2432 + 8) == 3 && rd64(p + 2432 + 24) == 4,
          "uint4 record: dtype 11, size 3, padding 4");
    CHECK(p[2496] == 0x21 && p[2497] == 0x43 && p[2498] == 0x0F, "uint4 payload 21 43 0f");
    CHECK(rd32(p + 68) == 1 && rd32(p + 196) == 2 && rd32(p + 2308) == 4, "dtype codes 1 2 4 (not MIL.proto's)");
    milblob_writer_free(w);
}

static void roundtrip_one(milblob_dtype dt, int64_t nbytes, const char *path) {
    int64_t cap = nbytes + 64; /* also feeds the short neighbour blobs */
    uint8_t *data = malloc((size_t)cap);
    for (int64_t i = 0; i < cap; i++) data[i] = (uint8_t)(i * 37 + (int)dt);
    milblob_writer *w = milblob_writer_new();
    int64_t pre = milblob_add(w, AF_MILBLOB_UINT8, data, nbytes % 61 + 1); /* shifts alignment */
    int64_t off = milblob_add(w, dt, data, nbytes);
    int64_t post = milblob_add(w, AF_MILBLOB_INT8, data, 3);
    CHECK(pre == 64 && off > 0 && off % 64 == 0 && post % 64 == 0, "%s x%lld: offsets", milblob_dtype_name(dt),
          (long long)nbytes);
    CHECK(milblob_write_file(w, path) == AF_OK, "write: %s", af_error_message());
    milblob *b = NULL;
    CHECK(milblob_read_file(path, &b) == AF_OK, "%s x%lld: read: %s", milblob_dtype_name(dt),
          (long long)nbytes, af_error_message());
    milblob_dtype got = (milblob_dtype)0; const void *d = NULL; int64_t nb = -1;
    CHECK(b && milblob_count(b) == 3, "count");
    CHECK(b && milblob_get(b, (uint64_t)off, &got, &d, &nb) == AF_OK && got == dt && nb == nbytes &&
          (nbytes == 0 || memcmp(d, data, (size_t)nbytes) == 0), "%s x%lld: payload", milblob_dtype_name(dt),
          (long long)nbytes);
    milblob_record r;
    CHECK(b && milblob_record_at(b, 2, &r) == AF_OK && r.offset == (uint64_t)post && r.nbytes == 3 &&
          r.data_offset == r.offset + 64 && r.padding_bits == 0, "record_at 2");
    milblob_free(b);
    milblob_writer_free(w);
    free(data);
}

static void test_roundtrips(const char *path) {
    const int64_t odd[] = {0, 1, 3, 10, 33, 63, 64, 65, 127, 128, 1000};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        roundtrip_one(AF_MILBLOB_UINT8, odd[i], path);
        roundtrip_one(AF_MILBLOB_INT8, odd[i], path);
        roundtrip_one(AF_MILBLOB_FP8E4M3FN, odd[i], path);
        roundtrip_one(AF_MILBLOB_FP16, 2 * odd[i], path);
        roundtrip_one(AF_MILBLOB_FP32, 4 * odd[i], path);
        roundtrip_one(AF_MILBLOB_INT32, 4 * odd[i], path);
    }
    const milblob_dtype wide[] = {AF_MILBLOB_BF16, AF_MILBLOB_INT16, AF_MILBLOB_UINT16, AF_MILBLOB_UINT32,
                                     AF_MILBLOB_FP8E5M2, AF_MILBLOB_UINT1, AF_MILBLOB_UINT2, AF_MILBLOB_UINT4,
                                     AF_MILBLOB_INT4};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) roundtrip_one(wide[i], 12, path);
    remove(path);

    /* Sub-byte types with every element count: padding bits and LSB-first packing. */
    const milblob_dtype sub[] = {AF_MILBLOB_UINT1, AF_MILBLOB_UINT2, AF_MILBLOB_UINT3, AF_MILBLOB_INT4,
                                    AF_MILBLOB_UINT4, AF_MILBLOB_UINT6};
    for (size_t s = 0; s < sizeof sub / sizeof sub[0]; s++) {
        int bits = milblob_dtype_bits(sub[s]);
        for (int64_t ne = 0; ne <= 17; ne++) {
            uint8_t vals[17], packed[17];
            for (int i = 0; i < ne; i++) vals[i] = (uint8_t)((i * 5 + 3) & ((1 << bits) - 1));
            milblob_pack_bits(vals, ne, bits, packed);
            milblob_writer *w = milblob_writer_new();
            int64_t off = milblob_add_packed(w, sub[s], packed, ne);
            size_t n; const uint8_t *p = milblob_bytes(w, &n);
            milblob *b = NULL; milblob_record r = {0};
            int ok = off == 64 && milblob_open(p, n, &b) == AF_OK && milblob_record_at(b, 0, &r) == AF_OK;
            int64_t nbits = ne * bits;
            ok = ok && r.nbytes == (nbits + 7) / 8 && r.padding_bits == (uint32_t)((8 - nbits % 8) % 8);
            for (int i = 0; ok && i < ne; i++) { /* unpack and compare */
                unsigned pos = (unsigned)(i * bits), v = p[r.data_offset + pos / 8];
                if (pos % 8 + (unsigned)bits > 8) v |= (unsigned)p[r.data_offset + pos / 8 + 1] << 8;
                ok = ((v >> pos % 8) & ((1u << bits) - 1)) == vals[i];
            }
            CHECK(ok, "%s x%lld: packed round trip (%s)", milblob_dtype_name(sub[s]), (long long)ne,
                  af_error_message());
            milblob_free(b);
            milblob_writer_free(w);
        }
    }
}

static void test_writer_errors(void) {
    uint8_t d[16] = {0};
    CHECK(milblob_add(NULL, AF_MILBLOB_FP16, d, 2) == -1 && has("NULL writer"), "NULL writer");
    milblob_writer *w = milblob_writer_new();
    CHECK(milblob_add(w, (milblob_dtype)0, d, 2) == -1 && has("BlobDataType 0"), "dtype 0");
    CHECK(milblob_add(w, (milblob_dtype)18, d, 2) == -1 && has("BlobDataType 18"), "dtype 18");
    CHECK(milblob_add(w, AF_MILBLOB_FP32, d, -4) == -1 && has("negative"), "negative size");
    CHECK(milblob_add(w, AF_MILBLOB_FP32, NULL, 4) == -1 && has("NULL data"), "NULL data");
    CHECK(milblob_add(w, AF_MILBLOB_FP16, d, 3) == -1 && has("whole number"), "odd fp16 bytes");
    CHECK(milblob_add(w, AF_MILBLOB_UINT3, d, 1) == -1 && has("milblob_add_packed"), "uint3 byte count");
    CHECK(milblob_add_packed(w, AF_MILBLOB_UINT4, d, INT64_MAX) == -1 && has("overflow"), "huge count");
    CHECK(milblob_writer_count(w) == 0 && milblob_add(w, AF_MILBLOB_UINT3, d, 3) == 64,
          "errors leave the writer usable; 3 uint3 bytes = 8 elements");
    CHECK(milblob_write_file(w, "/nonexistent-dir/x/weight.bin") == AF_ERR_IO && has("/nonexistent-dir"),
          "unwritable path: %s", af_error_message());
    milblob_writer_free(w);
    w = milblob_writer_new(); /* an empty file is just the header, and it reads back */
    size_t n; const uint8_t *p = milblob_bytes(w, &n);
    milblob *b = NULL;
    CHECK(n == 64 && rd32(p) == 0 && rd32(p + 4) == 2 && milblob_open(p, n, &b) == AF_OK &&
          milblob_count(b) == 0, "empty file");
    milblob_free(b);
    milblob_writer_free(w);
}

/* Base for corruption: uint8 x10 at 64 (data 128), uint8 x200 at 192 (data 256..456),
 * uint4 x5 at 512 (data 576, 3 bytes): 579 bytes. */
static uint8_t *base_file(size_t *n) {
    uint8_t d[200]; for (int i = 0; i < 200; i++) d[i] = (uint8_t)(i + 1);
    milblob_writer *w = milblob_writer_new();
    milblob_add(w, AF_MILBLOB_UINT8, d, 10);
    milblob_add(w, AF_MILBLOB_UINT8, d, 200);
    milblob_add_packed(w, AF_MILBLOB_UINT4, d, 5);
    const uint8_t *p = milblob_bytes(w, n);
    uint8_t *copy = malloc(*n + 128);
    memcpy(copy, p, *n);
    milblob_writer_free(w);
    return copy;
}

typedef struct {
    const char *what;
    size_t field;   /* byte offset to patch */
    int width;      /* 1, 4 or 8 bytes; 0 = no patch */
    uint64_t value;
    long resize;    /* new file length (the base is followed by zeros); -1 = keep */
    af_status want;
    const char *msg; /* substring of the error; NULL for a valid control */
} corruption;

static void test_corruptions(void) {
    size_t n0;
    uint8_t *base = base_file(&n0);
    CHECK(n0 == 579, "base file is %zu bytes", n0);
    const corruption table[] = {
        {"empty file", 0, 0, 0, 0, AF_ERR_CORRUPT, "shorter than the 64-byte header"},
        {"truncated header", 0, 0, 0, 63, AF_ERR_CORRUPT, "63 bytes is shorter"},
        {"truncated to records", 0, 0, 0, 100, AF_ERR_CORRUPT, "header count 3"},
        {"truncated payload", 0, 0, 0, 578, AF_ERR_CORRUPT, "record 2 at offset 512: 3-byte payload at 576 runs past"},
        {"truncated mid-record", 0, 0, 0, 530, AF_ERR_CORRUPT, "record 2 of 3 at offset 512: 64-byte record runs past"},
        {"version 1", 4, 4, 1, -1, AF_ERR_CORRUPT, "version 1 at offset 4, want 2 (1 is Espresso"},
        {"version 3", 4, 4, 3, -1, AF_ERR_CORRUPT, "version 3 at offset 4"},
        {"bad sentinel", 192, 4, 0xDEADBEEE, -1, AF_ERR_CORRUPT, "record 1 at offset 192: sentinel 0xDEADBEEE"},
        {"zero dtype", 68, 4, 0, -1, AF_ERR_UNSUPPORTED, "offset 64: unknown BlobDataType 0"},
        {"future dtype", 196, 4, 18, -1, AF_ERR_UNSUPPORTED, "offset 192: unknown BlobDataType 18"},
        {"misaligned data", 64 + 16, 8, 136, -1, AF_ERR_CORRUPT, "offset 64: data offset 136, want 128"},
        {"data offset past end", 192 + 16, 8, 1ull << 40, -1, AF_ERR_CORRUPT, "data offset 1099511627776, want 256"},
        {"size past end", 192 + 8, 8, 324, -1, AF_ERR_CORRUPT, "324-byte payload at 256 runs past"},
        {"size overflow", 192 + 8, 8, UINT64_MAX, -1, AF_ERR_CORRUPT, "18446744073709551615-byte payload"},
        {"size wraps data+size", 512 + 8, 8, UINT64_MAX - 500, -1, AF_ERR_CORRUPT, "runs past the end (579 bytes)"},
        {"count too large", 0, 4, 4, -1, AF_ERR_CORRUPT, "record 3 of 4 at offset 640: 64-byte record runs past"},
        {"count past file size", 0, 4, 9, -1, AF_ERR_CORRUPT, "header count 9 at offset 0 needs at least 640 bytes, file has 579"},
        {"count 2^32-1", 0, 4, UINT32_MAX, -1, AF_ERR_CORRUPT, "header count 4294967295"},
        {"count too small", 0, 4, 2, -1, AF_ERR_CORRUPT, "a record follows that the header count does not include"},
        {"count zero", 0, 4, 0, -1, AF_ERR_CORRUPT, "stray bytes after the last payload (ends at 64)"},
        {"padding on fp-size type", 64 + 24, 8, 1, -1, AF_ERR_CORRUPT, "offset 64: 10 bytes with 1 padding bits"},
        {"padding 8 on uint4", 512 + 24, 8, 8, -1, AF_ERR_CORRUPT, "3 bytes with 8 padding bits"},
        {"odd padding on uint4", 512 + 24, 8, 3, -1, AF_ERR_CORRUPT, "not a whole number of uint4 elements"},
        {"uint3 in 3 bytes, pad 4", 512 + 4, 4, 12, -1, AF_ERR_CORRUPT, "whole number of uint3"},
        {"control: 10 bytes as fp16", 64 + 4, 4, 1, -1, AF_OK, NULL},
        {"control: 1 zero byte of tail", 0, 0, 0, 580, AF_OK, NULL},
        {"control: reserved fields", 100, 8, 42, -1, AF_OK, NULL}, /* pre-iOS18 files may hold garbage */
        {"fp32 with 10 bytes", 64 + 4, 4, 2, -1, AF_ERR_CORRUPT, "whole number of fp32 elements"},
        {"trailing garbage", 579, 1, 0x5A, 580, AF_ERR_CORRUPT, "1 stray bytes after the last payload (ends at 579)"},
        {"trailing zero block", 0, 0, 0, 579 + 64, AF_ERR_CORRUPT, "64 stray bytes"},
    };
    uint8_t *buf = malloc(n0 + 128);
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        const corruption *c = &table[t];
        memcpy(buf, base, n0);
        memset(buf + n0, 0, 128);
        size_t n = c->resize >= 0 ? (size_t)c->resize : n0;
        if (c->width == 1) buf[c->field] = (uint8_t)c->value;
        if (c->width == 4) wr32(buf + c->field, (uint32_t)c->value);
        if (c->width == 8) wr64(buf + c->field, c->value);
        milblob *b = (milblob *)1;
        af_status st = milblob_open(n ? buf : NULL, n, &b);
        if (c->want == AF_OK) {
            CHECK(st == AF_OK && b && milblob_count(b) == 3, "%s: %s", c->what, af_error_message());
            milblob_free(b);
            continue;
        }
        CHECK(st == c->want && b == NULL, "%s: status %s, want %s", c->what, af_status_name(st),
              af_status_name(c->want));
        CHECK(has(c->msg) && has("milblob <memory>"), "%s: message \"%s\" lacks \"%s\"", c->what,
              af_error_message(), c->msg);
    }
    /* ANEForge-style file without alignment: the second record at 138 is not found. */
    memcpy(buf, base, 64 + 64 + 10);
    wr32(buf, 2);
    memcpy(buf + 138, base + 192, 64);
    wr64(buf + 138 + 16, 202);
    memcpy(buf + 202, base + 256, 200);
    milblob *b = NULL;
    CHECK(milblob_open(buf, 402, &b) != AF_OK && has("offset 192: sentinel") &&
          has("a record starts unaligned right after the previous payload"), "unaligned records: %s",
          af_error_message());

    /* Offsets that name no record. */
    CHECK(milblob_open(base, n0, &b) == AF_OK, "base opens: %s", af_error_message());
    const struct { uint64_t off; const char *msg; } bad[] = {
        {128, "offset 128 names no record (it is a payload; cite its record"},
        {65, "offset 65 names no record (it is not 64-aligned"},
        {138, "not 64-aligned"},
        {0, "it is the file header"},
        {384, "offset 384 names no record (no record starts there"},
        {576, "it is a payload"},
        {640, "past the end"},
        {UINT64_MAX - 63, "past the end"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const void *d = (const void *)1;
        CHECK(milblob_get(b, bad[i].off, NULL, &d, NULL) == AF_ERR_INVALID && d == (const void *)1 &&
              has(bad[i].msg), "get %llu: \"%s\"", (unsigned long long)bad[i].off, af_error_message());
    }
    milblob_record r;
    CHECK(milblob_record_at(b, 3, &r) == AF_ERR_INVALID && milblob_record_at(b, -1, &r) == AF_ERR_INVALID,
          "record_at out of range");
    CHECK(milblob_get(NULL, 64, NULL, NULL, NULL) == AF_ERR_INVALID && milblob_count(NULL) == 0, "NULL blob");
    milblob_free(b);

    /* Files: I/O errors and corrupt files name the path. */
    CHECK(milblob_read_file("/nonexistent-dir/weight.bin", &b) == AF_ERR_IO && b == NULL &&
          has("/nonexistent-dir/weight.bin"), "missing file: %s", af_error_message());
    const char *path = "test_milblob_corrupt.bin";
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(base, 1, 300, f); fclose(f); }
    CHECK(milblob_read_file(path, &b) == AF_ERR_CORRUPT && has("milblob test_milblob_corrupt.bin:"),
          "corrupt file names its path: %s", af_error_message());
    remove(path);

    /* Every prefix and every single-byte flip: an error or a consistent file, never a crash. */
    int prefix_ok = 1;
    for (size_t len = 0; len < n0; len++) {
        if (milblob_open(base, len, &b) != AF_OK) continue;
        prefix_ok = 0;
        milblob_free(b);
    }
    CHECK(prefix_ok, "every proper prefix of the file is rejected");
    int flips_ok = 1;
    for (size_t pos = 0; pos < n0; pos++) {
        memcpy(buf, base, n0);
        buf[pos] ^= 0xFF;
        if (milblob_open(buf, n0, &b) != AF_OK) continue;
        for (int i = 0; i < milblob_count(b); i++) {
            const void *d; int64_t nb;
            if (milblob_record_at(b, i, &r) != AF_OK || milblob_get(b, r.offset, NULL, &d, &nb) != AF_OK ||
                r.data_offset + (uint64_t)nb > n0)
                flips_ok = 0;
        }
        if (pos < 512 + 32 && (pos < 8 || (pos >= 64 && pos < 96) || (pos >= 192 && pos < 224) || pos >= 512))
            flips_ok = 0; /* a flipped count, sentinel, dtype, size or data offset must not pass */
        milblob_free(b);
    }
    CHECK(flips_ok, "byte flips in structural fields are rejected; others read consistently");
    free(buf);
    free(base);
}


static char logged[600];
static void capture(af_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == AF_LOG_WARN) snprintf(logged, sizeof logged, "%s", msg);
}

/* The reader the MIL front end uses follows record headers: a header count that
 * disagrees (several public builders write 1 for 2 or 3 records) is read with a warning
 * through the log; a file the headers do not describe is still refused. */
static void test_follow_headers(void) {
    size_t n0;
    uint8_t *base = base_file(&n0);
    uint8_t *buf = malloc(n0 + 64);
    const struct { uint32_t count; long len; int want; const char *warn; } cases[] = {
        {3, -1, 3, NULL},                                   /* the count agrees: no warning */
        {1, -1, 3, "the header says 1 records but the file holds 3"},
        {0, -1, 3, "the header says 0 records but the file holds 3"},
        {2, -1, 3, "the header says 2 records but the file holds 3"},
        {9, -1, 3, "the header says 9 records but the file holds 3"},
        {UINT32_MAX, -1, 3, "the header says 4294967295 records"},
        {3, 512, 2, "the header says 3 records but the file holds 2"}, /* cut at a record boundary */
        {3, 530, -1, "record 2 at offset 512: 64-byte record runs past"},
        {3, 578, -1, "record 2 at offset 512: 3-byte payload at 576 runs past"},
        {1, 579 + 64, -1, "64 stray bytes"},
    };
    af_set_log(capture, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, base, n0);
        memset(buf + n0, 0, 64);
        wr32(buf, cases[i].count);
        size_t n = cases[i].len >= 0 ? (size_t)cases[i].len : n0;
        logged[0] = 0;
        milblob *b = NULL;
        af_status st = milblob_open_follow(buf, n, &b);
        if (cases[i].want < 0) {
            CHECK(st == AF_ERR_CORRUPT && !b && has(cases[i].warn), "follow case %zu: %s", i, af_error_message());
            continue;
        }
        CHECK(st == AF_OK && milblob_count(b) == cases[i].want, "follow case %zu: %s", i, af_error_message());
        CHECK(cases[i].warn ? strstr(logged, cases[i].warn) != NULL : logged[0] == 0, "follow case %zu: logged '%s'", i, logged);
        for (int k = 0; k < milblob_count(b); k++) { /* the same records the checked reader finds */
            milblob_record r, want;
            milblob *s = NULL;
            CHECK(milblob_open(base, n0, &s) == AF_OK && milblob_record_at(b, k, &r) == AF_OK &&
                  milblob_record_at(s, k, &want) == AF_OK && r.offset == want.offset && r.nbytes == want.nbytes &&
                  r.dtype == want.dtype, "follow case %zu: record %d", i, k);
            milblob_free(s);
        }
        milblob_free(b);
    }
    af_set_log(NULL, NULL);
    free(buf);
    free(base);
}

int main(void) {
    test_follow_headers();
    test_two_fp32_constants();
    test_four_blob_reference();
    test_roundtrips("test_milblob_roundtrip.bin");
    test_writer_errors();
    test_corruptions();
    return check_finish("milblob");
}
