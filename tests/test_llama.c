/* llama2.c models (src/llama): configs and presets, both export.py file formats, the
 * KV-cache forward against PyTorch, run.c's sampler, and untrusted files.
 *
 * tests/fixtures/llama/make_fixtures.py (see README.md there) wrote two small random
 * models (a: shared classifier, 4 heads over 2 KV heads; b: separate classifier, 3
 * layers) as version-0 and version-1 files with its own writer, their float64 PyTorch
 * logits at every position of a token sequence, the float32 logits of a step-by-step
 * Python copy of run.c's forward, a greedy continuation, and tokens drawn by a Python
 * copy of run.c's sampler from fixed logits. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "llama/llama.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama"

static char tmpdir[256];

static uint8_t *read_all(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static float *npy(const char *name, int64_t *count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", FIXDIR, name);
    float *d = NULL;
    int rank = 0;
    int64_t dims[8];
    af_status st = af_npy_read(path, &d, &rank, dims);
    CHECK(st == AF_OK, "read %s: %s (regenerate: python3 tests/fixtures/llama/make_fixtures.py)", path,
          af_error_message());
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (count) *count = st == AF_OK ? n : 0;
    return d;
}

static af_llama_weights *load_fixture(const char *model, int version) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model_%s_v%d.bin", FIXDIR, model, version);
    int got = -1;
    af_llama_weights *w = af_llama_load(path, &got);
    CHECK(w != NULL, "load %s: %s", path, af_error_message());
    CHECK(got == version, "%s read as version %d", path, got);
    return w;
}

/* ---------------------------------------------------------------- configs */

static void test_config(void) {
    af_llama_config c;
    CHECK(af_llama_preset("stories15m", 32000, &c) == AF_OK, "%s", af_error_message());
    CHECK(c.dim == 288 && c.n_layers == 6 && c.n_heads == 6 && c.n_kv_heads == 6 && c.hidden_dim == 768 &&
          c.seq_len == 256 && c.vocab_size == 32000 && c.shared_classifier == 1, "stories15m preset");
    /* llama2.c's stories15M.bin is 60,816,028 bytes: 28 + 4 * (weights + freq_cis). */
    CHECK(28 + 4 * (af_llama_weight_count(&c) + 256 * 48) == 60816028, "stories15m size %lld",
          (long long)af_llama_weight_count(&c));
    CHECK(af_llama_preset("stories42m", 32000, &c) == AF_OK && c.dim == 512 && c.n_layers == 8 && c.n_heads == 8 &&
          c.hidden_dim == 1376 && c.seq_len == 1024, "stories42m preset");
    CHECK(af_llama_preset("stories110m", 32000, &c) == AF_OK && c.dim == 768 && c.n_layers == 12 &&
          c.n_heads == 12 && c.hidden_dim == 2048 && c.seq_len == 1024, "stories110m preset");
    CHECK(af_llama_preset("tiny", 512, &c) == AF_OK && c.dim == 64 && c.n_layers == 2 && c.n_heads == 4 &&
          c.n_kv_heads == 2 && c.hidden_dim == 172 && c.seq_len == 128, "tiny preset");
    CHECK(af_llama_preset("huge", 512, &c) == AF_ERR_INVALID && strstr(af_error_message(), "stories15m"),
          "unknown preset lists the names: %s", af_error_message());
    CHECK(af_llama_preset("tiny", 0, &c) == AF_ERR_INVALID, "vocab 0");

    /* The count by hand for an unshared GQA config, and the tensors tile it in order. */
    af_llama_config u = { 24, 56, 2, 4, 2, 37, 16, 0 };
    const int64_t kv = 12, per_layer = 24 + 24 * 24 + 2 * kv * 24 + 24 * 24 + 24 + 3 * 56 * 24;
    CHECK(af_llama_weight_count(&u) == 2 * 37 * 24 + 2 * per_layer + 24, "count %lld",
          (long long)af_llama_weight_count(&u));
    int64_t next = 0;
    for (int t = AF_LLAMA_TOKEN_EMBEDDING; t <= AF_LLAMA_CLASSIFIER; t++) {
        int layered = t != AF_LLAMA_TOKEN_EMBEDDING && t != AF_LLAMA_RMS_FINAL && t != AF_LLAMA_CLASSIFIER;
        for (int l = 0; l < (layered ? u.n_layers : 1); l++) {
            int64_t off;
            int r, k;
            CHECK(af_llama_tensor_at(&u, (af_llama_tensor)t, l, &off, &r, &k) == AF_OK, "%s", af_error_message());
            CHECK(off == next, "%s layer %d at %lld, expected %lld", af_llama_tensor_name((af_llama_tensor)t), l,
                  (long long)off, (long long)next);
            next = off + (int64_t)r * k;
        }
    }
    CHECK(next == af_llama_weight_count(&u), "tensors end at %lld", (long long)next);
    int r, k;
    CHECK(af_llama_tensor_at(&u, AF_LLAMA_WK, 0, NULL, &r, &k) == AF_OK && r == 12 && k == 24, "wk [%d, %d]", r, k);
    CHECK(af_llama_tensor_at(&u, AF_LLAMA_W2, 1, NULL, &r, &k) == AF_OK && r == 24 && k == 56, "w2 [%d, %d]", r, k);
    CHECK(af_llama_tensor_at(&u, AF_LLAMA_WQ, 2, NULL, NULL, NULL) == AF_ERR_INVALID, "layer out of range");
    u.shared_classifier = 1;
    int64_t off = -1;
    CHECK(af_llama_tensor_at(&u, AF_LLAMA_CLASSIFIER, 0, &off, NULL, NULL) == AF_OK && off == 0,
          "a shared classifier is the embedding");

    const struct { af_llama_config c; const char *word; } bad[] = {
        { { 24, 56, 2, 5, 5, 37, 16, 1 }, "multiple of n_heads" },
        { { 24, 56, 2, 8, 2, 37, 16, 1 }, "odd" },
        { { 24, 56, 2, 4, 3, 37, 16, 1 }, "n_kv_heads" },
        { { 24, 0, 2, 4, 2, 37, 16, 1 }, "hidden_dim" },
        { { 24, 56, 2, 4, 2, -3, 16, 1 }, "vocab_size" },
        { { 24, 56, 2, 4, 2, 37, INT_MAX, 1 }, "seq_len" },
        { { 24, 56, 2, 4, 2, 37, 16, 2 }, "shared_classifier" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(af_llama_config_check(&bad[i].c) == AF_ERR_INVALID && strstr(af_error_message(), bad[i].word),
              "bad config %zu: '%s' should mention %s", i, af_error_message(), bad[i].word);
        CHECK(af_llama_weight_count(&bad[i].c) == -1, "bad config %zu counted", i);
        CHECK(af_llama_weights_new(&bad[i].c) == NULL, "bad config %zu made weights", i);
    }
}

/* ---------------------------------------------------------------- forward against PyTorch */

/* Feeds the fixture's tokens one at a time; every position's logits must match. */
static void check_logits(const char *model, af_llama_weights *w, int threads, float *logits_out) {
    char name[64];
    int64_t nt, nl;
    snprintf(name, sizeof name, "model_%s_tokens", model);
    float *tok = npy(name, &nt);
    snprintf(name, sizeof name, "model_%s_logits", model);
    float *ref = npy(name, &nl);
    const af_llama_config *c = af_llama_weights_config(w);
    af_llama_gen *g = af_llama_gen_new(w, threads);
    CHECK(g != NULL && tok && ref && nl == nt * c->vocab_size, "%s: generator %s", model, af_error_message());
    if (g && tok && ref) {
        CHECK(af_llama_gen_logits(g) == NULL, "logits before any feed");
        double worst = 0, scale = 0;
        for (int64_t t = 0; t < nt; t++) {
            CHECK(af_llama_gen_feed(g, (int)tok[t]) == AF_OK, "feed: %s", af_error_message());
            const float *l = af_llama_gen_logits(g);
            for (int v = 0; v < c->vocab_size; v++) {
                double r = ref[t * c->vocab_size + v];
                worst = fmax(worst, fabs(l[v] - r));
                scale = fmax(scale, fabs(r));
                if (logits_out) logits_out[t * c->vocab_size + v] = l[v];
            }
        }
        CHECK(af_llama_gen_pos(g) == nt, "position %d", af_llama_gen_pos(g));
        CHECK(worst <= 1e-5 * fmax(1, scale), "model %s (%d threads): logits differ from PyTorch by %g (scale %g)",
              model, threads, worst, scale);
        /* After a reset the same sequence gives the same logits, bit for bit. */
        af_llama_gen_reset(g);
        CHECK(af_llama_gen_pos(g) == 0, "reset");
        for (int64_t t = 0; t < nt && logits_out; t++) {
            af_llama_gen_feed(g, (int)tok[t]);
            CHECK(!memcmp(af_llama_gen_logits(g), logits_out + t * c->vocab_size, (size_t)c->vocab_size * 4),
                  "model %s position %lld differs after reset", model, (long long)t);
        }
    }
    af_llama_gen_free(g);
    free(tok);
    free(ref);
}

static void test_forward(void) {
    const char *models[] = { "a", "b" };
    for (int m = 0; m < 2; m++) {
        af_llama_weights *w0 = load_fixture(models[m], 0), *w1 = load_fixture(models[m], 1);
        if (!w0 || !w1) {
            af_llama_weights_free(w0);
            af_llama_weights_free(w1);
            continue;
        }
        const af_llama_config *c0 = af_llama_weights_config(w0), *c1 = af_llama_weights_config(w1);
        CHECK(!memcmp(c0, c1, sizeof *c0), "model %s: v0 and v1 configs differ", models[m]);
        CHECK(c0->shared_classifier == (m == 0), "model %s shared classifier %d", models[m], c0->shared_classifier);
        CHECK(!memcmp(af_llama_weights_data(w0), af_llama_weights_data(w1),
                      (size_t)af_llama_weight_count(c0) * sizeof(float)),
              "model %s: v0 and v1 weights differ", models[m]);
        int64_t n = (int64_t)c0->seq_len * c0->vocab_size;
        float *one = calloc((size_t)n, 4), *two = calloc((size_t)n, 4);
        check_logits(models[m], w0, 1, one);
        check_logits(models[m], w1, 1, NULL);
        check_logits(models[m], w0, 2, two); /* rows split over threads: same bits */
        CHECK(!memcmp(one, two, (size_t)n * 4), "model %s: 1 and 2 threads differ", models[m]);
        /* run.c's own arithmetic, replayed in float32 by the fixture script: the same bits
         * where float expressions are not fused into FMAs (baseline x86-64), else round-off. */
        char name[64];
        int64_t nr;
        snprintf(name, sizeof name, "model_%s_runc_logits", models[m]);
        float *runc = npy(name, &nr);
        if (runc && nr == n) {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__FMA__)
            int64_t first = -1;
            for (int64_t i = 0; i < n && first < 0; i++)
                if (memcmp(&one[i], &runc[i], 4)) first = i;
            CHECK(first < 0, "model %s: logit %lld is %.9g, run.c's arithmetic gives %.9g", models[m],
                  (long long)first, first < 0 ? 0 : one[first], first < 0 ? 0 : runc[first]);
#else
            double worst = 0;
            for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(one[i] - runc[i]));
            CHECK(worst <= 1e-5, "model %s: %g from run.c's arithmetic", models[m], worst);
#endif
        }
        free(runc);
        free(one);
        free(two);
        af_llama_weights_free(w0);
        af_llama_weights_free(w1);
    }
}

/* Greedy decoding (temperature 0) from the fixture's 3-token prompt follows PyTorch's argmax. */
static void test_greedy(void) {
    const char *models[] = { "a", "b" };
    for (int m = 0; m < 2; m++) {
        char name[64];
        int64_t n;
        snprintf(name, sizeof name, "model_%s_greedy", models[m]);
        float *want = npy(name, &n);
        af_llama_weights *w = load_fixture(models[m], 0);
        af_llama_gen *g = w ? af_llama_gen_new(w, 1) : NULL;
        af_llama_sampler *s = w ? af_llama_sampler_new(af_llama_weights_config(w)->vocab_size, 0, 0.9f, 1) : NULL;
        if (want && g && s) {
            int tok = (int)want[0], same = 1;
            for (int64_t i = 1; i < n; i++) {
                af_llama_gen_feed(g, tok);
                int next = af_llama_sample(s, af_llama_gen_logits(g));
                tok = i < 3 ? (int)want[i] : next; /* the prompt is forced, as run.c does */
                if (tok != (int)want[i]) same = 0;
            }
            CHECK(same, "model %s: greedy tokens differ from PyTorch's argmax", models[m]);
        }
        af_llama_sampler_free(s);
        af_llama_gen_free(g);
        af_llama_weights_free(w);
        free(want);
    }
}

/* ---------------------------------------------------------------- sampling */

static void test_sampler(void) {
    int64_t nl, ns, nt;
    float *logits = npy("sample_logits", &nl), *set = npy("sample_settings", &ns), *want = npy("sample_tokens", &nt);
    const int vocab = 500, rows = (int)(nl / 500), cases = (int)(ns / 3);
    if (logits && set && want && nt == (int64_t)rows * cases) {
        for (int c = 0; c < cases; c++) {
            af_llama_sampler *s = af_llama_sampler_new(vocab, set[3 * c], set[3 * c + 1], (uint64_t)set[3 * c + 2]);
            CHECK(s != NULL, "%s", af_error_message());
            int same = 1;
            for (int r = 0; r < rows && s; r++) {
                const float *row = logits + (size_t)r * vocab;
                float before = row[17];
                int got = af_llama_sample(s, row);
                if (got != (int)want[c * rows + r]) same = 0;
                CHECK(row[17] == before, "logits changed");
            }
            CHECK(same, "temperature %g top_p %g seed %g: tokens differ from run.c's sampler", set[3 * c],
                  set[3 * c + 1], set[3 * c + 2]);
            af_llama_sampler_free(s);
        }
    }
    free(logits);
    free(set);
    free(want);

    CHECK(af_llama_sampler_new(10, 1, 0.9f, 0) == NULL && strstr(af_error_message(), "seed"), "seed 0");
    CHECK(af_llama_sampler_new(10, -1, 0.9f, 1) == NULL, "negative temperature");
    CHECK(af_llama_sampler_new(10, 1, 1.5f, 1) == NULL, "top_p > 1");
    CHECK(af_llama_sampler_new(0, 1, 0.9f, 1) == NULL, "vocab 0");
    /* Flat logits with top_p below 1/n leave no candidate (run.c reads out of bounds):
     * the most probable token is taken. */
    af_llama_sampler *s = af_llama_sampler_new(4, 1, 0.1f, 9);
    const float flat[4] = { 0.5f, 0.5f, 0.5f, 0.5f }, bad[4] = { 0, NAN, 0, 0 };
    CHECK(af_llama_sample(s, flat) == 0, "flat logits, small top_p");
    CHECK(af_llama_sample(s, bad) == -1 && strstr(af_error_message(), "logit 1"), "nan logit: %s",
          af_error_message());
    CHECK(af_llama_sample(s, NULL) == -1, "NULL logits");
    af_llama_sampler_free(s);
    af_llama_sampler *one = af_llama_sampler_new(1, 1, 0.9f, 9);
    CHECK(af_llama_sample(one, flat) == 0, "a one-token vocabulary");
    af_llama_sampler_free(one);
}

/* ---------------------------------------------------------------- files */

static int file_equals(const char *path, const uint8_t *want, size_t n) {
    size_t len;
    uint8_t *got = read_all(path, &len);
    int same = got && len == n && !memcmp(got, want, n);
    free(got);
    return same;
}

static void test_roundtrip(void) {
    const char *models[] = { "a", "b" };
    for (int m = 0; m < 2; m++) {
        uint8_t *file[2];
        size_t len[2];
        af_llama_weights *w[2];
        for (int v = 0; v < 2; v++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/model_%s_v%d.bin", FIXDIR, models[m], v);
            file[v] = read_all(path, &len[v]);
            w[v] = load_fixture(models[m], v);
        }
        if (!file[0] || !file[1] || !w[0] || !w[1]) goto next;
        /* Each format written back is the Python writer's file byte for byte, from
         * either format read (so v1 -> v0 checks the writer against an independent one). */
        for (int from = 0; from < 2; from++)
            for (int to = 0; to < 2; to++) {
                char out[512];
                snprintf(out, sizeof out, "%s/%s_%d_%d.bin", tmpdir, models[m], from, to);
                CHECK(af_llama_save(w[from], out, to) == AF_OK, "save: %s", af_error_message());
                CHECK(file_equals(out, file[to], len[to]), "model %s read as v%d, written as v%d: bytes differ",
                      models[m], from, to);
                int ver = -1;
                af_llama_weights *back = af_llama_load(out, &ver);
                CHECK(back && ver == to, "reload: %s", af_error_message());
                if (back)
                    CHECK(!memcmp(af_llama_weights_data(back), af_llama_weights_data(w[from]),
                                  (size_t)af_llama_weight_count(af_llama_weights_config(back)) * 4),
                          "model %s: weights changed through v%d", models[m], to);
                af_llama_weights_free(back);
                char partial[600];
                snprintf(partial, sizeof partial, "%s.partial", out);
                CHECK(access(partial, F_OK) != 0, "%s left behind", partial);
                remove(out);
            }
        /* In memory too. */
        uint8_t *bytes = NULL;
        size_t n = 0;
        CHECK(llama_serialize(w[1], 0, &bytes, &n) == AF_OK && n == len[0] && !memcmp(bytes, file[0], n),
              "serialize v0");
        free(bytes);
    next:
        for (int v = 0; v < 2; v++) {
            free(file[v]);
            af_llama_weights_free(w[v]);
        }
    }
    af_llama_config c;
    af_llama_preset("tiny", 40, &c);
    af_llama_weights *w = af_llama_weights_new(&c);
    CHECK(af_llama_save(w, "/nonexistent-dir/x.bin", 0) == AF_ERR_IO && strstr(af_error_message(), "x.bin"),
          "unwritable path: %s", af_error_message());
    CHECK(af_llama_save(w, "x.bin", 2) == AF_ERR_INVALID, "version 2 is not written");
    CHECK(af_llama_save(NULL, "x.bin", 0) == AF_ERR_INVALID, "NULL weights");
    af_llama_weights_free(w);
}

/* Parses bytes; returns the status and checks a failure leaves no weights. */
static af_status parse(const uint8_t *b, size_t n) {
    af_llama_weights *w = NULL;
    af_status st = llama_parse(b, n, "test.bin", &w, NULL);
    CHECK((st == AF_OK) == (w != NULL), "status %d with weights %p", st, (void *)w);
    af_llama_weights_free(w);
    return st;
}

static void put_i32(uint8_t *p, int32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

static int32_t get_i32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static void test_untrusted(void) {
    size_t n0, n1;
    uint8_t *v0 = read_all(FIXDIR "/model_b_v0.bin", &n0), *v1 = read_all(FIXDIR "/model_b_v1.bin", &n1);
    CHECK(v0 && v1, "fixture files");
    if (!v0 || !v1) goto done;
    CHECK(parse(v0, n0) == AF_OK && parse(v1, n1) == AF_OK, "the fixtures parse: %s", af_error_message());
    /* Every truncation within the headers and the first weights, then a stride. */
    int clean = 1;
    for (size_t k = 0; k < n1; k += k < 600 ? 1 : 997) {
        if (parse(v0, k < n0 ? k : n0 - 1) == AF_OK || parse(v1, k) == AF_OK) clean = 0;
    }
    CHECK(clean, "a truncated file loaded");
    CHECK(parse(v0, n0 - 1) == AF_ERR_CORRUPT && strstr(af_error_message(), "truncated"), "message: %s",
          af_error_message());
    CHECK(parse(NULL, 0) == AF_ERR_CORRUPT, "empty");
    /* An extra byte. */
    uint8_t *big = malloc(n1 + 1);
    memcpy(big, v1, n1);
    big[n1] = 0;
    CHECK(parse(big, n1 + 1) == AF_ERR_CORRUPT, "trailing byte");
    free(big);
    /* Each header field made absurd. */
    const int32_t absurd[] = { 0, -1, 7, INT32_MAX, INT32_MIN, 1 << 20 };
    for (int f = 0; f < 7; f++)
        for (size_t a = 0; a < sizeof absurd / sizeof absurd[0]; a++) {
            uint8_t h0[28], h1[256];
            memcpy(h0, v0, 28);
            memcpy(h1, v1, 256);
            put_i32(h0 + 4 * f, absurd[a]);
            put_i32(h1 + 8 + 4 * f, absurd[a]);
            uint8_t *c0 = malloc(n0), *c1 = malloc(n1);
            memcpy(c0, v0, n0);
            memcpy(c1, v1, n1);
            memcpy(c0, h0, 28);
            memcpy(c1, h1, 256);
            /* vocab -vocab flips v0's classifier flag: still the wrong size, so rejected */
            CHECK(parse(c0, n0) == AF_ERR_CORRUPT, "v0 field %d = %d accepted", f, absurd[a]);
            /* v1 has no freq_cis blocks: any seq_len within the limits fits its size */
            int fits = f == 6 && absurd[a] >= 1 && absurd[a] <= (1 << 20);
            CHECK(parse(c1, n1) == (fits ? AF_OK : AF_ERR_CORRUPT), "v1 field %d = %d", f, absurd[a]);
            free(c0);
            free(c1);
        }
    uint8_t *c = malloc(n1);
    memcpy(c, v1, n1);
    c[36] = 2;
    CHECK(parse(c, n1) == AF_ERR_CORRUPT && strstr(af_error_message(), "flag"), "flag 2: %s", af_error_message());
    c[36] = 1; /* claims a shared classifier: the size no longer fits */
    CHECK(parse(c, n1) == AF_ERR_CORRUPT, "flag flipped");
    c[36] = 0;
    put_i32(c + 4, 2);
    CHECK(parse(c, n1) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "Q8_0"), "version 2: %s",
          af_error_message());
    put_i32(c + 4, 3);
    CHECK(parse(c, n1) == AF_ERR_CORRUPT && strstr(af_error_message(), "version 3"), "version 3");
    put_i32(c + 4, 1);
    int32_t vocab = get_i32(c + 8 + 20); /* as export.py writes it after its own legacy export */
    put_i32(c + 8 + 20, -vocab);
    CHECK(parse(c, n1) == AF_ERR_CORRUPT && strstr(af_error_message(), "fresh process"), "negative v1 vocab: %s",
          af_error_message());
    put_i32(c + 8 + 20, vocab);
    float nan = NAN;
    memcpy(c + 256 + 4 * 5, &nan, 4); /* rms_att of layer 0 */
    CHECK(parse(c, n1) == AF_ERR_CORRUPT && strstr(af_error_message(), "rms_att") && strstr(af_error_message(), "nan"),
          "nan weight: %s", af_error_message());
    free(c);
    /* Every single-byte change of each header: loads as something consistent or fails cleanly. */
    for (int which = 0; which < 2; which++) {
        uint8_t *b = which ? v1 : v0;
        size_t n = which ? n1 : n0, hl = which ? 40 : 28;
        for (size_t i = 0; i < hl; i++)
            for (int bit = 0; bit < 8; bit++) {
                b[i] ^= (uint8_t)(1 << bit);
                parse(b, n);
                b[i] ^= (uint8_t)(1 << bit);
            }
    }
    CHECK(af_llama_load(FIXDIR "/no-such-model.bin", NULL) == NULL && strstr(af_error_message(), "no-such-model"),
          "missing file: %s", af_error_message());
    CHECK(af_llama_load(NULL, NULL) == NULL, "NULL path");
done:
    free(v0);
    free(v1);
}

static void test_generator_errors(void) {
    af_llama_config c;
    af_llama_preset("tiny", 50, &c);
    c.seq_len = 4;
    af_llama_weights *w = af_llama_weights_new(&c);
    float *d = af_llama_weights_data(w);
    test_rng r = { 5 };
    for (int64_t i = 0; i < af_llama_weight_count(&c); i++) d[i] = (float)(test_normal(&r) * 0.1);
    af_llama_gen *g = af_llama_gen_new(w, 0);
    CHECK(g != NULL, "%s", af_error_message());
    CHECK(af_llama_gen_feed(g, 50) == AF_ERR_INVALID && strstr(af_error_message(), "vocabulary"), "token 50");
    CHECK(af_llama_gen_feed(g, -1) == AF_ERR_INVALID, "token -1");
    for (int i = 0; i < 4; i++) CHECK(af_llama_gen_feed(g, i) == AF_OK, "%s", af_error_message());
    const float *l = af_llama_gen_logits(g);
    int finite = 1;
    for (int v = 0; v < 50; v++) finite &= isfinite(l[v]) != 0;
    CHECK(finite, "tiny logits finite");
    CHECK(af_llama_gen_feed(g, 1) == AF_ERR_INVALID && strstr(af_error_message(), "full"), "full cache: %s",
          af_error_message());
    af_llama_gen_reset(g);
    CHECK(af_llama_gen_feed(g, 1) == AF_OK, "after reset");
    CHECK(af_llama_gen_feed(NULL, 1) == AF_ERR_INVALID && af_llama_gen_new(NULL, 1) == NULL, "NULL");
    af_llama_gen_free(g);
    af_llama_weights_free(w);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/af_llama_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_config();
    test_forward();
    test_greedy();
    test_sampler();
    test_roundtrip();
    test_untrusted();
    test_generator_errors();
    rmdir(tmpdir);
    return check_finish("llama");
}
