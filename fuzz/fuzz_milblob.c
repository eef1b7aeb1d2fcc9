/* libFuzzer target for the MILBlob reader: opens arbitrary bytes, reads every record,
 * probes offsets taken from the input, and checks that an accepted file survives a
 * rewrite through the writer with the same record table and payloads.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
 *       fuzz/fuzz_milblob.c src/mil/milblob.c src/ir/ir.c <whatever ir.c needs>
 *   ./a.out -max_total_time=600 tests/corpus/milblob
 *
 * Built with -DAF_MILBLOB_GEN_CORPUS (and no -fsanitize=fuzzer) it is instead the
 * program that wrote the seed files: ./gen tests/corpus/milblob */
#include "mil/milblob.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "fuzz_milblob: %s failed\n", #c); abort(); } } while (0)

static uint64_t le64(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Rewrites b's records and checks the copy reads back identically. */
static void rewrite_check(const milblob *b) {
    milblob_writer *w = milblob_writer_new();
    REQUIRE(w);
    int n = milblob_count(b);
    for (int i = 0; i < n; i++) {
        milblob_record r;
        const void *d;
        REQUIRE(milblob_record_at(b, i, &r) == AF_OK);
        REQUIRE(milblob_get(b, r.offset, NULL, &d, NULL) == AF_OK);
        int bits = milblob_dtype_bits(r.dtype);
        int64_t off = bits < 8 ? milblob_add_packed(w, r.dtype, d, (r.nbytes * 8 - r.padding_bits) / bits)
                               : milblob_add(w, r.dtype, d, r.nbytes);
        REQUIRE(off >= 0 && (uint64_t)off == r.offset);
    }
    size_t len;
    const uint8_t *bytes = milblob_bytes(w, &len);
    milblob *c = NULL;
    REQUIRE(milblob_open(bytes, len, &c) == AF_OK && milblob_count(c) == n);
    for (int i = 0; i < n; i++) {
        milblob_record r1, r2;
        const void *d1, *d2;
        REQUIRE(milblob_record_at(b, i, &r1) == AF_OK && milblob_record_at(c, i, &r2) == AF_OK);
        REQUIRE(r1.offset == r2.offset && r1.dtype == r2.dtype && r1.nbytes == r2.nbytes &&
                r1.data_offset == r2.data_offset && r1.padding_bits == r2.padding_bits);
        REQUIRE(milblob_get(b, r1.offset, NULL, &d1, NULL) == AF_OK &&
                milblob_get(c, r2.offset, NULL, &d2, NULL) == AF_OK);
        REQUIRE(r1.nbytes == 0 || memcmp(d1, d2, (size_t)r1.nbytes) == 0);
    }
    milblob_free(c);
    milblob_writer_free(w);
}

#ifndef AF_MILBLOB_GEN_CORPUS
/* Everything an accepted file promises; returns its record count (-1: rejected). */
static int check_open(milblob *b, af_status st, const uint8_t *data, size_t size) {
    if (st != AF_OK) {
        REQUIRE(b == NULL);
        return -1;
    }
    volatile unsigned sum = 0;
    int n = milblob_count(b);
    for (int i = 0; i < n; i++) {
        milblob_record r;
        milblob_dtype dt;
        const void *d;
        int64_t nb;
        REQUIRE(milblob_record_at(b, i, &r) == AF_OK);
        REQUIRE(milblob_get(b, r.offset, &dt, &d, &nb) == AF_OK && dt == r.dtype && nb == r.nbytes);
        REQUIRE(r.offset % 64 == 0 && r.data_offset == r.offset + 64 && r.data_offset + (uint64_t)nb <= size);
        for (int64_t k = 0; k < nb; k++) sum += ((const uint8_t *)d)[k]; /* touch every payload byte */
        /* Neighbouring offsets must be rejected cleanly, never misread. */
        const uint64_t probe[3] = {r.data_offset, r.offset + 1, r.offset - 1};
        for (int k = 0; k < 3; k++) REQUIRE(milblob_get(b, probe[k], NULL, &d, NULL) != AF_OK || probe[k] % 64 == 0);
    }
    for (size_t k = 0; k < size && k < 64; k += 8) { /* offsets the input chooses */
        const void *d;
        int64_t nb;
        if (milblob_get(b, le64(data + k, size - k), NULL, &d, &nb) == AF_OK)
            REQUIRE(d != NULL && nb >= 0 && nb <= (int64_t)size);
    }
    (void)sum;
    rewrite_check(b);
    milblob_free(b);
    return n;
}

/* Both readers: the checked one, and the one that follows record headers whatever the
 * header's count says (what the MIL reader uses); a file the first accepts, the
 * second reads with the same records. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    milblob *b = NULL, *f = NULL;
    af_status sb = milblob_open(data, size, &b), sf = milblob_open_follow(data, size, &f);
    int strict = check_open(b, sb, data, size), follow = check_open(f, sf, data, size);
    REQUIRE(strict < 0 || follow == strict);
    return 0;
}
#else
static void put(const char *dir, const char *name, const uint8_t *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    const uint8_t h[6] = {0x00, 0x3C, 0x00, 0x40, 0x00, 0xB8}; /* fp16 1, 2, -0.5 */
    const uint8_t i8[7] = {0xFD, 0xFE, 0xFF, 0, 1, 2, 0x7F}, u4[5] = {1, 2, 3, 4, 15}, u3[7] = {0, 1, 2, 3, 4, 5, 7};
    uint8_t p4[3], p3[3];
    milblob_pack_bits(u4, 5, 4, p4);
    milblob_pack_bits(u3, 7, 3, p3);
    milblob_writer *w = milblob_writer_new();
    milblob_add(w, AF_MILBLOB_FP16, h, 6);
    milblob_add(w, AF_MILBLOB_INT8, i8, 7);
    milblob_add_packed(w, AF_MILBLOB_UINT4, p4, 5);
    milblob_add_packed(w, AF_MILBLOB_UINT3, p3, 7);
    size_t n;
    const uint8_t *v = milblob_bytes(w, &n);
    uint8_t buf[1024];
    memcpy(buf, v, n);
    put(dir, "valid_mixed.bin", buf, n);             /* fp16, int8, uint4, uint3: 4 records */
    milblob_writer *e = milblob_writer_new();
    size_t ne;
    put(dir, "valid_empty.bin", milblob_bytes(e, &ne), ne);
    milblob_writer_free(e);
    put(dir, "truncated.bin", buf, n - 1);           /* last payload cut short */
    buf[192] ^= 0x01;
    put(dir, "bad_sentinel.bin", buf, n);            /* record 1's sentinel broken */
    /* ANEForge's unaligned container (reference §1.7): record 1 straight after payload 0. */
    memset(buf, 0, sizeof buf);
    memcpy(buf, v, 64 + 64 + 6);
    buf[0] = 2;
    memcpy(buf + 134, v + 192, 64);
    memset(buf + 134 + 16, 0, 8);
    buf[134 + 16] = 198; /* its data offset, u64 little-endian */
    memcpy(buf + 198, v + 256, 7);
    put(dir, "unaligned_aneforge.bin", buf, 205);
    milblob_writer_free(w);
    return 0;
}
#endif
