/* Hugging Face tokenizer.json, byte-level BPE as Llama 3, Qwen2 and SmolLM ship it
 * (aneforge_hf.h): added tokens split out first (leftmost, longest), the pre-tokenizer's
 * split pattern (Llama 3's, Qwen2's or GPT-2's, matched by hand: the three patterns are
 * known, any other is refused), bytes mapped to GPT-2's printable characters, then BPE
 * merges by rank (Llama 3's ignore_merges: a piece already in the vocab is one token).
 * Every field of the file is checked before use; what it asks for that is not
 * implemented (a normalizer, byte_fallback, another model type) is refused by name. */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "ir/file.h"
#include "ir/ir.h"
#include "ir/json.h"
#include "text/nfc.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAX_FILE ((uint64_t)256 << 20)
#define TOK_MAX_VOCAB (1 << 22)

typedef enum { PAT_LLAMA3, PAT_QWEN2, PAT_GPT2 } split_pattern;

static const char LLAMA3_PAT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_PAT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct { const char *s; uint32_t len; int32_t id; } vslot;
typedef struct { uint64_t key; int32_t rank, id; } mslot;
typedef struct { const char *s; size_t len; int32_t id; bool special; } added;

struct af_hf_tokenizer {
    json_doc *doc;          /* the strings below point into it */
    vslot *v;               /* vocab: open addressing, vcap a power of two */
    uint32_t vcap;
    mslot *m;               /* merges: (left id, right id) -> rank, result */
    uint32_t mcap;
    added *add;
    int nadd;
    int32_t byte_id[256];   /* the token of each byte's printable character, -1 none */
    char byte_chr[256][3];  /* that character in UTF-8 */
    int byte_len[256];
    split_pattern pat;
    bool ignore_merges;
    bool nfc;               /* the NFC normalizer (Qwen2) */
    int vocab_size;         /* largest id + 1 */
    const char **tok;       /* id -> its string (NULL: no token), for decoding */
    uint32_t *tok_len;
    bool *tok_special;      /* a special added token: dropped when decoding skips them */
    int32_t tmpl[2][8];     /* the post-processor's single template: ids before and after the text */
    int ntmpl[2];
};

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static int32_t vocab_find(const af_hf_tokenizer *t, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)fnv(s, n) & (t->vcap - 1);; i = (i + 1) & (t->vcap - 1)) {
        if (!t->v[i].s) return -1;
        if (t->v[i].len == n && !memcmp(t->v[i].s, s, n)) return t->v[i].id;
    }
}

static uint64_t mix(uint64_t k) { k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; return k; }

static const mslot *merge_find(const af_hf_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)mix(key) & (t->mcap - 1);; i = (i + 1) & (t->mcap - 1)) {
        if (t->m[i].id < 0) return NULL;
        if (t->m[i].key == key) return &t->m[i];
    }
}

static uint32_t pow2_above(uint64_t n) {
    uint32_t c = 16;
    while (c < 2 * n) c <<= 1;
    return c;
}

void af_hf_tokenizer_free(af_hf_tokenizer *t) {
    if (!t) return;
    ir_json_free(t->doc);
    free(t->v);
    free(t->m);
    free(t->add);
    free(t->tok);
    free(t->tok_len);
    free(t->tok_special);
    free(t);
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest for 256 + k. */
static void byte_chars(af_hf_tokenizer *t) {
    int k = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        uint32_t cp = keep ? (uint32_t)b : (uint32_t)(256 + k++);
        if (cp < 0x80) { t->byte_chr[b][0] = (char)cp; t->byte_len[b] = 1; }
        else { t->byte_chr[b][0] = (char)(0xC0 | cp >> 6); t->byte_chr[b][1] = (char)(0x80 | (cp & 63)); t->byte_len[b] = 2; }
    }
}

static bool is_str(const json_doc *d, int i, const char *want) { return ir_json_is_text(d, i) && !strcmp(ir_json_str(d, i), want); }
static bool is_off(const json_doc *d, int i) { return i < 0 || d->n[i].type == JSON_NULL || (d->n[i].type == JSON_BOOL && !d->n[i].boolean); }

static af_status bad(const char *what, const char *fmt, const char *a) {
    char msg[300];
    snprintf(msg, sizeof msg, fmt, a);
    return ir_fail(AF_ERR_UNSUPPORTED, "%s: %s", what, msg);
}

static af_status read_pre_tokenizer(af_hf_tokenizer *t, const json_doc *d, int p, const char *what) {
    if (p < 0 || d->n[p].type != JSON_OBJ) return bad(what, "%s", "\"pre_tokenizer\" must be ByteLevel or Sequence[Split, ByteLevel]");
    int type = ir_json_get(d, p, "type");
    if (is_str(d, type, "ByteLevel")) {
        if (!is_off(d, ir_json_get(d, p, "add_prefix_space"))) return bad(what, "%s", "ByteLevel add_prefix_space true is not supported");
        int ur = ir_json_get(d, p, "use_regex");
        if (ur >= 0 && is_off(d, ur)) return bad(what, "%s", "a lone ByteLevel pre-tokenizer without its regex is not supported");
        t->pat = PAT_GPT2;
        return AF_OK;
    }
    if (!is_str(d, type, "Sequence")) return bad(what, "pre_tokenizer type \"%.40s\" is not supported (ByteLevel or Sequence)",
                                                 ir_json_is_text(d, type) ? ir_json_str(d, type) : "?");
    int seq = ir_json_get(d, p, "pretokenizers");
    if (seq < 0 || d->n[seq].type != JSON_ARR || d->n[seq].count != 2)
        return bad(what, "%s", "a Sequence pre_tokenizer must be [Split, ByteLevel]");
    int sp = d->n[seq].child, bl = d->n[sp].next;
    int pat = ir_json_get(d, ir_json_get(d, sp, "pattern"), "Regex");
    if (!is_str(d, ir_json_get(d, sp, "type"), "Split") || !is_str(d, ir_json_get(d, sp, "behavior"), "Isolated") ||
        !is_off(d, ir_json_get(d, sp, "invert")) || !ir_json_is_text(d, pat))
        return bad(what, "%s", "the Sequence's first pre-tokenizer must be Split on a Regex, behavior Isolated, not inverted");
    if (!strcmp(ir_json_str(d, pat), LLAMA3_PAT)) t->pat = PAT_LLAMA3;
    else if (!strcmp(ir_json_str(d, pat), QWEN2_PAT)) t->pat = PAT_QWEN2;
    else return bad(what, "the split pattern %.80s is not one aneforge implements (Llama 3's, Qwen2's or GPT-2's)", ir_json_str(d, pat));
    if (!is_str(d, ir_json_get(d, bl, "type"), "ByteLevel") || !is_off(d, ir_json_get(d, bl, "add_prefix_space")) ||
        !is_off(d, ir_json_get(d, bl, "use_regex")))
        return bad(what, "%s", "the Sequence's second pre-tokenizer must be ByteLevel without prefix space or regex");
    return AF_OK;
}

static af_status read_model(af_hf_tokenizer *t, const json_doc *d, int mo, const char *what) {
    if (!is_str(d, ir_json_get(d, mo, "type"), "BPE")) return bad(what, "%s", "\"model\" must be a BPE model");
    static const char *const OFF[] = { "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback" };
    for (size_t i = 0; i < sizeof OFF / sizeof *OFF; i++) {
        int k = ir_json_get(d, mo, OFF[i]);
        if (!is_off(d, k) && !(ir_json_is_text(d, k) && !ir_json_str(d, k)[0]))
            return bad(what, "model.%s is set, which byte-level BPE as aneforge implements it does not use", OFF[i]);
    }
    t->ignore_merges = !is_off(d, ir_json_get(d, mo, "ignore_merges"));
    int voc = ir_json_get(d, mo, "vocab"), mer = ir_json_get(d, mo, "merges");
    if (voc < 0 || d->n[voc].type != JSON_OBJ || d->n[voc].count == 0 || d->n[voc].count > TOK_MAX_VOCAB)
        return ir_fail(AF_ERR_CORRUPT, "%s: model.vocab must be an object of 1..%d tokens", what, TOK_MAX_VOCAB);
    if (mer < 0 || d->n[mer].type != JSON_ARR) return ir_fail(AF_ERR_CORRUPT, "%s: model.merges must be a list", what);
    t->vcap = pow2_above((uint64_t)d->n[voc].count);
    t->mcap = pow2_above((uint64_t)d->n[mer].count + 1);
    t->v = calloc(t->vcap, sizeof *t->v);
    t->m = malloc(sizeof *t->m * t->mcap);
    if (!t->v || !t->m) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    for (uint32_t i = 0; i < t->mcap; i++) t->m[i].id = -1;
    for (int e = d->n[voc].child; e >= 0; e = d->n[e].next) {
        int64_t id;
        if (!ir_json_int(d, e, 0, TOK_MAX_VOCAB - 1, &id))
            return ir_fail(AF_ERR_CORRUPT, "%s: vocab token \"%.40s\" has no id in 0..%d", what, ir_json_key(d, e), TOK_MAX_VOCAB - 1);
        const char *s = ir_json_key(d, e);
        size_t n = d->n[e].keylen;
        uint32_t i = (uint32_t)fnv(s, n) & (t->vcap - 1);
        while (t->v[i].s) i = (i + 1) & (t->vcap - 1); /* the JSON reader refused duplicate keys */
        t->v[i] = (vslot){ s, (uint32_t)n, (int32_t)id };
        if (id + 1 > t->vocab_size) t->vocab_size = (int)id + 1;
    }
    int rank = 0;
    for (int e = d->n[mer].child; e >= 0; e = d->n[e].next, rank++) {
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        char buf[600];
        if (ir_json_is_text(d, e)) { /* "a b" (tokenizers before 0.20) */
            const char *s = ir_json_str(d, e), *sp = strchr(s, ' ');
            if (sp && !strchr(sp + 1, ' ')) { a = s; al = (size_t)(sp - s); b = sp + 1; bl = strlen(b); }
        } else if (d->n[e].type == JSON_ARR && d->n[e].count == 2 && ir_json_is_text(d, d->n[e].child) &&
                   ir_json_is_text(d, d->n[d->n[e].child].next)) {
            a = ir_json_str(d, d->n[e].child);
            b = ir_json_str(d, d->n[d->n[e].child].next);
            al = strlen(a);
            bl = strlen(b);
        }
        if (!a || al + bl >= sizeof buf)
            return ir_fail(AF_ERR_CORRUPT, "%s: merge %d is not a pair of tokens (\"a b\" or [\"a\", \"b\"])", what, rank);
        memcpy(buf, a, al);
        memcpy(buf + al, b, bl);
        int32_t ia = vocab_find(t, a, al), ib = vocab_find(t, b, bl), iab = vocab_find(t, buf, al + bl);
        if (ia < 0 || ib < 0 || iab < 0)
            return ir_fail(AF_ERR_CORRUPT, "%s: merge %d (%.*s + %.*s) has a part or result that is not in the vocab", what, rank,
                           (int)(al > 40 ? 40 : al), a, (int)(bl > 40 ? 40 : bl), b);
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        uint32_t i = (uint32_t)mix(key) & (t->mcap - 1);
        while (t->m[i].id >= 0 && t->m[i].key != key) i = (i + 1) & (t->mcap - 1);
        if (t->m[i].id < 0) t->m[i] = (mslot){ key, rank, iab }; /* a repeated pair keeps its first (lowest) rank */
    }
    return AF_OK;
}

static af_status read_added(af_hf_tokenizer *t, const json_doc *d, const char *what) {
    int at = ir_json_get(d, 0, "added_tokens");
    if (at < 0 || d->n[at].type == JSON_NULL) return AF_OK;
    if (d->n[at].type != JSON_ARR) return ir_fail(AF_ERR_CORRUPT, "%s: added_tokens must be a list", what);
    t->add = calloc((size_t)d->n[at].count + 1, sizeof *t->add);
    if (!t->add) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    for (int e = d->n[at].child; e >= 0; e = d->n[e].next) {
        int c = ir_json_get(d, e, "content");
        int64_t id;
        if (!ir_json_is_text(d, c) || !ir_json_str(d, c)[0] || !ir_json_int(d, ir_json_get(d, e, "id"), 0, TOK_MAX_VOCAB - 1, &id))
            return ir_fail(AF_ERR_CORRUPT, "%s: an added token lacks its content or id", what);
        static const char *const OFF[] = { "single_word", "lstrip", "rstrip" };
        for (size_t i = 0; i < 3; i++)
            if (!is_off(d, ir_json_get(d, e, OFF[i])))
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: added token \"%.40s\" sets %s, which aneforge does not implement", what,
                               ir_json_str(d, c), OFF[i]);
        int sp = ir_json_get(d, e, "special"), nz = ir_json_get(d, e, "normalized");
        /* tokenizers matches a normalized added token in the normalized text: with NFC that
         * can differ from the raw match this reader does */
        if (t->nfc && nz >= 0 && !is_off(d, nz))
            return ir_fail(AF_ERR_UNSUPPORTED, "%s: added token \"%.40s\" is normalized, which aneforge does not implement beside "
                           "the NFC normalizer (set \"normalized\": false)", what, ir_json_str(d, c));
        t->add[t->nadd++] = (added){ ir_json_str(d, c), strlen(ir_json_str(d, c)), (int32_t)id, sp >= 0 && !is_off(d, sp) };
        if (id + 1 > t->vocab_size) t->vocab_size = (int)id + 1;
    }
    return AF_OK;
}

/* The id -> token table decoding needs, and the decoder, which must be ByteLevel (or none:
 * decoding then still undoes the byte mapping, as every byte-level file wants). */
static af_status read_decoder(af_hf_tokenizer *t, const json_doc *d, const char *what) {
    int de = ir_json_get(d, 0, "decoder");
    if (!is_off(d, de) && !is_str(d, ir_json_get(d, de, "type"), "ByteLevel")) {
        int ty = ir_json_get(d, de, "type");
        return bad(what, "decoder \"%.40s\" is not supported (ByteLevel)", ir_json_is_text(d, ty) ? ir_json_str(d, ty) : "?");
    }
    size_t V = (size_t)t->vocab_size;
    t->tok = calloc(V, sizeof *t->tok);
    t->tok_len = calloc(V, sizeof *t->tok_len);
    t->tok_special = calloc(V, sizeof *t->tok_special);
    if (!t->tok || !t->tok_len || !t->tok_special) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
    for (uint32_t i = 0; i < t->vcap; i++)
        if (t->v[i].s) { t->tok[t->v[i].id] = t->v[i].s; t->tok_len[t->v[i].id] = t->v[i].len; }
    for (int a = 0; a < t->nadd; a++) { /* an added token's content wins, as in tokenizers' id_to_token */
        t->tok[t->add[a].id] = t->add[a].s;
        t->tok_len[t->add[a].id] = (uint32_t)t->add[a].len;
        t->tok_special[t->add[a].id] = t->add[a].special;
    }
    return AF_OK;
}

/* One TemplateProcessing's "single" template: special tokens around sequence A. */
static af_status read_template(af_hf_tokenizer *t, const json_doc *d, int p, const char *what) {
    int single = ir_json_get(d, p, "single"), sp = ir_json_get(d, p, "special_tokens");
    if (single < 0 || d->n[single].type != JSON_ARR || sp < 0 || d->n[sp].type != JSON_OBJ)
        return ir_fail(AF_ERR_CORRUPT, "%s: a TemplateProcessing post-processor needs \"single\" and \"special_tokens\"", what);
    int side = 0, seen_a = 0;
    for (int e = d->n[single].child; e >= 0; e = d->n[e].next) {
        int seq = ir_json_get(d, e, "Sequence"), st = ir_json_get(d, e, "SpecialToken");
        if (seq >= 0) {
            if (!is_str(d, ir_json_get(d, seq, "id"), "A") || seen_a++)
                return ir_fail(AF_ERR_CORRUPT, "%s: the single template must hold sequence A once", what);
            side = 1;
            continue;
        }
        int name = ir_json_get(d, st, "id");
        if (!ir_json_is_text(d, name)) return ir_fail(AF_ERR_CORRUPT, "%s: a template item is neither Sequence nor SpecialToken", what);
        int ids = ir_json_get(d, ir_json_get(d, sp, ir_json_str(d, name)), "ids");
        if (ids < 0 || d->n[ids].type != JSON_ARR)
            return ir_fail(AF_ERR_CORRUPT, "%s: the template's special token \"%.40s\" is not in special_tokens", what, ir_json_str(d, name));
        for (int k = d->n[ids].child; k >= 0; k = d->n[k].next) {
            int64_t id;
            if (!ir_json_int(d, k, 0, t->vocab_size - 1, &id))
                return ir_fail(AF_ERR_CORRUPT, "%s: special token \"%.40s\" has an id outside the vocab", what, ir_json_str(d, name));
            if (t->ntmpl[side] == 8) return ir_fail(AF_ERR_UNSUPPORTED, "%s: more than 8 template tokens on one side of the text", what);
            t->tmpl[side][t->ntmpl[side]++] = (int32_t)id;
        }
    }
    if (!seen_a) return ir_fail(AF_ERR_CORRUPT, "%s: the single template must hold sequence A once", what);
    return AF_OK;
}

/* post_processor: none, ByteLevel (offsets only: no ids), TemplateProcessing, or a
 * Sequence of those (Llama 3's). */
static af_status read_post(af_hf_tokenizer *t, const json_doc *d, int p, const char *what) {
    if (is_off(d, p)) return AF_OK;
    int ty = ir_json_get(d, p, "type");
    if (is_str(d, ty, "ByteLevel")) return AF_OK;
    if (is_str(d, ty, "TemplateProcessing")) return t->ntmpl[0] || t->ntmpl[1] ? bad(what, "%s", "two TemplateProcessing post-processors")
                                                                                : read_template(t, d, p, what);
    if (is_str(d, ty, "Sequence")) {
        int seq = ir_json_get(d, p, "processors");
        if (seq < 0 || d->n[seq].type != JSON_ARR) return ir_fail(AF_ERR_CORRUPT, "%s: a Sequence post-processor needs \"processors\"", what);
        for (int e = d->n[seq].child; e >= 0; e = d->n[e].next) {
            if (is_str(d, ir_json_get(d, e, "type"), "Sequence")) return bad(what, "%s", "nested Sequence post-processors are not supported");
            af_status st = read_post(t, d, e, what);
            if (st) return st;
        }
        return AF_OK;
    }
    return bad(what, "post_processor \"%.40s\" is not supported (ByteLevel, TemplateProcessing or a Sequence of them)",
               ir_json_is_text(d, ty) ? ir_json_str(d, ty) : "?");
}

af_hf_tokenizer *af_hf_tokenizer_parse(const char *text, size_t len, const char *what) {
    af_hf_tokenizer *t = calloc(1, sizeof *t);
    char err[256];
    af_status st = AF_OK;
    if (!t) { ir_fail(AF_ERR_NOMEM, "%s: out of memory", what); return NULL; }
    if (!(t->doc = ir_json_parse(text, len, err, sizeof err))) { st = ir_fail(AF_ERR_CORRUPT, "%s: not valid JSON: %s", what, err); goto out; }
    const json_doc *d = t->doc;
    if (d->n[0].type != JSON_OBJ) { st = ir_fail(AF_ERR_CORRUPT, "%s: not a JSON object", what); goto out; }
    int nz = ir_json_get(d, 0, "normalizer");
    if (!is_off(d, nz)) {
        int ty = ir_json_get(d, nz, "type");
        if (!is_str(d, ty, "NFC")) {
            st = bad(what, "normalizer \"%.40s\" is not supported (NFC, as Qwen2 has it, or none)",
                     ir_json_is_text(d, ty) ? ir_json_str(d, ty) : "?");
            goto out;
        }
        t->nfc = true;
    }
    byte_chars(t);
    if ((st = read_pre_tokenizer(t, d, ir_json_get(d, 0, "pre_tokenizer"), what)) != AF_OK ||
        (st = read_model(t, d, ir_json_get(d, 0, "model"), what)) != AF_OK || (st = read_added(t, d, what)) != AF_OK ||
        (st = read_decoder(t, d, what)) != AF_OK || (st = read_post(t, d, ir_json_get(d, 0, "post_processor"), what)) != AF_OK)
        goto out;
    for (int b = 0; b < 256; b++) t->byte_id[b] = vocab_find(t, t->byte_chr[b], (size_t)t->byte_len[b]);
out:
    if (st != AF_OK) { af_hf_tokenizer_free(t); return NULL; }
    return t;
}

af_hf_tokenizer *af_hf_tokenizer_load(const char *path) {
    if (!path) { ir_fail(AF_ERR_INVALID, "af_hf_tokenizer_load: path is NULL"); return NULL; }
    uint64_t size;
    FILE *f = ir_fopen_regular(path, "tokenizer.json", TOK_MAX_FILE, &size);
    if (!f) return NULL;
    char *buf = malloc((size_t)size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!buf || got != size) { free(buf); ir_fail(AF_ERR_IO, "%s: cannot read it whole", path); return NULL; }
    af_hf_tokenizer *t = af_hf_tokenizer_parse(buf, (size_t)size, path);
    /* the doc holds decoded copies of every string, so the text itself may go */
    free(buf);
    return t;
}

int af_hf_tokenizer_vocab_size(const af_hf_tokenizer *t) { return t ? t->vocab_size : 0; }

/* ---- the pre-tokenizer: one piece [i, j) of the code points cp[0..n) */

static bool L(uint32_t c) { return text_is_letter(c); }
static bool N(uint32_t c) { return text_is_number(c); }
static bool S(uint32_t c) { return text_is_space(c); }
static bool P(uint32_t c) { return !S(c) && !L(c) && !N(c); } /* [^\s\p{L}\p{N}] */
static bool CRLF(uint32_t c) { return c == '\r' || c == '\n'; }

static size_t run(const uint32_t *cp, size_t i, size_t n, bool (*f)(uint32_t)) {
    while (i < n && f(cp[i])) i++;
    return i;
}

static bool fold_is(uint32_t c, char lower) {
    return c == (uint32_t)lower || c == (uint32_t)(lower - 32) || (lower == 's' && c == 0x17F) || (lower == 'k' && c == 0x212A);
}

/* 's|'t|'re|'ve|'m|'ll|'d, case-insensitive (Llama 3, Qwen2) or not (GPT-2) */
static size_t contraction(const uint32_t *cp, size_t i, size_t n, bool fold) {
    if (cp[i] != '\'' || i + 1 >= n) return 0;
    static const char *const ALT[] = { "s", "t", "re", "ve", "m", "ll", "d" };
    for (int a = 0; a < 7; a++) {
        size_t k = strlen(ALT[a]);
        if (i + 1 + k > n) continue;
        bool ok = true;
        for (size_t q = 0; q < k && ok; q++) ok = fold ? fold_is(cp[i + 1 + q], ALT[a][q]) : cp[i + 1 + q] == (uint32_t)ALT[a][q];
        if (ok) return i + 1 + k;
    }
    return 0;
}

static size_t match_at(split_pattern pat, const uint32_t *cp, size_t i, size_t n) {
    size_t j;
    if (pat == PAT_GPT2) {
        if ((j = contraction(cp, i, n, false))) return j;
        size_t k = cp[i] == ' ' && i + 1 < n ? i + 1 : i;
        if (L(cp[k])) return run(cp, k, n, L);
        if (N(cp[k])) return run(cp, k, n, N);
        if (P(cp[k])) return run(cp, k, n, P);
        if (k != i && L(cp[i])) return run(cp, i, n, L); /* never: ' ' is not L, N or P */
    } else {
        if ((j = contraction(cp, i, n, true))) return j;
        if (L(cp[i])) return run(cp, i, n, L);
        if (!CRLF(cp[i]) && !N(cp[i]) && i + 1 < n && L(cp[i + 1])) return run(cp, i + 1, n, L);
        if (N(cp[i])) {
            size_t end = run(cp, i, n, N), max = pat == PAT_LLAMA3 ? 3 : 1;
            return end - i > max ? i + max : end;
        }
        size_t k = cp[i] == ' ' && i + 1 < n && P(cp[i + 1]) ? i + 1 : i;
        if (P(cp[k])) return run(cp, run(cp, k, n, P), n, CRLF);
        if (S(cp[i])) {
            size_t e = run(cp, i, n, S);
            for (size_t r = e; r > i; r--)
                if (CRLF(cp[r - 1])) return r;
        }
    }
    if (S(cp[i])) { /* \s+(?!\S) | \s+ */
        size_t e = run(cp, i, n, S);
        if (e == n || e - 1 == i) return e;
        return e - 1;
    }
    return 0;
}

/* ---- BPE on one piece's bytes */

typedef struct {
    int32_t *ids;
    int64_t n, cap;
} idbuf;

static bool push(idbuf *o, int32_t id) {
    if (o->n == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        int32_t *p = realloc(o->ids, sizeof *p * (size_t)cap);
        if (!p) return false;
        o->ids = p;
        o->cap = cap;
    }
    o->ids[o->n++] = id;
    return true;
}

static af_status bpe(const af_hf_tokenizer *t, const unsigned char *s, size_t n, idbuf *o, int32_t *sym, char *mapped) {
    size_t ml = 0;
    for (size_t i = 0; i < n; i++) {
        if (t->byte_id[s[i]] < 0) return ir_fail(AF_ERR_UNSUPPORTED, "tokenizer: byte 0x%02x has no token in the vocab", s[i]);
        memcpy(mapped + ml, t->byte_chr[s[i]], (size_t)t->byte_len[s[i]]);
        ml += (size_t)t->byte_len[s[i]];
        sym[i] = t->byte_id[s[i]];
    }
    if (t->ignore_merges) {
        int32_t whole = vocab_find(t, mapped, ml);
        if (whole >= 0) return push(o, whole) ? AF_OK : ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
    }
    size_t m = n;
    for (;;) { /* the lowest-ranked pair, leftmost on ties, until none merges */
        int best = -1;
        int32_t rank = 0, id = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            const mslot *ms = merge_find(t, sym[i], sym[i + 1]);
            if (ms && (best < 0 || ms->rank < rank)) { best = (int)i; rank = ms->rank; id = ms->id; }
        }
        if (best < 0) break;
        sym[best] = id;
        memmove(sym + best + 1, sym + best + 2, sizeof *sym * (m - (size_t)best - 2));
        m--;
    }
    for (size_t i = 0; i < m; i++)
        if (!push(o, sym[i])) return ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
    return AF_OK;
}

/* One stretch of text without added tokens: pre-tokenize, then BPE each piece. */
static af_status encode_plain(const af_hf_tokenizer *t, const unsigned char *s, size_t len, idbuf *o) {
    if (!len) return AF_OK;
    if (t->nfc) {
        bool ascii = true; /* ASCII is its own NFC */
        for (size_t i = 0; i < len && ascii; i++) ascii = s[i] < 0x80;
        if (!ascii) {
            unsigned char *norm;
            size_t nl;
            if (text_nfc(s, len, &norm, &nl)) return ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
            af_hf_tokenizer tn = *t;
            tn.nfc = false;
            af_status st = encode_plain(&tn, norm, nl, o);
            free(norm);
            return st;
        }
    }
    uint32_t *cp = malloc(sizeof *cp * len);
    size_t *off = malloc(sizeof *off * (len + 1));
    int32_t *sym = malloc(sizeof *sym * len);
    char *mapped = malloc(2 * len + 1);
    af_status st = AF_OK;
    if (!cp || !off || !sym || !mapped) { st = ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory"); goto out; }
    size_t n = 0;
    for (size_t b = 0; b < len;) {
        int k;
        off[n] = b;
        cp[n++] = text_utf8_next(s + b, len - b, &k);
        b += (size_t)k;
    }
    off[n] = len;
    size_t gap = 0; /* start of text no alternative matched (Split's Isolated keeps it as a piece) */
    for (size_t i = 0; i < n && st == AF_OK;) {
        size_t j = match_at(t->pat, cp, i, n);
        if (!j) { i++; continue; }
        if (gap < i) st = bpe(t, s + off[gap], off[i] - off[gap], o, sym, mapped);
        if (st == AF_OK) st = bpe(t, s + off[i], off[j] - off[i], o, sym, mapped);
        i = gap = j;
    }
    if (st == AF_OK && gap < n) st = bpe(t, s + off[gap], off[n] - off[gap], o, sym, mapped);
out:
    free(cp); free(off); free(sym); free(mapped);
    return st;
}

static af_status encode(const af_hf_tokenizer *t, const char *text, size_t len, bool special, int32_t **ids, int64_t *n) {
    if (!t || (!text && len) || !ids || !n) return ir_fail(AF_ERR_INVALID, "af_hf_tokenizer_encode: NULL argument");
    idbuf o = { 0 };
    for (int k = 0; special && k < t->ntmpl[0]; k++)
        if (!push(&o, t->tmpl[0][k])) { free(o.ids); return ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory"); }
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    af_status st = AF_OK;
    for (size_t i = 0; i < len && st == AF_OK;) { /* added tokens first: leftmost, then longest */
        int best = -1;
        for (int a = 0; a < t->nadd; a++)
            if (t->add[a].len <= len - i && !memcmp(s + i, t->add[a].s, t->add[a].len) && (best < 0 || t->add[a].len > t->add[best].len))
                best = a;
        if (best < 0) { i++; continue; }
        st = encode_plain(t, s + start, i - start, &o);
        if (st == AF_OK && !push(&o, t->add[best].id)) st = ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
        i += t->add[best].len;
        start = i;
    }
    if (st == AF_OK) st = encode_plain(t, s + start, len - start, &o);
    for (int k = 0; st == AF_OK && special && k < t->ntmpl[1]; k++)
        if (!push(&o, t->tmpl[1][k])) st = ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
    if (st == AF_OK && !o.ids && !(o.ids = malloc(sizeof *o.ids))) st = ir_fail(AF_ERR_NOMEM, "tokenizer: out of memory");
    if (st != AF_OK) { free(o.ids); return st; }
    *ids = o.ids;
    *n = o.n;
    return AF_OK;
}

af_status af_hf_tokenizer_encode(const af_hf_tokenizer *t, const char *text, size_t len, int32_t **ids, int64_t *n) {
    return encode(t, text, len, false, ids, n);
}

af_status af_hf_tokenizer_encode_special(const af_hf_tokenizer *t, const char *text, size_t len, int32_t **ids, int64_t *n) {
    return encode(t, text, len, true, ids, n);
}

/* ---- decoding: ByteLevel's inverse map per token (a token with a character outside the
 * map contributes its own UTF-8), then the bytes as UTF-8 with each maximal invalid
 * subpart replaced by U+FFFD, as Rust's String::from_utf8_lossy does */

static size_t valid_len(const unsigned char *s, size_t n, size_t *bad) {
    unsigned char c = s[0];
    int k;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else { *bad = 1; return 0; }
    for (int i = 1; i < k; i++) {
        if ((size_t)i >= n || s[i] < lo || s[i] > hi) { *bad = (size_t)i; return 0; }
        lo = 0x80; hi = 0xBF;
    }
    return (size_t)k;
}

af_status af_hf_tokenizer_decode(const af_hf_tokenizer *t, const int32_t *ids, int64_t n, int skip_special, char **text, size_t *len) {
    if (!t || (!ids && n) || n < 0 || !text || !len) return ir_fail(AF_ERR_INVALID, "af_hf_tokenizer_decode: NULL argument");
    size_t cap = 1;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size || !t->tok[ids[i]])
            return ir_fail(AF_ERR_INVALID, "af_hf_tokenizer_decode: id %d (at %lld) is no token of this tokenizer (vocab %d)",
                           (int)ids[i], (long long)i, t->vocab_size);
        cap += t->tok_len[ids[i]];
    }
    uint8_t inv[0x144]; /* GPT-2's printable character (U+0021..U+0143) -> its byte */
    bool has[0x144] = { false };
    for (int b = 0; b < 256; b++) {
        int k;
        uint32_t c = text_utf8_next((const unsigned char *)t->byte_chr[b], (size_t)t->byte_len[b], &k);
        inv[c] = (uint8_t)b;
        has[c] = true;
    }
    unsigned char *raw = malloc(cap), *out = malloc(3 * cap);
    if (!raw || !out) { free(raw); free(out); return ir_fail(AF_ERR_NOMEM, "af_hf_tokenizer_decode: out of memory"); }
    size_t rl = 0, ol = 0;
    for (int64_t i = 0; i < n; i++) {
        if (skip_special && t->tok_special[ids[i]]) continue;
        const unsigned char *s = (const unsigned char *)t->tok[ids[i]];
        size_t m = t->tok_len[ids[i]], start = rl;
        bool mapped = true;
        for (size_t b = 0; b < m && mapped;) {
            int k;
            uint32_t c = text_utf8_next(s + b, m - b, &k);
            if (c < 0x144 && has[c]) raw[rl++] = inv[c];
            else mapped = false;
            b += (size_t)k;
        }
        if (!mapped) { memcpy(raw + start, s, m); rl = start + m; }
    }
    for (size_t i = 0; i < rl;) {
        size_t bad = 0, k = valid_len(raw + i, rl - i, &bad);
        if (k) { memcpy(out + ol, raw + i, k); ol += k; i += k; }
        else { memcpy(out + ol, "\xEF\xBF\xBD", 3); ol += 3; i += bad; }
    }
    free(raw);
    out[ol] = 0;
    *text = (char *)out;
    *len = ol;
    return AF_OK;
}
