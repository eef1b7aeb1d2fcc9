/* MILBlob (weight.bin): the weight container that Core ML and the ANE compiler read
 * for `BLOBFILE(path = ..., offset = uint64(K))` constants.
 *
 * Layout (coremltools mlmodel/src/MILBlob/Blob/StorageFormat.hpp, all little-endian):
 *   0   header, 64 bytes: u32 count, u32 version = 2, 56 zero bytes
 *   64  record 0, 64 bytes: u32 0xDEADBEEF, u32 dtype, u64 sizeInBytes,
 *       u64 data offset (absolute, = record offset + 64), u64 padding_size_in_bits,
 *       32 zero bytes; then the payload at once
 *   next record at align_up(data offset + size, 64); the gap is zero bytes and nothing
 *   follows the last payload.
 * K, the offset MIL cites, is the offset of the record, not of the data: the first
 * blob is always at 64.
 *
 * Errors never abort: failing calls return -1 / an af_status / NULL and set the
 * thread's message (af_error_message) naming the problem, the offset and the file. */
#ifndef AF_MILBLOB_H
#define AF_MILBLOB_H

#include "aneforge.h"
#include <stddef.h>
#include <stdint.h>

/* coremltools' BlobDataType (BlobDataType.hpp). Not the MIL.proto DataType numbering
 * (there FLOAT16 is 10, FLOAT32 11, INT8 21): never mix the two. */
typedef enum {
    AF_MILBLOB_FP16 = 1,
    AF_MILBLOB_FP32 = 2,
    AF_MILBLOB_UINT8 = 3,
    AF_MILBLOB_INT8 = 4,
    AF_MILBLOB_BF16 = 5,
    AF_MILBLOB_INT16 = 6,
    AF_MILBLOB_UINT16 = 7,
    AF_MILBLOB_INT4 = 8,
    AF_MILBLOB_UINT1 = 9,
    AF_MILBLOB_UINT2 = 10,
    AF_MILBLOB_UINT4 = 11,
    AF_MILBLOB_UINT3 = 12,
    AF_MILBLOB_UINT6 = 13,
    AF_MILBLOB_INT32 = 14,
    AF_MILBLOB_UINT32 = 15,
    AF_MILBLOB_FP8E4M3FN = 16,
    AF_MILBLOB_FP8E5M2 = 17
} milblob_dtype;

#define AF_MILBLOB_ALIGN 64
#define AF_MILBLOB_SENTINEL 0xDEADBEEFu
#define AF_MILBLOB_VERSION 2

/* Bits per element (1..32), or 0 for a code this format does not define. */
int milblob_dtype_bits(milblob_dtype dt);
/* "fp16", "uint4", ...; "?" for an unknown code. */
const char *milblob_dtype_name(milblob_dtype dt);

/* ---------------------------------------------------------------- writer
 * Builds the file in memory; byte-identical to coremltools' StorageWriter. */
typedef struct milblob_writer milblob_writer;

milblob_writer *milblob_writer_new(void);   /* NULL when out of memory */
void milblob_writer_free(milblob_writer *w);

/* Appends nbytes of raw little-endian payload (data may be NULL when nbytes is 0) and
 * returns the record offset that MIL cites as `offset = uint64(...)`, or -1 on error.
 * padding_size_in_bits is 0, so for a sub-byte dtype nbytes * 8 must be a whole
 * number of elements; use milblob_add_packed for other element counts. */
int64_t milblob_add(milblob_writer *w, milblob_dtype dt, const void *data, int64_t nbytes);
/* Appends nelems sub-byte elements already packed LSB-first (milblob_pack_bits):
 * ceil(nelems*bits/8) bytes, with padding_size_in_bits set to the unused high bits of
 * the last byte. Works for byte-sized dtypes too (padding 0). Returns as above. */
int64_t milblob_add_packed(milblob_writer *w, milblob_dtype dt, const void *packed,
                              int64_t nelems);
/* Packs n values of `bits` bits each (1..8; the low bits of vals[i]) LSB-first into
 * out, which must hold ceil(n*bits/8) bytes; element i starts at bit i*bits. */
void milblob_pack_bits(const uint8_t *vals, int64_t n, int bits, uint8_t *out);

/* The file as built so far (valid until the next add or free). */
const uint8_t *milblob_bytes(const milblob_writer *w, size_t *n);
int milblob_writer_count(const milblob_writer *w);
af_status milblob_write_file(const milblob_writer *w, const char *path);

/* ---------------------------------------------------------------- reader
 * Treats the file as untrusted: open validates the header and walks every record
 * (alignment, sentinel, dtype, data offset and size inside the file, padding bits,
 * nothing but alignment zeros after the last payload), so later gets only look up. */
typedef struct milblob milblob;

typedef struct {
    uint64_t offset;        /* record offset, what MIL cites */
    milblob_dtype dtype;
    int64_t nbytes;         /* payload bytes */
    uint64_t data_offset;   /* absolute; always offset + 64 in an accepted file */
    uint32_t padding_bits;  /* unused bits in the last byte (sub-byte dtypes) */
} milblob_record;

/* Copies the n bytes (the caller may free them at once). AF_ERR_CORRUPT for a
 * malformed file, AF_ERR_UNSUPPORTED for a dtype code this reader does not know. */
af_status milblob_open(const uint8_t *bytes, size_t n, milblob **out);
/* Reads the whole file; AF_ERR_IO when it cannot be read, else as milblob_open. */
af_status milblob_read_file(const char *path, milblob **out);
/* As milblob_open / milblob_read_file, but records are found by following their
 * headers from offset 64 to the end of the file, whatever the header's count says
 * (several public builders write count 1 for a file of 2 or 3 records); a count that
 * disagrees is reported through the library's log (af_set_log) as a warning. The MIL
 * reader opens weight files this way. */
af_status milblob_open_follow(const uint8_t *bytes, size_t n, milblob **out);
af_status milblob_read_file_follow(const char *path, milblob **out);
void milblob_free(milblob *b);

int milblob_count(const milblob *b);  /* records; 0 for NULL */
/* Record i (0-based, file order). AF_ERR_INVALID when out of range. */
af_status milblob_record_at(const milblob *b, int i, milblob_record *out);
/* The payload of the record at record_offset (the MIL offset). data points into b and
 * lives as long as b. AF_ERR_INVALID when record_offset names no record (for example
 * a data offset, a misaligned or an out-of-file offset). Any out pointer may be NULL. */
af_status milblob_get(const milblob *b, uint64_t record_offset, milblob_dtype *dt,
                         const void **data, int64_t *nbytes);

#endif
