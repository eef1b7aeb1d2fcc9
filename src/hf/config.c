/* config.json of LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM. Every field is
 * one of: read (it shapes the model), checked (accepted only at the value that leaves
 * the math unchanged, e.g. attention_dropout 0), or bookkeeping that changes nothing we
 * compute (transformers_version, initializer_range). Anything else is refused by name, so
 * a checkpoint whose config asks for math we do not do is never loaded silently wrong. */
#include "hf/hf.h"

#include "ir/json.h"
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ARCH[] = { "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM" };
static const char *const MODEL_TYPE[] = { "llama", "qwen2", "qwen3" };

const char *hf_arch_name(hf_arch a) { return ARCH[a]; }

/* Fields that change nothing aneforge computes (training settings, generation
 * defaults, bookkeeping): accepted whatever their value. */
static const char *const IGNORED[] = {
    "transformers_version", "torch_dtype", "dtype", "initializer_range", "use_cache", "pad_token_id", "_name_or_path",
    "output_hidden_states", "output_attentions", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
    "id2label", "label2id", "problem_type", "tokenizer_class", "is_llama_config", "sliding_window", "max_window_layers",
    "tf_legacy_loss", "use_bfloat16", "torchscript", "pruned_heads", "bad_words_ids", "forced_bos_token_id",
    "forced_eos_token_id", "decoder_start_token_id", "sep_token_id", "task_specific_params", "finetuning_task",
};

typedef struct {
    const json_doc *d;
    const char *what;
} ctx;

static af_status bad(const ctx *x, const char *field, const char *rule) {
    return ir_fail(AF_ERR_INVALID, "%s: \"%s\" %s", x->what, field, rule);
}

static af_status get_int(const ctx *x, int obj, const char *field, int lo, int hi, bool required, int *out) {
    int i = ir_json_get(x->d, obj, field);
    if (i < 0 || x->d->n[i].type == JSON_NULL) {
        if (required) return ir_fail(AF_ERR_INVALID, "%s: \"%s\" is missing (a whole number is required)", x->what, field);
        return AF_OK;
    }
    int64_t v;
    if (!ir_json_int(x->d, i, lo, hi, &v)) {
        char rule[96];
        snprintf(rule, sizeof rule, "must be a whole number in %d..%d", lo, hi);
        return bad(x, field, rule);
    }
    *out = (int)v;
    return AF_OK;
}

static af_status get_num(const ctx *x, int obj, const char *field, double lo, double hi, double *out) {
    int i = ir_json_get(x->d, obj, field);
    if (i < 0 || x->d->n[i].type == JSON_NULL) return AF_OK;
    if (x->d->n[i].type != JSON_NUM || !(x->d->n[i].num > lo && x->d->n[i].num <= hi)) {
        char rule[96];
        snprintf(rule, sizeof rule, "must be a number in (%g, %g]", lo, hi);
        return bad(x, field, rule);
    }
    *out = x->d->n[i].num;
    return AF_OK;
}

static af_status get_bool(const ctx *x, int obj, const char *field, bool *out) {
    int i = ir_json_get(x->d, obj, field);
    if (i < 0 || x->d->n[i].type == JSON_NULL) return AF_OK;
    if (x->d->n[i].type != JSON_BOOL) return bad(x, field, "must be true or false");
    *out = x->d->n[i].boolean;
    return AF_OK;
}

/* bos/eos: an id, a list of ids, or null. */
static af_status get_ids(const ctx *x, const char *field, int64_t *ids, int *n) {
    int i = ir_json_get(x->d, 0, field);
    *n = 0;
    if (i < 0 || x->d->n[i].type == JSON_NULL) return AF_OK;
    int64_t v;
    if (ir_json_int(x->d, i, 0, INT32_MAX, &v)) { ids[(*n)++] = v; return AF_OK; }
    if (x->d->n[i].type != JSON_ARR || x->d->n[i].count > 8) return bad(x, field, "must be a token id or a list of at most 8");
    for (int m = x->d->n[i].child; m >= 0; m = x->d->n[m].next) {
        if (!ir_json_int(x->d, m, 0, INT32_MAX, &v)) return bad(x, field, "must hold token ids (whole numbers >= 0)");
        ids[(*n)++] = v;
    }
    return AF_OK;
}

/* rope_scaling (transformers 4) or rope_parameters (5): type default or llama3. */
static af_status parse_rope(const ctx *x, int r, const char *field, hf_config *c) {
    const json_doc *d = x->d;
    if (r < 0 || d->n[r].type == JSON_NULL) return AF_OK;
    if (d->n[r].type != JSON_OBJ) return bad(x, field, "must be an object or null");
    static const char *const KNOWN[] = { "rope_type", "type", "rope_theta", "factor", "low_freq_factor",
                                         "high_freq_factor", "original_max_position_embeddings" };
    for (int m = d->n[r].child; m >= 0; m = d->n[m].next) {
        bool known = false;
        for (size_t k = 0; k < sizeof KNOWN / sizeof *KNOWN; k++) known |= !strcmp(ir_json_key(d, m), KNOWN[k]);
        if (!known)
            return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"%s.%s\" is not supported by aneforge (it reads rope_type default "
                                               "or llama3 with factor, low_freq_factor, high_freq_factor, "
                                               "original_max_position_embeddings)", x->what, field, ir_json_key(d, m));
    }
    int t = ir_json_get(d, r, "rope_type");
    if (t < 0) t = ir_json_get(d, r, "type");
    const char *type = t >= 0 && ir_json_is_text(d, t) ? ir_json_str(d, t) : t < 0 ? "default" : NULL;
    if (!type) return bad(x, field, "has a rope_type that is not a string");
    af_status st = get_num(x, r, "rope_theta", 0, 1e12, &c->theta);
    if (st != AF_OK) return st;
    if (!strcmp(type, "default")) return AF_OK;
    if (strcmp(type, "llama3"))
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"%s\" rope_type \"%.40s\" is not supported (aneforge implements "
                                           "\"default\" and \"llama3\")", x->what, field, type);
    c->rope_llama3 = true;
    c->rope_factor = c->low_freq_factor = c->high_freq_factor = 0;
    c->rope_orig_max_pos = 0;
    if ((st = get_num(x, r, "factor", 0, 1e6, &c->rope_factor)) != AF_OK ||
        (st = get_num(x, r, "low_freq_factor", 0, 1e6, &c->low_freq_factor)) != AF_OK ||
        (st = get_num(x, r, "high_freq_factor", 0, 1e6, &c->high_freq_factor)) != AF_OK ||
        (st = get_int(x, r, "original_max_position_embeddings", 1, 1 << 24, true, &c->rope_orig_max_pos)) != AF_OK)
        return st;
    if (!c->rope_factor || !c->low_freq_factor || !(c->high_freq_factor > c->low_freq_factor))
        return bad(x, field, "llama3 needs factor, low_freq_factor and high_freq_factor > low_freq_factor");
    return AF_OK;
}

static af_status check_fields(const ctx *x, hf_config *c) {
    const json_doc *d = x->d;
    static const char *const READ[] = {
        "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling",
        "rope_parameters", "tie_word_embeddings", "max_position_embeddings", "attention_bias", "bos_token_id",
        "eos_token_id", "hidden_act", "mlp_bias", "attention_dropout", "pretraining_tp", "use_sliding_window",
        "layer_types", "rope_interleaved",
    };
    for (int m = d->n[0].child; m >= 0; m = d->n[m].next) {
        const char *k = ir_json_key(d, m);
        bool known = false;
        for (size_t i = 0; !known && i < sizeof READ / sizeof *READ; i++) known = !strcmp(k, READ[i]);
        for (size_t i = 0; !known && i < sizeof IGNORED / sizeof *IGNORED; i++) known = !strcmp(k, IGNORED[i]);
        if (!known)
            return ir_fail(AF_ERR_UNSUPPORTED, "%s: field \"%.60s\" is not supported by aneforge for %s (it would change "
                                               "the model in a way aneforge does not implement; docs/hf.md lists the "
                                               "fields read)", x->what, k, ARCH[c->arch]);
    }
    int i = ir_json_get(d, 0, "hidden_act");
    if (i >= 0 && (!ir_json_is_text(d, i) || strcmp(ir_json_str(d, i), "silu")))
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"hidden_act\" must be \"silu\" (aneforge's FFN is SwiGLU)", x->what);
    bool flag = false;
    af_status st;
    if ((st = get_bool(x, 0, "mlp_bias", &flag)) != AF_OK) return st;
    if (flag) return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"mlp_bias\": true is not supported (the FFN has no biases)", x->what);
    flag = false;
    if ((st = get_bool(x, 0, "use_sliding_window", &flag)) != AF_OK) return st;
    if (flag) return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"use_sliding_window\": true is not supported (full causal attention only)", x->what);
    flag = false;
    if ((st = get_bool(x, 0, "rope_interleaved", &flag)) != AF_OK) return st;
    if (flag) return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"rope_interleaved\": true is not supported (Hugging Face's half-split RoPE only)", x->what);
    double drop = 0;
    if ((i = ir_json_get(d, 0, "attention_dropout")) >= 0 && (d->n[i].type != JSON_NUM || d->n[i].num != 0))
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"attention_dropout\" must be 0 (aneforge has no dropout)", x->what);
    (void)drop;
    int tp = 1;
    if ((st = get_int(x, 0, "pretraining_tp", 1, 1, false, &tp)) != AF_OK)
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"pretraining_tp\" must be 1 (sliced projections are not supported)", x->what);
    if ((i = ir_json_get(d, 0, "layer_types")) >= 0) {
        if (d->n[i].type != JSON_ARR) return bad(x, "layer_types", "must be a list");
        for (int m = d->n[i].child; m >= 0; m = d->n[m].next)
            if (!ir_json_is_text(d, m) || strcmp(ir_json_str(d, m), "full_attention"))
                return ir_fail(AF_ERR_UNSUPPORTED, "%s: \"layer_types\" may hold only \"full_attention\" (sliding-window "
                                                   "layers are not supported)", x->what);
    }
    return AF_OK;
}

af_status hf_config_parse(const char *text, size_t len, const char *what, hf_config *c) {
    char err[256];
    json_doc *d = ir_json_parse(text, len, err, sizeof err);
    if (!d) return ir_fail(AF_ERR_CORRUPT, "%s: not valid JSON: %s", what, err);
    ctx x = { d, what };
    memset(c, 0, sizeof *c);
    af_status st = AF_OK;
    if (d->n[0].type != JSON_OBJ) { st = ir_fail(AF_ERR_CORRUPT, "%s: not a JSON object", what); goto out; }
    int a = ir_json_get(d, 0, "architectures");
    const char *arch = a >= 0 && d->n[a].type == JSON_ARR && d->n[a].count == 1 && ir_json_is_text(d, d->n[a].child)
                           ? ir_json_str(d, d->n[a].child) : NULL;
    int which = -1;
    for (int i = 0; arch && i < 3; i++)
        if (!strcmp(arch, ARCH[i])) which = i;
    if (which < 0) {
        st = ir_fail(AF_ERR_UNSUPPORTED, "%s: \"architectures\" must be [\"LlamaForCausalLM\"], [\"Qwen2ForCausalLM\"] or "
                                         "[\"Qwen3ForCausalLM\"]%s%.60s%s", what, arch ? " (it is \"" : "",
                     arch ? arch : "", arch ? "\")" : "");
        goto out;
    }
    c->arch = (hf_arch)which;
    int mt = ir_json_get(d, 0, "model_type");
    if (mt >= 0 && (!ir_json_is_text(d, mt) || strcmp(ir_json_str(d, mt), MODEL_TYPE[which]))) {
        st = ir_fail(AF_ERR_INVALID, "%s: \"model_type\" must be \"%s\" for %s", what, MODEL_TYPE[which], ARCH[which]);
        goto out;
    }
    if ((st = check_fields(&x, c)) != AF_OK) goto out;
    c->theta = 10000;
    c->eps = 1e-6;
    c->max_pos = 2048;
    c->tie = c->arch != HF_LLAMA; /* each class's default when the field is absent */
    c->head_dim = 0;
    if ((st = get_int(&x, 0, "vocab_size", 1, 1 << 24, true, &c->vocab)) != AF_OK ||
        (st = get_int(&x, 0, "hidden_size", 1, 1 << 16, true, &c->hidden)) != AF_OK ||
        (st = get_int(&x, 0, "intermediate_size", 1, 1 << 20, true, &c->inter)) != AF_OK ||
        (st = get_int(&x, 0, "num_hidden_layers", 1, 1024, true, &c->layers)) != AF_OK ||
        (st = get_int(&x, 0, "num_attention_heads", 1, 1024, true, &c->heads)) != AF_OK ||
        (st = get_int(&x, 0, "max_position_embeddings", 1, 1 << 24, false, &c->max_pos)) != AF_OK ||
        (st = get_int(&x, 0, "head_dim", 2, 4096, false, &c->head_dim)) != AF_OK ||
        (st = get_num(&x, 0, "rms_norm_eps", 0, 1, &c->eps)) != AF_OK ||
        (st = get_num(&x, 0, "rope_theta", 0, 1e12, &c->theta)) != AF_OK ||
        (st = get_bool(&x, 0, "tie_word_embeddings", &c->tie)) != AF_OK)
        goto out;
    c->kv_heads = c->heads;
    if ((st = get_int(&x, 0, "num_key_value_heads", 1, 1024, false, &c->kv_heads)) != AF_OK) goto out;
    if (!c->head_dim) {
        if (c->hidden % c->heads) { st = bad(&x, "hidden_size", "must be divisible by num_attention_heads"); goto out; }
        c->head_dim = c->hidden / c->heads;
    }
    if (c->head_dim % 2) { st = bad(&x, "head_dim", "must be even (RoPE turns pairs)"); goto out; }
    if (c->heads % c->kv_heads) { st = bad(&x, "num_attention_heads", "must be divisible by num_key_value_heads"); goto out; }
    bool ab = false;
    if ((st = get_bool(&x, 0, "attention_bias", &ab)) != AF_OK) goto out;
    c->qkv_bias = c->arch == HF_QWEN2 || ab;
    c->o_bias = c->arch != HF_QWEN2 && ab;
    c->qk_norm = c->arch == HF_QWEN3;
    if ((st = parse_rope(&x, ir_json_get(d, 0, "rope_scaling"), "rope_scaling", c)) != AF_OK ||
        (st = parse_rope(&x, ir_json_get(d, 0, "rope_parameters"), "rope_parameters", c)) != AF_OK)
        goto out;
    if ((st = get_ids(&x, "bos_token_id", c->bos, &c->n_bos)) != AF_OK ||
        (st = get_ids(&x, "eos_token_id", c->eos, &c->n_eos)) != AF_OK)
        goto out;
    /* the whole model must be addressable: the largest tensor is counted in int64 */
    if ((int64_t)c->vocab * c->hidden > ((int64_t)1 << 40) || (int64_t)c->heads * c->head_dim > (1 << 20))
        st = bad(&x, "vocab_size", "times hidden_size is too large");
out:
    ir_json_free(d);
    return st;
}

static void put_ids(char *buf, size_t cap, const int64_t *ids, int n) {
    size_t at = 0;
    if (n == 0) { snprintf(buf, cap, "null"); return; }
    if (n == 1) { snprintf(buf, cap, "%lld", (long long)ids[0]); return; }
    at += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && at < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)ids[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

char *hf_config_json(const hf_config *c) {
    char rope[400], bos[200], eos[200];
    if (c->rope_llama3)
        snprintf(rope, sizeof rope, "{\"rope_type\": \"llama3\", \"factor\": %.17g, \"low_freq_factor\": %.17g, "
                 "\"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %d}", c->rope_factor,
                 c->low_freq_factor, c->high_freq_factor, c->rope_orig_max_pos);
    else
        snprintf(rope, sizeof rope, "null");
    put_ids(bos, sizeof bos, c->bos, c->n_bos);
    put_ids(eos, sizeof eos, c->eos, c->n_eos);
    size_t cap = 4096;
    char *s = malloc(cap);
    if (!s) return NULL;
    int n = snprintf(s, cap,
             "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n"
             "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
             "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n"
             "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %.17g,\n  \"rope_theta\": %.17g,\n"
             "  \"rope_scaling\": %s,\n  \"tie_word_embeddings\": %s,\n%s  \"bos_token_id\": %s,\n  \"eos_token_id\": %s,\n"
             "  \"torch_dtype\": \"float32\"\n}\n",
             ARCH[c->arch], MODEL_TYPE[c->arch], c->vocab, c->hidden, c->inter, c->layers, c->heads, c->kv_heads,
             c->head_dim, c->max_pos, c->eps, c->theta, rope, c->tie ? "true" : "false",
             c->arch == HF_QWEN2 ? "" : c->o_bias ? "  \"attention_bias\": true,\n" : "  \"attention_bias\": false,\n",
             bos, eos);
    if (n < 0 || (size_t)n >= cap) { free(s); return NULL; }
    return s;
}
