/* af_einsum: NumPy's einsum notation over one or two operands. The engine's native
 * "nchw,nwhu->nchu" layer becomes one einsum bridge node; every other equation is
 * decomposed into reduce_sum (letters summed out of one operand), transpose and
 * reshape to [batch, rows, K] @ [batch, K, cols], one matmul, and a final reshape and
 * transpose to the output's letter order. */
#include "ir/ir.h"

#include <string.h>

typedef struct {
    char letters[AF_MAX_RANK + 1];
    int n;
} term;

static bool has(const term *t, char ch) { return memchr(t->letters, ch, (size_t)t->n) != NULL; }
static int pos(const term *t, char ch) {
    const char *p = memchr(t->letters, ch, (size_t)t->n);
    return p ? (int)(p - t->letters) : -1;
}

/* Parses letters up to a ',' '-' or the end into t; false on a bad character, a repeat
 * or too many letters. */
static bool parse_term(const char **s, term *t) {
    t->n = 0;
    for (; **s && **s != ',' && **s != '-'; (*s)++) {
        char ch = **s;
        if (ch == ' ') continue;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) || t->n == AF_MAX_RANK || has(t, ch)) return false;
        t->letters[t->n++] = ch;
    }
    t->letters[t->n] = 0;
    return true;
}

/* Sums x over the letters of t that neither `other` nor `out` holds. */
static af_tensor *sum_private(af_tensor *x, term *t, const term *other, const term *out) {
    int axes[AF_MAX_RANK], na = 0;
    term kept = { .n = 0 };
    for (int i = 0; i < t->n; i++) {
        char ch = t->letters[i];
        if ((!other || !has(other, ch)) && !has(out, ch)) axes[na++] = i;
        else kept.letters[kept.n++] = ch;
    }
    if (!na) return x;
    kept.letters[kept.n] = 0;
    *t = kept;
    return af_reduce_sum(x, na, axes, 0);
}

/* x (letters t) transposed so its letters run in the order `want`. */
static af_tensor *permute(af_tensor *x, const term *t, const term *want) {
    int perm[AF_MAX_RANK];
    bool id = true;
    for (int i = 0; i < want->n; i++) {
        perm[i] = pos(t, want->letters[i]);
        id &= perm[i] == i;
    }
    return id ? x : af_transpose(x, perm);
}

static void add(term *t, char ch) { t->letters[t->n++] = ch; t->letters[t->n] = 0; }
static int64_t extent(af_tensor *x, const term *t, const term *group) {
    int64_t e = 1;
    for (int i = 0; i < group->n; i++) e *= x->shape.dim[pos(t, group->letters[i])];
    return e;
}

/* a [N,C,H,W], b [N,W,H,U] -> [N,C,H,U] in any letters of that pattern. */
static bool is_native(const term *a, const term *b, const term *o) {
    if (a->n != 4 || b->n != 4 || o->n != 4) return false;
    const char *A = a->letters, *B = b->letters, *O = o->letters;
    return B[0] == A[0] && B[1] == A[3] && B[2] == A[2] && O[0] == A[0] && O[1] == A[1] && O[2] == A[2] && O[3] == B[3] &&
           !has(a, B[3]);
}

static af_tensor *contract(af_tensor *x, term tx, af_tensor *y, term ty, const term *out) {
    term batch = { .n = 0 }, left = { .n = 0 }, right = { .n = 0 }, k = { .n = 0 };
    for (int i = 0; i < out->n; i++) {
        char ch = out->letters[i];
        if (has(&tx, ch) && has(&ty, ch)) add(&batch, ch);
        else if (has(&tx, ch)) add(&left, ch);
        else add(&right, ch);
    }
    for (int i = 0; i < tx.n; i++)
        if (has(&ty, tx.letters[i]) && !has(out, tx.letters[i])) add(&k, tx.letters[i]);
    term xo = batch, yo = batch, res = batch;
    for (int i = 0; i < left.n; i++) add(&xo, left.letters[i]);
    for (int i = 0; i < k.n; i++) { add(&xo, k.letters[i]); add(&yo, k.letters[i]); }
    for (int i = 0; i < right.n; i++) add(&yo, right.letters[i]);
    for (int i = 0; i < left.n; i++) add(&res, left.letters[i]);
    for (int i = 0; i < right.n; i++) add(&res, right.letters[i]);
    int64_t nb = extent(x, &tx, &batch), nl = extent(x, &tx, &left), nk = extent(x, &tx, &k), nr = extent(y, &ty, &right);
    af_tensor *x3 = af_reshape(permute(x, &tx, &xo), AF_SHAPE(nb, nl, nk));
    af_tensor *y3 = af_reshape(permute(y, &ty, &yo), AF_SHAPE(nb, nk, nr));
    af_shape rs = { .rank = res.n };
    for (int i = 0; i < res.n; i++) {
        char ch = res.letters[i];
        rs.dim[i] = has(&tx, ch) ? x->shape.dim[pos(&tx, ch)] : y->shape.dim[pos(&ty, ch)];
    }
    return permute(af_reshape(af_matmul(x3, y3, 0, 0), rs), &res, out);
}

af_tensor *af_einsum(af_graph *g, const char *eq, int n, af_tensor *const *ops) {
    if (!g) { ir_fail(AF_ERR_INVALID, "af_einsum: graph is NULL"); return NULL; }
    if (g->error) return NULL;
    if (!eq || n < 1 || n > 2 || !ops) {
        ir_graph_fail(g, "af_einsum: needs an equation and 1 or 2 operands (got %d)", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ops[i] || ops[i]->g != g) {
            ir_graph_fail(g, "af_einsum \"%s\": operand %d is %s; pass tensors built in this graph", eq, i, ops[i] ? "from another graph" : "NULL");
            return NULL;
        }
    term t[2], out;
    const char *s = eq;
    for (int i = 0; i < n; i++) {
        if (!parse_term(&s, &t[i]) || (i + 1 < n && *s++ != ',')) {
            ir_graph_fail(g, "af_einsum \"%s\": operand %d's letters must be distinct letters a-z or A-Z, at most %d, terms separated by ','", eq, i, AF_MAX_RANK);
            return NULL;
        }
    }
    if (strncmp(s, "->", 2) || (s += 2, !parse_term(&s, &out)) || *s) {
        ir_graph_fail(g, "af_einsum \"%s\": give %d operand term%s, then \"->\" and the output's distinct letters (\"ij,jk->ik\")", eq, n, n > 1 ? "s" : "");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (t[i].n != ops[i]->shape.rank) {
            ir_graph_fail(g, "af_einsum \"%s\": operand %d has rank %d but its term \"%s\" names %d axes", eq, i, ops[i]->shape.rank, t[i].letters, t[i].n);
            return NULL;
        }
    for (int i = 0; i < out.n; i++)
        if (!has(&t[0], out.letters[i]) && (n < 2 || !has(&t[1], out.letters[i]))) {
            ir_graph_fail(g, "af_einsum \"%s\": output letter '%c' is in no operand", eq, out.letters[i]);
            return NULL;
        }
    if (n == 2)
        for (int i = 0; i < t[0].n; i++) {
            int j = pos(&t[1], t[0].letters[i]);
            if (j >= 0 && ops[0]->shape.dim[i] != ops[1]->shape.dim[j]) {
                ir_graph_fail(g, "af_einsum \"%s\": letter '%c' is %lld in operand 0 but %lld in operand 1 (no broadcasting)", eq,
                              t[0].letters[i], (long long)ops[0]->shape.dim[i], (long long)ops[1]->shape.dim[j]);
                return NULL;
            }
        }
    if (n == 2 && is_native(&t[0], &t[1], &out)) return ir_build(IR_OP_EINSUM, 2, ops, NULL);
    af_tensor *x = sum_private(ops[0], &t[0], n == 2 ? &t[1] : NULL, &out);
    if (n == 1) return permute(x, &t[0], &out);
    af_tensor *y = sum_private(ops[1], &t[1], &t[0], &out);
    return contract(x, t[0], y, t[1], &out);
}
