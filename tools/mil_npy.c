/* Typed .npy for `aneforge mil run` and `aneforge op`: MIL arguments and results of
 * every I/O dtype (bool, int8, uint8, int16, uint16, int32, fp16, fp32). Reading goes
 * through the library's one strict parser (af_npy_read_typed, any little-endian numeric
 * descr); this file only checks that every value fits the argument's dtype, and writes
 * each result with its declared dtype. */
#include "mil_npy.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *mil, *descr; int size; } npy_kind;
static const npy_kind kinds[] = {
    { "bool", "|b1", 1 }, { "int8", "|i1", 1 }, { "uint8", "|u1", 1 }, { "int16", "<i2", 2 }, { "uint16", "<u2", 2 },
    { "int32", "<i4", 4 }, { "uint32", "<u4", 4 }, { "int64", "<i8", 8 }, { "fp16", "<f2", 2 }, { "fp32", "<f4", 4 },
    { "fp64", "<f8", 8 },
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const npy_kind *by_mil(const char *m) {
    for (size_t i = 0; i < NKINDS; i++)
        if (!strcmp(m, kinds[i].mil)) return &kinds[i];
    return NULL;
}

/* Whether v is a value of the MIL dtype `dt`; why not in why. */
static bool fits(const char *dt, double v, char *why, size_t n) {
    double lo, hi;
    if (!strcmp(dt, "fp16") || !strcmp(dt, "fp32")) return true;
    if (v != floor(v)) { snprintf(why, n, "is not a whole number"); return false; }
    if (!strcmp(dt, "bool")) { lo = 0; hi = 1; }
    else if (!strcmp(dt, "int8")) { lo = -128; hi = 127; }
    else if (!strcmp(dt, "uint8")) { lo = 0; hi = 255; }
    else if (!strcmp(dt, "int16")) { lo = -32768; hi = 32767; }
    else if (!strcmp(dt, "uint16")) { lo = 0; hi = 65535; }
    else { lo = -16777216; hi = 16777216; } /* int32: what the reader holds exactly in fp32 */
    if (v < lo || v > hi) { snprintf(why, n, "is outside %.0f..%.0f", lo, hi); return false; }
    return true;
}

int mil_npy_read(const char *path, const char *dt, float **data, int *rank, int64_t dims[AF_MAX_RANK], char *err, size_t errlen) {
    *data = NULL;
    double *v = NULL;
    af_npy_dtype kind;
    if (af_npy_read_typed(path, &v, rank, dims, &kind) != AF_OK) { snprintf(err, errlen, "%s", af_error_message()); return 1; }
    int64_t n = 1;
    for (int i = 0; i < *rank; i++) n *= dims[i]; /* the reader matched it to the file's bytes */
    *data = malloc(sizeof(float) * (size_t)(n + 1));
    if (!*data) { af_free(v); snprintf(err, errlen, "out of memory reading %s", path); return 1; }
    for (int64_t i = 0; i < n; i++) {
        char why[80];
        if (!fits(dt, v[i], why, sizeof why)) {
            snprintf(err, errlen, "%s: element %lld (%g) %s, the range of the %s argument", path, (long long)i, v[i], why, dt);
            af_free(v);
            free(*data);
            *data = NULL;
            return 1;
        }
        (*data)[i] = (float)v[i];
    }
    af_free(v);
    return 0;
}

int mil_npy_write(const char *path, const char *dt, const float *data, int rank, const int64_t *dims, char *err, size_t errlen) {
    const npy_kind *k = by_mil(dt);
    if (!k) { snprintf(err, errlen, "no .npy dtype for %s", dt); return 1; }
    char shape[200] = "";
    size_t o = 0;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld,%s", (long long)dims[i], rank > 1 && i + 1 < rank ? " " : "");
        n *= dims[i];
    }
    if (rank > 1) shape[o - 1] = 0; /* "(2, 3)" not "(2, 3,)" */
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", k->descr, shape);
    int total = 10 + hl + 1, pad = (64 - total % 64) % 64;
    FILE *f = af_write_open(path); /* whole or not at all */
    if (!f) { snprintf(err, errlen, "%s", af_error_message()); return 1; }
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((hl + pad + 1) & 255), (unsigned char)((hl + pad + 1) >> 8) };
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    for (int64_t i = 0; ok && i < n; i++) {
        unsigned char b[4];
        double v = data[i];
        uint32_t u;
        if (k->descr[1] == 'f') {
            if (k->size == 2) u = af_f32_to_f16(data[i]);
            else memcpy(&u, &data[i], 4);
        } else {
            u = (uint32_t)(int64_t)(k->descr[1] == 'b' ? v != 0 : v); /* two's complement, low bytes */
        }
        for (int j = 0; j < k->size; j++) b[j] = (unsigned char)(u >> (8 * j));
        ok = fwrite(b, 1, (size_t)k->size, f) == (size_t)k->size;
    }
    if (af_write_close(f, path, ok)) { snprintf(err, errlen, "%s", af_error_message()); return 1; }
    return 0;
}
