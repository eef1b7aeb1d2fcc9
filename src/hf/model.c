/* Hugging Face model folders in and out: config.json, model.safetensors or shards named
 * by model.safetensors.index.json. Every tensor the config implies must be present with
 * exactly its shape; a tensor the model does not use is refused by name (it would mean
 * the config and weights disagree), except buffers transformers itself recomputes. */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf.h"

#include "ir/json.h"
#include "hf/safetensors.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_CONFIG ((uint64_t)1 << 20)
#define HF_MAX_INDEX ((uint64_t)16 << 20)
#define HF_MAX_SHARDS 1024

af_hf_model *hf_model_alloc(const hf_config *c) {
    af_hf_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->c = *c;
    m->n = hf_slot_count(c);
    m->slot = calloc((size_t)m->n, sizeof *m->slot);
    m->w = calloc((size_t)m->n, sizeof *m->w);
    if (!m->slot || !m->w) { af_hf_free(m); return NULL; }
    hf_slots(c, m->slot);
    for (int i = 0; i < m->n; i++) {
        int64_t count = m->slot[i].shape[0] * (m->slot[i].rank == 2 ? m->slot[i].shape[1] : 1);
        if (!(m->w[i] = malloc(sizeof(float) * (size_t)count))) { af_hf_free(m); return NULL; }
    }
    return m;
}

void af_hf_free(af_hf_model *m) {
    if (!m) return;
    hf_lora_drop(m);
    for (int i = 0; m->w && i < m->n; i++) free(m->w[i]);
    free(m->w);
    free(m->slot);
    free(m);
}

static int64_t slot_count(const hf_slot *s) { return s->shape[0] * (s->rank == 2 ? s->shape[1] : 1); }

static char *read_small(const char *path, const char *what, uint64_t max, size_t *len) {
    uint64_t size;
    FILE *f = ir_fopen_regular(path, what, max, &size);
    if (!f) return NULL;
    char *buf = malloc((size_t)size + 1);
    if (!buf) { fclose(f); ir_fail(AF_ERR_NOMEM, "%s: out of memory", path); return NULL; }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != size) { free(buf); ir_fail(AF_ERR_IO, "%s: read %zu of %llu bytes", path, got, (unsigned long long)size); return NULL; }
    buf[size] = 0;
    *len = (size_t)size;
    return buf;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Tensors transformers keeps as buffers and recomputes: skipped when present. */
static bool ignorable(const char *name, const hf_config *c) {
    const char *inv = strstr(name, "rotary_emb.inv_freq");
    return (inv && !strcmp(inv, "rotary_emb.inv_freq")) || (c->tie && !strcmp(name, "lm_head.weight"));
}

typedef struct {
    st_file *f[HF_MAX_SHARDS];
    char *name[HF_MAX_SHARDS];
    int n;
} shards;

/* A shard's file name from the index: a plain name inside the folder. */
static bool plain_name(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && !strchr(s, '/') && !strchr(s, '\\') && s[0] != '.';
}

static af_status open_shards(const char *dir, shards *sh, json_doc **index_out) {
    char *path = join(dir, "model.safetensors");
    if (!path) return ir_fail(AF_ERR_NOMEM, "out of memory");
    struct stat stt;
    af_status st;
    *index_out = NULL;
    if (!stat(path, &stt)) {
        sh->n = 1;
        sh->name[0] = strdup("model.safetensors");
        st = sh->name[0] ? st_open(path, &sh->f[0]) : ir_fail(AF_ERR_NOMEM, "out of memory");
        free(path);
        return st;
    }
    free(path);
    if (!(path = join(dir, "model.safetensors.index.json"))) return ir_fail(AF_ERR_NOMEM, "out of memory");
    if (stat(path, &stt)) {
        st = ir_fail(AF_ERR_IO, "%s has neither model.safetensors nor model.safetensors.index.json (is it a Hugging "
                                "Face model folder? PyTorch .bin weights are not read: convert them to safetensors)", dir);
        free(path);
        return st;
    }
    size_t len;
    char *text = read_small(path, "safetensors index", HF_MAX_INDEX, &len);
    if (!text) { free(path); return AF_ERR_IO; }
    char err[256];
    json_doc *d = ir_json_parse(text, len, err, sizeof err);
    free(text);
    if (!d) { st = ir_fail(AF_ERR_CORRUPT, "%s: not valid JSON: %s", path, err); free(path); return st; }
    int wm = ir_json_get(d, 0, "weight_map");
    if (wm < 0 || d->n[wm].type != JSON_OBJ) {
        st = ir_fail(AF_ERR_CORRUPT, "%s: no \"weight_map\" object {tensor: file}", path);
        goto fail;
    }
    for (int m = d->n[wm].child; m >= 0; m = d->n[m].next) {
        const char *file = ir_json_is_text(d, m) ? ir_json_str(d, m) : NULL;
        if (!file || !plain_name(file)) {
            st = ir_fail(AF_ERR_CORRUPT, "%s: tensor \"%.80s\" maps to a file that is not a plain name in the folder", path,
                         ir_json_key(d, m));
            goto fail;
        }
        bool seen = false;
        for (int i = 0; i < sh->n && !seen; i++) seen = !strcmp(sh->name[i], file);
        if (seen) continue;
        if (sh->n == HF_MAX_SHARDS) { st = ir_fail(AF_ERR_CORRUPT, "%s: more than %d shards", path, HF_MAX_SHARDS); goto fail; }
        char *sp = join(dir, file);
        sh->name[sh->n] = strdup(file);
        st = sp && sh->name[sh->n] ? st_open(sp, &sh->f[sh->n]) : ir_fail(AF_ERR_NOMEM, "out of memory");
        sh->n++;
        free(sp);
        if (st != AF_OK) goto fail;
    }
    free(path);
    *index_out = d;
    return AF_OK;
fail:
    free(path);
    ir_json_free(d);
    return st;
}

static void close_shards(shards *sh) {
    for (int i = 0; i < sh->n; i++) { st_close(sh->f[i]); free(sh->name[i]); }
}

/* Fills m from the shards; with an index, each tensor must be in the file it names. */
static af_status fill(af_hf_model *m, shards *sh, const json_doc *index, const char *dir) {
    int wm = index ? ir_json_get(index, 0, "weight_map") : -1;
    for (int i = 0; i < m->n; i++) {
        const hf_slot *s = &m->slot[i];
        int fi = -1;
        if (index) {
            const char *file = ir_json_str(index, ir_json_get(index, wm, s->name));
            for (int j = 0; file && j < sh->n; j++)
                if (!strcmp(sh->name[j], file)) fi = j;
        } else
            fi = 0;
        const st_tensor *t = fi >= 0 ? st_find(sh->f[fi], s->name) : NULL;
        if (!t)
            return ir_fail(AF_ERR_CORRUPT, "%s: tensor %s is missing (the config implies it: %s)", dir, s->name,
                           strstr(s->name, "bias") ? "biases" : strstr(s->name, "lm_head") ? "tie_word_embeddings is false"
                                                                                          : "every layer has it");
        bool ok = t->rank == s->rank && t->shape[0] == s->shape[0] && (s->rank == 1 || t->shape[1] == s->shape[1]);
        if (!ok)
            return ir_fail(AF_ERR_CORRUPT, "%s: tensor %s has shape [%lld%s%lld] in the file, the config implies [%lld%s%lld]",
                           dir, s->name, (long long)t->shape[0], t->rank > 1 ? ", " : "", t->rank > 1 ? (long long)t->shape[1] : 0LL,
                           (long long)s->shape[0], s->rank > 1 ? ", " : "", s->rank > 1 ? (long long)s->shape[1] : 0LL);
        st_read_f32(sh->f[fi], t, m->w[i]);
    }
    /* every tensor in the files must be one the model uses */
    for (int j = 0; j < sh->n; j++)
        for (int k = 0; k < sh->f[j]->n; k++) {
            const char *name = sh->f[j]->t[k].name;
            bool used = ignorable(name, &m->c);
            for (int i = 0; i < m->n && !used; i++) used = !strcmp(m->slot[i].name, name);
            if (!used)
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: %s holds tensor \"%.80s\", which %s as configured does not have "
                                                   "(config.json and the weights disagree)", dir, sh->name[j], name,
                               hf_arch_name(m->c.arch));
        }
    return AF_OK;
}

af_status hf_read_config(const char *dir, hf_config *c) {
    char *path = join(dir, "config.json");
    if (!path) return ir_fail(AF_ERR_NOMEM, "out of memory");
    size_t len;
    char *text = read_small(path, "config.json", HF_MAX_CONFIG, &len);
    af_status st = text ? hf_config_parse(text, len, path, c) : AF_ERR_IO;
    free(text);
    free(path);
    return st;
}

af_hf_model *af_hf_load(const char *dir) {
    if (!dir) { ir_fail(AF_ERR_INVALID, "af_hf_load: dir is NULL"); return NULL; }
    hf_config c;
    af_status st = hf_read_config(dir, &c);
    if (st != AF_OK) return NULL;
    af_hf_model *m = hf_model_alloc(&c);
    if (!m) { ir_fail(AF_ERR_NOMEM, "%s: out of memory for the weights", dir); return NULL; }
    shards *sh = calloc(1, sizeof *sh);
    json_doc *index = NULL;
    st = sh ? open_shards(dir, sh, &index) : ir_fail(AF_ERR_NOMEM, "out of memory");
    if (st == AF_OK) st = fill(m, sh, index, dir);
    if (sh) close_shards(sh);
    free(sh);
    ir_json_free(index);
    if (st != AF_OK) { af_hf_free(m); return NULL; }
    return m;
}

af_status af_hf_save(const af_hf_model *m, const char *dir) {
    if (!m || !dir) return ir_fail(AF_ERR_INVALID, "af_hf_save: model and dir must not be NULL");
    if (mkdir(dir, 0777) && errno != EEXIST) return ir_fail(AF_ERR_IO, "cannot create folder %s: %s", dir, strerror(errno));
    st_out *t = calloc((size_t)m->n, sizeof *t);
    char *cfg = hf_config_json(&m->c), *pc = join(dir, "config.json"), *pw = join(dir, "model.safetensors");
    af_status st;
    if (!t || !cfg || !pc || !pw) st = ir_fail(AF_ERR_NOMEM, "af_hf_save: out of memory");
    else {
        for (int i = 0; i < m->n; i++) {
            t[i].name = m->slot[i].name;
            t[i].rank = m->slot[i].rank;
            t[i].shape[0] = m->slot[i].shape[0];
            t[i].shape[1] = m->slot[i].shape[1];
            t[i].data = m->w[i];
        }
        st = st_write(pw, m->n, t);
        if (st == AF_OK) st = ir_write_file(pc, cfg, strlen(cfg), "af_hf_save");
    }
    free(t);
    free(cfg);
    free(pc);
    free(pw);
    return st;
}

/* The trainable tensors: the adapters when the model has them, else every weight. */
static int ntrain(const af_hf_model *m) { return m->lora.rank > 0 ? m->na : m->n; }
static const hf_slot *tslot(const af_hf_model *m, int i) { return m->lora.rank > 0 ? &m->aslot[i] : &m->slot[i]; }
static float *tdata(const af_hf_model *m, int i) { return m->lora.rank > 0 ? m->a[i] : m->w[i]; }

const char *af_hf_architecture(const af_hf_model *m) { return m ? hf_arch_name(m->c.arch) : NULL; }
int af_hf_vocab_size(const af_hf_model *m) { return m ? m->c.vocab : -1; }
int af_hf_param_count(const af_hf_model *m) { return m ? ntrain(m) : -1; }
const char *af_hf_param_name(const af_hf_model *m, int i) { return m && i >= 0 && i < ntrain(m) ? tslot(m, i)->name : NULL; }

af_shape af_hf_param_shape(const af_hf_model *m, int i) {
    if (!m || i < 0 || i >= ntrain(m)) return (af_shape){ 0 };
    const hf_slot *s = tslot(m, i);
    return s->rank == 2 ? AF_SHAPE(s->shape[0], s->shape[1]) : AF_SHAPE(s->shape[0]);
}

float *af_hf_param_data(af_hf_model *m, int i) { return m && i >= 0 && i < ntrain(m) ? tdata(m, i) : NULL; }

int af_hf_params_new(af_graph *g, const af_hf_model *m, af_tensor **params, int max) {
    if (!g || !m || !params) { ir_fail(AF_ERR_INVALID, "af_hf_params_new: graph, model and params must not be NULL"); return -1; }
    int n = ntrain(m);
    if (n > max) { ir_fail(AF_ERR_INVALID, "af_hf_params_new: room for %d params, the model has %d", max, n); return -1; }
    for (int i = 0; i < n; i++)
        if (!(params[i] = af_parameter(g, tslot(m, i)->name, af_hf_param_shape(m, i), tdata(m, i)))) return -1;
    return n;
}

/* A frozen base weight as a constant of g: the one an earlier call put there when its
 * name, shape and values are the same (the trainer builds its training and evaluation
 * programs on one graph: one copy of a 0.5B model's weights, not two), else a new one;
 * borrowed (no copy at all: read where the model holds it) when the caller keeps the
 * model alive and unchanged for as long as the graph and its programs. */
static af_tensor *base_const(af_graph *g, const hf_slot *sl, const float *w, bool borrow) {
    af_shape s = sl->rank == 2 ? AF_SHAPE(sl->shape[0], sl->shape[1]) : AF_SHAPE(sl->shape[0]);
    for (int k = 0; k < g->n; k++) {
        const af_tensor *t = g->t[k];
        if (t->op == IR_OP_CONST && t->data && t->name && !strcmp(t->name, sl->name) && t->shape.rank == s.rank &&
            af_shape_count(t->shape) == af_shape_count(s) && t->shape.dim[0] == s.dim[0] &&
            (t->data == w || !memcmp(t->data, w, sizeof(float) * (size_t)af_shape_count(s))))
            return g->t[k];
    }
    return borrow ? ir_const_borrow(g, sl->name, s, w) : af_const(g, sl->name, s, w);
}

af_tensor *hf_model_forward(const af_hf_model *m, af_tensor *tokens, af_tensor *const *params, bool borrow) {
    if (!m || !tokens || !params) { ir_fail(AF_ERR_INVALID, "af_hf_forward: model, tokens and params must not be NULL"); return NULL; }
    af_graph *g = af_tensor_graph(tokens);
    for (int i = 0; i < ntrain(m); i++) {
        af_shape s = params[i] ? af_tensor_shape(params[i]) : (af_shape){ 0 }, want = af_hf_param_shape(m, i);
        if (!params[i] || af_tensor_graph(params[i]) != g || s.rank != want.rank || s.dim[0] != want.dim[0] ||
            (want.rank == 2 && s.dim[1] != want.dim[1])) {
            ir_graph_fail(g, "af_hf_forward: param %d (%s) is NULL, in another graph, or not of its shape (make them with "
                             "af_hf_params_new)", i, tslot(m, i)->name);
            return NULL;
        }
    }
    if (m->lora.rank <= 0) return hf_forward(&m->c, NULL, tokens, params, NULL);
    /* LoRA: the base weights are constants (frozen: no gradient, no optimizer state) */
    af_tensor **base = malloc(sizeof *base * (size_t)m->n);
    if (!base) { ir_graph_fail(g, "af_hf_forward: out of memory"); return NULL; }
    for (int i = 0; i < m->n; i++) base[i] = base_const(g, &m->slot[i], m->w[i], borrow);
    af_tensor *y = hf_forward(&m->c, &m->lora, tokens, base, params);
    free(base);
    return y;
}

af_tensor *af_hf_forward(const af_hf_model *m, af_tensor *tokens, af_tensor *const *params) {
    return hf_model_forward(m, tokens, params, false);
}

af_status af_hf_set_params(af_hf_model *m, af_tensor *const *params, int n) {
    if (!m || !params) return ir_fail(AF_ERR_INVALID, "af_hf_set_params: model and params must not be NULL");
    if (n != ntrain(m)) return ir_fail(AF_ERR_INVALID, "af_hf_set_params: %d params, the model has %d", n, ntrain(m));
    for (int i = 0; i < n; i++) {
        float *v = params[i] ? af_tensor_value(params[i]) : NULL;
        if (!v || af_shape_count(af_tensor_shape(params[i])) != slot_count(tslot(m, i)))
            return ir_fail(AF_ERR_INVALID, "af_hf_set_params: param %d (%s) is not a parameter of its shape", i, tslot(m, i)->name);
        memcpy(tdata(m, i), v, sizeof(float) * (size_t)slot_count(tslot(m, i)));
    }
    return AF_OK;
}

int af_hf_eos_ids(const af_hf_model *m, int32_t *ids, int max) {
    if (!m) return 0;
    int k = 0;
    for (int i = 0; i < m->c.n_eos; i++)
        if (m->c.eos[i] >= 0 && m->c.eos[i] < m->c.vocab) {
            if (ids && k < max) ids[k] = (int32_t)m->c.eos[i];
            k++;
        }
    return k < max || !ids ? k : max;
}

int af_hf_max_positions(const af_hf_model *m) { return m ? m->c.max_pos : 0; }
