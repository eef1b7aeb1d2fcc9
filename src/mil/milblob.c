/* MILBlob (weight.bin) writer and checked reader; the layout is described in
 * milblob.h. Integers are written and read byte by byte, so the file is the same on
 * any host and no struct layout or alignment is assumed. */
#include "ir/bytes.h"
#include "mil/milblob.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR 64u   /* storage_header */
#define REC 64u   /* blob_metadata */

static const char *const dtype_names[] = {
    NULL, "fp16", "fp32", "uint8", "int8", "bf16", "int16", "uint16", "int4", "uint1",
    "uint2", "uint4", "uint3", "uint6", "int32", "uint32", "fp8e4m3fn", "fp8e5m2"};
static const unsigned char dtype_bits[] = {0, 16, 32, 8, 8, 16, 16, 16, 4, 1, 2, 4, 3, 6, 32, 32, 8, 8};
#define NDTYPES (sizeof dtype_bits / sizeof dtype_bits[0])

int milblob_dtype_bits(milblob_dtype dt) {
    return ((unsigned)dt < NDTYPES) ? dtype_bits[dt] : 0;
}

const char *milblob_dtype_name(milblob_dtype dt) {
    return milblob_dtype_bits(dt) ? dtype_names[dt] : "?";
}

/* Callers pass values bounded by a real buffer size, so x + 63 cannot wrap. */
static uint64_t align_up(uint64_t x) { return (x + (AF_MILBLOB_ALIGN - 1)) & ~(uint64_t)(AF_MILBLOB_ALIGN - 1); }

/* ---------------------------------------------------------------- writer */

struct milblob_writer {
    uint8_t *buf;
    size_t len, cap;
    uint32_t count;
};

milblob_writer *milblob_writer_new(void) {
    milblob_writer *w = calloc(1, sizeof *w);
    if (w) w->buf = calloc(1, HDR);
    if (!w || !w->buf) {
        free(w);
        ir_fail(AF_ERR_NOMEM, "milblob: out of memory creating a writer");
        return NULL;
    }
    w->len = w->cap = HDR;
    ir_put_u32(w->buf + 4, AF_MILBLOB_VERSION); /* count 0 and reserved 0 from calloc */
    return w;
}

void milblob_writer_free(milblob_writer *w) {
    if (!w) return;
    free(w->buf);
    free(w);
}

/* Appends one record + payload at the next 64-aligned offset, zero-filling the gap as
 * coremltools' FileWriter does when it seeks past the end. */
static int64_t add_record(milblob_writer *w, milblob_dtype dt, const void *data, int64_t nbytes,
                          uint32_t pad_bits) {
    if (w->count == UINT32_MAX) {
        ir_fail(AF_ERR_UNSUPPORTED, "milblob: a file holds at most %u records (u32 count)", UINT32_MAX);
        return -1;
    }
    uint64_t rec = align_up(w->len);
    if ((uint64_t)nbytes > (uint64_t)SIZE_MAX - rec - REC || rec + REC + (uint64_t)nbytes > (uint64_t)INT64_MAX) {
        ir_fail(AF_ERR_NOMEM, "milblob: a %lld-byte %s payload at offset %llu overflows the file size",
                (long long)nbytes, milblob_dtype_name(dt), (unsigned long long)rec);
        return -1;
    }
    size_t need = (size_t)(rec + REC + (uint64_t)nbytes);
    if (need > w->cap) {
        size_t cap = w->cap;
        while (cap < need) cap = (cap > SIZE_MAX / 2) ? need : cap * 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb) {
            ir_fail(AF_ERR_NOMEM, "milblob: out of memory growing the file to %zu bytes", need);
            return -1;
        }
        w->buf = nb;
        w->cap = cap;
    }
    uint8_t *r = w->buf + rec;
    memset(w->buf + w->len, 0, (size_t)(rec - w->len) + REC); /* gap + record's reserved fields */
    ir_put_u32(r, AF_MILBLOB_SENTINEL);
    ir_put_u32(r + 4, (uint32_t)dt);
    ir_put_u64(r + 8, (uint64_t)nbytes);
    ir_put_u64(r + 16, rec + REC);
    ir_put_u64(r + 24, pad_bits);
    if (nbytes > 0) memcpy(r + REC, data, (size_t)nbytes);
    w->len = need;
    ir_put_u32(w->buf, ++w->count); /* like StorageWriter, the header always holds the count */
    return (int64_t)rec;
}

static int check_add(const milblob_writer *w, milblob_dtype dt, const void *data, int64_t n,
                     const char *what) {
    if (!w) return ir_fail(AF_ERR_INVALID, "milblob: NULL writer"), 0;
    if (!milblob_dtype_bits(dt))
        return ir_fail(AF_ERR_INVALID, "milblob: unknown BlobDataType %d (known: 1..%d)", (int)dt,
                       (int)NDTYPES - 1), 0;
    if (n < 0)
        return ir_fail(AF_ERR_INVALID, "milblob: negative %s (%lld) for a %s blob", what, (long long)n,
                       milblob_dtype_name(dt)), 0;
    if (n > 0 && !data)
        return ir_fail(AF_ERR_INVALID, "milblob: NULL data for a %lld-%s %s blob", (long long)n, what,
                       milblob_dtype_name(dt)), 0;
    return 1;
}

int64_t milblob_add(milblob_writer *w, milblob_dtype dt, const void *data, int64_t nbytes) {
    if (!check_add(w, dt, data, nbytes, "byte count")) return -1;
    int bits = milblob_dtype_bits(dt);
    /* Whole elements only: the reader derives the element count from the byte count. */
    if (bits >= 8 ? nbytes % (bits / 8) != 0 : (8 * (nbytes % bits)) % bits != 0) {
        ir_fail(AF_ERR_INVALID,
                "milblob: %lld bytes is not a whole number of %s elements (%d bits each)%s",
                (long long)nbytes, milblob_dtype_name(dt), bits,
                bits < 8 ? "; use milblob_add_packed with an element count" : "");
        return -1;
    }
    return add_record(w, dt, data, nbytes, 0);
}

int64_t milblob_add_packed(milblob_writer *w, milblob_dtype dt, const void *packed, int64_t nelems) {
    if (!check_add(w, dt, packed, nelems, "element count")) return -1;
    int bits = milblob_dtype_bits(dt);
    if (nelems > INT64_MAX / 32) {
        ir_fail(AF_ERR_INVALID, "milblob: %lld %s elements overflow the size field", (long long)nelems,
                milblob_dtype_name(dt));
        return -1;
    }
    int64_t nbits = nelems * bits;
    /* coremltools' WritePaddingBits: the unused high bits of the last byte. */
    return add_record(w, dt, packed, (nbits + 7) / 8, (uint32_t)((8 - nbits % 8) % 8));
}

void milblob_pack_bits(const uint8_t *vals, int64_t n, int bits, uint8_t *out) {
    if (bits < 1 || bits > 8 || n <= 0) return;
    memset(out, 0, (size_t)((n * bits + 7) / 8));
    unsigned mask = (1u << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t pos = (uint64_t)i * (uint64_t)bits;
        unsigned v = vals[i] & mask, sh = (unsigned)(pos % 8);
        out[pos / 8] |= (uint8_t)(v << sh);
        if (sh + (unsigned)bits > 8) out[pos / 8 + 1] |= (uint8_t)(v >> (8 - sh)); /* 3/6-bit spill */
    }
}

const uint8_t *milblob_bytes(const milblob_writer *w, size_t *n) {
    if (n) *n = w ? w->len : 0;
    return w ? w->buf : NULL;
}

int milblob_writer_count(const milblob_writer *w) {
    return w ? (int)(w->count > INT_MAX ? INT_MAX : w->count) : 0;
}

af_status milblob_write_file(const milblob_writer *w, const char *path) {
    if (!w || !path) return ir_fail(AF_ERR_INVALID, "milblob: NULL %s", w ? "path" : "writer");
    return ir_write_file(path, w->buf, w->len, "milblob"); /* whole or not at all */
}

/* ---------------------------------------------------------------- reader */

struct milblob {
    uint8_t *bytes; /* owned copy of the file */
    size_t n;
    char *name;     /* path, or "<memory>" */
    int count;
    milblob_record *rec;
};

void milblob_free(milblob *b) {
    if (!b) return;
    free(b->bytes);
    free(b->name);
    free(b->rec);
    free(b);
}

/* Records the error and returns its status from parse (the caller frees b). */
#define BAD(...) return ir_fail(__VA_ARGS__)

/* Checks the record at off and stores it as record i; end receives its payload's end. */
static af_status check_record(milblob *b, uint32_t i, const char *of, uint64_t off, uint64_t prev_end, uint64_t *end) {
    const uint8_t *p = b->bytes;
    const char *nm = b->name;
    uint64_t n = b->n;
    /* ANEForge-style files put the next record right after the payload (ref. §1.7). */
    const char *hint = (off != prev_end && prev_end + 4 <= n && ir_get_u32(p + prev_end) == AF_MILBLOB_SENTINEL)
                           ? "; a record starts unaligned right after the previous payload" : "";
    if (off > n || n - off < REC)
        BAD(AF_ERR_CORRUPT, "milblob %s: record %u%s at offset %llu: 64-byte record runs past the end (%llu bytes)%s",
            nm, i, of, (unsigned long long)off, (unsigned long long)n, hint);
    const uint8_t *r = p + off;
    uint32_t sentinel = ir_get_u32(r), code = ir_get_u32(r + 4);
    uint64_t size = ir_get_u64(r + 8), data = ir_get_u64(r + 16), pad = ir_get_u64(r + 24);
    if (sentinel != AF_MILBLOB_SENTINEL)
        BAD(AF_ERR_CORRUPT, "milblob %s: record %u at offset %llu: sentinel 0x%08X, want 0xDEADBEEF%s",
            nm, i, (unsigned long long)off, sentinel, hint);
    int bits = code < NDTYPES ? dtype_bits[code] : 0; /* no enum cast before the check */
    if (!bits)
        BAD(AF_ERR_UNSUPPORTED, "milblob %s: record %u at offset %llu: unknown BlobDataType %u (known: 1..%d)",
            nm, i, (unsigned long long)off, code, (int)NDTYPES - 1);
    if (data != off + REC)
        BAD(AF_ERR_CORRUPT, "milblob %s: record %u at offset %llu: data offset %llu, want %llu (the payload follows its record)",
            nm, i, (unsigned long long)off, (unsigned long long)data, (unsigned long long)(off + REC));
    if (size > n - data)
        BAD(AF_ERR_CORRUPT, "milblob %s: record %u at offset %llu: %llu-byte payload at %llu runs past the end (%llu bytes)",
            nm, i, (unsigned long long)off, (unsigned long long)size, (unsigned long long)data,
            (unsigned long long)n);
    /* Whole elements: padding only for sub-byte dtypes, and 8*size - pad a multiple
     * of the element width (computed mod bits so 8*size cannot wrap). */
    int whole = bits >= 8 ? (pad == 0 && size % (uint64_t)(bits / 8) == 0)
                          : (pad < 8 && (size > 0 || pad == 0) &&
                             (8 * (size % (uint64_t)bits) + 8 * (uint64_t)bits - pad) % (uint64_t)bits == 0);
    if (!whole)
        BAD(AF_ERR_CORRUPT, "milblob %s: record %u at offset %llu: %llu bytes with %llu padding bits is not a whole number of %s elements",
            nm, i, (unsigned long long)off, (unsigned long long)size, (unsigned long long)pad,
            milblob_dtype_name((milblob_dtype)code));
    b->rec[i] = (milblob_record){off, (milblob_dtype)code, (int64_t)size, data, (uint32_t)pad};
    *end = data + size;
    return AF_OK;
}

/* Whether a record header starts at the next aligned offset after end. */
static int record_follows(const milblob *b, uint64_t end) {
    uint64_t next = align_up(end);
    return next + 4 <= b->n && ir_get_u32(b->bytes + next) == AF_MILBLOB_SENTINEL;
}

/* Validates the whole file so that milblob_get needs no further checks. With follow,
 * records are found by walking their headers and the header's count only warns. */
static af_status parse(milblob *b, int follow) {
    const uint8_t *p = b->bytes;
    const char *nm = b->name;
    uint64_t n = b->n;
    if (n < HDR)
        BAD(AF_ERR_CORRUPT, "milblob %s: %llu bytes is shorter than the 64-byte header", nm,
            (unsigned long long)n);
    uint32_t version = ir_get_u32(p + 4), count = ir_get_u32(p);
    if (version != AF_MILBLOB_VERSION)
        BAD(AF_ERR_CORRUPT, "milblob %s: header version %u at offset 4, want 2%s", nm, version,
            version == 1 ? " (1 is Espresso blob_v1, not MILBlob)" : "");
    /* Each record takes at least 64 bytes: bounds the allocation below by the file size. */
    uint64_t room = (n - HDR) / REC;
    if (!follow && (count > room || count > INT_MAX))
        BAD(AF_ERR_CORRUPT, "milblob %s: header count %u at offset 0 needs at least %llu bytes, file has %llu",
            nm, count, (unsigned long long)(HDR + (uint64_t)count * REC), (unsigned long long)n);
    /* Following headers, the table grows as records are found (at most `room`). */
    uint64_t cap = follow ? (room < 16 ? room : 16) : count, limit = room < INT_MAX ? room : INT_MAX;
    if (cap) {
        b->rec = calloc((size_t)cap, sizeof *b->rec);
        if (!b->rec) BAD(AF_ERR_NOMEM, "milblob %s: out of memory for %llu records", nm, (unsigned long long)cap);
    }
    uint64_t end = HDR;
    uint32_t i = 0;
    for (; follow ? (i < limit && (i == 0 ? n > HDR : record_follows(b, end))) : i < count; i++) {
        char of[32] = "";
        if (!follow) snprintf(of, sizeof of, " of %u", count);
        if (i == cap) {
            uint64_t nc = cap * 2 < limit ? cap * 2 : limit;
            milblob_record *nr = realloc(b->rec, (size_t)nc * sizeof *nr);
            if (!nr) BAD(AF_ERR_NOMEM, "milblob %s: out of memory for %llu records", nm, (unsigned long long)nc);
            b->rec = nr;
            cap = nc;
        }
        af_status st = check_record(b, i, of, align_up(end), end, &end); /* always 64-aligned */
        if (st) return st;
    }
    /* coremltools writes nothing after the last payload; allow only alignment zeros so
     * that a header whose count is too small does not hide records. */
    for (uint64_t k = end; k < n; k++) {
        if (p[k] != 0 || k >= align_up(end)) {
            BAD(AF_ERR_CORRUPT, "milblob %s: %llu stray bytes after the last payload (ends at %llu)%s", nm,
                (unsigned long long)(n - end), (unsigned long long)end,
                record_follows(b, end) ? "; a record follows that the header count does not include" : "");
        }
    }
    if (follow && i != count)
        ir_log(AF_LOG_WARN, "milblob %s: the header says %u records but the file holds %u; reading the %u found by their headers",
               nm, count, i, i);
    b->count = (int)i;
    return AF_OK;
}

/* Takes ownership of bytes (freed on failure too). */
static af_status open_owned(uint8_t *bytes, size_t n, const char *name, int follow, milblob **out) {
    milblob *b = calloc(1, sizeof *b);
    size_t len = strlen(name);
    char *nm = malloc(len + 1);
    if (!b || !nm) {
        free(b);
        free(nm);
        free(bytes);
        return ir_fail(AF_ERR_NOMEM, "milblob %s: out of memory", name);
    }
    memcpy(nm, name, len + 1);
    b->bytes = bytes;
    b->n = n;
    b->name = nm;
    af_status st = parse(b, follow);
    if (st != AF_OK) {
        milblob_free(b);
        return st;
    }
    *out = b;
    return AF_OK;
}

static af_status open_mem(const uint8_t *bytes, size_t n, int follow, milblob **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "milblob: NULL out pointer");
    *out = NULL;
    if (!bytes && n) return ir_fail(AF_ERR_INVALID, "milblob <memory>: NULL bytes with length %zu", n);
    uint8_t *copy = malloc(n ? n : 1); /* malloc alignment keeps 64-aligned payloads typed-aligned */
    if (!copy) return ir_fail(AF_ERR_NOMEM, "milblob <memory>: out of memory copying %zu bytes", n);
    if (n) memcpy(copy, bytes, n);
    return open_owned(copy, n, "<memory>", follow, out);
}

af_status milblob_open(const uint8_t *bytes, size_t n, milblob **out) { return open_mem(bytes, n, 0, out); }
af_status milblob_open_follow(const uint8_t *bytes, size_t n, milblob **out) { return open_mem(bytes, n, 1, out); }

static af_status read_file(const char *path, int follow, milblob **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "milblob: NULL out pointer");
    *out = NULL;
    if (!path) return ir_fail(AF_ERR_INVALID, "milblob: NULL path");
    uint64_t size = 0;
    FILE *f = ir_fopen_regular(path, "weight file", SIZE_MAX / 2 < IR_FILE_MAX_BYTES ? SIZE_MAX / 2 : IR_FILE_MAX_BYTES,
                               &size);
    if (!f) return AF_ERR_IO;
    size_t n = (size_t)size;
    uint8_t *buf = malloc(n ? n : 1);
    size_t got = buf ? fread(buf, 1, n, f) : 0;
    int rerr = buf && got != n;
    fclose(f);
    if (!buf) return ir_fail(AF_ERR_NOMEM, "milblob %s: out of memory reading %zu bytes", path, n);
    if (rerr) {
        free(buf);
        return ir_fail(AF_ERR_IO, "milblob %s: read error after %zu bytes", path, n);
    }
    return open_owned(buf, n, path, follow, out);
}

af_status milblob_read_file(const char *path, milblob **out) { return read_file(path, 0, out); }
af_status milblob_read_file_follow(const char *path, milblob **out) { return read_file(path, 1, out); }

int milblob_count(const milblob *b) { return b ? b->count : 0; }

af_status milblob_record_at(const milblob *b, int i, milblob_record *out) {
    if (!b || !out) return ir_fail(AF_ERR_INVALID, "milblob: NULL %s", b ? "out pointer" : "blob");
    if (i < 0 || i >= b->count)
        return ir_fail(AF_ERR_INVALID, "milblob %s: record index %d out of range (file has %d)", b->name, i,
                       b->count);
    *out = b->rec[i];
    return AF_OK;
}

static int find(const milblob *b, uint64_t off) {
    int lo = 0, hi = b->count - 1; /* records are in increasing offset order */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (b->rec[mid].offset == off) return mid;
        if (b->rec[mid].offset < off) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

af_status milblob_get(const milblob *b, uint64_t record_offset, milblob_dtype *dt,
                         const void **data, int64_t *nbytes) {
    if (!b) return ir_fail(AF_ERR_INVALID, "milblob: NULL blob");
    unsigned long long o = record_offset;
    int i = find(b, record_offset);
    if (i < 0) {
        /* Say why, since a wrong BLOBFILE offset is the usual bug (Orion cited 128). */
        const char *why = record_offset % AF_MILBLOB_ALIGN ? "it is not 64-aligned"
                        : record_offset >= b->n          ? "it is past the end of the file"
                        : record_offset < HDR            ? "it is the file header"
                        : find(b, record_offset - REC) >= 0 ? "it is a payload; cite its record, 64 bytes earlier"
                                                          : "no record starts there";
        return ir_fail(AF_ERR_INVALID, "milblob %s: offset %llu names no record (%s; %d records, first at 64)",
                       b->name, o, why, b->count);
    }
    const milblob_record *r = &b->rec[i];
    if (dt) *dt = r->dtype;
    if (data) *data = b->bytes + r->data_offset;
    if (nbytes) *nbytes = r->nbytes;
    return AF_OK;
}
