/* aneforge generate: samples text from a llama2.c model with the KV-cache generator,
 * following run.c's generate loop (token ids in and out, or text with --tokenizer), or
 * from a Hugging Face folder of any architecture aneforge_hf.h reads (af_hf_gen), with
 * its tokenizer.json and, for --chat, its chat template. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli.h"
#include "cli_args.h"
#include "llama_ckpt.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "aneforge_hf.h"

#include <stdbool.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *model, *tokenizer, *prompt, *tokens, *chat, *system;
    long steps, threads;
    float temperature, top_p;
    uint64_t seed;
    int json;
} gen_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge generate --model M [--tokens IDS | --tokenizer T --prompt TEXT] [options]\n"
            "       aneforge generate --init DIR [--tokens IDS | --prompt TEXT | --chat TEXT [--system TEXT]] [options]\n\n"
            "Runs a llama2.c model (export.py's version 0 or 1 file) one token at a time with a\n"
            "KV cache and samples as llama2.c's run.c does, so the same seed gives run.c's tokens.\n"
            "A Hugging Face folder (Llama 2/3, SmolLM, Qwen2, Qwen3) runs as itself, one token at a\n"
            "time with a KV cache, with the same sampler.\n\n"
            "  --model PATH        the model file, a checkpoint of 'aneforge train llama --save', or a\n"
            "                      Hugging Face folder\n"
            "  --init DIR          the same as --model DIR\n"
            "  --tokens 1,403,...  the prompt as token ids (default: 1, the BOS token; a folder needs a prompt)\n"
            "  --tokenizer PATH    a llama2.c tokenizer.bin: --prompt is encoded with it (BOS first, as\n"
            "                      run.c does) and the output printed as text; with a folder, a\n"
            "                      tokenizer.json (default: DIR/tokenizer.json)\n"
            "  --prompt TEXT       the prompt text, raw (a folder: encoded as tokenizers' encode(text),\n"
            "                      the post-processor's BOS included)\n"
            "  --chat TEXT         a folder only: TEXT as a user message in the chat template of\n"
            "                      DIR/tokenizer_config.json (ChatML, Qwen3, Llama 3, Llama 2), with the\n"
            "                      assistant's prompt; prints the reply alone, which ends at the template's\n"
            "                      end-of-turn token. Another template is refused: use --prompt\n"
            "  --system TEXT       with --chat: a system message first\n"
            "  --steps N           positions to run, prompt included (default 256; 0 or more than\n"
            "                      the model's seq_len: seq_len)\n"
            "  --temperature T     0 takes the most likely token (default 1.0)\n"
            "  --top-p P           nucleus sampling in (0, 1); 0 or 1 samples from all (default 0.9)\n"
            "  --seed S            the sampler's seed, a positive integer (default: the time, as run.c)\n"
            "  --threads N         threads for the matrix-vector products (default: one per core)\n"
            "  --json              one JSON line: tokens, prompt_tokens, seed, tokens_per_s\n\n"
            "Prints the sequence (prompt included): token ids separated by spaces, or text with\n"
            "--tokenizer. Generation stops after --steps positions or when the model produces\n"
            "BOS (1), as in run.c; a folder's at config.json's eos_token_id (and, with --chat, the\n"
            "end-of-turn token), not printed.\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge generate", fmt, a); }

static int parse_args(int argc, char **argv, gen_args *a) {
    *a = (gen_args){ .steps = 256, .temperature = 1.0f, .top_p = 0.9f };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 1; }
        if (!strcmp(k, "--json")) { a->json = 1; continue; }
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        if (!strcmp(k, "--model") || !strcmp(k, "--init")) {
            if (a->model) return bad("%s", "give the model once: --model or --init");
            a->model = v;
        }
        else if (!strcmp(k, "--chat")) a->chat = v;
        else if (!strcmp(k, "--system")) a->system = v;
        else if (!strcmp(k, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(k, "--prompt")) a->prompt = v;
        else if (!strcmp(k, "--tokens")) a->tokens = v;
        else if (!strcmp(k, "--steps")) { if (cli_parse_long(v, 0, 1L << 30, &a->steps)) return bad("--steps wants an integer >= 0, not '%s'", v); }
        else if (!strcmp(k, "--threads")) { if (cli_parse_long(v, 1, 1024, &a->threads)) return bad("--threads wants a positive integer, not '%s'", v); }
        else if (!strcmp(k, "--temperature")) { if (cli_parse_float(v, &a->temperature) || a->temperature < 0) return bad("--temperature wants a number >= 0, not '%s'", v); }
        else if (!strcmp(k, "--top-p")) { if (cli_parse_float(v, &a->top_p) || a->top_p < 0 || a->top_p > 1) return bad("--top-p wants a number in [0, 1], not '%s'", v); }
        else if (!strcmp(k, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-' || s == 0) return bad("--seed wants a positive integer, not '%s'", v);
            a->seed = s;
        } else return bad("unknown option '%s'", k);
    }
    if (!a->model) return bad("%s", "--model is required");
    bool hf = llama_is_hf_folder(a->model);
    if (!!a->tokens + !!a->prompt + !!a->chat > 1) return bad("%s", "give one prompt: --tokens, --prompt or --chat");
    if (a->tokens && a->tokenizer && !hf) return bad("%s", "give --tokens or --tokenizer with --prompt, not both");
    if (a->system && !a->chat) return bad("%s", "--system goes with --chat");
    if (a->chat && !hf) return bad("--chat needs a Hugging Face folder with a chat template, not '%s'", a->model);
    if (!hf && !a->tokenizer != !a->prompt) return bad("%s", "--tokenizer and --prompt go together");
    if (!a->seed) a->seed = (uint64_t)time(NULL);
    return 0;
}

/* "1,403,22" -> ids, each in [0, vocab). */
static int parse_tokens(const char *s, int vocab, int **ids, int *n) {
    int cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *ids = malloc((size_t)cap * sizeof(int));
    *n = 0;
    if (!*ids) return bad("%s", "out of memory");
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v >= vocab || (*end && *end != ','))
            return bad("--tokens wants comma-separated ids below the model's vocab size, not '%s'", s);
        (*ids)[(*n)++] = (int)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

/* The tokenizer's place: src/text's llama2.c tokenizer (issue 14, part 3) plugs in here,
 * encoding the prompt as run.c does (BOS 1, then the text) and, in run(), decoding each
 * new token instead of printing its id. Until it is merged --tokens is the way in. */
/* run.c's prompt: the text encoded with BOS (and the dummy-prefix space), checked
 * against the model's vocabulary. */
static int tokenizer_prompt(const af_tokenizer *tok, const char *prompt, int vocab, int **ids, int *n) {
    /* Equal sizes: a smaller tokenizer cannot decode the model's higher ids (they would
     * vanish from the text), a larger one encodes ids the model has no row for. */
    if (af_tokenizer_vocab_size(tok) != vocab) {
        fprintf(stderr, "aneforge generate: the tokenizer has %d tokens but the model's vocabulary is %d: they must be "
                "equal; give the tokenizer the model was trained with (train llama --tokenizer), or --tokens ids "
                "without --tokenizer\n", af_tokenizer_vocab_size(tok), vocab);
        return 2;
    }
    int32_t *t = NULL;
    int64_t k = 0;
    const char *text = prompt ? prompt : "";
    if (af_tokenizer_encode(tok, text, strlen(text), AF_ENCODE_BOS, &t, &k)) {
        fprintf(stderr, "aneforge generate: --prompt: %s\n", af_error_message());
        return 1;
    }
    *ids = malloc(sizeof **ids * (size_t)(k > 0 ? k : 1));
    if (!*ids) { af_free(t); return bad("%s", "out of memory"); }
    for (int64_t i = 0; i < k; i++) (*ids)[i] = t[i];
    *n = (int)k;
    af_free(t);
    return 0;
}

/* Prints token `next` after `prev`: its text with a tokenizer (run.c's piece rules; like
 * run.c, not the first token, BOS), its id without. */
static void print_token(const af_tokenizer *tok, int prev, int next, bool first) {
    if (!tok) {
        printf(first ? "%d" : " %d", next);
        return;
    }
    if (first) return;
    size_t len = 0;
    const char *piece = af_tokenizer_decode_piece(tok, prev, next, &len);
    if (piece) fwrite(piece, 1, len, stdout);
}

static void print_result(const gen_args *a, const int *seq, int nseq, int nprompt, double tps) {
    if (a->json) {
        printf("{\"tokens\": [");
        for (int i = 0; i < nseq; i++) printf("%s%d", i ? ", " : "", seq[i]);
        printf("], \"prompt_tokens\": %d, \"seed\": %llu, \"tokens_per_s\": %.1f}\n", nprompt,
               (unsigned long long)a->seed, tps);
    } else {
        printf("\n");
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The model generating: llama2.c's with a KV cache, or a Hugging Face one; the tokens
 * that stop it; and how text is printed. */
typedef struct {
    af_llama_gen *lg;
    af_hf_gen *hg;
    const af_tokenizer *tok;     /* llama2.c's pieces */
    const af_hf_tokenizer *htok; /* tokenizer.json: the sequence decoded, new bytes printed */
    int stop[16], nstop;
    int print_from;              /* hf: the first position printed (--chat: the reply alone) */
    size_t printed;
} gen_model;

static af_status feed(gen_model *m, int token) { return m->hg ? af_hf_gen_feed(m->hg, token) : af_llama_gen_feed(m->lg, token); }
static const float *logits(const gen_model *m) { return m->hg ? af_hf_gen_logits(m->hg) : af_llama_gen_logits(m->lg); }

/* tokenizer.json: the text of seq[from..n) decoded whole, its bytes not yet printed
 * written out (held back while it ends in U+FFFD: a character still incomplete). */
static void print_hf(gen_model *m, const int *seq, int n, bool last) {
    if (n <= m->print_from) return;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n - m->print_from));
    char *text = NULL;
    size_t len = 0;
    for (int i = m->print_from; ids && i < n; i++) ids[i - m->print_from] = seq[i];
    if (ids && !af_hf_tokenizer_decode(m->htok, ids, n - m->print_from, 1, &text, &len)) {
        bool partial = !last && len >= 3 && !memcmp(text + len - 3, "\xef\xbf\xbd", 3);
        if (!partial && len > m->printed) {
            fwrite(text + m->printed, 1, len - m->printed, stdout);
            m->printed = len;
        }
    }
    af_free(text);
    free(ids);
}

/* run.c's generate loop: feed the prompt, then sample; stop at a stop token or after steps. */
static int run(const gen_args *a, gen_model *m, af_llama_sampler *s, const int *prompt, int nprompt, int steps, int **seq,
               int *nseq, double *tokens_per_s) {
    const af_tokenizer *tok = m->tok;
    *seq = malloc((size_t)(steps + 1) * sizeof(int));
    if (!*seq) return bad("%s", "out of memory");
    int token = prompt[0], n = 0;
    (*seq)[n++] = token;
    if (!a->json && !m->htok) print_token(tok, -1, token, true);
    double start = 0;
    for (int pos = 0; pos < steps; pos++) {
        if (feed(m, token)) {
            fprintf(stderr, "aneforge generate: %s\n", af_error_message());
            return 1;
        }
        int next = pos < nprompt - 1 ? prompt[pos + 1] : af_llama_sample(s, logits(m));
        if (next < 0) {
            fprintf(stderr, "aneforge generate: %s\n", af_error_message());
            return 1;
        }
        bool stop = false;
        for (int i = 0; i < m->nstop && (!m->hg || pos >= nprompt - 1); i++) stop |= next == m->stop[i];
        if (stop) break; /* llama2.c: BOS delimits sequences; a folder: its EOS, the end of the turn */
        (*seq)[n++] = next;
        if (!a->json && m->htok) print_hf(m, *seq, n, false);
        else if (!a->json) print_token(tok, token, next, false);
        if (!a->json) fflush(stdout);
        token = next;
        if (pos == 0) start = now_s(); /* the first step warms caches; time the rest */
    }
    if (!a->json && m->htok) print_hf(m, *seq, n, true);
    double secs = now_s() - start;
    *tokens_per_s = n > 2 && secs > 0 ? (n - 2) / secs : 0;
    *nseq = n;
    return 0;
}

/* A folder's prompt: --tokens, --prompt (tokenizers' encode(text)), --chat (the chat
 * template), or its bos_token_id alone. */
static int hf_prompt(const gen_args *a, const af_hf_model *hm, const af_hf_tokenizer *ht, gen_model *gm, int **ids, int *n) {
    int V = af_hf_vocab_size(hm);
    if (a->tokens) return parse_tokens(a->tokens, V, ids, n);
    int32_t *t = NULL;
    int64_t k = 0;
    af_status st = AF_OK;
    if (a->chat) {
        af_hf_chat *c = af_hf_chat_load(a->model);
        af_chat_message msg[2] = { { "system", a->system }, { "user", a->chat } };
        if (!c) {
            fprintf(stderr, "aneforge generate: --chat: %s\n", af_error_message());
            return 2;
        }
        st = af_hf_chat_encode(c, ht, a->system ? msg : msg + 1, a->system ? 2 : 1, 1, &t, &k);
        int eot = af_hf_tokenizer_token_id(ht, af_hf_chat_end_of_turn(c));
        if (eot >= 0 && gm->nstop < 16) gm->stop[gm->nstop++] = eot;
        af_hf_chat_free(c);
    } else if (a->prompt) st = af_hf_tokenizer_encode_special(ht, a->prompt, strlen(a->prompt), &t, &k);
    if (st) {
        fprintf(stderr, "aneforge generate: %s: %s\n", a->chat ? "--chat" : "--prompt", af_error_message());
        return 1;
    }
    if (!a->chat && !a->prompt) {
        fprintf(stderr, "aneforge generate: give a prompt for %s: --tokens, --prompt or --chat (a folder has no "
                "default first token)\n", a->model);
        return 2;
    }
    for (int64_t i = 0; i < k; i++)
        if (t[i] >= V) {
            fprintf(stderr, "aneforge generate: the tokenizer gave id %d but the model's vocab is %d: give the model's "
                    "own tokenizer.json\n", t[i], V);
            af_free(t);
            return 2;
        }
    if (!k) {
        af_free(t);
        fprintf(stderr, "aneforge generate: the prompt encodes to no tokens\n");
        return 2;
    }
    *ids = malloc(sizeof **ids * (size_t)k);
    if (!*ids) { af_free(t); return bad("%s", "out of memory"); }
    for (int64_t i = 0; i < k; i++) (*ids)[i] = t[i];
    *n = (int)k;
    if (a->chat) gm->print_from = (int)k;
    af_free(t);
    return 0;
}

/* A Hugging Face folder: its forward (af_hf_gen), tokenizer.json, the stop tokens. */
static int generate_hf(const gen_args *a) {
    af_hf_model *hm = af_hf_load(a->model);
    if (!hm) {
        fprintf(stderr, "aneforge generate: %s\n", af_error_message());
        return 1;
    }
    gen_model gm = { 0 };
    af_hf_tokenizer *ht = NULL;
    af_llama_sampler *s = NULL;
    int *prompt = NULL, nprompt = 0, *seq = NULL, nseq = 0, rc = 0;
    double tps = 0;
    int32_t eos[8];
    int ne = af_hf_eos_ids(hm, eos, 8);
    for (int i = 0; i < ne; i++) gm.stop[gm.nstop++] = eos[i];
    if (a->prompt || a->chat || a->tokenizer) {
        char path[4096];
        const char *tp = a->tokenizer;
        if (!tp) {
            snprintf(path, sizeof path, "%s/tokenizer.json", a->model);
            tp = path;
        }
        if (!(ht = af_hf_tokenizer_load(tp))) {
            fprintf(stderr, "aneforge generate: %s%s\n", a->tokenizer ? "--tokenizer: " : "", af_error_message());
            rc = 1;
            goto out;
        }
        gm.htok = ht;
    }
    if ((rc = hf_prompt(a, hm, ht, &gm, &prompt, &nprompt))) goto out;
    int max = af_hf_max_positions(hm);
    int steps = a->steps == 0 || a->steps > max ? max : (int)a->steps;
    gm.hg = af_hf_gen_new(hm, (int)a->threads);
    s = af_llama_sampler_new(af_hf_vocab_size(hm), a->temperature, a->top_p, a->seed);
    if (!gm.hg || !s) {
        fprintf(stderr, "aneforge generate: %s\n", af_error_message());
        rc = 1;
        goto out;
    }
    if (nprompt > steps) {
        fprintf(stderr, "aneforge generate: the prompt has %d tokens, more than --steps %d: raise --steps\n", nprompt, steps);
        rc = 2;
        goto out;
    }
    rc = run(a, &gm, s, prompt, nprompt, steps, &seq, &nseq, &tps);
    if (!rc) print_result(a, seq, nseq, nprompt, tps);
out:
    free(seq);
    free(prompt);
    af_llama_sampler_free(s);
    af_hf_gen_free(gm.hg);
    af_hf_tokenizer_free(ht);
    af_hf_free(hm);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    if (llama_is_hf_folder(a.model)) return generate_hf(&a);
    af_llama_weights *w = llama_model_load(a.model);
    if (!w) {
        fprintf(stderr, "aneforge generate: %s\n", af_error_message());
        return 1;
    }
    const af_llama_config *c = af_llama_weights_config(w);
    int *prompt = NULL, nprompt = 0, *seq = NULL, nseq = 0;
    af_llama_gen *g = NULL;
    af_llama_sampler *s = NULL;
    af_tokenizer *tok = NULL;
    double tps = 0;
    if (a.tokenizer && !(tok = af_tokenizer_load(a.tokenizer))) {
        fprintf(stderr, "aneforge generate: --tokenizer: %s\n", af_error_message());
        rc = 1;
        goto out;
    }
    if (tok) rc = tokenizer_prompt(tok, a.prompt, c->vocab_size, &prompt, &nprompt);
    else rc = parse_tokens(a.tokens ? a.tokens : "1", c->vocab_size, &prompt, &nprompt);
    if (rc) goto out;
    int steps = a.steps == 0 || a.steps > c->seq_len ? c->seq_len : (int)a.steps;
    g = af_llama_gen_new(w, (int)a.threads);
    s = af_llama_sampler_new(c->vocab_size, a.temperature, a.top_p, a.seed);
    if (!g || !s) {
        fprintf(stderr, "aneforge generate: %s\n", af_error_message());
        rc = 1;
        goto out;
    }
    gen_model gm = { .lg = g, .tok = tok, .stop = { 1 }, .nstop = 1 };
    rc = run(&a, &gm, s, prompt, nprompt, steps, &seq, &nseq, &tps);
    if (rc) goto out;
    print_result(&a, seq, nseq, nprompt, tps);
out:
    free(seq);
    free(prompt);
    af_llama_sampler_free(s);
    af_llama_gen_free(g);
    af_llama_weights_free(w);
    af_tokenizer_free(tok);
    return rc;
}
