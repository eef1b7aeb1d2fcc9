/* aneforge generate: run.c's loop (the prompt forced, then sampled tokens, a stop at BOS
 * or after --steps positions) on the fixture models, against the library driven by hand
 * and against PyTorch's greedy tokens; the two file formats agree; errors exit cleanly.
 * Runs the built binary from the build directory (ctest's working directory). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama"

/* Runs `aneforge generate ARGS`; stdout into out, returns the exit code. */
static int generate(const char *args, char *out, size_t cap) {
    char a[2048];
    snprintf(a, sizeof a, "generate %s", args);
    return cli_run(a, 0, out, cap);
}

static int parse_ids(const char *s, int *ids, int cap) {
    int n = 0;
    char *end;
    for (long v = strtol(s, &end, 10); end != s && n < cap; v = strtol(s, &end, 10)) {
        ids[n++] = (int)v;
        s = end;
    }
    return n;
}

/* The same loop by hand through the public API. */
static int by_hand(const char *model, const int *prompt, int np, int steps, float temp, float top_p, uint64_t seed,
                   int *seq) {
    af_llama_weights *w = af_llama_load(model, NULL);
    if (!w) return 0;
    af_llama_gen *g = af_llama_gen_new(w, 1);
    af_llama_sampler *s = af_llama_sampler_new(af_llama_weights_config(w)->vocab_size, temp, top_p, seed);
    int n = 0, token = prompt[0];
    seq[n++] = token;
    for (int pos = 0; pos < steps; pos++) {
        af_llama_gen_feed(g, token);
        int next = pos < np - 1 ? prompt[pos + 1] : af_llama_sample(s, af_llama_gen_logits(g));
        if (next == 1) break;
        seq[n++] = token = next;
    }
    af_llama_sampler_free(s);
    af_llama_gen_free(g);
    af_llama_weights_free(w);
    return n;
}

/* A small random model whose vocabulary is the byte-level tokenizer's, and that tokenizer,
 * written under TMPDIR; returns 0 on failure. */
static int write_model_and_tokenizer(char *model, char *tokpath, size_t n) {
    const char *tmp = getenv("TMPDIR");
    snprintf(model, n, "%s/af_llama_cli_model_%d.bin", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    snprintf(tokpath, n, "%s/af_llama_cli_tok_%d.bin", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    af_tokenizer *bytes = af_tokenizer_byte_level();
    af_llama_config c;
    if (!bytes || af_llama_preset("tiny", af_tokenizer_vocab_size(bytes), &c) != AF_OK) return 0;
    c.seq_len = 32;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return 0;
    test_rng r = { 9 };
    float *d = af_llama_weights_data(w);
    for (int64_t i = 0; i < af_llama_weight_count(&c); i++) d[i] = (float)(test_uniform(&r) - 0.5) * 0.2f;
    int ok = af_llama_save(w, model, 0) == AF_OK && af_tokenizer_save(bytes, tokpath) == AF_OK;
    af_llama_weights_free(w);
    af_tokenizer_free(bytes);
    return ok;
}

/* With --tokenizer the prompt is encoded as run.c does (BOS, then the text) and the
 * output is the text of the generated tokens, which the token ids of --json decode to. */
static void test_tokenizer(void) {
    char model[256], tokpath[256];
    CHECK(write_model_and_tokenizer(model, tokpath, sizeof model), "writing a model and a tokenizer: %s", af_error_message());
    af_tokenizer *tok = af_tokenizer_load(tokpath);
    CHECK(tok != NULL, "loading the tokenizer: %s", af_error_message());
    char args[1024], text[8192], json[8192];
    snprintf(args, sizeof args, "--model %s --tokenizer %s --prompt \"hi there\" --steps 20 --temperature 0", model, tokpath);
    CHECK(generate(args, text, sizeof text) == 0, "generate with a tokenizer");
    snprintf(args + strlen(args), sizeof args - strlen(args), " --json");
    CHECK(generate(args, json, sizeof json) == 0, "generate --json with a tokenizer");
    const char *p = strchr(json, '[');
    int ids[64], n = 0;
    while (p && *p && *p != ']' && n < 64) { /* "[1, 262, ...]" */
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1) break;
        ids[n++] = (int)v;
        p = end;
    }
    int32_t *want = NULL;
    int64_t nw = 0;
    CHECK(tok && af_tokenizer_encode(tok, "hi there", 8, AF_ENCODE_BOS, &want, &nw) == AF_OK, "encode");
    bool prompt_ok = n >= nw;
    for (int64_t i = 0; i < nw && prompt_ok; i++) prompt_ok = ids[i] == want[i];
    CHECK(prompt_ok && nw == 10, "the prompt is BOS + ' hi there' as run.c encodes it (%lld tokens)", (long long)nw);
    int32_t all[64]; /* decoded with the BOS, whose next piece loses its dummy space, as printed */
    for (int i = 0; i < n; i++) all[i] = ids[i];
    char *decoded = NULL;
    size_t dlen = 0;
    CHECK(tok && af_tokenizer_decode(tok, all, n, &decoded, &dlen) == AF_OK, "decode");
    size_t tl = strlen(text);
    while (tl && text[tl - 1] == '\n') text[--tl] = 0; /* the final newline */
    CHECK(decoded && dlen == tl && !memcmp(decoded, text, dlen), "printed text '%s' is the tokens' text '%.*s'", text,
          (int)dlen, decoded ? decoded : "");
    CHECK(!strncmp(text, "hi there", 8), "the text starts with the prompt, without its dummy space: '%s'", text);
    free(decoded);
    free(want);
    af_tokenizer_free(tok);
    remove(tokpath);
    remove(model);
}

int main(void) {
    char out[8192];
    test_tokenizer();
    int got[512], want[512];

    /* Greedy from PyTorch's prompt follows PyTorch's argmax tokens. */
    float *ref = NULL;
    int rank;
    int64_t dims[8];
    CHECK(af_npy_read(FIXDIR "/model_b_greedy.npy", &ref, &rank, dims) == AF_OK, "%s", af_error_message());
    int rc = generate("--model " FIXDIR "/model_b_v0.bin --tokens 1,24,28 --temperature 0", out, sizeof out);
    int n = parse_ids(out, got, 512);
    CHECK(rc == 0 && ref && n == dims[0] + 1, "greedy: rc %d, %d tokens: %s", rc, n, out);
    for (int i = 0; ref && i < n - 1 && i < dims[0]; i++)
        CHECK(got[i] == (int)ref[i], "greedy token %d: %d, PyTorch %d", i, got[i], (int)ref[i]);
    free(ref);

    /* Sampling: the CLI is run.c's loop over the library; both formats give the same. */
    const struct { const char *flags; float t, p; uint64_t seed; int steps; } cases[] = {
        { "--temperature 1 --top-p 0.9 --seed 42", 1, 0.9f, 42, 16 },
        { "--temperature 0.7 --top-p 0 --seed 1234567", 0.7f, 0, 1234567, 16 },
        { "--temperature 1.5 --top-p 0.5 --seed 9 --steps 7", 1.5f, 0.5f, 9, 7 },
    };
    const int prompt[] = { 1, 3, 5 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[512], out1[8192];
        snprintf(args, sizeof args, "--model " FIXDIR "/model_a_v0.bin --tokens 1,3,5 %s", cases[c].flags);
        rc = generate(args, out, sizeof out);
        n = parse_ids(out, got, 512);
        int m = by_hand(FIXDIR "/model_a_v0.bin", prompt, 3, cases[c].steps, cases[c].t, cases[c].p, cases[c].seed,
                        want);
        CHECK(rc == 0 && n == m && !memcmp(got, want, (size_t)n * sizeof(int)), "case %zu: %s vs %d by hand", c,
              out, m);
        snprintf(args, sizeof args, "--model " FIXDIR "/model_a_v1.bin --tokens 1,3,5 %s", cases[c].flags);
        CHECK(generate(args, out1, sizeof out1) == 0 && !strcmp(out, out1), "case %zu: v1 gives %s, v0 %s", c, out1,
              out);
        snprintf(args, sizeof args, "--model " FIXDIR "/model_a_v0.bin --tokens 1,3,5 %s --json --threads 2",
                 cases[c].flags);
        CHECK(generate(args, out1, sizeof out1) == 0 && strstr(out1, "\"tokens\": [") &&
              strstr(out1, "\"prompt_tokens\": 3") && strstr(out1, "\"tokens_per_s\""), "json: %s", out1);
        char *open = strchr(out1, '['), *close = strchr(out1, ']');
        if (open && close) {
            *close = 0;
            for (char *q = open; *q; q++) *q = *q == ',' || *q == '[' ? ' ' : *q;
            int jn = parse_ids(open, got, 512);
            CHECK(jn == m && !memcmp(got, want, (size_t)m * sizeof(int)), "case %zu: json tokens differ", c);
        }
    }

    /* Errors: usage (2), an unusable file (1). */
    CHECK(generate("--tokens 1", out, sizeof out) == 2, "no --model");
    CHECK(generate("--model " FIXDIR "/model_a_v0.bin --tokens 1,37", out, sizeof out) == 2, "token 37 of 37");
    CHECK(generate("--model " FIXDIR "/model_a_v0.bin --seed 0", out, sizeof out) == 2, "seed 0");
    CHECK(generate("--model " FIXDIR "/model_a_v0.bin --top-p 2", out, sizeof out) == 2, "top-p 2");
    CHECK(generate("--model " FIXDIR "/model_a_v0.bin --tokenizer /nonexistent/t.bin --prompt hi", out, sizeof out) == 1,
          "a missing tokenizer file");
    CHECK(generate("--model " FIXDIR "/model_a_logits.npy", out, sizeof out) == 1, "not a model");
    return check_finish("llama_cli");
}
