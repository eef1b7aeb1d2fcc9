/* One JSON-lines record read for the dashboard and the report: the top-level keys of an
 * object with number, string, true/false/null values (nested values are skipped). Any
 * bytes are safe: a line that is not such an object is rejected, never read past. */
#ifndef AF_TOOLS_DASH_JSON_H
#define AF_TOOLS_DASH_JSON_H
#include <stdbool.h>
#include <stddef.h>

#define JL_MAX_FIELDS 64
#define JL_KEY 48
#define JL_TEXT 4096 /* string bytes kept per line, all strings together */

typedef enum { JL_NUM, JL_STR, JL_BOOL, JL_NULL, JL_NESTED } jl_type;

typedef struct {
    char key[JL_KEY];
    jl_type type;
    double num;      /* JL_NUM, JL_BOOL (0 or 1) */
    size_t str;      /* JL_STR: offset of the unescaped UTF-8 in the line's text (may be cut);
                      * an offset, so that a jl_line can be copied by assignment */
} jl_field;

typedef struct {
    int n;
    jl_field f[JL_MAX_FIELDS];
    char text[JL_TEXT];
    size_t used;
} jl_line;

/* Parses s[0..n) (a trailing newline is fine). 0 on success, -1 when it is not one JSON
 * object (out is then empty). Keys past JL_MAX_FIELDS are dropped, long keys cut. */
int jl_parse(const char *s, size_t n, jl_line *out);
const jl_field *jl_get(const jl_line *l, const char *key);
/* The number at key, or dflt when it is absent or not a number. */
double jl_num(const jl_line *l, const char *key, double dflt);
bool jl_has_num(const jl_line *l, const char *key);
/* The string at key, or NULL. */
const char *jl_str(const jl_line *l, const char *key);
#endif
