/* A small strict JSON reader (RFC 8259) for every JSON document the library reads from
 * untrusted bytes: safetensors headers, config.json, the sharded index. Hand-written
 * rather than a dependency so the build needs nothing Debian-only (ARCHITECTURE.md,
 * "JSON"). Bounded: nesting depth JSON_MAX_DEPTH, at most JSON_MAX_VALUES values, strings decoded
 * into one buffer no larger than the input. Refused: duplicate keys, trailing bytes,
 * invalid UTF-8, lone surrogates, control characters in strings, leading zeros, NaN. */
#ifndef AF_IR_JSON_H
#define AF_IR_JSON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64
#define JSON_MAX_VALUES (1 << 21) /* 2M values: about 130 MB of nodes at most */

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_type;

typedef struct {
    json_type type;
    bool boolean;
    bool integer;      /* a number written without fraction or exponent */
    double num;
    size_t str, len;   /* JSON_STR: offset into the doc's strings and length (may hold NUL) */
    size_t key, keylen;/* a member of an object: its key, likewise */
    int child, next;   /* first element / member and next sibling: node indexes, -1 none */
    int count;         /* elements or members */
} json_node;

typedef struct {
    json_node *n;
    int count;
    char *strings;
} json_doc;

/* Parses len bytes; NULL on failure with why written into err ("line L col C: ..."). */
json_doc *ir_json_parse(const char *text, size_t len, char *err, size_t cap);
void ir_json_free(json_doc *d);

/* The member of object node `obj` named key, or -1. */
int ir_json_get(const json_doc *d, int obj, const char *key);
/* NUL-terminated views (the decoded strings are stored with a terminating NUL). */
const char *ir_json_str(const json_doc *d, int i);
const char *ir_json_key(const json_doc *d, int i);
/* True when node i is a string holding no NUL byte (so json_str is the whole string). */
bool ir_json_is_text(const json_doc *d, int i);
/* A whole number in [lo, hi] held by node i (integer or an exact float value). */
bool ir_json_int(const json_doc *d, int i, int64_t lo, int64_t hi, int64_t *out);
#endif
