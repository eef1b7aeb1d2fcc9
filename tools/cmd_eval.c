/* aneforge eval llama: the mean next-token loss (nats per token) of a model over a token
 * file, in windows of --seq + 1 tokens at stride --seq (the windows train llama's
 * validation uses), forward only, on the CPU in fp32. The model is a llama2.c file, a
 * train llama checkpoint, or a Hugging Face folder of any architecture aneforge_hf.h
 * reads (its own forward, af_hf_forward). */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "cli_args.h"
#include "cli_out.h"
#include "llama_ckpt.h"
#include "llama_nll.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "aneforge_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>


typedef struct {
    const char *model, *data;
    long seq, batch, threads;
    int json, progress;
} eval_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge eval llama (--model M | --init DIR) --data tokens.bin [--seq N] [--batch B] [--threads N] [--json]\n"
            "                           [--progress]\n\n"
            "The mean loss in nats per token of a model over a token file (uint16 ids, llama2.c's\n"
            ".bin): windows of --seq + 1 tokens at stride --seq, each predicting its last --seq\n"
            "tokens from the ones before (the windows 'train llama --val' reports), forward only,\n"
            "CPU, fp32. Tokens after the last whole window are not scored.\n\n"
            "  --model PATH    a llama2.c model file (version 0 or 1), a 'train llama --save' checkpoint, or a\n"
            "                  Hugging Face folder (Llama 2/3, SmolLM, Qwen2, Qwen3: config.json, safetensors)\n"
            "  --init DIR      the same as --model DIR (the spelling train llama uses for a folder)\n"
            "  --data PATH     the tokens\n"
            "  --seq N         tokens per window, 1..65536 (default: the model's seq_len, at most 65536, or\n"
            "                  fewer for a short file; a folder: max_position_embeddings, at most 1024)\n"
            "  --batch B       windows per forward pass (default 8)\n"
            "  --threads N     CPU threads (default one per core)\n"
            "  --json          one JSON line: loss, perplexity, tokens, windows, seq, seconds\n"
            "  --progress      windows done so far on stderr, a line per batch (on by default, on one\n"
            "                  line, when stderr is a terminal and there is more than one batch)\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge eval llama", fmt, a); }

static int parse_args(int argc, char **argv, eval_args *a) {
    a->batch = 8;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 1; }
        if (!strcmp(k, "--json")) { a->json = 1; continue; }
        if (!strcmp(k, "--progress")) { a->progress = 1; continue; }
        if (k[0] != '-') return bad("unexpected argument '%s'", k);
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        if (!strcmp(k, "--model") || !strcmp(k, "--init")) {
            if (a->model) return bad("%s", "give the model once: --model or --init");
            a->model = v;
        }
        else if (!strcmp(k, "--data")) a->data = v;
        else if (!strcmp(k, "--seq")) { if (cli_parse_long(v, 1, LLAMA_EVAL_MAX_SEQ, &a->seq)) return bad("--seq wants an integer in 1..65536, not '%s'", v); }
        else if (!strcmp(k, "--batch")) { if (cli_parse_long(v, 1, 4096, &a->batch)) return bad("--batch wants an integer in 1..4096, not '%s'", v); }
        else if (!strcmp(k, "--threads")) { if (cli_parse_long(v, 1, 1024, &a->threads)) return bad("--threads wants a positive integer, not '%s'", v); }
        else return bad("unknown option '%s'", k);
    }
    if (!a->model) return bad("%s", "--model is required: a llama2.c model file, a 'train llama --save' checkpoint or a Hugging Face folder");
    if (!a->data) return bad("%s", "--data is required: a token file (see 'aneforge data tokenize')");
    return 0;
}

/* The model evaluated: llama2.c's (w) or a Hugging Face one (hf). */
typedef struct {
    const af_llama_weights *w;
    const af_hf_model *hf;
    int vocab, seq_len, nparams;
    int default_seq; /* windows without --seq: seq_len, or for a folder at most HF_DEFAULT_SEQ */
} eval_model;

/* A folder's max_position_embeddings can be 40960 (Qwen3): a default window that long
 * would need gigabytes of attention scores, so a folder's default is at most this. */
enum { HF_DEFAULT_SEQ = 1024 };

/* The model's forward for [B, T] token ids -> logits [B, T, vocab], compiled for the CPU. */
static af_model *compile_forward(const eval_model *em, int B, int T, int threads, af_graph **g_out,
                                 af_tensor **in, int *nin) {
    af_graph *g = af_graph_new();
    if (!g) return NULL;
    af_graph_set_target(g, AF_TARGET_CPU);
    in[0] = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T));
    int n = em->hf ? af_hf_params_new(g, em->hf, in + 1, em->nparams) : af_llama_params_new(g, em->w, in + 1, em->nparams);
    af_tensor *logits = n <= 0 ? NULL : em->hf ? af_hf_forward(em->hf, in[0], in + 1) : af_llama(af_llama_weights_config(em->w), in[0], in + 1);
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = threads };
    af_model *m = logits ? af_compile(g, 1 + n, in, 1, &logits, &o) : NULL;
    if (!m) {
        const char *why = n > 0 && !logits ? af_graph_error(g) : af_error_message();
        fprintf(stderr, "aneforge eval llama: %s\n", why && *why ? why : "cannot build the model's forward");
    }
    *g_out = g;
    *nin = 1 + n;
    return m;
}

static int evaluate(const eval_args *a, const eval_model *em, const int32_t *tok, int64_t n) {
    const int V = em->vocab, seq_len = em->seq_len;
    int T = llama_eval_window(n, em->default_seq, a->seq);
    if (!a->seq && em->default_seq > LLAMA_EVAL_MAX_SEQ && n - 1 > LLAMA_EVAL_MAX_SEQ)
        fprintf(stderr, "aneforge eval llama: the model's seq_len %d is above eval's limit of %d: windows of %d (set --seq)\n",
                seq_len, LLAMA_EVAL_MAX_SEQ, T);
    else if (!a->seq && em->default_seq < seq_len && n - 1 > T)
        fprintf(stderr, "aneforge eval llama: windows of %d tokens, a folder's default (max_position_embeddings is %d: set "
                "--seq for longer ones)\n", T, seq_len);
    if (T > seq_len) {
        fprintf(stderr, "aneforge eval llama: --seq %d is longer than the model's seq_len %d\n", T, seq_len);
        return 2;
    }
    if (T < 1 || n < T + 1) {
        fprintf(stderr, "aneforge eval llama: %s has %lld tokens, too few for one window of %d + 1; lower --seq\n", a->data,
                (long long)n, T);
        return 2;
    }
    int64_t windows = (n - 1) / T;
    int B = (int)(a->batch < windows ? a->batch : windows);
    int np = em->nparams;
    af_tensor **in = np > 0 ? calloc((size_t)np + 1, sizeof *in) : NULL; /* tokens, then the params */
    int nin = 0;
    af_graph *g = NULL;
    af_model *m = NULL;
    if (!in) fprintf(stderr, "aneforge eval llama: out of memory\n");
    else m = compile_forward(em, B, T, (int)a->threads, &g, in, &nin);
    float *x = malloc((size_t)B * (size_t)T * sizeof *x), *out = malloc((size_t)B * (size_t)T * (size_t)V * sizeof *out);
    af_buffer *bin = malloc((size_t)nin * sizeof *bin);
    int rc = 0;
    if (!m) rc = 1;
    else if (!x || !out || !bin) {
        fprintf(stderr, "aneforge eval llama: out of memory\n");
        rc = 1;
    }
    for (int i = 1; !rc && i < nin; i++) bin[i] = AF_BUF_F32(af_tensor_value(in[i]), af_shape_count(af_tensor_shape(in[i])));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double sum = 0;
    /* Progress on stderr: asked for, or a terminal watching more than one batch. */
    const bool tty = isatty(fileno(stderr)), progress = a->progress || (tty && windows > B);
    for (int64_t w0 = 0; !rc && w0 < windows; w0 += B) {
        int used = (int)(windows - w0 < B ? windows - w0 : B);
        /* A short last batch repeats its last window; only the used rows are scored. */
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) x[b * T + i] = tok[(w0 + (b < used ? b : used - 1)) * T + i];
        bin[0] = AF_BUF_F32(x, (int64_t)B * T);
        af_buffer bout = AF_BUF_F32(out, (int64_t)B * T * V);
        if (af_run(m, bin, &bout)) {
            fprintf(stderr, "aneforge eval llama: %s\n", af_error_message());
            rc = 1;
            break;
        }
        for (int b = 0; b < used; b++)
            for (int i = 0; i < T; i++) sum += llama_nll(out + ((int64_t)b * T + i) * V, V, tok[(w0 + b) * T + i + 1]);
        if (progress)
            fprintf(stderr, "%seval: %lld/%lld windows (%lld tokens)%s", tty ? "\r\033[K" : "", (long long)(w0 + used),
                    (long long)windows, (long long)(w0 + used) * T, tty ? "" : "\n");
    }
    if (progress && tty) fputs("\r\033[K", stderr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc) {
        int64_t scored = windows * T;
        double loss = sum / (double)scored, secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (a->json)
            printf("{\"loss\":%s,\"perplexity\":%s,\"tokens\":%lld,\"windows\":%lld,\"seq\":%d,\"vocab\":%d,\"seconds\":%.3f}\n",
                   JNUM("%.6f", loss), JNUM("%.4f", exp(loss)), (long long)scored, (long long)windows, T, V, secs);
        else
            printf("%s: %.4f nats per token (perplexity %.2f) over %lld tokens in %lld windows of %d\n", a->data, loss,
                   exp(loss), (long long)scored, (long long)windows, T);
    }
    free(x);
    free(out);
    free(bin);
    free(in);
    af_model_free(m);
    af_graph_free(g);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "llama")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage(stdout); return 0; }
        return cli_usage_error("aneforge eval", "%s", "say what to evaluate: 'aneforge eval llama --model M --data tokens.bin'");
    }
    eval_args a = { 0 };
    int rc = parse_args(argc - 1, argv + 1, &a);
    if (rc) return rc == 1 ? 0 : rc;
    /* A Hugging Face folder runs as itself (any architecture), not converted to llama2.c's layout. */
    af_hf_model *hf = llama_is_hf_folder(a.model) ? af_hf_load(a.model) : NULL;
    af_llama_weights *w = hf || llama_is_hf_folder(a.model) ? NULL : llama_model_load(a.model);
    if (!w && !hf) {
        fprintf(stderr, "aneforge eval llama: --model: %s\n", af_error_message());
        return 2;
    }
    eval_model em = { .w = w, .hf = hf };
    if (hf) em.vocab = af_hf_vocab_size(hf), em.seq_len = af_hf_max_positions(hf), em.nparams = af_hf_param_count(hf);
    else {
        const af_llama_config *c = af_llama_weights_config(w);
        em.vocab = c->vocab_size, em.seq_len = c->seq_len, em.nparams = af_llama_param_count(c);
    }
    em.default_seq = hf && em.seq_len > HF_DEFAULT_SEQ ? HF_DEFAULT_SEQ : em.seq_len;
    int32_t *tok = NULL;
    int64_t n = 0;
    if (af_tokens_read(a.data, 0, &tok, &n)) {
        fprintf(stderr, "aneforge eval llama: --data: %s\n", af_error_message());
        af_llama_weights_free(w);
        af_hf_free(hf);
        return 2;
    }
    int V = em.vocab;
    for (int64_t i = 0; i < n; i++)
        if (tok[i] >= V) {
            fprintf(stderr, "aneforge eval llama: %s holds id %d at %lld but the model's vocab is %d: tokenize with the model's tokenizer\n",
                    a.data, tok[i], (long long)i, V);
            rc = 2;
            break;
        }
    if (!rc) rc = evaluate(&a, &em, tok, n);
    af_free(tok);
    af_llama_weights_free(w);
    af_hf_free(hf);
    return rc;
}
