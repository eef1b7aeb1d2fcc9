/* A small property-list value tree, its XML writer and its reader. net.plist programs
 * (ANECIR netplists) are made of these values; the writer produces byte for byte what
 * Python's plistlib.dumps(value, sort_keys=True) produces, so a program written here
 * is the one a reference generator writes. */
#ifndef AF_ANE_PLIST_H
#define AF_ANE_PLIST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { PLIST_DICT, PLIST_ARRAY, PLIST_STRING, PLIST_INT, PLIST_REAL, PLIST_BOOL, PLIST_DATA } plist_kind;

typedef struct plist_value plist_value;
struct plist_value {
    plist_kind kind;
    int64_t i;             /* PLIST_INT */
    double r;              /* PLIST_REAL */
    bool b;                /* PLIST_BOOL */
    char *s;               /* PLIST_STRING (NUL-terminated, owned) */
    unsigned char *data;   /* PLIST_DATA (owned) */
    size_t len;            /* PLIST_DATA bytes */
    int n, cap;            /* PLIST_DICT, PLIST_ARRAY: entries */
    char **keys;           /* PLIST_DICT: key per entry (owned) */
    plist_value **items;   /* PLIST_DICT, PLIST_ARRAY: value per entry (owned) */
    bool oom;              /* an allocation below this value failed: the writer refuses it */
};

/* Constructors: a new value, or NULL when out of memory. */
plist_value *plist_dict(void);
plist_value *plist_array(void);
plist_value *plist_string(const char *s);
plist_value *plist_int(int64_t i);
plist_value *plist_real(double r);
plist_value *plist_bool(bool b);
plist_value *plist_data(const void *bytes, size_t len);
void plist_free(plist_value *v);
/* A deep copy, or NULL when out of memory. */
plist_value *plist_clone(const plist_value *v);

/* Adds v (owned from here on; NULL marks the container out of memory) under key,
 * replacing an existing entry of that key. Insertion order is kept in the tree; the
 * writer sorts keys. Returns v. */
plist_value *plist_set(plist_value *dict, const char *key, plist_value *v);
plist_value *plist_set_int(plist_value *dict, const char *key, int64_t i);
plist_value *plist_set_str(plist_value *dict, const char *key, const char *s);
plist_value *plist_set_real(plist_value *dict, const char *key, double r);
plist_value *plist_set_bool(plist_value *dict, const char *key, bool b);
/* Appends v (owned) to an array; NULL marks it out of memory. Returns v. */
plist_value *plist_push(plist_value *array, plist_value *v);
plist_value *plist_push_str(plist_value *array, const char *s);

/* Lookups: the entry, or NULL (also when v is not a dict or the kind differs). */
const plist_value *plist_get(const plist_value *dict, const char *key);
const plist_value *plist_get_kind(const plist_value *dict, const char *key, plist_kind kind);
const char *plist_get_str(const plist_value *dict, const char *key);
/* The integer under key into *out; false when absent or not an integer. */
bool plist_get_int(const plist_value *dict, const char *key, int64_t *out);

/* Deep equality (dict entries compared by key, whatever their order). */
bool plist_equal(const plist_value *a, const plist_value *b);

/* The XML document plistlib.dumps(v, sort_keys=True) writes: malloc'd, NUL-terminated,
 * its length in *len. NULL with a message in err when v (or a value below it) ran out
 * of memory, a string holds a character plistlib refuses (controls other than tab,
 * newline and carriage return) or the depth exceeds PLIST_MAX_DEPTH. Reals are
 * written as Python's repr writes them (plist_format_real). */
enum { PLIST_MAX_DEPTH = 32 };
char *plist_write_xml(const plist_value *v, size_t *len, char *err, size_t errn);

/* Parses an XML property list (the subset plistlib writes: dict, array, key, string,
 * integer, real, true, false, data; the declaration, DOCTYPE, comments and whitespace
 * between elements). At most PLIST_MAX_DEPTH levels and PLIST_MAX_NODES values; a dict
 * may not repeat a key. NULL with a message naming the byte offset and the problem on
 * malformed input (plist_read.c). */
enum { PLIST_MAX_NODES = 1 << 20 };
plist_value *plist_read_xml(const char *text, size_t len, char *err, size_t errn);

/* Python's repr(r) into out: shortest round-trip digits, fixed notation for decimal
 * exponents -4 < e <= 16 ("1.0", "0.0001"), otherwise "1e-05", "1.5e+16". */
void plist_format_real(double r, char *out, size_t n);

#endif
