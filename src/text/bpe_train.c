/* The BPE trainer. Its vocabulary is laid out as llama2.c's sentencepiece export lays
 * out Llama 2's: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (score 0), the
 * merges in the order they were learnt (score -1, -2, ...), then the single characters
 * (scores below every merge).
 *
 * Training mirrors what run.c's encoder will do with the result:
 *  - each document gets run.c's dummy prefix " ", and is cut into code points as run.c
 *    cuts them; the most frequent well-formed ones become character tokens (always " ",
 *    which run.c looks up for the prefix), the rest stay bytes, which never merge (run.c
 *    looks up "<0x41>b", never "Ab");
 *  - merges never cross chunk boundaries (a space-led word, a word, a run of
 *    whitespace), as sentencepiece's never cross words;
 *  - merge k takes the most frequent adjacent pair (ties: the lower symbol ids) and its
 *    token scores -(k + 1), so run.c, which merges the pair with the best score first,
 *    replays the merges in the order they were learnt. (Text that spells a special or
 *    byte token's name, "<0x41>" or "<unk>", is the exception: run.c merges it into
 *    that token, scored 0, whatever training did.)
 * The pair counts are updated incrementally: a merge revisits only the chunks holding
 * its pair, and a heap with stale entries skipped on the way out gives the best pair. */
#include "text/maps.h"
#include "aneforge_data.h"
#include "text/text.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t count;
    int32_t a, b;
    int32_t *occ, nocc, capocc; /* chunks that hold (or held) the pair */
    int32_t last_chunk;         /* the chunk appended last, to skip repeats */
} pair_stat;

typedef struct {
    int64_t count;
    int32_t a, b;
} pair_entry;

typedef struct {
    txt_strset chunks;          /* distinct chunks */
    int64_t *freq;              /* how often each occurs */
    int32_t capfreq;
    int32_t **sym, *nsym;       /* each chunk as symbols */
    int32_t *stamp;             /* the merge that last visited a chunk */

    txt_strset syms;            /* symbol strings: ids 0..258 the specials and bytes */
    int32_t first_merge;        /* symbols below are specials, bytes and characters */

    txt_u64map pair_index;
    pair_stat *pairs;
    int32_t npairs, cappairs;
    pair_entry *heap;
    size_t nheap, capheap;
    int32_t *touched;           /* pairs a merge changed, and their counts before it */
    int64_t *touched_old;
    int32_t ntouched, captouched, *touched_mark;
} trainer;

static bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static bool space_unit(const uint8_t *s, size_t n, size_t i) {
    return is_space(s[i]) && txt_unit_len(s + i, n - i) == 1;
}

static size_t skip_word(const uint8_t *s, size_t n, size_t i) {
    while (i < n && !space_unit(s, n, i)) i += txt_unit_len(s + i, n - i);
    return i;
}

/* The end of the chunk that starts at i: a word, " " and a word, or a run of
 * whitespace that leaves its last space to a word that follows. Chunks end on run.c's
 * code point boundaries. */
static size_t chunk_end(const uint8_t *s, size_t n, size_t i) {
    if (!space_unit(s, n, i)) return skip_word(s, n, i);
    if (s[i] == ' ' && i + 1 < n && !space_unit(s, n, i + 1)) return skip_word(s, n, i + 1);
    size_t start = i, last = i;
    while (i < n && space_unit(s, n, i)) last = i++;
    return i < n && s[last] == ' ' && last > start ? last : i;
}

static bool add_chunk(trainer *tr, const uint8_t *s, size_t n) {
    int32_t c = txt_strset_intern(&tr->chunks, s, n, NULL);
    if (c < 0) return false;
    if (c >= tr->capfreq) {
        int32_t cap = tr->capfreq ? 2 * tr->capfreq : 1024;
        int64_t *f = realloc(tr->freq, (size_t)cap * sizeof *f);
        if (!f) return false;
        memset(f + tr->capfreq, 0, (size_t)(cap - tr->capfreq) * sizeof *f);
        tr->freq = f;
        tr->capfreq = cap;
    }
    tr->freq[c]++;
    return true;
}

static bool add_doc(trainer *tr, const uint8_t *doc, size_t len, uint8_t **scratch, size_t *cap) {
    if (!len) return true;
    if (len + 1 > *cap) {
        uint8_t *b = realloc(*scratch, len + 1);
        if (!b) return false;
        *scratch = b;
        *cap = len + 1;
    }
    uint8_t *s = *scratch;
    s[0] = ' '; /* run.c's dummy prefix */
    memcpy(s + 1, doc, len);
    for (size_t i = 0, e; i < len + 1; i = e) {
        e = chunk_end(s, len + 1, i);
        if (!add_chunk(tr, s + i, e - i)) return false;
    }
    return true;
}

bool txt_utf8_valid(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t want = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!want || n != want) return false;
    if (want == 1) return true;
    uint32_t cp = c & (0x7F >> want);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return false;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    return cp >= min_cp[want] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

typedef struct {
    uint64_t key;            /* up to 4 bytes, and the length above them */
    int64_t count;
} char_count;

static uint64_t unit_key(const uint8_t *s, size_t n) {
    uint64_t k = (uint64_t)n << 32;
    for (size_t i = 0; i < n; i++) k |= (uint64_t)s[i] << (8 * i);
    return k;
}

static int by_count(const void *pa, const void *pb) {
    const char_count *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* Makes the character symbols: the well-formed code points by frequency, " " first,
 * as many as `room` allows. */
static af_status pick_chars(trainer *tr, int room) {
    txt_u64map idx = { 0 };
    char_count *cc = NULL;
    int32_t ncc = 0, capcc = 0;
    af_status st = AF_ERR_NOMEM;
    for (int32_t c = 0; c < tr->chunks.n; c++) {
        uint32_t n;
        const uint8_t *s = txt_strset_get(&tr->chunks, c, &n);
        for (size_t i = 0, u; i < n; i += u) {
            u = txt_unit_len(s + i, n - i);
            if (!txt_utf8_valid(s + i, u) || s[i] == 0) continue;
            uint64_t k = unit_key(s + i, u);
            int32_t j = txt_u64map_get(&idx, k);
            if (j < 0) {
                if (ncc == capcc) {
                    capcc = capcc ? 2 * capcc : 256;
                    char_count *g = realloc(cc, (size_t)capcc * sizeof *g);
                    if (!g) goto done;
                    cc = g;
                }
                j = ncc++;
                cc[j] = (char_count){ k, 0 };
                if (!txt_u64map_put(&idx, k, j)) goto done;
            }
            cc[j].count += tr->freq[c];
        }
    }
    if (ncc) qsort(cc, (size_t)ncc, sizeof *cc, by_count);
    if (txt_strset_intern(&tr->syms, (const uint8_t *)" ", 1, NULL) < 0) goto done;
    for (int32_t j = 0; j < ncc && tr->syms.n < TXT_MIN_VOCAB + room; j++) {
        uint8_t b[4];
        size_t n = (size_t)(cc[j].key >> 32);
        for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(cc[j].key >> (8 * i));
        if (txt_strset_intern(&tr->syms, b, n, NULL) < 0) goto done;
    }
    tr->first_merge = tr->syms.n;
    st = AF_OK;
done:
    free(cc);
    txt_u64map_free(&idx);
    return st;
}

/* Each chunk as symbols: its characters, and bytes where a code point has no token. */
static bool spell_chunks(trainer *tr) {
    int32_t n = tr->chunks.n;
    tr->sym = calloc((size_t)n ? (size_t)n : 1, sizeof *tr->sym);
    tr->nsym = calloc((size_t)n ? (size_t)n : 1, sizeof *tr->nsym);
    tr->stamp = malloc(((size_t)n ? (size_t)n : 1) * sizeof *tr->stamp);
    if (!tr->sym || !tr->nsym || !tr->stamp) return false;
    for (int32_t c = 0; c < n; c++) {
        uint32_t len;
        const uint8_t *s = txt_strset_get(&tr->chunks, c, &len);
        tr->stamp[c] = -1;
        if (!(tr->sym[c] = malloc(((size_t)len ? len : 1) * sizeof **tr->sym))) return false;
        int32_t k = 0;
        for (size_t i = 0, u; i < len; i += u) {
            u = txt_unit_len(s + i, len - i);
            int32_t id = txt_strset_find(&tr->syms, s + i, u);
            if (id >= TXT_MIN_VOCAB) tr->sym[c][k++] = id;
            else
                for (size_t j = 0; j < u; j++) tr->sym[c][k++] = TXT_BYTE0 + s[i + j];
        }
        tr->nsym[c] = k;
    }
    return true;
}

static bool mergeable(int32_t s) { return s >= TXT_MIN_VOCAB; }

static bool heap_before(const pair_entry *x, const pair_entry *y) {
    if (x->count != y->count) return x->count > y->count;
    return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static bool heap_push(trainer *tr, pair_entry e) {
    if (tr->nheap == tr->capheap) {
        size_t cap = tr->capheap ? 2 * tr->capheap : 1024;
        pair_entry *h = realloc(tr->heap, cap * sizeof *h);
        if (!h) return false;
        tr->heap = h;
        tr->capheap = cap;
    }
    size_t i = tr->nheap++;
    while (i > 0 && heap_before(&e, &tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = e;
    return true;
}

static pair_entry heap_pop(trainer *tr) {
    pair_entry top = tr->heap[0], x = tr->heap[--tr->nheap];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= tr->nheap) break;
        if (k + 1 < tr->nheap && heap_before(&tr->heap[k + 1], &tr->heap[k])) k++;
        if (!heap_before(&tr->heap[k], &x)) break;
        tr->heap[i] = tr->heap[k];
        i = k;
    }
    if (tr->nheap) tr->heap[i] = x;
    return top;
}

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

/* The pair's index, created (count 0) if new; -1 when out of memory. */
static int32_t pair_get(trainer *tr, int32_t a, int32_t b) {
    int32_t p = txt_u64map_get(&tr->pair_index, pair_key(a, b));
    if (p >= 0) return p;
    if (tr->npairs == tr->cappairs) {
        int32_t cap = tr->cappairs ? 2 * tr->cappairs : 1024;
        pair_stat *g = realloc(tr->pairs, (size_t)cap * sizeof *g);
        int32_t *m = realloc(tr->touched_mark, (size_t)cap * sizeof *m);
        if (g) tr->pairs = g;
        if (m) tr->touched_mark = m;
        if (!g || !m) return -1;
        tr->cappairs = cap;
    }
    p = tr->npairs;
    if (!txt_u64map_put(&tr->pair_index, pair_key(a, b), p)) return -1;
    tr->npairs++;
    tr->pairs[p] = (pair_stat){ .a = a, .b = b, .last_chunk = -1 };
    tr->touched_mark[p] = 0;
    return p;
}

static bool note_chunk(pair_stat *ps, int32_t c) {
    if (ps->last_chunk == c) return true;
    if (ps->nocc == ps->capocc) {
        int32_t cap = ps->capocc ? 2 * ps->capocc : 4;
        int32_t *o = realloc(ps->occ, (size_t)cap * sizeof *o);
        if (!o) return false;
        ps->occ = o;
        ps->capocc = cap;
    }
    ps->occ[ps->nocc++] = c;
    ps->last_chunk = c;
    return true;
}

static bool touch(trainer *tr, int32_t p) {
    if (tr->touched_mark[p]) return true;
    if (tr->ntouched == tr->captouched) {
        int32_t cap = tr->captouched ? 2 * tr->captouched : 256;
        int32_t *t = realloc(tr->touched, (size_t)cap * sizeof *t);
        int64_t *o = realloc(tr->touched_old, (size_t)cap * sizeof *o);
        if (t) tr->touched = t;
        if (o) tr->touched_old = o;
        if (!t || !o) return false;
        tr->captouched = cap;
    }
    tr->touched_mark[p] = 1;
    tr->touched[tr->ntouched] = p;
    tr->touched_old[tr->ntouched++] = tr->pairs[p].count;
    return true;
}

/* Adds sign * freq for every mergeable pair in chunk c, and records c as holding them
 * all (fresh -1), none (-2) or those that involve the symbol `fresh`. */
static bool count_chunk(trainer *tr, int32_t c, int64_t sign, int32_t fresh) {
    const int32_t *s = tr->sym[c];
    for (int32_t j = 0; j + 1 < tr->nsym[c]; j++) {
        if (!mergeable(s[j]) || !mergeable(s[j + 1])) continue;
        int32_t p = pair_get(tr, s[j], s[j + 1]);
        if (p < 0 || !touch(tr, p)) return false;
        tr->pairs[p].count += sign * tr->freq[c];
        bool holds = fresh == -1 || (fresh >= 0 && (s[j] == fresh || s[j + 1] == fresh));
        if (holds && !note_chunk(&tr->pairs[p], c)) return false;
    }
    return true;
}

/* Replaces every (a, b) in the chunks that hold it, left to right, by `to`. */
static bool apply_merge(trainer *tr, int32_t p, int32_t to, int32_t step) {
    int32_t a = tr->pairs[p].a, b = tr->pairs[p].b;
    tr->ntouched = 0;
    for (int32_t k = 0; k < tr->pairs[p].nocc; k++) {
        int32_t c = tr->pairs[p].occ[k];
        if (tr->stamp[c] == step) continue;
        tr->stamp[c] = step;
        int32_t *s = tr->sym[c], n = tr->nsym[c], j = 0;
        while (j + 1 < n && !(s[j] == a && s[j + 1] == b)) j++;
        if (j + 1 >= n) continue; /* an earlier merge took it */
        if (!count_chunk(tr, c, -1, -2)) return false;
        int32_t w = 0;
        for (j = 0; j < n; j++) {
            if (j + 1 < n && s[j] == a && s[j + 1] == b) s[w++] = to, j++;
            else s[w++] = s[j];
        }
        tr->nsym[c] = w;
        if (!count_chunk(tr, c, +1, to)) return false;
    }
    for (int32_t k = 0; k < tr->ntouched; k++) {
        pair_stat *ps = &tr->pairs[tr->touched[k]];
        tr->touched_mark[tr->touched[k]] = 0;
        if (ps->count != tr->touched_old[k] && ps->count > 0 &&
            !heap_push(tr, (pair_entry){ ps->count, ps->a, ps->b }))
            return false;
    }
    return true;
}

static af_status learn_merges(trainer *tr, int vocab) {
    for (int32_t c = 0; c < tr->chunks.n; c++)
        if (!count_chunk(tr, c, +1, -1)) return AF_ERR_NOMEM;
    for (int32_t p = 0; p < tr->npairs; p++) {
        tr->touched_mark[p] = 0;
        if (tr->pairs[p].count > 0 && !heap_push(tr, (pair_entry){ tr->pairs[p].count, tr->pairs[p].a, tr->pairs[p].b }))
            return AF_ERR_NOMEM;
    }
    tr->ntouched = 0;
    uint8_t *buf = NULL;
    size_t cap = 0;
    af_status st = AF_OK;
    for (int32_t step = 0; tr->syms.n < vocab && tr->nheap;) {
        pair_entry e = heap_pop(tr);
        int32_t p = txt_u64map_get(&tr->pair_index, pair_key(e.a, e.b));
        if (tr->pairs[p].count != e.count) continue; /* stale: a newer entry holds its count */
        if (e.count < 2) break; /* what is left occurs once: nothing to learn */
        uint32_t la, lb;
        txt_strset_get(&tr->syms, e.a, &la);
        txt_strset_get(&tr->syms, e.b, &lb);
        if ((size_t)la + lb > cap) {
            uint8_t *g = realloc(buf, 2 * ((size_t)la + lb));
            if (!g) {
                st = AF_ERR_NOMEM;
                break;
            }
            buf = g;
            cap = 2 * ((size_t)la + lb);
        }
        const uint8_t *sa = txt_strset_get(&tr->syms, e.a, &la), *sb = txt_strset_get(&tr->syms, e.b, &lb);
        memcpy(buf, sa, la);
        memcpy(buf + la, sb, lb);
        /* A string reached by another split keeps its first token, as run.c's lookup would. */
        int32_t to = txt_strset_intern(&tr->syms, buf, (size_t)la + lb, NULL);
        if (to < 0 || !apply_merge(tr, p, to, step++)) {
            st = AF_ERR_NOMEM;
            break;
        }
    }
    free(buf);
    return st;
}

/* The final vocabulary: specials and bytes, merges, then characters. */
static af_status build_vocab(trainer *tr, af_tokenizer **out, int32_t **final_id) {
    int32_t n = tr->syms.n, nchar = tr->first_merge - TXT_MIN_VOCAB, nmerge = n - tr->first_merge;
    const uint8_t **tok = malloc((size_t)n * sizeof *tok);
    uint32_t *len = malloc((size_t)n * sizeof *len);
    float *score = malloc((size_t)n * sizeof *score);
    int32_t *id = malloc((size_t)n * sizeof *id);
    af_status st = AF_ERR_NOMEM;
    if (tok && len && score && id) {
        for (int32_t s = 0; s < n; s++) {
            int32_t f = s < TXT_MIN_VOCAB ? s : s >= tr->first_merge ? s - nchar : s + nmerge;
            id[s] = f;
            tok[f] = txt_strset_get(&tr->syms, s, &len[f]);
            score[f] = s < TXT_MIN_VOCAB ? 0.0f
                       : s >= tr->first_merge ? -(float)(s - tr->first_merge + 1)
                                              : -(float)(nmerge + 1 + (s - TXT_MIN_VOCAB));
        }
        st = txt_tokenizer_build(n, tok, len, score, -1, "the trained tokenizer", out);
    }
    free(tok);
    free(len);
    free(score);
    if (st == AF_OK) *final_id = id;
    else free(id);
    return st;
}

static void trainer_free(trainer *tr) {
    for (int32_t c = 0; tr->sym && c < tr->chunks.n; c++) free(tr->sym[c]);
    free(tr->sym);
    free(tr->nsym);
    free(tr->stamp);
    free(tr->freq);
    txt_strset_free(&tr->chunks);
    txt_strset_free(&tr->syms);
    for (int32_t p = 0; p < tr->npairs; p++) free(tr->pairs[p].occ);
    free(tr->pairs);
    txt_u64map_free(&tr->pair_index);
    free(tr->heap);
    free(tr->touched);
    free(tr->touched_old);
    free(tr->touched_mark);
}

af_status txt_bpe_train(int64_t ndocs, const char *const *docs, const size_t *lens, int vocab,
                        txt_chunk_fn chunk_fn, void *user, af_tokenizer **out) {
    *out = NULL;
    if (ndocs < 0 || (ndocs && (!docs || !lens)))
        return ir_fail(AF_ERR_INVALID, "af_tokenizer_train: docs and lens must not be NULL");
    if (vocab <= TXT_MIN_VOCAB || vocab > TXT_MAX_VOCAB)
        return ir_fail(AF_ERR_INVALID, "af_tokenizer_train: vocab size %d is outside [%d, %d]: the 259 specials and "
                                       "byte tokens, \" \", then characters and merges (af_tokenizer_byte_level "
                                       "gives the 259-token byte-level one)", vocab, TXT_MIN_VOCAB + 1, TXT_MAX_VOCAB);
    trainer tr = { 0 };
    af_status st = AF_ERR_NOMEM;
    uint8_t *scratch = NULL;
    size_t cap = 0;
    static const char *const special[3] = { "<unk>", "\n<s>\n", "\n</s>\n" };
    for (int i = 0; i < 3; i++)
        if (txt_strset_intern(&tr.syms, (const uint8_t *)special[i], strlen(special[i]), NULL) != i) goto done;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (txt_strset_intern(&tr.syms, (const uint8_t *)name, 6, NULL) != TXT_BYTE0 + b) goto done;
    }
    for (int64_t d = 0; d < ndocs; d++) {
        if (!docs[d] && lens[d]) {
            st = ir_fail(AF_ERR_INVALID, "af_tokenizer_train: document %lld is NULL", (long long)d);
            goto done;
        }
        if (!add_doc(&tr, (const uint8_t *)docs[d], lens[d], &scratch, &cap)) goto done;
    }
    if ((st = pick_chars(&tr, vocab - TXT_MIN_VOCAB)) != AF_OK) goto done;
    st = AF_ERR_NOMEM;
    if (!spell_chunks(&tr)) goto done;
    if ((st = learn_merges(&tr, vocab)) != AF_OK) goto done;
    int32_t *final_id = NULL;
    if ((st = build_vocab(&tr, out, &final_id)) != AF_OK) goto done;
    for (int32_t c = 0; chunk_fn && c < tr.chunks.n; c++) {
        uint32_t n;
        const uint8_t *s = txt_strset_get(&tr.chunks, c, &n);
        for (int32_t j = 0; j < tr.nsym[c]; j++) tr.sym[c][j] = final_id[tr.sym[c][j]];
        chunk_fn(s, n, tr.freq[c], tr.sym[c], tr.nsym[c], user);
    }
    free(final_id);
done:
    if (st == AF_ERR_NOMEM) ir_fail(st, "af_tokenizer_train: out of memory");
    free(scratch);
    trainer_free(&tr);
    return st;
}

af_tokenizer *af_tokenizer_train(int64_t ndocs, const char *const *docs, const size_t *lens, int vocab_size) {
    af_tokenizer *t;
    txt_bpe_train(ndocs, docs, lens, vocab_size, NULL, NULL, &t);
    return t;
}
