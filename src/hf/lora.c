/* LoRA adapters of a Hugging Face model in PEFT's layout (aneforge_hf.h): adding them,
 * folding them into the weights, and PEFT adapter folders both ways. */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf.h"

#include "hf/safetensors.h"
#include "ir/file.h"
#include "ir/ir.h"
#include "ir/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const HF_PROJ_NAME[HF_NPROJ] = { "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj" };
static const char *const SHORT[HF_NPROJ] = { "q", "k", "v", "o", "gate", "up", "down" };

static const char *module_of(int p) { return p <= HF_O ? "self_attn" : "mlp"; }

/* [out, in] of projection p */
static void proj_dims(const hf_config *c, int p, int64_t *out, int64_t *in) {
    int64_t D = c->hidden, qd = (int64_t)c->heads * c->head_dim, kvd = (int64_t)c->kv_heads * c->head_dim;
    static const int OUT[HF_NPROJ] = { 0, 1, 1, 2, 3, 3, 2 }; /* qd, kvd, D, inter */
    int64_t dims[4] = { qd, kvd, D, c->inter };
    *out = dims[OUT[p]];
    *in = p == HF_O ? qd : p == HF_DOWN ? c->inter : D;
}

int hf_lora_slots(const hf_config *c, const hf_lora_cfg *lora, hf_slot *s) {
    int n = 0;
    for (int l = 0; l < c->layers; l++)
        for (int p = 0; p < HF_NPROJ; p++) {
            if (!(lora->targets >> p & 1u)) continue;
            int64_t out, in;
            proj_dims(c, p, &out, &in);
            for (int ab = 0; ab < 2 && s; ab++) {
                hf_slot *t = &s[n + ab];
                snprintf(t->name, sizeof t->name, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", l, module_of(p),
                         HF_PROJ_NAME[p], ab ? 'B' : 'A');
                t->rank = 2;
                t->shape[0] = ab ? out : lora->rank;
                t->shape[1] = ab ? lora->rank : in;
            }
            n += 2;
        }
    return n;
}

void hf_lora_drop(af_hf_model *m) {
    for (int i = 0; m->a && i < m->na; i++) free(m->a[i]);
    free(m->a);
    free(m->aslot);
    m->a = NULL;
    m->aslot = NULL;
    m->na = 0;
    memset(&m->lora, 0, sizeof m->lora);
}

af_status hf_lora_alloc(af_hf_model *m, const hf_lora_cfg *lora) {
    hf_lora_drop(m);
    int n = hf_lora_slots(&m->c, lora, NULL);
    m->aslot = calloc((size_t)n, sizeof *m->aslot);
    m->a = calloc((size_t)n, sizeof *m->a);
    if (!m->aslot || !m->a) { hf_lora_drop(m); return ir_fail(AF_ERR_NOMEM, "LoRA: out of memory"); }
    hf_lora_slots(&m->c, lora, m->aslot);
    m->na = n;
    for (int i = 0; i < n; i++)
        if (!(m->a[i] = malloc(sizeof(float) * (size_t)(m->aslot[i].shape[0] * m->aslot[i].shape[1])))) {
            hf_lora_drop(m);
            return ir_fail(AF_ERR_NOMEM, "LoRA: out of memory");
        }
    m->lora = *lora;
    return AF_OK;
}

/* "q,k,v" or "q_proj,v_proj" or "all" (or "all-linear", PEFT's) into target bits. */
static af_status parse_targets(const char *spec, unsigned *bits) {
    *bits = 0;
    if (!strcmp(spec, "all") || !strcmp(spec, "all-linear")) { *bits = (1u << HF_NPROJ) - 1; return AF_OK; }
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        int hit = -1;
        for (int k = 0; k < HF_NPROJ; k++)
            if ((strlen(SHORT[k]) == len && !strncmp(p, SHORT[k], len)) ||
                (strlen(HF_PROJ_NAME[k]) == len && !strncmp(p, HF_PROJ_NAME[k], len)))
                hit = k;
        if (hit < 0)
            return ir_fail(AF_ERR_UNSUPPORTED, "LoRA target \"%.*s\" is not one aneforge adapts (q, k, v, o, gate, up, down "
                                               "or their _proj names, or all)", (int)(len > 40 ? 40 : len), p);
        *bits |= 1u << hit;
        p += len;
        if (*p == ',') p++;
    }
    return *bits ? AF_OK : ir_fail(AF_ERR_INVALID, "LoRA: no targets given (e.g. q,k,v,o)");
}

static af_status check_rank(int rank, double alpha) {
    if (rank < 1 || rank > 4096) return ir_fail(AF_ERR_INVALID, "LoRA rank %d must be in 1..4096", rank);
    if (!(alpha > 0) || !isfinite(alpha)) return ir_fail(AF_ERR_INVALID, "LoRA alpha %g must be positive", alpha);
    return AF_OK;
}

af_status af_hf_lora_add(af_hf_model *m, int rank, float alpha, const char *targets, uint64_t seed) {
    if (!m || !targets) return ir_fail(AF_ERR_INVALID, "af_hf_lora_add: model and targets must not be NULL");
    hf_lora_cfg lc = { rank, alpha, 0 };
    af_status st = check_rank(rank, alpha);
    if (st == AF_OK) st = parse_targets(targets, &lc.targets);
    if (st == AF_OK) st = hf_lora_alloc(m, &lc);
    if (st != AF_OK) return st;
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    for (int i = 0; i < m->na; i++) {
        const hf_slot *sl = &m->aslot[i];
        int64_t n = sl->shape[0] * sl->shape[1];
        bool is_b = i % 2 == 1;
        double bound = 1.0 / sqrt((double)sl->shape[1]); /* kaiming_uniform_(a=sqrt(5)), PEFT's A */
        for (int64_t k = 0; k < n; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            m->a[i][k] = is_b ? 0.0f : (float)(((double)(s >> 11) / 9007199254740992.0 * 2 - 1) * bound);
        }
    }
    return AF_OK;
}

static int base_slot(const af_hf_model *m, int layer, int p) {
    char name[80];
    snprintf(name, sizeof name, "model.layers.%d.%s.%s.weight", layer, module_of(p), HF_PROJ_NAME[p]);
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->slot[i].name, name)) return i;
    return -1;
}

af_status af_hf_lora_merge(af_hf_model *m) {
    if (!m) return ir_fail(AF_ERR_INVALID, "af_hf_lora_merge: model is NULL");
    if (m->lora.rank <= 0) return ir_fail(AF_ERR_INVALID, "af_hf_lora_merge: the model has no adapters");
    double scale = m->lora.alpha / m->lora.rank;
    int k = 0, r = m->lora.rank;
    for (int l = 0; l < m->c.layers; l++)
        for (int p = 0; p < HF_NPROJ; p++) {
            if (!(m->lora.targets >> p & 1u)) continue;
            const float *A = m->a[k], *B = m->a[k + 1];
            int64_t out = m->aslot[k + 1].shape[0], in = m->aslot[k].shape[1];
            float *W = m->w[base_slot(m, l, p)];
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++) {
                    double acc = 0;
                    for (int j = 0; j < r; j++) acc += (double)B[o * r + j] * A[(int64_t)j * in + i];
                    W[o * in + i] += (float)(scale * acc);
                }
            k += 2;
        }
    hf_lora_drop(m);
    return AF_OK;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

af_status af_hf_lora_save(const af_hf_model *m, const char *dir) {
    if (!m || !dir) return ir_fail(AF_ERR_INVALID, "af_hf_lora_save: model and dir must not be NULL");
    if (m->lora.rank <= 0) return ir_fail(AF_ERR_INVALID, "af_hf_lora_save: the model has no adapters");
    if (mkdir(dir, 0777) && errno != EEXIST) return ir_fail(AF_ERR_IO, "cannot create folder %s: %s", dir, strerror(errno));
    char cfg[1024], mods[200] = "";
    for (int p = 0; p < HF_NPROJ; p++)
        if (m->lora.targets >> p & 1u) {
            size_t at = strlen(mods);
            snprintf(mods + at, sizeof mods - at, "%s\"%s\"", at ? ", " : "", HF_PROJ_NAME[p]);
        }
    snprintf(cfg, sizeof cfg, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"r\": %d,\n  \"lora_alpha\": %.17g,\n"
             "  \"target_modules\": [%s],\n  \"lora_dropout\": 0.0,\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n"
             "  \"use_rslora\": false,\n  \"use_dora\": false,\n  \"inference_mode\": true,\n  \"base_model_name_or_path\": null\n}\n",
             m->lora.rank, m->lora.alpha, mods);
    st_out *t = calloc((size_t)m->na, sizeof *t);
    char *pc = join(dir, "adapter_config.json"), *pw = join(dir, "adapter_model.safetensors");
    af_status st;
    if (!t || !pc || !pw) st = ir_fail(AF_ERR_NOMEM, "af_hf_lora_save: out of memory");
    else {
        for (int i = 0; i < m->na; i++) {
            t[i].name = m->aslot[i].name;
            t[i].rank = 2;
            t[i].shape[0] = m->aslot[i].shape[0];
            t[i].shape[1] = m->aslot[i].shape[1];
            t[i].data = m->a[i];
        }
        st = st_write(pw, m->na, t);
        if (st == AF_OK) st = ir_write_file(pc, cfg, strlen(cfg), "af_hf_lora_save");
    }
    free(t);
    free(pc);
    free(pw);
    return st;
}

/* adapter_config.json: what changes the math is read or checked; any other field must
 * be off (null, false, {} or []) or bookkeeping, else it is refused by name, so a newer
 * PEFT feature is never applied silently wrong. */
af_status hf_lora_parse_config(const char *text, size_t len, const char *what, hf_lora_cfg *lc) {
    char err[256];
    json_doc *d = ir_json_parse(text, len, err, sizeof err);
    if (!d) return ir_fail(AF_ERR_CORRUPT, "%s: not valid JSON: %s", what, err);
    af_status st = AF_OK;
    static const char *const META[] = { "auto_mapping", "base_model_name_or_path", "peft_version", "revision", "task_type",
                                        "inference_mode", "megatron_core", "qalora_group_size", "init_lora_weights",
                                        "lora_dropout", "peft_type", "r", "lora_alpha", "target_modules", "bias" };
    if (d->n[0].type != JSON_OBJ) { st = ir_fail(AF_ERR_CORRUPT, "%s: not a JSON object", what); goto out; }
    for (int m = d->n[0].child; m >= 0; m = d->n[m].next) {
        const json_node *v = &d->n[m];
        bool off = v->type == JSON_NULL || (v->type == JSON_BOOL && !v->boolean) ||
                   ((v->type == JSON_OBJ || v->type == JSON_ARR) && v->count == 0);
        bool meta = false;
        for (size_t k = 0; k < sizeof META / sizeof *META; k++) meta |= !strcmp(ir_json_key(d, m), META[k]);
        if (!off && !meta) {
            st = ir_fail(AF_ERR_UNSUPPORTED, "%s: \"%.60s\" is set, which aneforge's LoRA does not implement (plain LoRA "
                                             "only: r, lora_alpha, target_modules)", what, ir_json_key(d, m));
            goto out;
        }
    }
    int t = ir_json_get(d, 0, "peft_type");
    if (t >= 0 && (!ir_json_is_text(d, t) || strcmp(ir_json_str(d, t), "LORA"))) {
        st = ir_fail(AF_ERR_UNSUPPORTED, "%s: \"peft_type\" must be \"LORA\"", what);
        goto out;
    }
    t = ir_json_get(d, 0, "bias");
    if (t >= 0 && (!ir_json_is_text(d, t) || strcmp(ir_json_str(d, t), "none"))) {
        st = ir_fail(AF_ERR_UNSUPPORTED, "%s: \"bias\" must be \"none\" (adapters without biases)", what);
        goto out;
    }
    int64_t r;
    if (!ir_json_int(d, ir_json_get(d, 0, "r"), 1, 4096, &r)) { st = ir_fail(AF_ERR_INVALID, "%s: \"r\" must be a whole number in 1..4096", what); goto out; }
    lc->rank = (int)r;
    lc->alpha = 8; /* PEFT's default */
    t = ir_json_get(d, 0, "lora_alpha");
    if (t >= 0) {
        if (d->n[t].type != JSON_NUM || !(d->n[t].num > 0)) { st = ir_fail(AF_ERR_INVALID, "%s: \"lora_alpha\" must be a positive number", what); goto out; }
        lc->alpha = d->n[t].num;
    }
    t = ir_json_get(d, 0, "target_modules");
    char spec[256] = "";
    if (t >= 0 && ir_json_is_text(d, t)) snprintf(spec, sizeof spec, "%s", ir_json_str(d, t));
    else if (t >= 0 && d->n[t].type == JSON_ARR && d->n[t].count > 0) {
        for (int m = d->n[t].child; m >= 0; m = d->n[m].next) {
            if (!ir_json_is_text(d, m)) { st = ir_fail(AF_ERR_INVALID, "%s: \"target_modules\" must hold names", what); goto out; }
            size_t at = strlen(spec);
            snprintf(spec + at, sizeof spec - at, "%s%.40s", at ? "," : "", ir_json_str(d, m));
        }
    } else {
        st = ir_fail(AF_ERR_INVALID, "%s: \"target_modules\" must be a list of module names", what);
        goto out;
    }
    st = parse_targets(spec, &lc->targets);
out:
    ir_json_free(d);
    return st;
}

af_status af_hf_lora_load(af_hf_model *m, const char *dir) {
    if (!m || !dir) return ir_fail(AF_ERR_INVALID, "af_hf_lora_load: model and dir must not be NULL");
    char *pc = join(dir, "adapter_config.json"), *pw = join(dir, "adapter_model.safetensors");
    af_status st = AF_OK;
    char *text = NULL;
    st_file *f = NULL;
    hf_lora_cfg lc = { 0 };
    if (!pc || !pw) { st = ir_fail(AF_ERR_NOMEM, "out of memory"); goto out; }
    uint64_t size;
    FILE *fp = ir_fopen_regular(pc, "adapter_config.json", 1 << 20, &size);
    if (!fp) { st = AF_ERR_IO; goto out; }
    text = malloc((size_t)size + 1);
    size_t got = text ? fread(text, 1, (size_t)size, fp) : 0;
    fclose(fp);
    if (!text || got != size) { st = ir_fail(AF_ERR_IO, "%s: cannot read it whole", pc); goto out; }
    if ((st = hf_lora_parse_config(text, (size_t)size, pc, &lc)) != AF_OK) goto out;
    if ((st = st_open(pw, &f)) != AF_OK) goto out;
    if ((st = hf_lora_alloc(m, &lc)) != AF_OK) goto out;
    for (int i = 0; i < m->na; i++) {
        const hf_slot *s = &m->aslot[i];
        const st_tensor *t = st_find(f, s->name);
        if (!t) { st = ir_fail(AF_ERR_CORRUPT, "%s: tensor %s is missing (target_modules and r imply it)", pw, s->name); goto out; }
        if (t->rank != 2 || t->shape[0] != s->shape[0] || t->shape[1] != s->shape[1]) {
            st = ir_fail(AF_ERR_CORRUPT, "%s: tensor %s is not [%lld, %lld] as r and the model imply", pw, s->name,
                         (long long)s->shape[0], (long long)s->shape[1]);
            goto out;
        }
        st_read_f32(f, t, m->a[i]);
    }
    for (int k = 0; k < f->n; k++) {
        bool used = false;
        for (int i = 0; i < m->na && !used; i++) used = !strcmp(m->aslot[i].name, f->t[k].name);
        if (!used) {
            st = ir_fail(AF_ERR_UNSUPPORTED, "%s: tensor \"%.80s\" is not an adapter this model and config have", pw, f->t[k].name);
            goto out;
        }
    }
out:
    if (st != AF_OK) hf_lora_drop(m);
    st_close(f);
    free(text);
    free(pc);
    free(pw);
    return st;
}
