/* NumPy .npy reader/writer for little-endian C-order float32/float16 arrays.
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE in v1.0, u32 LE in v2.0),
 * then an ASCII Python dict literal padded with spaces and ending in '\n', then data.
 * The dict is parsed by a small strict grammar, never evaluated. */
#include "data/data.h"
#include "aneforge_data.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parser reads tuples as long as NumPy's own (it allows 64 dims) so a file of too
 * high a rank is refused by name, not as a malformed header; the API takes AF_MAX_RANK. */
enum { NPY_PARSE_RANK = 64 };

typedef struct {
    const char *p, *end, *path;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes, copied into out (cap bytes). */
static int parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return 0;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[n] = 0;
    return 1;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    c->p += n;
    return 1;
}

static int parse_int(cursor *c, int64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int dgt = *c->p++ - '0';
        if (x > (INT64_MAX - dgt) / 10) return 0;
        x = x * 10 + dgt;
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 era files write 3L */
    *v = x;
    return 1;
}

/* "()", "(3,)", "(2, 3)", "(2, 3,)"; a 1-tuple needs its comma, as in Python. */
static int parse_shape(cursor *c, int *rank, int64_t dims[NPY_PARSE_RANK]) {
    if (!eat(c, '(')) return 0;
    int r = 0, commas = 0;
    if (eat(c, ')')) {
        *rank = 0;
        return 1;
    }
    for (;;) {
        if (r == NPY_PARSE_RANK) return 0;
        if (!parse_int(c, &dims[r++])) return 0;
        if (eat(c, ')')) break;
        if (!eat(c, ',')) return 0;
        commas++;
        if (eat(c, ')')) break;
    }
    if (r == 1 && commas == 0) return 0;
    *rank = r;
    return 1;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);            /* inf / nan */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);     /* normal: rebias 15 -> 127 */
    } else if (man) {                                        /* subnormal: normalize */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The descrs read: NumPy's little-endian numeric ones. One-byte kinds have no byte
 * order; NumPy writes them '|', and '<' is accepted for them too. */
typedef struct { const char *descr; af_npy_dtype dt; int size; char cls; } npy_kind;
static const npy_kind kinds[] = {
    { "<f4", AF_NPY_F32, 4, 'f' }, { "<f2", AF_NPY_F16, 2, 'f' }, { "<f8", AF_NPY_F64, 8, 'f' },
    { "|b1", AF_NPY_BOOL, 1, 'b' }, { "|i1", AF_NPY_I8, 1, 'i' },  { "|u1", AF_NPY_U8, 1, 'u' },
    { "<i2", AF_NPY_I16, 2, 'i' },  { "<u2", AF_NPY_U16, 2, 'u' }, { "<i4", AF_NPY_I32, 4, 'i' },
    { "<u4", AF_NPY_U32, 4, 'u' },  { "<i8", AF_NPY_I64, 8, 'i' }, { "<u8", AF_NPY_U64, 8, 'u' },
};

static const npy_kind *kind_of(const char *d) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *k = kinds[i].descr;
        if (!strcmp(d, k) || (k[0] == '|' && d[0] == '<' && !strcmp(d + 1, k + 1))) return &kinds[i];
    }
    return NULL;
}

/* Element p of kind k as a double: exact for every kind but 64-bit ints past 2^53. */
static double element(const npy_kind *k, const uint8_t *p) {
    uint64_t u = 0;
    for (int i = k->size - 1; i >= 0; i--) u = u << 8 | p[i];
    if (k->cls == 'b' || k->cls == 'u') return (double)u;
    if (k->cls == 'i') {
        int sh = 64 - 8 * k->size;
        return (double)((int64_t)(u << sh) >> sh); /* sign-extend */
    }
    if (k->size == 2) return f16_to_f32((uint16_t)u);
    if (k->size == 4) { uint32_t b = (uint32_t)u; float f; memcpy(&f, &b, 4); return f; }
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* typed: every kind of the table, else '<f4' and '<f2' only (af_npy_read). */
static af_status parse_header(const char *path, const char *h, size_t hlen, int typed, const npy_kind **kind,
                              int *rank, int64_t dims[NPY_PARSE_RANK]) {
    if (hlen == 0 || h[hlen - 1] != '\n')
        return ir_fail(AF_ERR_CORRUPT, "%s: npy header does not end with a newline", path);
    for (size_t i = 0; i < hlen; i++)
        if ((unsigned char)h[i] < 0x20 && h[i] != '\n' && h[i] != '\t')
            return ir_fail(AF_ERR_CORRUPT, "%s: npy header has a control character at byte %zu", path, i);
    cursor c = { h, h + hlen - 1, path };
    int seen_descr = 0, seen_fo = 0, seen_shape = 0;
    char key[32], descr[32];
    if (!eat(&c, '{')) return ir_fail(AF_ERR_CORRUPT, "%s: npy header is not a dict", path);
    while (!eat(&c, '}')) {
        if (!parse_str(&c, key, sizeof key) || !eat(&c, ':'))
            return ir_fail(AF_ERR_CORRUPT, "%s: malformed npy header near byte %td", path, c.p - h);
        if (!strcmp(key, "descr") && !seen_descr) {
            seen_descr = 1;
            if (!parse_str(&c, descr, sizeof descr))
                return ir_fail(AF_ERR_CORRUPT, "%s: npy 'descr' is not a string", path);
            *kind = kind_of(descr);
            if (!typed && (!*kind || (*kind)->dt > AF_NPY_F16))
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: npy dtype '%s' not supported (only '<f4' and '<f2'; "
                               "af_npy_read_typed reads ints, bools and '<f8')", path, descr);
            if (!*kind)
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: npy dtype '%s' not supported (want a little-endian bool, "
                               "int, uint or float: '|b1', '<i4', '<f2', '<f4', ...)", path, descr);
        } else if (!strcmp(key, "fortran_order") && !seen_fo) {
            seen_fo = 1;
            if (parse_word(&c, "True"))
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: Fortran-order npy arrays are not supported "
                               "(save with np.ascontiguousarray)", path);
            if (!parse_word(&c, "False"))
                return ir_fail(AF_ERR_CORRUPT, "%s: npy 'fortran_order' must be True or False", path);
        } else if (!strcmp(key, "shape") && !seen_shape) {
            seen_shape = 1;
            if (!parse_shape(&c, rank, dims))
                return ir_fail(AF_ERR_CORRUPT, "%s: npy 'shape' must be a tuple of at most %d "
                               "non-negative ints", path, NPY_PARSE_RANK);
            if (*rank > AF_MAX_RANK)
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: the array has rank %d but aneforge takes at most "
                               "AF_MAX_RANK = %d dimensions; reshape it in NumPy (merge axes) before saving",
                               path, *rank, AF_MAX_RANK);
        } else {
            return ir_fail(AF_ERR_CORRUPT, "%s: unexpected or repeated npy header key '%s'", path, key);
        }
        if (eat(&c, '}')) break;
        if (!eat(&c, ','))
            return ir_fail(AF_ERR_CORRUPT, "%s: malformed npy header near byte %td", path, c.p - h);
    }
    skip_ws(&c);
    if (c.p != c.end) return ir_fail(AF_ERR_CORRUPT, "%s: junk after the npy header dict", path);
    if (!seen_descr || !seen_fo || !seen_shape)
        return ir_fail(AF_ERR_CORRUPT, "%s: npy header lacks '%s'", path,
                       !seen_descr ? "descr" : !seen_fo ? "fortran_order" : "shape");
    return AF_OK;
}

/* Parses buf into floats (out32, af_npy_read's kinds) or doubles (out64, every kind). */
static af_status parse(const char *path, const uint8_t *buf, size_t len, float **out32, double **out64, int *rank,
                       int64_t *dims, af_npy_dtype *dtype) {
    af_status st = AF_ERR_CORRUPT;
    size_t hstart, hlen;
    const npy_kind *k = NULL;
    int r = 0;
    int64_t d[NPY_PARSE_RANK];
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return ir_fail(st, len < 10 ? "%s: too short for a .npy file" : "%s: not a .npy file (bad magic)", path);
    if (buf[6] == 1 && buf[7] == 0) {
        hstart = 10;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if (buf[6] == 2 && buf[7] == 0 && len >= 12) {
        hstart = 12;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    } else {
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: npy version %u.%u not supported (only 1.0 and 2.0)", path, buf[6],
                       buf[7]);
    }
    if (hlen > len - hstart) return ir_fail(st, "%s: npy header length %zu runs past the end of the file", path, hlen);
    if ((st = parse_header(path, (const char *)buf + hstart, hlen, out64 != NULL, &k, &r, d)) != AF_OK) return st;
    st = AF_ERR_CORRUPT;
    size_t itemsize = (size_t)k->size, payload = len - hstart - hlen, count = 1;
    int empty = 0;
    for (int i = 0; i < r; i++) empty |= d[i] == 0;
    for (int i = 0; i < r && !empty; i++) {
        /* count * itemsize must equal payload, so bounding by it prevents overflow. */
        if (count > payload / itemsize / (uint64_t)d[i])
            return ir_fail(st, "%s: shape needs more than the %zu data bytes present (truncated?)", path, payload);
        count *= (size_t)d[i];
    }
    if (empty) count = 0;
    if (count * itemsize != payload)
        return ir_fail(st, "%s: shape holds %zu bytes of data but the file has %zu", path, count * itemsize, payload);
    const uint8_t *p = buf + hstart + hlen;
    void *out = malloc((count ? count : 1) * (out64 ? sizeof **out64 : sizeof **out32));
    if (!out) return ir_fail(AF_ERR_NOMEM, "%s: cannot allocate %zu values", path, count);
    for (size_t i = 0; i < count; i++) {
        if (k->cls == 'b' && p[i] > 1) {
            free(out);
            return ir_fail(st, "%s: element %zu of the bool array is byte %u, not 0 or 1", path, i, p[i]);
        }
        if (out64) {
            ((double *)out)[i] = element(k, p + i * itemsize);
        } else if (itemsize == 4) { /* the bits as they are (NaN payloads included) */
            uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            memcpy((float *)out + i, &b, sizeof b);
        } else {
            ((float *)out)[i] = f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        }
    }
    if (out64) *out64 = out;
    else *out32 = out;
    if (dtype) *dtype = k->dt;
    *rank = r;
    for (int i = 0; i < r; i++) dims[i] = d[i];
    return AF_OK;
}

af_status data_npy_parse(const char *path, const uint8_t *buf, size_t len, float **data, int *rank,
                         int64_t *dims) {
    *data = NULL;
    *rank = 0;
    return parse(path, buf, len, data, NULL, rank, dims, NULL);
}

af_status data_npy_parse_typed(const char *path, const uint8_t *buf, size_t len, double **data, int *rank,
                               int64_t *dims, af_npy_dtype *dtype) {
    *data = NULL;
    *rank = 0;
    return parse(path, buf, len, NULL, data, rank, dims, dtype);
}

af_status af_npy_read(const char *path, float **data, int *rank, int64_t dims[AF_MAX_RANK]) {
    if (!data || !rank || !dims) return ir_fail(AF_ERR_INVALID, "af_npy_read: NULL output argument");
    *data = NULL;
    *rank = 0;
    uint8_t *buf;
    size_t len;
    af_status st = data_read_file(path, NULL, &buf, &len);
    if (st != AF_OK) return st;
    st = data_npy_parse(path, buf, len, data, rank, dims);
    free(buf);
    return st;
}

af_status af_npy_read_typed(const char *path, double **data, int *rank, int64_t dims[AF_MAX_RANK],
                            af_npy_dtype *dtype) {
    if (!data || !rank || !dims) return ir_fail(AF_ERR_INVALID, "af_npy_read_typed: NULL output argument");
    *data = NULL;
    *rank = 0;
    uint8_t *buf;
    size_t len;
    af_status st = data_read_file(path, NULL, &buf, &len);
    if (st != AF_OK) return st;
    st = data_npy_parse_typed(path, buf, len, data, rank, dims, dtype);
    free(buf);
    return st;
}

af_status af_npy_write(const char *path, const float *data, int rank, const int64_t *dims) {
    if (!path) return ir_fail(AF_ERR_INVALID, "af_npy_write: path is NULL");
    if (rank < 0 || rank > AF_MAX_RANK || (rank > 0 && !dims))
        return ir_fail(AF_ERR_INVALID, "af_npy_write %s: rank %d (must be 0..AF_MAX_RANK = %d with dims)", path,
                       rank, AF_MAX_RANK);
    char shape[AF_MAX_RANK * 24 + 4];
    size_t sl = 0;
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return ir_fail(AF_ERR_INVALID, "af_npy_write %s: dims[%d] = %lld is negative",
                                        path, i, (long long)dims[i]);
        if (dims[i] != 0 && count > SIZE_MAX / sizeof(float) / (uint64_t)dims[i])
            return ir_fail(AF_ERR_INVALID, "af_npy_write %s: element count overflows", path);
        count *= (size_t)dims[i];
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", i ? ", " : "", (long long)dims[i]);
    }
    if (rank == 1) shape[sl++] = ',', shape[sl] = 0;
    if (count && !data) return ir_fail(AF_ERR_INVALID, "af_npy_write %s: data is NULL", path);

    /* Pad so the data starts on a 64-byte boundary, as numpy does. */
    char hdr[512];
    int n = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                     rank ? shape : "");
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + 10 + n, ' ', padded - total);
    hdr[padded - 1] = '\n';
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((padded - 10) & 0xff);
    hdr[9] = (char)((padded - 10) >> 8);

    FILE *f = ir_open_write(path); /* whole or not at all */
    if (!f) return AF_ERR_IO;
    int ok = fwrite(hdr, 1, padded, f) == padded;
    uint8_t chunk[4096];
    for (size_t i = 0; ok && i < count;) {
        size_t m = count - i < sizeof chunk / 4 ? count - i : sizeof chunk / 4;
        for (size_t j = 0; j < m; j++) {
            uint32_t b;
            memcpy(&b, &data[i + j], sizeof b);
            chunk[4 * j] = (uint8_t)b, chunk[4 * j + 1] = (uint8_t)(b >> 8);
            chunk[4 * j + 2] = (uint8_t)(b >> 16), chunk[4 * j + 3] = (uint8_t)(b >> 24);
        }
        ok = fwrite(chunk, 4, m, f) == m;
        i += m;
    }
    return ir_close_written(f, path, ok);
}
