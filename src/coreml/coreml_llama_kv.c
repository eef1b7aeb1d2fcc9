/* af_coreml_export_llama_kv: a llama2.c-architecture model as a Core ML decode program
 * with its KV cache in Core ML states (iOS 18 / macOS 15, specification version 9).
 *
 * One call runs one token at one position:
 *   inputs  input_ids [1, 1] (the token id), position [1, 1] (0, 1, ...; fp16, exact)
 *   states  key_cache, value_cache [layers, kv_heads, max_seq, head_size] (fp16)
 *   output  logits [1, vocab]
 * The step is built as a graph whose caches are ordinary inputs and whose updated caches
 * are outputs, emitted to MIL like any graph, and then rewritten in the syntax tree: the
 * cache arguments become state<tensor<...>> arguments read once by read_state, and the
 * updated caches are written back by coreml_update_state instead of being returned.
 * Inside the step, the position's one-hot row (position == iota) picks the RoPE angles
 * (a matmul against the cos/sin tables, exact), selects the cache row the new key and
 * value go to (select, exact), and masks the keys after the position with -1e4 (as
 * af_causal_mask does), so the logits equal the stateless forward's at that position. */
#include "coreml/coreml.h"
#include "aneforge_llama.h"
#include "ir/ir.h"
#include "mil/mil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KV_MAX_EXACT 2048 /* fp16 holds every whole number up to here */

typedef struct {
    af_graph *g;
    const af_llama_config *c;
    float *data;
    af_tensor *emb; /* the embedding constant, once made */
} kv_ctx;

static af_tensor *weight(kv_ctx *k, af_llama_tensor t, int layer) {
    int64_t off;
    int rows, cols;
    if (af_llama_tensor_at(k->c, t, layer, &off, &rows, &cols)) return NULL;
    if (t == AF_LLAMA_CLASSIFIER && k->c->shared_classifier) return k->emb; /* tied: one constant */
    char name[48];
    snprintf(name, sizeof name, "l%d_%s", layer, af_llama_tensor_name(t));
    bool vec = t == AF_LLAMA_RMS_ATT || t == AF_LLAMA_RMS_FFN || t == AF_LLAMA_RMS_FINAL;
    af_tensor *w = af_const(k->g, name, vec ? AF_SHAPE((int64_t)rows * cols) : AF_SHAPE(rows, cols), k->data + off);
    if (t == AF_LLAMA_TOKEN_EMBEDDING) k->emb = w;
    return w;
}

static af_tensor *linear(af_tensor *x, af_tensor *w) { return af_matmul(x, w, 0, 1); }

/* RoPE on x [1, n * hs] at the angles c, s [1, hs/2, 1]: pair (2i, 2i+1) of each head
 * becomes (v0 c - v1 s, v0 s + v1 c), af_rope's products. */
static af_tensor *rope(af_tensor *x, int n, int hs, af_tensor *c, af_tensor *s) {
    af_tensor *parts[2] = { NULL, NULL };
    if (!x || af_split(af_reshape(x, AF_SHAPE(n, hs / 2, 2)), 2, 2, NULL, parts) != AF_OK) return NULL;
    af_tensor *even = af_sub(af_mul(parts[0], c), af_mul(parts[1], s));
    af_tensor *odd = af_add(af_mul(parts[0], s), af_mul(parts[1], c));
    return af_reshape(af_concat(2, (af_tensor *[]){ even, odd }, 2), AF_SHAPE(1, (int64_t)n * hs));
}

/* A constant [1, n] holding 0, 1, ..., n - 1. */
static af_tensor *iota(af_graph *g, const char *name, int n) {
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) v[i] = (float)i;
    af_tensor *t = af_const(g, name, AF_SHAPE(1, n), v);
    free(v);
    return t;
}

/* The decode step: in = { input_ids, position, key_cache, value_cache }, out = { logits,
 * next key cache, next value cache }. */
static af_status build_step(kv_ctx *k, int S, af_tensor **in, af_tensor **out) {
    const af_llama_config *c = k->c;
    af_graph *g = k->g;
    int L = c->n_layers, D = c->dim, H = c->n_heads, KV = c->n_kv_heads, hs = D / H, half = hs / 2, rep = H / KV;
    af_shape cs = AF_SHAPE(L, KV, S, hs);
    af_tensor *ids = in[0] = af_input(g, "input_ids", AF_F16, AF_SHAPE(1, 1));
    af_tensor *pos = in[1] = af_input(g, "position", AF_F16, AF_SHAPE(1, 1));
    af_tensor *kc = in[2] = af_input(g, "key_cache", AF_F16, cs);
    af_tensor *vc = in[3] = af_input(g, "value_cache", AF_F16, cs);
    /* RoPE tables computed as af_rope computes them */
    float *tab = malloc(sizeof(float) * (size_t)S * (size_t)half * 2);
    if (!tab) return ir_fail(AF_ERR_NOMEM, "af_coreml_export_llama_kv: out of memory");
    for (int t = 0; t < S; t++)
        for (int i = 0; i < half; i++) {
            float freq = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hs);
            float val = (float)t * freq;
            tab[(size_t)t * half + i] = cosf(val);
            tab[(size_t)S * half + (size_t)t * half + i] = sinf(val);
        }
    af_tensor *cos_t = af_const(g, "rope_cos", AF_SHAPE(S, half), tab), *sin_t = af_const(g, "rope_sin", AF_SHAPE(S, half), tab + (size_t)S * half);
    free(tab);
    af_tensor *at = af_equal(pos, iota(g, "positions", S)); /* [1, S]: one-hot of the position */
    af_tensor *cosr = af_reshape(af_matmul(at, cos_t, 0, 0), AF_SHAPE(1, half, 1));
    af_tensor *sinr = af_reshape(af_matmul(at, sin_t, 0, 0), AF_SHAPE(1, half, 1));
    af_tensor *row = af_reshape(at, AF_SHAPE(1, 1, S, 1));
    af_tensor *mask = af_reshape(af_muls(af_greater(iota(g, "key_positions", S), pos), -1e4f), AF_SHAPE(1, 1, 1, S));
    af_tensor *onehot = af_equal(ids, iota(g, "vocab_ids", c->vocab_size));
    af_tensor *x = af_matmul(onehot, weight(k, AF_LLAMA_TOKEN_EMBEDDING, 0), 0, 0); /* [1, D] */
    af_tensor **kn = calloc((size_t)L * 2, sizeof *kn), **vn = kn ? kn + L : NULL;
    if (!kn) return ir_fail(AF_ERR_NOMEM, "af_coreml_export_llama_kv: out of memory");
    for (int l = 0; l < L; l++) {
        af_tensor *h = af_rms_norm(x, weight(k, AF_LLAMA_RMS_ATT, l), 1e-5f);
        af_tensor *q = rope(linear(h, weight(k, AF_LLAMA_WQ, l)), H, hs, cosr, sinr);
        af_tensor *kk = rope(linear(h, weight(k, AF_LLAMA_WK, l)), KV, hs, cosr, sinr);
        af_tensor *vv = linear(h, weight(k, AF_LLAMA_WV, l));
        int64_t b[4] = { l, 0, 0, 0 }, n[4] = { 1, KV, S, hs };
        kn[l] = af_select(row, af_reshape(kk, AF_SHAPE(1, KV, 1, hs)), af_slice(kc, b, n)); /* [1, KV, S, hs] */
        vn[l] = af_select(row, af_reshape(vv, AF_SHAPE(1, KV, 1, hs)), af_slice(vc, b, n));
        /* grouped heads: query head kv * rep + r reads kv head kv */
        af_tensor *s = af_muls(af_matmul(af_reshape(q, AF_SHAPE(1, KV, rep, hs)), kn[l], 0, 1), 1.0f / sqrtf((float)hs));
        af_tensor *att = af_matmul(af_softmax(af_add(s, mask), -1), vn[l], 0, 0); /* [1, KV, rep, hs] */
        x = af_add(x, linear(af_reshape(att, AF_SHAPE(1, D)), weight(k, AF_LLAMA_WO, l)));
        h = af_rms_norm(x, weight(k, AF_LLAMA_RMS_FFN, l), 1e-5f);
        af_tensor *gate = af_mul(af_silu(linear(h, weight(k, AF_LLAMA_W1, l))), linear(h, weight(k, AF_LLAMA_W3, l)));
        x = af_add(x, linear(gate, weight(k, AF_LLAMA_W2, l)));
    }
    x = af_rms_norm(x, weight(k, AF_LLAMA_RMS_FINAL, 0), 1e-5f);
    out[0] = linear(x, weight(k, AF_LLAMA_CLASSIFIER, 0));
    out[1] = L > 1 ? af_concat(L, kn, 0) : kn[0];
    out[2] = L > 1 ? af_concat(L, vn, 0) : vn[0];
    free(kn);
    const char *names[3] = { "logits", "key_cache_next", "value_cache_next" };
    for (int i = 0; i < 3 && out[i]; i++) {
        free(out[i]->name);
        if (!(out[i]->name = ir_strdup(names[i]))) return ir_fail(AF_ERR_NOMEM, "af_coreml_export_llama_kv: out of memory");
    }
    if (g->error || !out[0] || !out[1] || !out[2])
        return ir_fail(AF_ERR_INVALID, "af_coreml_export_llama_kv: building the decode step failed: %s", g->error ? g->error : af_error_message());
    return AF_OK;
}

/* Renames every use of the identifier `from` in f's statements to `to`. */
static void rename_uses(mil_func *f, const char *from, const char *to) {
    for (int i = 0; i < f->nstmts; i++)
        for (int k = 0; k < f->stmts[i].nargs; k++) {
            mil_value *v = &f->stmts[i].args[k].val;
            if (v->kind == MIL_V_IDENT && !strcmp(v->ident, from)) v->ident = to;
            for (int j = 0; v->kind == MIL_V_TUPLE && j < v->n; j++)
                if (v->items[j].kind == MIL_V_IDENT && !strcmp(v->items[j].ident, from)) v->items[j].ident = to;
        }
}

/* The emitted step with its caches turned into states: for each cache argument `name`
 * (returned updated as f->ret[1 + i]), the argument becomes state<...>, a read_state
 * statement opens the function and a coreml_update_state statement closes it. */
static bool to_states(mil_func *f, mil_arena *a, char *why, size_t n) {
    static const char *const names[2] = { "key_cache", "value_cache" };
    if (f->nret != 3) { snprintf(why, n, "the emitted step returns %d values, not 3", f->nret); return false; }
    mil_stmt *st = mil_alloc(a, sizeof *st * (size_t)(f->nstmts + 4));
    if (!st) { snprintf(why, n, "out of memory"); return false; }
    memcpy(st + 2, f->stmts, sizeof *st * (size_t)f->nstmts);
    for (int i = 0; i < 2; i++) {
        mil_param *p = NULL;
        for (int k = 0; k < f->nparams && !p; k++)
            if (!strcmp(f->params[k].name, names[i])) p = &f->params[k];
        char rd[64], wr[64];
        snprintf(rd, sizeof rd, "%s_read", names[i]);
        snprintf(wr, sizeof wr, "%s_written", names[i]);
        mil_type *ty = mil_alloc(a, sizeof *ty);
        const char **rn = mil_alloc(a, sizeof *rn), **wn = mil_alloc(a, sizeof *wn);
        mil_arg *ra = mil_alloc(a, sizeof *ra), *wa = mil_alloc(a, 2 * sizeof *wa);
        if (!p || !ty || !rn || !wn || !ra || !wa || !(*rn = mil_strndup(a, rd, strlen(rd))) || !(*wn = mil_strndup(a, wr, strlen(wr)))) {
            snprintf(why, n, p ? "out of memory" : "the emitted step has no argument %s", names[i]);
            return false;
        }
        *ty = p->type;
        rename_uses(f, p->name, *rn);
        p->type.state = true;
        *ra = (mil_arg){ .name = "input", .val = { .kind = MIL_V_IDENT, .ident = p->name } };
        st[i] = (mil_stmt){ .nout = 1, .out_types = ty, .out_names = rn, .op = "read_state", .nargs = 1, .args = ra };
        wa[0] = (mil_arg){ .name = "state", .val = { .kind = MIL_V_IDENT, .ident = p->name } };
        wa[1] = (mil_arg){ .name = "value", .val = { .kind = MIL_V_IDENT, .ident = f->ret[1 + i].name } };
        st[f->nstmts + 2 + i] = (mil_stmt){ .nout = 1, .out_types = ty, .out_names = wn, .op = "coreml_update_state", .nargs = 2, .args = wa };
    }
    f->stmts = st;
    f->nstmts += 4;
    f->nret = 1; /* the logits; the caches live on in the states */
    return true;
}

af_status af_coreml_export_llama_kv(const af_llama_weights *w, int max_seq, const af_coreml_opts *o, const char *path) {
    static const char *fn = "af_coreml_export_llama_kv";
    if (!w || !path || !*path) return ir_fail(AF_ERR_INVALID, "%s: weights or path is NULL or empty", fn);
    const af_llama_config *c = af_llama_weights_config((af_llama_weights *)w);
    if (af_llama_config_check(c)) return AF_ERR_INVALID;
    int S = max_seq ? max_seq : c->seq_len;
    if (o && o->ios && o->ios != 18)
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: deployment target iOS %d: the KV cache is held in Core ML states, which need "
                       "iOS 18 / macOS 15 (specification version 9); export with ios 18 (--ios 18), or export the stateless "
                       "forward instead", fn, o->ios);
    if (o && o->precision == 32)
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: precision 32: Core ML states are fp16, so the KV-cache package is fp16 "
                       "(precision 16); the stateless forward exports in fp32", fn);
    if (o && o->nclasses) return ir_fail(AF_ERR_INVALID, "%s: a decode program is not a classifier (nclasses must be 0)", fn);
    if (S < 1 || S > c->seq_len)
        return ir_fail(AF_ERR_INVALID, "%s: max_seq %d must be 1..%d (the model's seq_len)", fn, S, c->seq_len);
    if (S > KV_MAX_EXACT || c->vocab_size > KV_MAX_EXACT)
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: %s %d: the package's fp16 inputs hold token ids and positions up to %d exactly; "
                       "use a smaller max_seq", fn, S > KV_MAX_EXACT ? "max_seq" : "vocabulary", S > KV_MAX_EXACT ? S : c->vocab_size,
                       KV_MAX_EXACT);
    struct stat sb;
    if (!stat(path, &sb)) return ir_fail(AF_ERR_IO, "%s: %s already exists; remove it or choose another path", fn, path);
    kv_ctx k = { .g = af_graph_new(), .c = c, .data = af_llama_weights_data((af_llama_weights *)w) };
    if (!k.g) return ir_fail(AF_ERR_NOMEM, "%s: out of memory", fn);
    af_tensor *in[4] = { 0 }, *out[3] = { 0 };
    af_status st = build_step(&k, S, in, out);
    char *text = NULL;
    size_t len = 0;
    milblob_writer *blob = NULL;
    if (!st) st = mil_emit_mem(k.g, 4, in, 3, out, &text, &len, &blob, NULL);
    mil_arena arena = { 0 };
    mil_diag diag = { .source = "<emitted MIL>" };
    mil_program prog;
    pb_buf model = { 0 };
    char why[300] = "";
    if (!st && !mil_parse_program(text, len, &arena, &diag, &prog)) st = ir_fail(diag.st, "%s: %s", fn, diag.msg);
    else if (!st && (!to_states(&prog.funcs[0], &arena, why, sizeof why) || !coreml_encode_func(&prog.funcs[0], o, &model, why, sizeof why)))
        st = ir_fail(AF_ERR_UNSUPPORTED, "%s: %s", fn, why);
    else if (!st && model.oom) st = ir_fail(AF_ERR_NOMEM, "%s: out of memory encoding the model", fn);
    if (!st) st = coreml_write_package(path, &model, blob);
    pb_free(&model);
    mil_arena_free(&arena);
    free(text);
    milblob_writer_free(blob);
    af_graph_free(k.g);
    return st;
}
