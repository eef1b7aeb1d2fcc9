#define _GNU_SOURCE /* memmem */
/* libFuzzer target for the .npy reader: arbitrary bytes must be rejected cleanly or give
 * an array whose shape matches the payload exactly, with every element decoded as
 * IEEE binary32 / binary16 says (checked against the IR's own fp16 converter). The typed
 * reader (af_npy_read_typed) runs on the same bytes: it accepts whatever the float one
 * does with the same shape and values, and its ints, bools and doubles are checked
 * against a decoding written here from the descr's own letters.
 *
 *   make fuzz            (builds build-fuzz/fuzz_npy; seeds in tests/corpus/npy) */
#include "data/data.h"
#include "aneforge_data.h"
#include "ir/fp16.h"
#include "fuzz_util.h"

#include <string.h>

/* The typed reader on data: dims as float_dims when float_rank >= 0 (the float reader
 * took it), each element as its descr's letter and size spell it. */
static void typed(const uint8_t *data, size_t size, int float_rank, const int64_t *float_dims, const float *fl) {
    double *v = NULL;
    int rank = -1;
    int64_t dims[8];
    af_npy_dtype dt = (af_npy_dtype)-1;
    if (data_npy_parse_typed("fuzz.npy", data, size, &v, &rank, dims, &dt) != AF_OK) {
        REQUIRE(v == NULL && rank == 0 && float_rank < 0);
        return;
    }
    REQUIRE(v != NULL && rank >= 0 && rank <= AF_MAX_RANK);
    if (float_rank >= 0) REQUIRE(rank == float_rank && !memcmp(dims, float_dims, sizeof(int64_t) * (size_t)rank));
    static const struct { af_npy_dtype dt; char cls; int size; } spell[] = {
        { AF_NPY_F32, 'f', 4 }, { AF_NPY_F16, 'f', 2 }, { AF_NPY_F64, 'f', 8 }, { AF_NPY_BOOL, 'b', 1 },
        { AF_NPY_I8, 'i', 1 },  { AF_NPY_U8, 'u', 1 },  { AF_NPY_I16, 'i', 2 }, { AF_NPY_U16, 'u', 2 },
        { AF_NPY_I32, 'i', 4 }, { AF_NPY_U32, 'u', 4 }, { AF_NPY_I64, 'i', 8 }, { AF_NPY_U64, 'u', 8 },
    };
    REQUIRE((int)dt >= 0 && (size_t)dt < sizeof spell / sizeof spell[0] && spell[dt].dt == dt);
    char cls = spell[dt].cls;
    size_t item = (size_t)spell[dt].size, hstart = data[6] == 1 ? 10 : 12;
    size_t hlen = data[6] == 1 ? (size_t)(data[8] | data[9] << 8)
                               : (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 | (size_t)data[11] << 24;
    char want_descr[4] = { item == 1 ? '|' : '<', cls, (char)('0' + item), 0 };
    char alt[4] = { '<', cls, (char)('0' + item), 0 };
    REQUIRE(memmem(data + hstart, hlen, want_descr, 3) || (item == 1 && memmem(data + hstart, hlen, alt, 3)));
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) count *= (uint64_t)dims[i];
    REQUIRE(count * item == size - hstart - hlen);
    const uint8_t *p = data + hstart + hlen;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t u = 0;
        for (size_t j = item; j-- > 0;) u = u << 8 | p[i * item + j];
        double want;
        if (cls == 'b') { REQUIRE(u <= 1); want = (double)u; }
        else if (cls == 'u') want = (double)u;
        else if (cls == 'i') want = u >> (8 * item - 1) ? -(double)((~u + 1) & (item == 8 ? UINT64_MAX : ((uint64_t)1 << 8 * item) - 1)) : (double)u;
        else if (item == 8) memcpy(&want, &u, 8);
        else if (item == 4) { float f; uint32_t b = (uint32_t)u; memcpy(&f, &b, 4); want = f; }
        else { float f; uint16_t h = (uint16_t)u; ir_f16_to_f32_array(&h, &f, 1); want = f; }
        REQUIRE(want == v[i] || (want != want && v[i] != v[i]));
        if (fl) REQUIRE((float)v[i] == fl[i] || (fl[i] != fl[i] && v[i] != v[i]));
    }
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    float *arr = NULL;
    int rank = -1;
    int64_t dims[8];
    if (data_npy_parse("fuzz.npy", data, size, &arr, &rank, dims) != AF_OK) {
        REQUIRE(arr == NULL && rank == 0);
        typed(data, size, -1, NULL, NULL);
        return 0;
    }
    typed(data, size, rank, dims, arr);
    REQUIRE(arr != NULL && rank >= 0 && rank <= 8);
    REQUIRE(size >= 10 && memcmp(data, "\x93NUMPY", 6) == 0);
    size_t hstart = data[6] == 1 ? 10 : 12;
    size_t hlen = data[6] == 1 ? (size_t)(data[8] | data[9] << 8)
                               : (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 | (size_t)data[11] << 24;
    REQUIRE(hstart + hlen <= size);
    const char *hdr = (const char *)data + hstart;
    int f2 = memmem(hdr, hlen, "<f2", 3) != NULL, f4 = memmem(hdr, hlen, "<f4", 3) != NULL;
    REQUIRE(f2 || f4);
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) {
        REQUIRE(dims[i] >= 0);
        count *= (uint64_t)dims[i];
    }
    size_t payload = size - hstart - hlen, item = payload && count ? payload / count : 0;
    REQUIRE(count * item == payload && (count == 0 || item == 2 || item == 4));
    const uint8_t *p = data + hstart + hlen;
    for (uint64_t i = 0; i < count; i++) {
        float want;
        if (item == 4) {
            uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            memcpy(&want, &b, 4);
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            ir_f16_to_f32_array(&h, &want, 1);
        }
        REQUIRE(memcmp(&want, &arr[i], 4) == 0 || (want != want && arr[i] != arr[i]));
    }
    free(arr);
    return 0;
}
