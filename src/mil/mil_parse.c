/* MIL parser: text -> syntax tree (mil_ast.h). Recursive descent over the grammar in
 * ane-formats.md section 2.2, with both scalar spellings: `string("x")` (ios18,
 * program(1.3)) and `tensor<string, []>("x")` (ios16/17, program(1.0)). Nesting depth,
 * counts and literal sizes are capped; every error carries its line and column. */
#include "mil/mil_ast.h"
#include "ir/fp16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mil_lexer L;
    mil_token tok;
    mil_arena *a;
    mil_diag *d;
    int depth;
    bool in_state; /* inside state<...>: a nested state is not a tensor */
} parser;

#define TRY(x) do { if (!(x)) return false; } while (0)

static bool perr(parser *p, const char *fmt, const char *what) {
    char near[40];
    size_t n = p->tok.n < 24 ? p->tok.n : 24;
    if (p->tok.kind == TK_EOF) snprintf(near, sizeof near, "the end of the text");
    else snprintf(near, sizeof near, "'%.*s'", (int)n, p->tok.p);
    char m[200];
    snprintf(m, sizeof m, fmt, what);
    return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "%s, found %s", m, near);
}

static bool next(parser *p) { return mil_lex(&p->L, &p->tok); }

static bool peek(parser *p, mil_token *t) {
    mil_lexer save = p->L;
    bool ok = mil_lex(&save, t);
    return ok;
}

static bool is(parser *p, const char *s) { return mil_tok_is(&p->tok, s); }

static bool expect(parser *p, const char *s) {
    if (!is(p, s)) return perr(p, "expected '%s'", s);
    return next(p);
}

static bool nomem(parser *p) { return mil_error(p->d, AF_ERR_NOMEM, p->tok.line, p->tok.col, "out of memory"); }

static const char *ident(parser *p, const char *what) {
    if (p->tok.kind != TK_IDENT) { perr(p, "expected %s", what); return NULL; }
    const char *s = mil_strndup(p->a, p->tok.p, p->tok.n);
    if (!s) { nomem(p); return NULL; }
    return next(p) ? s : NULL;
}

/* Appends one element to an arena array, doubling its room as needed. */
static void *push(parser *p, void *arr, int *n, int *cap, size_t elem, int max, const char *what) {
    if (*n >= max) { mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "more than %d %s", max, what); return NULL; }
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 4;
        void *na = mil_alloc(p->a, elem * (size_t)c);
        if (!na) { nomem(p); return NULL; }
        if (*n) memcpy(na, arr, elem * (size_t)*n);
        arr = na;
        *cap = c;
    }
    (*n)++;
    return arr;
}

static bool enter(parser *p) {
    if (++p->depth > MIL_MAX_DEPTH) return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "nesting deeper than %d", MIL_MAX_DEPTH);
    return true;
}

/* Skips a bracketed group starting at the current '[' / '(' / '{' (attribute lists of
 * programs and functions, dict bodies). */
static bool skip_group(parser *p) {
    int depth = 0;
    do {
        if (p->tok.kind == TK_EOF) return perr(p, "%s", "unbalanced brackets: expected a closing bracket");
        if (is(p, "[") || is(p, "(") || is(p, "{")) depth++;
        else if (is(p, "]") || is(p, ")") || is(p, "}")) depth--;
        if (depth > 10000) return perr(p, "%s", "brackets nested too deep");
        TRY(next(p));
    } while (depth > 0);
    return true;
}

/* ---------------------------------------------------------------- numbers */

static bool int_token(parser *p, int64_t *v, int64_t max) {
    if (p->tok.kind != TK_NUM || p->tok.n > 19) return perr(p, "expected %s", "a non-negative integer");
    int64_t x = 0;
    for (size_t i = 0; i < p->tok.n; i++) {
        char c = p->tok.p[i];
        if (c < '0' || c > '9') return perr(p, "expected %s", "a non-negative integer");
        x = x * 10 + (c - '0');
        if (x > max) return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "integer larger than %lld", (long long)max);
    }
    *v = x;
    return next(p);
}

/* The value of a number token (or inf/nan identifier) read as dtype dt. */
static bool number(parser *p, mil_dtype dt, double *out) {
    const mil_token *t = &p->tok;
    char buf[80];
    if ((t->kind != TK_NUM && t->kind != TK_IDENT) || t->n >= sizeof buf) return perr(p, "expected %s", "a number");
    memcpy(buf, t->p, t->n);
    buf[t->n] = 0;
    const char *q = buf + (buf[0] == '-' || buf[0] == '+');
    if (t->kind == TK_IDENT && strcmp(buf, "inf") && strcmp(buf, "nan")) return perr(p, "expected %s", "a number");
    bool hex = q[0] == '0' && (q[1] == 'x' || q[1] == 'X');
    double v;
    if (hex && !strpbrk(q, ".pP") && (dt == MIL_FP16 || dt == MIL_FP32)) { /* a bit pattern: 0x3c00 is fp16 1.0 */
        unsigned long long bits = strtoull(q + 2, NULL, 16);
        if (buf[0] == '-' || strlen(q) > (dt == MIL_FP16 ? 6u : 10u) || (dt == MIL_FP16 && bits > 0xFFFF))
            return perr(p, "expected %s", "a bit pattern that fits the dtype");
        if (dt == MIL_FP16) v = af_f16_to_f32((uint16_t)bits);
        else { uint32_t b32 = (uint32_t)bits; float f; memcpy(&f, &b32, 4); v = f; }
    } else {
        char *end;
        v = strtod(buf, &end);
        if (*end || end == buf) return perr(p, "expected %s", "a number");
    }
    if (mil_dtype_is_int(dt)) {
        if (!(v == floor(v)) || v < -9.3e18 || v > 1.8e19) return perr(p, "expected %s", "an integer");
        if (dt == MIL_INT8 && (v < -128 || v > 127)) return perr(p, "expected %s", "an int8 value");
        if (dt == MIL_UINT8 && (v < 0 || v > 255)) return perr(p, "expected %s", "a uint8 value");
        if (dt == MIL_INT32 && (v < -2147483648.0 || v > 2147483647.0)) return perr(p, "expected %s", "an int32 value");
        if (dt >= MIL_UINT1 && v < 0) return perr(p, "expected %s", "an unsigned value");
    } else if (dt == MIL_FP16) {
        v = af_round_f16((float)v);
    } else if (dt == MIL_FP32) {
        v = (float)v;
    }
    *out = v;
    return next(p);
}

static bool string_token(parser *p, char **out) {
    if (p->tok.kind != TK_STR) return perr(p, "expected %s", "a quoted string");
    char *s = mil_alloc(p->a, p->tok.n);
    if (!s) return nomem(p);
    size_t k = 0;
    for (size_t i = 1; i + 1 < p->tok.n; i++) {
        char c = p->tok.p[i];
        if (c == '\\' && i + 2 < p->tok.n) {
            c = p->tok.p[++i];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (!c) return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "NUL inside a string");
        s[k++] = c;
    }
    *out = s;
    return next(p);
}

/* ---------------------------------------------------------------- types */

static bool parse_type(parser *p, mil_type *ty) {
    memset(ty, 0, sizeof *ty);
    ty->line = p->tok.line;
    ty->col = p->tok.col;
    if (p->tok.kind != TK_IDENT) return perr(p, "expected %s", "a type");
    mil_dtype dt = mil_dtype_from(p->tok.p, p->tok.n);
    if (dt) { ty->dt = dt; return next(p); }
    if (is(p, "tensor")) {
        TRY(next(p) && expect(p, "<"));
        if (p->tok.kind != TK_IDENT || !(ty->dt = mil_dtype_from(p->tok.p, p->tok.n))) return perr(p, "expected %s", "a dtype");
        TRY(next(p) && expect(p, ",") && expect(p, "["));
        while (!is(p, "]")) {
            if (ty->rank && !expect(p, ",")) return false;
            if (ty->rank == MIL_MAX_RANK) return mil_error(p->d, AF_ERR_UNSUPPORTED, p->tok.line, p->tok.col, "tensor rank above %d", MIL_MAX_RANK);
            if (is(p, "?") || p->tok.kind == TK_IDENT) { /* symbolic: parses, never maps */
                ty->dynamic = true;
                ty->dim[ty->rank++] = 1;
                TRY(next(p));
            } else {
                TRY(int_token(p, &ty->dim[ty->rank++], (int64_t)1 << 40));
            }
        }
        TRY(next(p));
        return expect(p, ">");
    }
    if (is(p, "state") && !p->in_state) { /* state<tensor<...>>: Core ML's only wrapped type */
        int line = p->tok.line, col = p->tok.col;
        TRY(next(p) && expect(p, "<"));
        p->in_state = true;
        bool ok = parse_type(p, ty);
        p->in_state = false;
        TRY(ok);
        if (ty->kind != MIL_TY_TENSOR || !ty->rank)
            return mil_error(p->d, AF_ERR_UNSUPPORTED, line, col, "a state wraps a tensor<dtype, [dims]> (Core ML's rule)");
        ty->state = true;
        ty->line = line;
        ty->col = col;
        return expect(p, ">");
    }
    if (is(p, "state") || is(p, "dict") || is(p, "tuple") || is(p, "list")) {
        ty->kind = MIL_TY_OTHER;
        TRY(next(p));
        if (!is(p, "<")) return perr(p, "expected %s", "'<'");
        int depth = 0;
        do { /* <...> may nest */
            if (p->tok.kind == TK_EOF) return perr(p, "expected %s", "'>'");
            if (is(p, "<")) depth++;
            else if (is(p, ">")) depth--;
            if (depth > MIL_MAX_DEPTH) return perr(p, "%s", "types nested too deep");
            TRY(next(p));
        } while (depth > 0);
        return true;
    }
    return perr(p, "expected %s", "a type");
}

/* ---------------------------------------------------------------- literals */

static bool parse_literal(parser *p, mil_lit **out);

static bool scalar(parser *p, mil_lit *lit, double *slot) {
    mil_dtype dt = lit->type.dt;
    if (dt == MIL_STRING) return string_token(p, &lit->s);
    if (dt == MIL_BOOL) {
        if (is(p, "true") || is(p, "false")) { *slot = is(p, "true"); return next(p); }
        return perr(p, "expected %s", "true or false");
    }
    return number(p, dt, slot);
}

static bool nested(parser *p, mil_lit *lit, int axis, int64_t *pos) {
    TRY(expect(p, "["));
    int64_t n = lit->type.dim[axis];
    for (int64_t i = 0; i < n; i++) {
        if (i && !is(p, ","))
            return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col,
                             "the literal has %lld elements on axis %d but its type says %lld", (long long)i, axis, (long long)n);
        if (i) TRY(next(p));
        if (axis + 1 == lit->type.rank) TRY(scalar(p, lit, &lit->v[(*pos)++]));
        else TRY(nested(p, lit, axis + 1, pos));
    }
    if (!is(p, "]"))
        return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "the literal has more than %lld elements on axis %d",
                         (long long)n, axis);
    return next(p);
}

/* A rank >= 2 tensor written as one flat list of all its elements in row-major order
 * (`tensor<fp16, [2, 2]>([1, 2, 3, 4])`). */
static bool flat(parser *p, mil_lit *lit) {
    TRY(expect(p, "["));
    for (int64_t i = 0; i < lit->count; i++) {
        if (i && !is(p, ","))
            return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col,
                             "the flat literal has %lld elements but its type holds %lld", (long long)i, (long long)lit->count);
        if (i) TRY(next(p));
        TRY(scalar(p, lit, &lit->v[i]));
    }
    if (!is(p, "]"))
        return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col, "the flat literal has more than the %lld elements its type holds",
                         (long long)lit->count);
    return next(p);
}

/* A one-element tensor written as a bare scalar (`tensor<int32, [1]>(1)`). */
static bool bare_scalar(parser *p, mil_lit *lit) {
    if (lit->count != 1)
        return mil_error(p->d, AF_ERR_CORRUPT, p->tok.line, p->tok.col,
                         "a bare scalar stands only for a one-element tensor; this type holds %lld elements, write them in [...]",
                         (long long)lit->count);
    return scalar(p, lit, lit->v);
}

static bool blobfile(parser *p, mil_lit *lit) {
    TRY(next(p) && expect(p, "("));
    bool have_path = false, have_off = false;
    while (!is(p, ")")) {
        if ((have_path || have_off) && !expect(p, ",")) return false;
        const char *key = ident(p, "path or offset");
        TRY(key && expect(p, "="));
        mil_lit *v;
        int line = p->tok.line, col = p->tok.col;
        TRY(parse_literal(p, &v));
        if (!strcmp(key, "path") && v->type.dt == MIL_STRING && v->s && !have_path) {
            lit->blob_path = v->s;
            have_path = true;
        } else if (!strcmp(key, "offset") && v->v && v->count == 1 && mil_dtype_is_int(v->type.dt) && v->v[0] >= 0 && !have_off) {
            lit->blob_offset = (uint64_t)v->v[0];
            have_off = true;
        } else {
            return mil_error(p->d, AF_ERR_CORRUPT, line, col, "BLOBFILE takes path = string(...) and offset = uint64(...) once each");
        }
    }
    if (!have_path || !have_off) return perr(p, "%s", "BLOBFILE needs both path and offset");
    lit->blob = true;
    return next(p);
}

static bool parse_literal(parser *p, mil_lit **out) {
    TRY(enter(p));
    mil_lit *lit = mil_alloc(p->a, sizeof *lit);
    if (!lit) return nomem(p);
    lit->line = p->tok.line;
    lit->col = p->tok.col;
    TRY(parse_type(p, &lit->type));
    TRY(expect(p, "("));
    mil_type *ty = &lit->type;
    if (ty->kind == MIL_TY_OTHER) { /* dict, tuple, ...: parsed, value unused */
        while (!is(p, ")")) {
            if (p->tok.kind == TK_EOF) return perr(p, "expected %s", "')'");
            if (is(p, "(") || is(p, "[") || is(p, "{")) TRY(skip_group(p));
            else TRY(next(p));
        }
    } else if (is(p, "BLOBFILE")) {
        if (ty->dynamic) return mil_error(p->d, AF_ERR_UNSUPPORTED, ty->line, ty->col, "a BLOBFILE constant needs a static shape");
        lit->count = 1;
        for (int i = 0; i < ty->rank; i++) {
            lit->count *= ty->dim[i];
            if (lit->count > AF_MIL_MAX_ELEMS) return mil_error(p->d, AF_ERR_UNSUPPORTED, ty->line, ty->col, "constant larger than %lld elements", (long long)AF_MIL_MAX_ELEMS);
        }
        TRY(blobfile(p, lit));
    } else {
        if (ty->dynamic) return mil_error(p->d, AF_ERR_UNSUPPORTED, ty->line, ty->col, "a literal needs a static shape");
        if (ty->dt == MIL_STRING && ty->rank) return mil_error(p->d, AF_ERR_UNSUPPORTED, ty->line, ty->col, "string tensors are not supported");
        int64_t n = 1;
        for (int i = 0; i < ty->rank; i++) {
            n *= ty->dim[i];
            if (n > AF_MIL_MAX_INLINE) return mil_error(p->d, AF_ERR_UNSUPPORTED, ty->line, ty->col, "inline literal larger than %lld elements; use a BLOBFILE", (long long)AF_MIL_MAX_INLINE);
        }
        lit->count = n;
        if (ty->dt != MIL_STRING) {
            lit->v = mil_alloc(p->a, sizeof(double) * (size_t)(n ? n : 1));
            if (!lit->v) return nomem(p);
        }
        int64_t pos = 0;
        mil_token nx = { 0 };
        if (ty->rank && is(p, "[")) TRY(peek(p, &nx));
        if (ty->rank == 0) TRY(scalar(p, lit, lit->v));
        else if (!is(p, "[")) TRY(bare_scalar(p, lit));
        else if (ty->rank >= 2 && !mil_tok_is(&nx, "[")) TRY(flat(p, lit));
        else TRY(nested(p, lit, 0, &pos));
    }
    TRY(expect(p, ")"));
    p->depth--;
    *out = lit;
    return true;
}

/* ---------------------------------------------------------------- statements */

static bool starts_literal(parser *p) {
    if (p->tok.kind != TK_IDENT) return false;
    mil_token nx;
    if (!peek(p, &nx)) return false;
    if (is(p, "tensor") || is(p, "dict") || is(p, "tuple") || is(p, "list") || is(p, "state")) return mil_tok_is(&nx, "<");
    return mil_dtype_from(p->tok.p, p->tok.n) && mil_tok_is(&nx, "(");
}

/* Whether a number token is written as an integer (no point, exponent or hex float). */
static bool integer_spelling(const mil_token *t) {
    if (t->kind != TK_NUM) return false;
    for (size_t i = 0; i < t->n; i++)
        if (strchr(".eEpPxXin", t->p[i])) return false;
    return true;
}

/* An operand written without a type, as hand-written MIL does: `axis = -1` (int32),
 * `alpha = 0.5` (fp32), `keep_dims = true` (bool), `mode = "EXACT"` (string) and
 * one-level lists `axes = [0, 1]` (int32, or fp32 when any entry is not an integer). */
static bool untyped_literal(parser *p, mil_lit **out) {
    mil_lit *lit = mil_alloc(p->a, sizeof *lit);
    if (!lit) return nomem(p);
    lit->line = lit->type.line = p->tok.line;
    lit->col = lit->type.col = p->tok.col;
    lit->count = 1;
    if (p->tok.kind == TK_STR) {
        lit->type.dt = MIL_STRING;
        *out = lit;
        return string_token(p, &lit->s);
    }
    if (is(p, "true") || is(p, "false")) {
        lit->type.dt = MIL_BOOL;
        if (!(lit->v = mil_alloc(p->a, sizeof(double)))) return nomem(p);
        lit->v[0] = is(p, "true");
        *out = lit;
        return next(p);
    }
    if (!is(p, "[")) {
        lit->type.dt = integer_spelling(&p->tok) ? MIL_INT32 : MIL_FP32;
        if (!(lit->v = mil_alloc(p->a, sizeof(double)))) return nomem(p);
        *out = lit;
        return number(p, lit->type.dt, lit->v);
    }
    /* A list: read the tokens once to learn the count and the dtype, then parse. */
    mil_lexer save = p->L;
    mil_token first = p->tok;
    int64_t n = 0, nbools = 0;
    bool ints = true;
    TRY(next(p));
    while (!is(p, "]")) {
        if (n && !expect(p, ",")) return false;
        if (n >= AF_MIL_MAX_INLINE) return mil_error(p->d, AF_ERR_UNSUPPORTED, lit->line, lit->col, "inline literal larger than %lld elements", (long long)AF_MIL_MAX_INLINE);
        if (is(p, "true") || is(p, "false")) nbools++;
        else if (p->tok.kind == TK_NUM || is(p, "inf") || is(p, "nan")) ints = ints && integer_spelling(&p->tok);
        else return perr(p, "expected %s", "a number or a bool in an untyped list (nested lists need a tensor<...> type)");
        if (nbools && nbools <= n) return perr(p, "%s", "an untyped list mixes bools and numbers");
        n++;
        TRY(next(p));
    }
    bool bools = n && nbools == n;
    p->L = save;
    p->tok = first;
    lit->type.dt = bools ? MIL_BOOL : ints ? MIL_INT32 : MIL_FP32;
    lit->type.rank = 1;
    lit->type.dim[0] = n;
    lit->count = n;
    if (!(lit->v = mil_alloc(p->a, sizeof(double) * (size_t)(n ? n : 1)))) return nomem(p);
    int64_t pos = 0;
    *out = lit;
    return nested(p, lit, 0, &pos);
}

static bool parse_value(parser *p, mil_value *v) {
    v->line = p->tok.line;
    v->col = p->tok.col;
    if (is(p, "(")) { /* a tuple: concat's values = (a, b) */
        TRY(enter(p) && next(p));
        int cap = 0;
        v->kind = MIL_V_TUPLE;
        while (!is(p, ")")) {
            if (v->n && !expect(p, ",")) return false;
            mil_value *items = push(p, v->items, &v->n, &cap, sizeof *items, 65536, "tuple items");
            if (!items) return false;
            v->items = items;
            TRY(parse_value(p, &v->items[v->n - 1]));
        }
        p->depth--;
        return next(p);
    }
    if (starts_literal(p)) {
        v->kind = MIL_V_LIT;
        return parse_literal(p, &v->lit);
    }
    if (p->tok.kind == TK_NUM || p->tok.kind == TK_STR || is(p, "true") || is(p, "false") || is(p, "[")) {
        v->kind = MIL_V_LIT;
        return untyped_literal(p, &v->lit);
    }
    if (p->tok.kind != TK_IDENT) return perr(p, "expected %s", "a variable, a typed literal or a tuple");
    v->kind = MIL_V_IDENT;
    return (v->ident = ident(p, "a variable")) != NULL;
}

static bool parse_args(parser *p, mil_stmt *s, int *cap, const char *close) {
    int before = s->nargs;
    bool first = true;
    while (!is(p, close)) {
        if (!first && !expect(p, ",")) return false;
        first = false;
        int line = p->tok.line, col = p->tok.col;
        const char *name = ident(p, "an argument name");
        TRY(name && expect(p, "="));
        mil_value v = { 0 };
        TRY(parse_value(p, &v));
        if (!strcmp(name, "name")) continue; /* the op's name: not an input */
        for (int i = 0; i < s->nargs; i++)
            if (!strcmp(s->args[i].name, name)) return mil_error(p->d, AF_ERR_CORRUPT, line, col, "argument '%s' is given twice", name);
        mil_arg *args = push(p, s->args, &s->nargs, cap, sizeof *args, 4096, "arguments");
        if (!args) return false;
        s->args = args;
        s->args[s->nargs - 1] = (mil_arg){ name, v, line, col };
    }
    (void)before;
    return next(p);
}

static bool parse_stmt(parser *p, mil_stmt *s) {
    s->line = p->tok.line;
    s->col = p->tok.col;
    int cap = 0, acap = 0;
    for (;;) {
        mil_type ty;
        TRY(parse_type(p, &ty));
        const char *name = ident(p, "a variable name");
        if (!name) return false;
        int n = s->nout;
        mil_type *types = push(p, s->out_types, &n, &cap, sizeof *types, 256, "outputs");
        if (!types) return false;
        const char **names = mil_alloc(p->a, sizeof *names * (size_t)cap);
        if (!names) return nomem(p);
        if (s->nout) memcpy(names, s->out_names, sizeof *names * (size_t)s->nout);
        s->out_types = types;
        s->out_names = names;
        s->out_types[s->nout] = ty;
        s->out_names[s->nout] = name;
        s->nout = n;
        if (!is(p, ",")) break;
        TRY(next(p));
    }
    TRY(expect(p, "="));
    if (!(s->op = ident(p, "an op name"))) return false;
    TRY(expect(p, "(") && parse_args(p, s, &acap, ")"));
    if (is(p, "[")) TRY(next(p) && parse_args(p, s, &acap, "]"));
    return expect(p, ";");
}

/* The opsets Core ML names: ios15..ios18, and CoreML5..CoreML9 (the same sets by
 * Core ML specification version). */
static bool known_opset(const char *s) {
    static const char *const known[] = { "ios15", "ios16", "ios17", "ios18",
                                         "CoreML5", "CoreML6", "CoreML7", "CoreML8", "CoreML9" };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(s, known[i])) return true;
    return false;
}

static bool parse_func(parser *p, mil_func *f) {
    f->line = p->tok.line;
    f->col = p->tok.col;
    TRY(expect(p, "func"));
    if (!(f->name = ident(p, "a function name"))) return false;
    if (is(p, "<")) {
        TRY(next(p));
        int line = p->tok.line, col = p->tok.col;
        if (!(f->opset = ident(p, "an opset such as ios18"))) return false;
        if (!known_opset(f->opset))
            return mil_error(p->d, AF_ERR_UNSUPPORTED, line, col, "opset '%s' is not one of ios15..ios18 or CoreML5..CoreML9", f->opset);
        TRY(expect(p, ">"));
    }
    TRY(expect(p, "("));
    int cap = 0;
    while (!is(p, ")")) {
        if (f->nparams && !expect(p, ",")) return false;
        mil_param *ps = push(p, f->params, &f->nparams, &cap, sizeof *ps, 4096, "function arguments");
        if (!ps) return false;
        f->params = ps;
        mil_param *q = &f->params[f->nparams - 1];
        q->line = p->tok.line;
        q->col = p->tok.col;
        TRY(parse_type(p, &q->type));
        if (!(q->name = ident(p, "an argument name"))) return false;
    }
    TRY(next(p));
    if (is(p, "[")) TRY(skip_group(p));
    TRY(expect(p, "{"));
    cap = 0;
    while (!is(p, "}")) {
        if (p->tok.kind == TK_EOF) return perr(p, "expected %s", "'}' closing the function");
        mil_stmt *ss = push(p, f->stmts, &f->nstmts, &cap, sizeof *ss, 1 << 20, "statements");
        if (!ss) return false;
        f->stmts = ss;
        memset(&f->stmts[f->nstmts - 1], 0, sizeof *ss);
        TRY(parse_stmt(p, &f->stmts[f->nstmts - 1]));
    }
    TRY(next(p) && expect(p, "->") && expect(p, "("));
    cap = 0;
    while (!is(p, ")")) {
        if (f->nret && !expect(p, ",")) return false;
        mil_ret *rs = push(p, f->ret, &f->nret, &cap, sizeof *rs, 4096, "returned values");
        if (!rs) return false;
        f->ret = rs;
        f->ret[f->nret - 1] = (mil_ret){ NULL, p->tok.line, p->tok.col };
        if (!(f->ret[f->nret - 1].name = ident(p, "a returned variable"))) return false;
    }
    TRY(next(p));
    return expect(p, ";");
}

bool mil_parse_program(const char *text, size_t len, mil_arena *a, mil_diag *d, mil_program *prog) {
    parser p = { .L = { .s = text, .n = len, .line = 1, .col = 1, .diag = d }, .a = a, .d = d };
    memset(prog, 0, sizeof *prog);
    TRY(next(&p));
    TRY(expect(&p, "program") && expect(&p, "("));
    if (p.tok.kind != TK_NUM || p.tok.n >= sizeof prog->version) return perr(&p, "expected %s", "a version such as 1.3");
    memcpy(prog->version, p.tok.p, p.tok.n);
    bool v1 = !strcmp(prog->version, "1") || (!strncmp(prog->version, "1.", 2) && prog->version[2] && strspn(prog->version + 2, "0123456789") == strlen(prog->version + 2));
    if (!v1)
        return mil_error(d, AF_ERR_UNSUPPORTED, p.tok.line, p.tok.col, "program version %s is not 1.x", prog->version);
    TRY(next(&p) && expect(&p, ")"));
    if (is(&p, "[")) TRY(skip_group(&p));
    TRY(expect(&p, "{"));
    int cap = 0;
    while (!is(&p, "}")) {
        mil_func *fs = push(&p, prog->funcs, &prog->nfuncs, &cap, sizeof *fs, 1024, "functions");
        if (!fs) return false;
        prog->funcs = fs;
        memset(&prog->funcs[prog->nfuncs - 1], 0, sizeof *fs);
        TRY(parse_func(&p, &prog->funcs[prog->nfuncs - 1]));
    }
    TRY(next(&p));
    if (p.tok.kind != TK_EOF) return perr(&p, "expected %s", "the end of the text after the program");
    return true;
}
