/* Encoding and decoding exactly as llama2.c's run.c does.
 *
 * run.c rescans the whole sequence for the best pair after every merge, which is
 * quadratic in the text's length. Here the candidate pairs sit in a heap ordered the
 * way run.c's scan chooses (highest score first, then the leftmost pair), and pairs
 * broken by a merge are dropped when they surface: the same merges in the same order,
 * in n log n. */
#include "text/text.h"
#include "aneforge_data.h"
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float score;
    int32_t left, right;     /* node indices: their order is the sequence's order */
    uint32_t gen_left, gen_right;
} cand;

typedef struct {
    cand *c;
    size_t n, cap;
} heap;

static bool before(const cand *a, const cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(heap *h, cand x) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        cand *c = realloc(h->c, cap * sizeof *c);
        if (!c) return false;
        h->c = c;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && before(&x, &h->c[(i - 1) / 2])) {
        h->c[i] = h->c[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->c[i] = x;
    return true;
}

static cand heap_pop(heap *h) {
    cand top = h->c[0], x = h->c[--h->n];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= h->n) break;
        if (k + 1 < h->n && before(&h->c[k + 1], &h->c[k])) k++;
        if (!before(&h->c[k], &x)) break;
        h->c[i] = h->c[k];
        i = k;
    }
    if (h->n) h->c[i] = x;
    return top;
}

typedef struct {
    const af_tokenizer *t;
    int32_t *tok, *next, *prev;
    uint32_t *gen;
    uint8_t *buf;            /* room for two tokens side by side */
    heap h;
} merger;

/* The token the pair (a, b) merges into, or -1: run.c looks up the two strings
 * concatenated and takes the pair only if its score beats its starting -1e10. */
static int32_t merged(const merger *m, int32_t a, int32_t b) {
    const af_tokenizer *t = m->t;
    uint32_t la = t->len[a], lb = t->len[b];
    memcpy(m->buf, t->bytes + t->off[a], la);
    memcpy(m->buf + la, t->bytes + t->off[b], lb);
    int id = txt_lookup(t, m->buf, (size_t)la + lb);
    return id >= 0 && t->score[id] > TXT_NO_MERGE_SCORE ? id : -1;
}

static bool offer(merger *m, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    int32_t id = merged(m, m->tok[left], m->tok[right]);
    if (id < 0) return true;
    cand c = { m->t->score[id], left, right, m->gen[left], m->gen[right] };
    return heap_push(&m->h, c);
}

/* Merges nodes [0, count) (linked by next/prev) until no pair is left; returns false
 * when out of memory. */
static bool merge_all(merger *m, int32_t count) {
    for (int32_t i = 0; i + 1 < count; i++)
        if (!offer(m, i, i + 1)) return false;
    while (m->h.n) {
        cand c = heap_pop(&m->h);
        if (m->next[c.left] != c.right || m->gen[c.left] != c.gen_left || m->gen[c.right] != c.gen_right) continue;
        m->tok[c.left] = merged(m, m->tok[c.left], m->tok[c.right]);
        m->gen[c.left]++;
        m->gen[c.right]++;
        int32_t after = m->next[c.right];
        m->next[c.left] = after;
        if (after >= 0) m->prev[after] = c.left;
        m->next[c.right] = -2; /* gone */
        if (!offer(m, m->prev[c.left], c.left) || !offer(m, c.left, after)) return false;
    }
    return true;
}

af_status af_tokenizer_encode(const af_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **tokens,
                              int64_t *n) {
    if (tokens) *tokens = NULL;
    if (n) *n = 0;
    if (!t || !tokens || !n || (!text && len))
        return ir_fail(AF_ERR_INVALID, "af_tokenizer_encode: the tokenizer, text, tokens and n must not be NULL");
    if (len > (size_t)INT32_MAX - 4)
        return ir_fail(AF_ERR_INVALID, "af_tokenizer_encode: %zu bytes is too long for one call; encode the text "
                                       "in documents", len);
    const uint8_t *s = (const uint8_t *)text;
    size_t cap = len + 3;
    merger m = { .t = t };
    m.tok = malloc(cap * sizeof *m.tok);
    m.next = malloc(cap * sizeof *m.next);
    m.prev = malloc(cap * sizeof *m.prev);
    m.gen = calloc(cap, sizeof *m.gen);
    m.buf = malloc(2 * (size_t)t->longest + 8);
    af_status st = AF_ERR_NOMEM;
    if (!m.tok || !m.next || !m.prev || !m.gen || !m.buf) goto done;

    int32_t k = 0;
    if (flags & AF_ENCODE_BOS) m.tok[k++] = TXT_BOS;
    /* run.c's dummy prefix: a " " token before any non-empty text. run.c has no answer
     * for a vocabulary without " " (it would store -1); this spells it as a byte. */
    if (len && !(flags & AF_ENCODE_NO_PREFIX)) m.tok[k++] = t->space >= 0 ? t->space : TXT_BYTE0 + ' ';
    for (size_t i = 0; i < len;) {
        size_t u = txt_unit_len(s + i, len - i);
        int id = txt_lookup(t, s + i, u);
        if (id >= 0) m.tok[k++] = id;
        else
            for (size_t j = 0; j < u; j++) m.tok[k++] = TXT_BYTE0 + s[i + j];
        i += u;
    }
    for (int32_t i = 0; i < k; i++) m.next[i] = i + 1 < k ? i + 1 : -1, m.prev[i] = i - 1;
    if (!merge_all(&m, k)) goto done;

    int32_t *out = malloc(((size_t)k + 1) * sizeof *out);
    if (!out) goto done;
    int64_t count = 0;
    for (int32_t i = k ? 0 : -1; i >= 0; i = m.next[i]) out[count++] = m.tok[i];
    if (flags & AF_ENCODE_EOS) out[count++] = TXT_EOS;
    *tokens = out;
    *n = count;
    st = AF_OK;
done:
    if (st != AF_OK) ir_fail(st, "af_tokenizer_encode: out of memory for %zu bytes of text", len);
    free(m.tok);
    free(m.next);
    free(m.prev);
    free(m.gen);
    free(m.buf);
    free(m.h.c);
    return st;
}

static int hex_digit(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *af_tokenizer_decode_piece(const af_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!t || token < 0 || token >= t->n) {
        ir_fail(AF_ERR_INVALID, "token %d is outside the vocabulary (size %d)", token, t ? t->n : 0);
        return NULL;
    }
    const uint8_t *p = t->bytes + t->off[token];
    size_t l = t->len[token];
    /* After BOS, sentencepiece drops the leading space the dummy prefix added. */
    if (prev == TXT_BOS && l && p[0] == ' ') p++, l--;
    /* A byte token: run.c's sscanf("<0x%02hhX>") takes "<0x" and one or two hex digits. */
    if (l >= 4 && !memcmp(p, "<0x", 3) && hex_digit(p[3]) >= 0) {
        int v = hex_digit(p[3]);
        if (l >= 5 && hex_digit(p[4]) >= 0) v = 16 * v + hex_digit(p[4]);
        p = &t->byte_piece[v];
        l = 1;
    }
    if (len) *len = l;
    return (const char *)p;
}

af_status af_tokenizer_decode(const af_tokenizer *t, const int32_t *tokens, int64_t n, char **text, size_t *len) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!t || !text || (!tokens && n) || n < 0)
        return ir_fail(AF_ERR_INVALID, "af_tokenizer_decode: the tokenizer, tokens and text must not be NULL");
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->n)
            return ir_fail(AF_ERR_INVALID, "token %d at position %lld is outside the vocabulary (size %d)",
                           (int)tokens[i], (long long)i, t->n);
        total += t->len[tokens[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return ir_fail(AF_ERR_NOMEM, "af_tokenizer_decode: out of memory for %zu bytes", total + 1);
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] == TXT_BOS || tokens[i] == TXT_EOS) continue; /* control tokens have no text */
        size_t l;
        const char *p = af_tokenizer_decode_piece(t, i ? tokens[i - 1] : -1, tokens[i], &l);
        memcpy(out + at, p, l);
        at += l;
    }
    out[at] = 0;
    *text = out;
    if (len) *len = at;
    return AF_OK;
}
