/* The protobuf wire format, just what a Core ML package needs: a growing writer that
 * nests messages by value, and a bounded reader over untrusted bytes.
 * Why our own and not protobuf-c: the package holds about twenty message kinds of which
 * we read and write a handful of fields; a 200-line codec keeps the build free of an
 * optional dependency (and of generated code) on Linux and macOS alike, and every read
 * is bounded here rather than in a library whose limits we would have to wrap. */
#ifndef AF_COREML_PB_H
#define AF_COREML_PB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PB_MAX_DEPTH 48            /* nesting the reader follows */
#define PB_MAX_BYTES ((size_t)1 << 30)

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

/* ---------------------------------------------------------------- writer */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom; /* sticky: any failed growth; the bytes are then meaningless */
} pb_buf;

void pb_raw(pb_buf *b, const void *data, size_t n);
void pb_varint(pb_buf *b, uint64_t v);
void pb_uint(pb_buf *b, int field, uint64_t v);            /* varint field (int32/64, uint, bool, enum) */
void pb_int(pb_buf *b, int field, int64_t v);              /* int64 / int32 (negative: 10 bytes) */
void pb_bytes(pb_buf *b, int field, const void *d, size_t n);
void pb_str(pb_buf *b, int field, const char *s);          /* skipped when s is NULL */
/* Appends sub as a length-delimited field and frees sub (also when b failed). */
void pb_msg(pb_buf *b, int field, pb_buf *sub);
void pb_free(pb_buf *b);
/* printf into the buffer (text building, no NUL kept in n). */
void pb_printf(pb_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- reader */
typedef struct {
    const uint8_t *p, *end;
} pb_rd;

typedef struct {
    int field, wt;
    uint64_t v;          /* PB_VARINT, PB_I64, PB_I32 */
    const uint8_t *data; /* PB_LEN: the payload, inside the reader's bytes */
    size_t len;
} pb_field;

/* The next field: 1, 0 at the end, -1 when the bytes are malformed (a varint over 10
 * bytes, a length past the end, field number 0, a group or an unknown wire type);
 * *why then says which. */
int pb_next(pb_rd *r, pb_field *f, const char **why);
pb_rd pb_sub(const pb_field *f); /* a reader over a PB_LEN field's payload */

#endif
