/* llama2.c model files, as its export.py writes them and its run.c reads them.
 *
 * Version 0 (legacy): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len; a negative vocab_size means the classifier is not shared), then
 * fp32 tensors in run.c's order, each stacked over layers: embedding, rms_att, wq, wk,
 * wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis_real and freq_cis_imag
 * ([seq_len][head_size / 2] each, which run.c skips), then the classifier if unshared.
 * Version 1: uint32 magic 0x616b3432 ("ak42"), int32 version 1, the 7 int32 (vocab
 * positive), a uint8 shared-classifier flag, zeros to byte 256; then rms_att, rms_ffn,
 * rms_final, embedding, wq, wk, wv, wo, w1, w2, w3, and the classifier if unshared.
 * All little-endian. Version 2 (int8 Q8_0) is not read. */
#define _POSIX_C_SOURCE 200809L
#include "llama/llama.h"
#include "aneforge_llama.h"
#include "ir/bytes.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FREQ_COS = -1, FREQ_SIN = -2 };
typedef struct { int tensor; int64_t floats; } block; /* tensor: an af_llama_tensor or FREQ_* */

/* The file's blocks in order; returns how many. */
static int file_blocks(const af_llama_config *c, int version, block *b) {
    static const int v0[] = { AF_LLAMA_TOKEN_EMBEDDING, AF_LLAMA_RMS_ATT, AF_LLAMA_WQ, AF_LLAMA_WK, AF_LLAMA_WV,
                              AF_LLAMA_WO, AF_LLAMA_RMS_FFN, AF_LLAMA_W1, AF_LLAMA_W2, AF_LLAMA_W3,
                              AF_LLAMA_RMS_FINAL, FREQ_COS, FREQ_SIN, AF_LLAMA_CLASSIFIER };
    static const int v1[] = { AF_LLAMA_RMS_ATT, AF_LLAMA_RMS_FFN, AF_LLAMA_RMS_FINAL, AF_LLAMA_TOKEN_EMBEDDING,
                              AF_LLAMA_WQ, AF_LLAMA_WK, AF_LLAMA_WV, AF_LLAMA_WO, AF_LLAMA_W1, AF_LLAMA_W2,
                              AF_LLAMA_W3, AF_LLAMA_CLASSIFIER };
    const int *order = version == 0 ? v0 : v1;
    int n = version == 0 ? (int)(sizeof v0 / sizeof v0[0]) : (int)(sizeof v1 / sizeof v1[0]), k = 0;
    for (int i = 0; i < n; i++) {
        int t = order[i];
        if (t == AF_LLAMA_CLASSIFIER && c->shared_classifier) continue;
        int64_t floats;
        if (t < 0) {
            floats = (int64_t)c->seq_len * (c->dim / c->n_heads / 2);
        } else {
            int rows, cols;
            af_llama_tensor_at(c, (af_llama_tensor)t, 0, NULL, &rows, &cols);
            int layered = t != AF_LLAMA_TOKEN_EMBEDDING && t != AF_LLAMA_RMS_FINAL && t != AF_LLAMA_CLASSIFIER;
            floats = (int64_t)rows * cols * (layered ? c->n_layers : 1);
        }
        b[k++] = (block){ t, floats };
    }
    return k;
}

static int64_t block_offset(const af_llama_config *c, int t) {
    int64_t off = 0;
    af_llama_tensor_at(c, (af_llama_tensor)t, 0, &off, NULL, NULL);
    return off;
}

void llama_rope_table(int seq_len, int head_size, float *cos_out, float *sin_out) {
    int half = head_size / 2;
    for (int pos = 0; pos < seq_len; pos++)
        for (int i = 0; i < half; i++) {
            double angle = pos * pow(10000.0, -(double)(2 * i) / head_size);
            cos_out[(size_t)pos * half + i] = (float)cos(angle);
            sin_out[(size_t)pos * half + i] = (float)sin(angle);
        }
}

/* ---------------------------------------------------------------- reading */

static int32_t get_i32(const uint8_t *p) { return (int32_t)ir_get_u32(p); }

/* The header: version, config and header size, checked against the file's size. */
static af_status parse_header(const uint8_t *h, uint64_t size, const char *what, af_llama_config *c,
                              int *version, size_t *header_bytes) {
    if (size < 8)
        return ir_fail(AF_ERR_CORRUPT, "%s: %llu bytes is too short for a llama2.c model file", what,
                       (unsigned long long)size);
    const uint8_t *ints;
    memset(c, 0, sizeof *c);
    if (ir_get_u32(h) == LLAMA_V1_MAGIC) {
        int32_t v = get_i32(h + 4);
        if (v == 2)
            return ir_fail(AF_ERR_UNSUPPORTED, "%s: llama2.c version 2 (int8 Q8_0 weights) is not supported: export "
                           "it from PyTorch with export.py --version 1 (fp32)", what);
        if (v != 1)
            return ir_fail(AF_ERR_CORRUPT, "%s: magic \"ak42\" but version %d (llama2.c writes 0, 1 or 2)", what, v);
        if (size < LLAMA_V1_HEADER)
            return ir_fail(AF_ERR_CORRUPT, "%s: %llu bytes is shorter than a version 1 header (%d)", what,
                           (unsigned long long)size, LLAMA_V1_HEADER);
        ints = h + 8;
        if (h[36] > 1) return ir_fail(AF_ERR_CORRUPT, "%s: shared-classifier flag %d (must be 0 or 1)", what, h[36]);
        c->shared_classifier = h[36];
        c->vocab_size = get_i32(ints + 20);
        if (c->vocab_size <= 0) /* export.py's legacy_export negates model.params.vocab_size in place */
            return ir_fail(AF_ERR_CORRUPT,
                           "%s: version 1 vocab_size %d (must be positive; export.py writes it negative when "
                           "--version 0 ran on the same model object first: export again in a fresh process)",
                           what, c->vocab_size);
        *version = 1;
        *header_bytes = LLAMA_V1_HEADER;
    } else {
        if (size < LLAMA_V0_HEADER)
            return ir_fail(AF_ERR_CORRUPT, "%s: %llu bytes is shorter than a llama2.c header (%d)", what,
                           (unsigned long long)size, LLAMA_V0_HEADER);
        ints = h;
        int64_t vocab = get_i32(ints + 20); /* negative: the classifier follows the weights */
        c->shared_classifier = vocab > 0;
        vocab = vocab < 0 ? -vocab : vocab;
        c->vocab_size = vocab > INT32_MAX ? 0 : (int)vocab;
        *version = 0;
        *header_bytes = LLAMA_V0_HEADER;
    }
    c->dim = get_i32(ints);
    c->hidden_dim = get_i32(ints + 4);
    c->n_layers = get_i32(ints + 8);
    c->n_heads = get_i32(ints + 12);
    c->n_kv_heads = get_i32(ints + 16);
    c->seq_len = get_i32(ints + 24);
    char why[256];
    if (llama_config_problem(c, why, sizeof why))
        return ir_fail(AF_ERR_CORRUPT, "%s: not a usable llama2.c version %d model: header says %s", what, *version,
                       why);
    block b[16];
    int nb = file_blocks(c, *version, b);
    uint64_t want = *header_bytes;
    for (int i = 0; i < nb; i++) want += 4 * (uint64_t)b[i].floats;
    if (want != size)
        return ir_fail(AF_ERR_CORRUPT, "%s: %llu bytes, but a version %d llama2.c fp32 model of dim %d, hidden %d, "
                       "%d layers, %d heads, %d kv heads, vocab %d, seq %d (%s classifier) is %llu bytes: the file is "
                       "truncated, has extra bytes, or is not such a model", what, (unsigned long long)size,
                       *version, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
                       c->seq_len, c->shared_classifier ? "shared" : "separate", (unsigned long long)want);
    return AF_OK;
}

/* Bytes come from memory or a stream; the size was checked before any read. */
typedef struct { const uint8_t *mem; FILE *f; uint64_t pos; } source;

static int source_read(source *s, void *dst, size_t n) {
    if (s->mem) memcpy(dst, s->mem + s->pos, n);
    else if (fread(dst, 1, n, s->f) != n) return 0;
    s->pos += n;
    return 1;
}

/* Little-endian bytes in place to host floats. */
static void floats_from_le(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = ir_get_u32((const uint8_t *)&p[i]);
        memcpy(&p[i], &v, 4);
    }
}

static af_status check_finite(const af_llama_weights *w, const block *b, const char *what) {
    const float *p = w->data + block_offset(&w->cfg, b->tensor);
    for (int64_t i = 0; i < b->floats; i++)
        if (!isfinite(p[i])) {
            int rows, cols;
            af_llama_tensor_at(&w->cfg, (af_llama_tensor)b->tensor, 0, NULL, &rows, &cols);
            return ir_fail(AF_ERR_CORRUPT, "%s: %s holds %s at element %lld (layer %lld): the file is damaged or "
                           "not fp32", what, af_llama_tensor_name((af_llama_tensor)b->tensor),
                           isnan(p[i]) ? "nan" : "inf", (long long)i, (long long)(i / ((int64_t)rows * cols)));
        }
    return AF_OK;
}

static af_status read_weights(source *s, const uint8_t *header, uint64_t size, const char *what,
                              af_llama_weights **out, int *version) {
    af_llama_config c;
    int ver = 0;
    size_t hbytes = 0;
    af_status st = parse_header(header, size, what, &c, &ver, &hbytes);
    if (st) return st;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return AF_ERR_NOMEM;
    s->pos = hbytes;
    if (s->f && fseek(s->f, (long)hbytes, SEEK_SET) != 0) {
        af_llama_weights_free(w);
        return ir_fail(AF_ERR_IO, "%s: cannot seek past the header", what);
    }
    block b[16];
    int nb = file_blocks(&c, ver, b);
    for (int i = 0; i < nb; i++) {
        if (b[i].tensor < 0) { /* freq_cis: nothing to keep */
            float junk[256];
            for (int64_t left = b[i].floats; left > 0;) {
                int64_t k = left < 256 ? left : 256;
                if (!source_read(s, junk, (size_t)k * 4)) goto short_read;
                left -= k;
            }
            continue;
        }
        float *dst = w->data + block_offset(&c, b[i].tensor);
        if (!source_read(s, dst, (size_t)b[i].floats * 4)) goto short_read;
        floats_from_le(dst, b[i].floats);
        if ((st = check_finite(w, &b[i], what))) {
            af_llama_weights_free(w);
            return st;
        }
    }
    *out = w;
    if (version) *version = ver;
    return AF_OK;
short_read:
    af_llama_weights_free(w);
    return ir_fail(AF_ERR_IO, "%s: read failed at byte %llu", what, (unsigned long long)s->pos);
}

af_status llama_parse(const uint8_t *bytes, size_t size, const char *what, af_llama_weights **out, int *version) {
    if (!out) return ir_fail(AF_ERR_INVALID, "llama_parse: out is NULL");
    *out = NULL;
    if (!bytes && size) return ir_fail(AF_ERR_INVALID, "llama_parse: bytes is NULL");
    uint8_t head[LLAMA_V1_HEADER] = { 0 };
    if (size) memcpy(head, bytes, size < sizeof head ? size : sizeof head);
    source s = { .mem = bytes };
    return read_weights(&s, head, size, what ? what : "llama2.c model", out, version);
}

af_llama_weights *af_llama_load(const char *path, int *version) {
    if (!path) {
        ir_fail(AF_ERR_INVALID, "af_llama_load: path is NULL");
        return NULL;
    }
    uint64_t size = 0;
    FILE *f = ir_fopen_regular(path, "llama2.c model", 0, &size);
    if (!f) return NULL;
    uint8_t head[LLAMA_V1_HEADER] = { 0 };
    size_t got = fread(head, 1, sizeof head, f);
    (void)got; /* a short file is caught by the size checks */
    source s = { .f = f };
    af_llama_weights *w = NULL;
    read_weights(&s, head, size, path, &w, version);
    fclose(f);
    return w;
}

/* ---------------------------------------------------------------- writing */

typedef struct { FILE *f; uint8_t *mem; size_t pos; } sink;

static int sink_write(sink *s, const void *p, size_t n) {
    if (s->mem) memcpy(s->mem + s->pos, p, n);
    else if (fwrite(p, 1, n, s->f) != n) return 0;
    s->pos += n;
    return 1;
}

static int write_floats(sink *s, const float *p, int64_t n) {
    uint8_t chunk[4096];
    for (int64_t i = 0; i < n;) {
        int64_t m = n - i < (int64_t)sizeof chunk / 4 ? n - i : (int64_t)sizeof chunk / 4;
        for (int64_t j = 0; j < m; j++) {
            uint32_t v;
            memcpy(&v, &p[i + j], 4);
            ir_put_u32(chunk + 4 * j, v);
        }
        if (!sink_write(s, chunk, (size_t)m * 4)) return 0;
        i += m;
    }
    return 1;
}

static uint64_t file_size(const af_llama_config *c, int version) {
    block b[16];
    int nb = file_blocks(c, version, b);
    uint64_t n = version == 0 ? LLAMA_V0_HEADER : LLAMA_V1_HEADER;
    for (int i = 0; i < nb; i++) n += 4 * (uint64_t)b[i].floats;
    return n;
}

static af_status write_model(sink *s, const af_llama_weights *w, int version) {
    const af_llama_config *c = &w->cfg;
    uint8_t h[LLAMA_V1_HEADER] = { 0 };
    uint8_t *ints = version == 0 ? h : h + 8;
    int32_t vocab = version == 0 && !c->shared_classifier ? -c->vocab_size : c->vocab_size;
    const int32_t fields[7] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, vocab, c->seq_len };
    for (int i = 0; i < 7; i++) ir_put_u32(ints + 4 * i, (uint32_t)fields[i]);
    if (version == 1) {
        ir_put_u32(h, LLAMA_V1_MAGIC);
        ir_put_u32(h + 4, 1);
        h[36] = (uint8_t)c->shared_classifier;
    }
    if (!sink_write(s, h, version == 0 ? LLAMA_V0_HEADER : LLAMA_V1_HEADER)) return AF_ERR_IO;
    block b[16];
    int nb = file_blocks(c, version, b);
    float *cos_t = NULL, *sin_t = NULL;
    af_status st = AF_OK;
    for (int i = 0; i < nb && !st; i++) {
        if (b[i].tensor >= 0) {
            if (!write_floats(s, w->data + block_offset(c, b[i].tensor), b[i].floats)) st = AF_ERR_IO;
            continue;
        }
        if (!cos_t) {
            cos_t = malloc((size_t)b[i].floats * sizeof(float));
            sin_t = malloc((size_t)b[i].floats * sizeof(float));
            if (!cos_t || !sin_t) {
                st = ir_fail(AF_ERR_NOMEM, "llama2.c writer: no memory for the freq_cis blocks");
                break;
            }
            llama_rope_table(c->seq_len, c->dim / c->n_heads, cos_t, sin_t);
        }
        if (!write_floats(s, b[i].tensor == FREQ_COS ? cos_t : sin_t, b[i].floats)) st = AF_ERR_IO;
    }
    free(cos_t);
    free(sin_t);
    return st;
}

static af_status check_save_args(const af_llama_weights *w, int version, const char *who) {
    if (!w) return ir_fail(AF_ERR_INVALID, "%s: weights are NULL", who);
    if (version != 0 && version != 1)
        return ir_fail(AF_ERR_INVALID, "%s: version %d (0: what llama2.c's run.c reads, or 1)", who, version);
    return af_llama_config_check(&w->cfg);
}

af_status llama_serialize(const af_llama_weights *w, int version, uint8_t **out, size_t *size) {
    af_status st = check_save_args(w, version, "llama_serialize");
    if (st) return st;
    uint64_t n = file_size(&w->cfg, version);
    if (n > SIZE_MAX) return ir_fail(AF_ERR_NOMEM, "llama_serialize: %llu bytes", (unsigned long long)n);
    sink s = { .mem = malloc((size_t)n) };
    if (!s.mem) return ir_fail(AF_ERR_NOMEM, "llama_serialize: cannot allocate %llu bytes", (unsigned long long)n);
    if ((st = write_model(&s, w, version))) {
        free(s.mem);
        return st;
    }
    *out = s.mem;
    *size = (size_t)n;
    return AF_OK;
}

af_status af_llama_save(const af_llama_weights *w, const char *path, int version) {
    af_status st = check_save_args(w, version, "af_llama_save");
    if (st) return st;
    if (!path) return ir_fail(AF_ERR_INVALID, "af_llama_save: path is NULL");
    sink s = { .f = ir_open_write(path) }; /* whole or not at all (a temporary renamed into place) */
    if (!s.f) return AF_ERR_IO;
    errno = 0;
    st = write_model(&s, w, version);
    if (st && st != AF_ERR_IO) { /* not a write: keep its message */
        char why[1024];
        snprintf(why, sizeof why, "%s", af_error_message());
        ir_close_written(s.f, path, false);
        return ir_fail(st, "%s", why);
    }
    return ir_close_written(s.f, path, st == AF_OK);
}
