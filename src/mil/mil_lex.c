/* MIL tokens, the arena and diagnostics. Tokens: identifiers, numbers (decimal, C99
 * hex floats, hex bit patterns, inf/nan with a sign), quoted strings, punctuation and
 * "->". `//` starts a comment to the end of the line; block comments (slash-star ... star-slash) may span lines. */
#include "mil/mil_ast.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

struct mil_block {
    mil_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *mil_alloc(mil_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n > ((size_t)1 << 34)) return NULL;
    mil_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->total += cap;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *mil_strndup(mil_arena *a, const char *s, size_t n) {
    char *d = mil_alloc(a, n + 1);
    if (d) memcpy(d, s, n);
    return d;
}

void mil_arena_free(mil_arena *a) {
    while (a->head) {
        mil_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    a->total = 0;
}

bool mil_error(mil_diag *d, af_status st, int line, int col, const char *fmt, ...) {
    if (d->st) return false;
    d->st = st;
    int k = snprintf(d->msg, sizeof d->msg, "%s:%d:%d: ", d->source ? d->source : "<mil>", line, col);
    if (k < 0 || (size_t)k >= sizeof d->msg) k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg + k, sizeof d->msg - (size_t)k, fmt, ap);
    va_end(ap);
    return false;
}

/* ---------------------------------------------------------------- dtypes */

static const char *const dtype_names[] = {
    [MIL_BOOL] = "bool", [MIL_STRING] = "string", [MIL_FP16] = "fp16", [MIL_FP32] = "fp32", [MIL_FP64] = "fp64",
    [MIL_BF16] = "bf16", [MIL_INT4] = "int4", [MIL_INT8] = "int8", [MIL_INT16] = "int16", [MIL_INT32] = "int32",
    [MIL_INT64] = "int64", [MIL_UINT1] = "uint1", [MIL_UINT2] = "uint2", [MIL_UINT3] = "uint3", [MIL_UINT4] = "uint4",
    [MIL_UINT6] = "uint6", [MIL_UINT8] = "uint8", [MIL_UINT16] = "uint16", [MIL_UINT32] = "uint32", [MIL_UINT64] = "uint64",
};

mil_dtype mil_dtype_from(const char *p, size_t n) {
    for (int i = 1; i <= MIL_UINT64; i++)
        if (strlen(dtype_names[i]) == n && !memcmp(dtype_names[i], p, n)) return (mil_dtype)i;
    return MIL_DT_NONE;
}

const char *mil_dtype_name(mil_dtype dt) { return dt > 0 && dt <= MIL_UINT64 ? dtype_names[dt] : "?"; }
int mil_dtype_class(mil_dtype dt) {
    return dt == MIL_BOOL ? MIL_VC_BOOL : mil_dtype_is_int(dt) ? MIL_VC_INT : MIL_VC_FLOAT;
}
bool mil_dtype_is_int(mil_dtype dt) { return dt >= MIL_INT4 && dt <= MIL_UINT64; }
bool mil_dtype_is_float(mil_dtype dt) { return dt >= MIL_FP16 && dt <= MIL_BF16; }

/* ---------------------------------------------------------------- lexer */

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static char at(const mil_lexer *L, size_t k) { return L->i + k < L->n ? L->s[L->i + k] : 0; }

static void advance(mil_lexer *L, size_t k) {
    while (k-- && L->i < L->n) {
        if (L->s[L->i] == '\n') { L->line++; L->col = 1; }
        else L->col++;
        L->i++;
    }
}

bool mil_tok_is(const mil_token *t, const char *text) {
    size_t n = strlen(text);
    return t->kind != TK_EOF && t->kind != TK_STR && t->kind != TK_NUM && t->n == n && !memcmp(t->p, text, n);
}

/* Length of the number starting at the cursor (0 when none does). */
static size_t number_len(const mil_lexer *L) {
    size_t k = 0;
    if (at(L, 0) == '-' || at(L, 0) == '+') k = 1;
    char c = at(L, k);
    if ((c == 'i' && at(L, k + 1) == 'n' && at(L, k + 2) == 'f') || (c == 'n' && at(L, k + 1) == 'a' && at(L, k + 2) == 'n'))
        return k ? k + 3 : 0; /* a bare inf/nan is an identifier; the parser reads it */
    if (!is_digit(c) && !(c == '.' && is_digit(at(L, k + 1)))) return 0;
    if (c == '0' && (at(L, k + 1) == 'x' || at(L, k + 1) == 'X')) {
        k += 2;
        while (is_hex(at(L, k)) || at(L, k) == '.') k++;
        if (at(L, k) == 'p' || at(L, k) == 'P') {
            k++;
            if (at(L, k) == '+' || at(L, k) == '-') k++;
            while (is_digit(at(L, k))) k++;
        }
        return k;
    }
    while (is_digit(at(L, k)) || at(L, k) == '.') k++;
    if (at(L, k) == 'e' || at(L, k) == 'E') {
        k++;
        if (at(L, k) == '+' || at(L, k) == '-') k++;
        while (is_digit(at(L, k))) k++;
    }
    return k;
}

bool mil_lex(mil_lexer *L, mil_token *t) {
    for (;;) { /* whitespace and comments */
        char c = at(L, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance(L, 1);
        else if (c == '/' && at(L, 1) == '/') { while (L->i < L->n && L->s[L->i] != '\n') advance(L, 1); }
        else if (c == '/' && at(L, 1) == '*') {
            int line = L->line, col = L->col;
            advance(L, 2);
            while (L->i < L->n && !(at(L, 0) == '*' && at(L, 1) == '/')) advance(L, 1);
            if (L->i >= L->n) return mil_error(L->diag, AF_ERR_CORRUPT, line, col, "unterminated /* comment");
            advance(L, 2);
        } else break;
    }
    *t = (mil_token){ .kind = TK_EOF, .p = L->s + L->i, .n = 0, .line = L->line, .col = L->col };
    if (L->i >= L->n) return true;
    char c = at(L, 0);
    size_t k;
    if (is_alpha(c)) {
        k = 1;
        while (is_alpha(at(L, k)) || is_digit(at(L, k))) k++;
        t->kind = TK_IDENT;
    } else if ((k = number_len(L)) > 0) {
        t->kind = TK_NUM;
    } else if (c == '"') {
        k = 1;
        while (L->i + k < L->n && L->s[L->i + k] != '"') {
            if (L->s[L->i + k] == '\n') return mil_error(L->diag, AF_ERR_CORRUPT, t->line, t->col, "unterminated string");
            k += L->s[L->i + k] == '\\' ? 2 : 1;
        }
        if (L->i + k >= L->n) return mil_error(L->diag, AF_ERR_CORRUPT, t->line, t->col, "unterminated string");
        k++;
        t->kind = TK_STR;
    } else if (c == '-' && at(L, 1) == '>') {
        k = 2;
        t->kind = TK_ARROW;
    } else if (strchr("()[]{}<>,=;:?", c)) {
        k = 1;
        t->kind = TK_PUNCT;
    } else {
        if ((unsigned char)c >= 32 && (unsigned char)c < 127)
            return mil_error(L->diag, AF_ERR_CORRUPT, t->line, t->col, "unexpected character '%c'", c);
        return mil_error(L->diag, AF_ERR_CORRUPT, t->line, t->col, "unexpected byte 0x%02x", (unsigned char)c);
    }
    if (k > 4096) return mil_error(L->diag, AF_ERR_CORRUPT, t->line, t->col, "token longer than 4096 bytes");
    t->n = k;
    advance(L, k);
    return true;
}
