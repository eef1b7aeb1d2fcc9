/* train llama's checkpoints (see llama_ckpt.h): af_trainer_export's records plus "llama.*"
 * (the config, one int64 record per field) and "cli.*" (data path, run position). */
#include "llama_ckpt.h"
#include "aneforge_hf.h"
#include "aneforge_llama.h"
#include "cli_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const FIELD[8] = { "llama.dim", "llama.hidden_dim", "llama.n_layers", "llama.n_heads",
                                      "llama.n_kv_heads", "llama.vocab_size", "llama.seq_len", "llama.shared_classifier" };

static void config_fields(const af_llama_config *c, int64_t v[8]) {
    v[0] = c->dim, v[1] = c->hidden_dim, v[2] = c->n_layers, v[3] = c->n_heads;
    v[4] = c->n_kv_heads, v[5] = c->vocab_size, v[6] = c->seq_len, v[7] = c->shared_classifier;
}

/* The config stored in c; AF_ERR_CORRUPT naming the record when one is missing or out of range. */
static af_status read_config(const af_checkpoint *c, const char *path, af_llama_config *out) {
    int64_t v[8];
    for (int i = 0; i < 8; i++) {
        if (af_checkpoint_get_i64(c, FIELD[i], &v[i]))
            return af_fail(AF_ERR_CORRUPT, "%s has no record %s: it is not a checkpoint of 'aneforge train llama'", path, FIELD[i]);
        if (v[i] < 0 || v[i] > 1 << 30) return af_fail(AF_ERR_CORRUPT, "%s: record %s is %lld", path, FIELD[i], (long long)v[i]);
    }
    *out = (af_llama_config){ .dim = (int)v[0], .hidden_dim = (int)v[1], .n_layers = (int)v[2], .n_heads = (int)v[3],
                              .n_kv_heads = (int)v[4], .vocab_size = (int)v[5], .seq_len = (int)v[6],
                              .shared_classifier = v[7] != 0 };
    af_status st = af_llama_config_check(out);
    return st ? af_fail(AF_ERR_CORRUPT, "%s: its config is not usable: %s", path, af_error_message()) : AF_OK;
}

int llama_ckpt_save(const char *path, af_trainer *t, const af_llama_config *cfg, const char *data, const llama_run_pos *p) {
    af_checkpoint *c = af_checkpoint_new();
    af_status st = c ? af_trainer_export(t, c) : AF_ERR_NOMEM;
    int64_t v[8];
    config_fields(cfg, v);
    for (int i = 0; i < 8 && !st; i++) st = af_checkpoint_put_i64(c, FIELD[i], v[i]);
    if (!st) st = af_checkpoint_put_str(c, "cli.data", data);
    if (!st) st = af_checkpoint_put_i64(c, "cli.steps", p->steps);
    if (!st) st = af_checkpoint_put_i64(c, "cli.calls", p->calls);
    if (!st) st = af_checkpoint_put(c, "cli.rng", &p->rng, sizeof p->rng);
    if (!st) st = af_checkpoint_put(c, "cli.recent", p->recent, sizeof p->recent);
    if (!st) st = af_checkpoint_save(c, path);
    af_checkpoint_free(c);
    if (st) fprintf(stderr, "aneforge train llama: could not save %s: %s\n", path, af_error_message());
    return st ? 1 : 0;
}

int llama_ckpt_resume(const char *path, af_trainer *t, const af_llama_config *cfg, const char *data, llama_run_pos *p) {
    af_checkpoint *c = NULL;
    af_llama_config saved;
    af_status st = af_checkpoint_load(path, &c);
    if (!st) st = read_config(c, path, &saved);
    int64_t want[8], have[8];
    config_fields(cfg, want);
    if (!st) config_fields(&saved, have);
    if (!st && memcmp(want, have, sizeof want))
        st = af_fail(AF_ERR_INVALID,
                     "%s holds a model of dim %d, %d layers, %d heads (%d KV), hidden %d, vocab %d, seq_len %d; "
                     "resume it with the --config (or --init) and --tokenizer it was trained with",
                     path, saved.dim, saved.n_layers, saved.n_heads, saved.n_kv_heads, saved.hidden_dim, saved.vocab_size,
                     saved.seq_len);
    const char *d = st ? NULL : af_checkpoint_get_str(c, "cli.data");
    if (!st && (!d || strcmp(d, data)))
        st = af_fail(AF_ERR_INVALID, "%s was trained on --data %s; resume it with the same data", path, d ? d : "?");
    int64_t bytes = 0, bytes2 = 0;
    const void *rng = st ? NULL : af_checkpoint_get(c, "cli.rng", &bytes), *recent = st ? NULL : af_checkpoint_get(c, "cli.recent", &bytes2);
    if (!st && (!rng || bytes != sizeof p->rng || !recent || bytes2 != sizeof p->recent))
        st = af_fail(AF_ERR_CORRUPT, "%s: records cli.rng and cli.recent are missing or mis-sized", path);
    llama_run_pos q = { 0 };
    if (!st) st = af_checkpoint_get_i64(c, "cli.steps", &q.steps);
    if (!st) st = af_checkpoint_get_i64(c, "cli.calls", &q.calls);
    /* Counters a run advances by one per step: beyond 2^62 none could have come from a run
     * (and step arithmetic would overflow). */
    if (!st && (q.steps < 0 || q.calls < 0 || q.steps > INT64_MAX / 2 || q.calls > INT64_MAX / 2))
        st = af_fail(AF_ERR_CORRUPT, "%s: records cli.steps %lld and cli.calls %lld must be in 0..2^62 (steps done); the "
                     "checkpoint is damaged or edited: resume from an earlier one or start again", path,
                     (long long)q.steps, (long long)q.calls);
    if (!st) {
        memcpy(&q.rng, rng, sizeof q.rng);
        memcpy(q.recent, recent, sizeof q.recent);
        for (int i = 0; i < LLAMA_RECENT && !st; i++) /* cross-entropy losses: >= 0 (NaN if a call diverged) */
            if (q.recent[i] < 0 || isinf(q.recent[i]))
                st = af_fail(AF_ERR_CORRUPT, "%s: record cli.recent holds loss %g at %d, not a cross-entropy (>= 0); the "
                             "checkpoint is damaged or edited: resume from an earlier one or start again", path,
                             q.recent[i], i);
    }
    if (!st) {
        st = af_trainer_import(t, c);
    }
    af_checkpoint_free(c);
    if (st) {
        fprintf(stderr, "aneforge train llama: cannot resume: %s\n", af_error_message());
        return 1;
    }
    *p = q;
    return 0;
}

/* AF_OK when the n floats at p (any alignment) are finite, else AF_ERR_CORRUPT naming
 * where, the record and the element (the trainer's own check of what it imports). */
static af_status check_finite(const char *where, const char *name, const void *p, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        float x;
        memcpy(&x, (const char *)p + j * (int64_t)sizeof x, sizeof x);
        if (isfinite(x)) continue;
        return af_fail(AF_ERR_CORRUPT,
                       "%s: record '%s' holds %g at element %lld, which is not finite: the checkpoint was saved from a "
                       "run that had already diverged, or edited; resume from an earlier checkpoint or start again",
                       where, name, (double)x, (long long)j);
    }
    return AF_OK;
}

/* The weights in a loaded checkpoint: records param.0 .. param.N-1 in af_llama's param
 * order. Every record is checked against the config before anything is allocated, so a
 * small file cannot make it allocate a large model. */
af_llama_weights *llama_weights_from_ckpt(const af_checkpoint *c, const char *path) {
    af_llama_config cfg;
    if (read_config(c, path, &cfg)) return NULL;
    int n = af_llama_param_count(&cfg);
    for (int i = 0; i < n; i++) {
        char name[32];
        af_shape s;
        int64_t bytes = 0;
        snprintf(name, sizeof name, "param.%d", i);
        af_llama_param_at(&cfg, i, NULL, &s, NULL);
        const void *p = af_checkpoint_get(c, name, &bytes);
        if (!p || bytes != af_shape_count(s) * (int64_t)sizeof(float)) {
            af_fail(AF_ERR_CORRUPT, "%s: record %s is missing or not the config's size", path, name);
            return NULL;
        }
        if (check_finite(path, name, p, af_shape_count(s))) return NULL;
    }
    af_llama_weights *w = af_llama_weights_new(&cfg);
    for (int i = 0; w && i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "param.%d", i);
        af_llama_weights_set_param(w, i, (const float *)af_checkpoint_get(c, name, NULL));
    }
    return w;
}

static af_llama_weights *from_ckpt(const char *path) {
    af_checkpoint *c = NULL;
    af_llama_weights *w = af_checkpoint_load(path, &c) ? NULL : llama_weights_from_ckpt(c, path);
    af_checkpoint_free(c);
    return w;
}

bool llama_is_hf_folder(const char *path) {
    struct stat st;
    char cfg[4096];
    if (!path || snprintf(cfg, sizeof cfg, "%s/config.json", path) >= (int)sizeof cfg) return false;
    return !stat(path, &st) && S_ISDIR(st.st_mode) && !stat(cfg, &st);
}

af_llama_weights *llama_model_load(const char *path) {
    if (!path) { af_fail(AF_ERR_INVALID, "no model path"); return NULL; }
    if (llama_is_hf_folder(path)) { /* a Hugging Face folder of a Llama-2-shaped model */
        af_hf_model *m = af_hf_load(path);
        af_llama_weights *w = m ? af_hf_to_llama(m) : NULL;
        af_hf_free(m);
        return w;
    }
    FILE *f = cli_fopen_regular(path, "model", 0, NULL);
    if (!f) return NULL;
    char magic[8] = { 0 };
    size_t n = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    if (n == sizeof magic && !memcmp(magic, "AFCKPT01", 8)) return from_ckpt(path);
    return af_llama_load(path, NULL);
}
