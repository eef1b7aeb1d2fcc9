/* aneforge hf: Hugging Face model folders (include/aneforge_hf.h).
 *   hf info DIR                         the architecture and tensors
 *   hf forward DIR --tokens 1,2,3;4,5,6 -o OUT.safetensors
 *                                       logits, the next-token loss and every gradient,
 *                                       for comparing with transformers (tests/python)
 *   hf train DIR --data train.bin -o OUTDIR [train options]
 *                                       full fine-tuning on every plan; writes a folder
 *                                       transformers loads
 *   hf convert --from-llama model.bin -o DIR | --to-llama DIR -o model.bin */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "cli_args.h"
#include "train_opts.h"
#include "aneforge.h"
#include "aneforge_hf.h"
#include "aneforge_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge hf", fmt, a); }

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge hf info DIR\n"
               "       aneforge hf forward DIR --tokens 1,2,3;4,5,6 -o OUT.safetensors [--target cpu|ane-sim]\n"
               "       aneforge hf train DIR --data train.bin -o OUTDIR [--steps N] [--seq T] [train options]\n"
               "                [--lora-rank R [--lora-alpha A] [--lora-targets q,k,v,o,gate,up,down] | --adapter ADIR]\n"
               "                [--merge]\n"
               "       aneforge hf convert --from-llama model.bin -o DIR | --to-llama DIR -o model.bin\n"
               "       aneforge hf encode tokenizer.json [--special] TEXT | --file F   (F: texts separated by NUL bytes;\n"
               "                                       --special: the post-processor's BOS/EOS template too)\n"
               "       aneforge hf decode tokenizer.json [--keep-special] 1,2,3 | --file F   (F: lines of ids; each text\n"
               "                                       after a line of its length in bytes; special tokens skipped unless kept)\n\n"
               "DIR is a Hugging Face model folder (config.json, model.safetensors or shards) of\n"
               "LlamaForCausalLM (Llama 2/3, SmolLM), Qwen2ForCausalLM or Qwen3ForCausalLM. forward\n"
               "writes logits [B, T-1, V] of each row's first T-1 tokens, the mean next-token loss and\n"
               "the gradient of every tensor (grad.<name>; with --adapter ADIR, a PEFT LoRA folder, of the\n"
               "adapters). train with --lora-rank trains LoRA adapters over frozen weights (alpha default\n"
               "2 x rank, targets default q,v) and writes them as a PEFT folder, or with --merge the merged\n"
               "model. docs/hf.md has the details.\n");
}

static af_hf_model *load(const char *dir) {
    af_hf_model *m = af_hf_load(dir);
    if (!m) fprintf(stderr, "aneforge hf: %s\n", af_error_message());
    return m;
}

static int info(const char *dir) {
    af_hf_model *m = load(dir);
    if (!m) return 1;
    int64_t total = 0;
    printf("%s: %s, vocab %d, %d tensors\n", dir, af_hf_architecture(m), af_hf_vocab_size(m), af_hf_param_count(m));
    for (int i = 0; i < af_hf_param_count(m); i++) {
        af_shape s = af_hf_param_shape(m, i);
        total += af_shape_count(s);
        if (s.rank == 2) printf("  %-52s [%lld, %lld]\n", af_hf_param_name(m, i), (long long)s.dim[0], (long long)s.dim[1]);
        else printf("  %-52s [%lld]\n", af_hf_param_name(m, i), (long long)s.dim[0]);
    }
    printf("parameters: %lld\n", (long long)total);
    af_hf_free(m);
    return 0;
}

/* "1,2,3;4,5,6": rows of equal length. */
static int parse_tokens(const char *s, int vocab, float **out, int *rows, int *cols) {
    int n = 0, r = 1, c = 0, first = -1;
    float *v = malloc(sizeof(float) * (strlen(s) + 1));
    if (!v) return -1;
    const char *p = s;
    for (;;) {
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p || id < 0 || id >= vocab) { free(v); return -1; }
        v[n++] = (float)id;
        c++;
        p = end;
        if (*p == ',') { p++; continue; }
        if (*p == ';' || !*p) {
            if (first < 0) first = c;
            else if (c != first) { free(v); return -1; }
            if (!*p) break;
            p++;
            r++;
            c = 0;
            continue;
        }
        free(v);
        return -1;
    }
    *out = v;
    *rows = r;
    *cols = first;
    return first >= 2 ? 0 : -1;
}

static int forward(int argc, char **argv) {
    const char *dir = NULL, *tokens = NULL, *out = NULL, *target = "cpu", *adapter = NULL;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (k[0] != '-') { if (dir) return bad("unexpected argument '%s'", k); dir = k; continue; }
        if (!v) return bad("%s needs a value", k);
        i++;
        if (!strcmp(k, "--tokens")) tokens = v;
        else if (!strcmp(k, "-o")) out = v;
        else if (!strcmp(k, "--target")) target = v;
        else if (!strcmp(k, "--adapter")) adapter = v;
        else return bad("unknown option '%s'", k);
    }
    if (!dir || !tokens || !out) return bad("%s", "forward needs DIR, --tokens and -o");
    af_compile_opts co = { 0 };
    if (af_target_parse(target, &co.target, &co.family)) return bad("unknown --target '%s'", target);
    af_hf_model *m = load(dir);
    if (!m) return 1;
    if (adapter && af_hf_lora_load(m, adapter)) {
        fprintf(stderr, "aneforge hf: --adapter: %s\n", af_error_message());
        af_hf_free(m);
        return 1;
    }
    int V = af_hf_vocab_size(m), B, T1, rc = 1, n = af_hf_param_count(m);
    float *ids = NULL;
    if (parse_tokens(tokens, V, &ids, &B, &T1)) { af_hf_free(m); return bad("--tokens: rows of at least 2 ids below the vocab size, '%s'", tokens); }
    int T = T1 - 1;
    float *x = malloc(sizeof(float) * (size_t)B * T), *y = calloc((size_t)B * T * V, sizeof(float));
    af_graph *g = af_graph_new();
    af_tensor **p = calloc((size_t)n, sizeof *p), **gr = calloc((size_t)n, sizeof *gr), **in = calloc((size_t)n + 2, sizeof *in),
              **outs = calloc((size_t)n + 2, sizeof *outs);
    af_buffer *bin = calloc((size_t)n + 2, sizeof *bin), *bout = calloc((size_t)n + 2, sizeof *bout);
    af_safetensor *so = calloc((size_t)n + 2, sizeof *so);
    char **names = calloc((size_t)n, sizeof *names);
    af_model *model = NULL;
    if (!x || !y || !g || !p || !gr || !in || !outs || !bin || !bout || !so || !names) { fprintf(stderr, "aneforge hf: out of memory\n"); goto done; }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = ids[b * T1 + t];
            y[((size_t)b * T + t) * V + (size_t)ids[b * T1 + t + 1]] = 1;
        }
    af_graph_set_target(g, co.target);
    af_tensor *tok = af_input(g, "tokens", AF_F32, AF_SHAPE(B, T)), *tgt = af_input(g, "targets", AF_F32, AF_SHAPE(B * T, V));
    if (af_hf_params_new(g, m, p, n) != n) goto fail;
    af_tensor *logits = af_hf_forward(m, tok, p);
    af_loss *loss = logits ? af_softmax_cross_entropy(af_reshape(logits, AF_SHAPE(B * T, V)), tgt) : NULL;
    if (!loss || af_backward(loss, n, p, gr, NULL)) goto fail;
    in[0] = tok;
    in[1] = tgt;
    outs[0] = logits;
    outs[1] = af_loss_value(loss);
    for (int i = 0; i < n; i++) { in[i + 2] = p[i]; outs[i + 2] = gr[i]; }
    if (!(model = af_compile(g, n + 2, in, n + 2, outs, &co))) goto fail;
    for (int i = 0; i < n + 2; i++) {
        af_shape s = i < 2 ? af_tensor_shape(in[i]) : af_hf_param_shape(m, i - 2);
        af_shape os = af_tensor_shape(outs[i]);
        float *ib = i == 0 ? x : i == 1 ? y : af_tensor_value(p[i - 2]);
        bin[i] = AF_BUF_F32(ib, af_shape_count(s));
        float *ob = malloc(sizeof(float) * (size_t)af_shape_count(os));
        if (!ob) { fprintf(stderr, "aneforge hf: out of memory\n"); goto done; }
        bout[i] = AF_BUF_F32(ob, af_shape_count(os));
        so[i].data = ob;
        so[i].rank = os.rank;
        for (int r = 0; r < os.rank; r++) so[i].shape[r] = os.dim[r];
    }
    if (af_run(model, bin, bout)) goto fail;
    so[0].name = "logits";
    so[1].name = "loss";
    for (int i = 0; i < n; i++) {
        const char *nm = af_hf_param_name(m, i);
        names[i] = malloc(strlen(nm) + 6);
        if (!names[i]) goto done;
        sprintf(names[i], "grad.%s", nm);
        so[i + 2].name = names[i];
    }
    if (af_safetensors_write(out, n + 2, so)) goto fail;
    fprintf(stderr, "hf forward: %s: loss %.6f over %d x %d tokens (%s)\n", out, ((float *)bout[1].data)[0], B, T, target);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "aneforge hf: %s\n", g && af_graph_error(g) ? af_graph_error(g) : af_error_message());
done:
    for (int i = 0; bout && i < n + 2; i++) free(bout[i].data);
    for (int i = 0; names && i < n; i++) free(names[i]);
    af_model_free(model);
    af_graph_free(g);
    free(x); free(y); free(ids); free(p); free(gr); free(in); free(outs); free(bin); free(bout); free(so); free(names);
    af_hf_free(m);
    return rc;
}

static int train(int argc, char **argv) {
    const char *dir = NULL, *data = NULL, *out = NULL, *targets = NULL, *adapter = NULL;
    long steps = 20, seq = 32, seed = 1, rank = 0;
    float alpha = 0;
    bool merge = false;
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.batch = 4;
    o.lr = 1e-3f;
    train_opt_flags fl = { 0 };
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (k[0] != '-') { if (dir) return bad("unexpected argument '%s'", k); dir = k; continue; }
        if (train_opt_flag(k, &o)) continue;
        if (!strcmp(k, "--merge")) { merge = true; continue; }
        if (!v) return bad("%s needs a value", k);
        int r = train_opt_parse(k, v, &o, &fl, "aneforge hf train");
        if (r < 0) return 2;
        i++;
        if (r) continue;
        if (!strcmp(k, "--data")) data = v;
        else if (!strcmp(k, "-o")) out = v;
        else if (!strcmp(k, "--steps")) { if (cli_parse_long(v, 1, 100000000, &steps)) return bad("--steps: a count >= 1, not '%s'", v); }
        else if (!strcmp(k, "--seq")) { if (cli_parse_long(v, 1, 1 << 20, &seq)) return bad("--seq: a length >= 1, not '%s'", v); }
        else if (!strcmp(k, "--lora-rank")) { if (cli_parse_long(v, 1, 4096, &rank)) return bad("--lora-rank: 1..4096, not '%s'", v); }
        else if (!strcmp(k, "--lora-alpha")) { if (cli_parse_float(v, &alpha) || !(alpha > 0)) return bad("--lora-alpha: a positive number, not '%s'", v); }
        else if (!strcmp(k, "--lora-targets")) targets = v;
        else if (!strcmp(k, "--adapter")) adapter = v;
        else if (!strcmp(k, "--seed")) { if (cli_parse_long(v, 0, 1L << 30, &seed)) return bad("--seed: a number, not '%s'", v); }
        else return bad("unknown option '%s'", k);
    }
    if (!dir || !data || !out) return bad("%s", "train needs DIR, --data (a uint16 token file) and -o OUTDIR");
    if ((targets || alpha > 0) && !rank) return bad("%s", "--lora-targets and --lora-alpha need --lora-rank");
    if (adapter && rank) return bad("%s", "give --adapter (continue a PEFT adapter) or --lora-rank (new adapters), not both");
    if (merge && !rank && !adapter) return bad("%s", "--merge folds LoRA adapters: give --lora-rank or --adapter");
    if (train_opt_finish(&o, &fl, "aneforge hf train")) return 2;
    o.objective = AF_OBJ_CUSTOM;
    af_hf_model *m = load(dir);
    if (!m) return 1;
    if ((rank && af_hf_lora_add(m, (int)rank, alpha > 0 ? alpha : 2.0f * (float)rank, targets ? targets : "q,v", (uint64_t)seed)) ||
        (adapter && af_hf_lora_load(m, adapter))) {
        fprintf(stderr, "aneforge hf train: %s\n", af_error_message());
        af_hf_free(m);
        return 1;
    }
    bool lora = rank || adapter;
    int V = af_hf_vocab_size(m), T = (int)seq, B = o.batch, rc = 1;
    int32_t *tokens = NULL;
    int64_t ntok = 0;
    af_trainer *t = NULL;
    float *x = NULL, *y = NULL;
    if (af_tokens_read(data, V, &tokens, &ntok)) { fprintf(stderr, "aneforge hf train: --data: %s\n", af_error_message()); goto done; }
    if (ntok < T + 1) { fprintf(stderr, "aneforge hf train: --data holds %lld tokens, fewer than --seq + 1\n", (long long)ntok); goto done; }
    af_net net = af_net_hf_borrow(m, T); /* m outlives the trainer */
    t = net.ctx ? af_trainer_new(&net, &o) : NULL;
    af_net_free(&net);
    if (!t) { fprintf(stderr, "aneforge hf train: %s\n", af_error_message()); goto done; }
    int64_t per = (int64_t)B * af_trainer_batches_per_call(t);
    x = malloc(sizeof(float) * (size_t)(per * T));
    y = malloc(sizeof(float) * (size_t)(per * T * V));
    if (!x || !y) { fprintf(stderr, "aneforge hf train: out of memory\n"); goto done; }
    uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 7;
    double first = NAN, last = NAN;
    for (long step = 0; step < steps; step += af_trainer_steps_per_call(t)) {
        memset(y, 0, sizeof(float) * (size_t)(per * T * V));
        for (int64_t b = 0; b < per; b++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t at = (int64_t)((s >> 33) % (uint64_t)(ntok - T));
            for (int i = 0; i < T; i++) {
                x[b * T + i] = tokens[at + i];
                y[(b * T + i) * V + tokens[at + i + 1]] = 1;
            }
        }
        af_step_info info;
        struct timespec t0, t1, c0, c1; /* wall and the process's CPU time (all threads): on a shared machine the second is steadier */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        if (af_trainer_step(t, x, y, &info)) { fprintf(stderr, "aneforge hf train: %s\n", af_error_message()); goto done; }
        if (isnan(first)) first = info.loss;
        last = info.loss;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        fprintf(stderr, "step %lld loss %.4f ms %.1f cpu_ms %.1f\n", (long long)info.step, info.loss,
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6,
                (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-6);
    }
    int n = af_trainer_num_params(t);
    af_tensor **p = malloc(sizeof *p * (size_t)n);
    if (!p) goto done;
    for (int i = 0; i < n; i++) {
        p[i] = af_trainer_param(t, i);
        if (af_trainer_read_param(t, i, af_tensor_value(p[i]))) { free(p); goto done; }
    }
    af_status st = af_hf_set_params(m, p, n);
    free(p);
    if (st == AF_OK && lora && merge) st = af_hf_lora_merge(m);
    if (st == AF_OK) st = lora && !merge ? af_hf_lora_save(m, out) : af_hf_save(m, out);
    if (st) { fprintf(stderr, "aneforge hf train: %s\n", af_error_message()); goto done; }
    fprintf(stderr, "hf train: loss %.4f -> %.4f; wrote %s\n", first, last, out);
    rc = 0;
done:
    af_trainer_free(t);
    af_free(tokens); free(x); free(y);
    af_hf_free(m);
    return rc;
}

static int convert(int argc, char **argv) {
    const char *from = NULL, *to = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return bad("%s needs a value", k);
        i++;
        if (!strcmp(k, "--from-llama")) from = v;
        else if (!strcmp(k, "--to-llama")) to = v;
        else if (!strcmp(k, "-o")) out = v;
        else return bad("unknown option '%s'", k);
    }
    if (!out || !!from == !!to) return bad("%s", "convert needs one of --from-llama model.bin / --to-llama DIR, and -o");
    if (from) {
        af_llama_weights *w = af_llama_load(from, NULL);
        af_hf_model *m = w ? af_hf_from_llama(w) : NULL;
        af_status st = m ? af_hf_save(m, out) : AF_ERR_INVALID;
        if (st) fprintf(stderr, "aneforge hf convert: %s\n", af_error_message());
        af_hf_free(m);
        af_llama_weights_free(w);
        return st ? 1 : 0;
    }
    af_hf_model *m = load(to);
    af_llama_weights *w = m ? af_hf_to_llama(m) : NULL;
    af_status st = w ? af_llama_save(w, out, 0) : AF_ERR_INVALID;
    if (st) fprintf(stderr, "aneforge hf convert: %s\n", af_error_message());
    af_llama_weights_free(w);
    af_hf_free(m);
    return st ? 1 : 0;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    char *buf = malloc(cap + 1);
    *len = 0;
    for (size_t got; buf && (got = fread(buf + *len, 1, cap - *len, f)) > 0;) {
        *len += got;
        if (*len == cap) { char *b = realloc(buf, (cap *= 2) + 1); if (!b) { free(buf); buf = NULL; } else buf = b; }
    }
    bool err = ferror(f);
    fclose(f);
    if (err) { free(buf); return NULL; }
    if (buf) buf[*len] = 0;
    return buf;
}

/* hf encode tokenizer.json [--special] TEXT | --file F (texts separated by NUL bytes): one line of ids per text
 * hf decode tokenizer.json [--keep-special] IDS | --file F (lines of ids): the text and a newline; with
 *                                                           --file each text after a line of its length in bytes */
static int codec(int argc, char **argv, bool dec) {
    const char *verb = dec ? "decode" : "encode";
    bool opt = argc > 3 && !strcmp(argv[3], dec ? "--keep-special" : "--special");
    if (opt) { /* drop the flag from argv */
        for (int i = 3; i + 1 < argc; i++) argv[i] = argv[i + 1];
        argc--;
    }
    if (argc != 4 && !(argc == 5 && !strcmp(argv[3], "--file")))
        return bad(dec ? "decode takes tokenizer.json, optionally --keep-special, then IDS (1,2,3) or --file F%s"
                       : "encode takes tokenizer.json, optionally --special, then TEXT or --file F%s", "");
    af_hf_tokenizer *t = af_hf_tokenizer_load(argv[2]);
    if (!t) { fprintf(stderr, "aneforge hf %s: %s\n", verb, af_error_message()); return 1; }
    char *buf = NULL;
    size_t len = 0;
    if (argc == 5) {
        if (!(buf = read_all(argv[4], &len))) { fprintf(stderr, "aneforge hf %s: cannot read %s\n", verb, argv[4]); af_hf_tokenizer_free(t); return 1; }
    } else {
        len = strlen(argv[3]);
        if ((buf = malloc(len + 1))) memcpy(buf, argv[3], len + 1);
    }
    int rc = buf ? 0 : 1;
    char sep = dec ? '\n' : 0;
    for (size_t at = 0; buf && at <= len && !rc;) {
        size_t end = at;
        while (end < len && buf[end] != sep) end++;
        if (dec && argc == 5 && end == len && at == len) break; /* the last line's newline */
        if (dec) {
            int64_t n = 0;
            int32_t *ids = malloc(sizeof *ids * (end - at + 1));
            char *p = buf + at;
            buf[end] = 0;
            while (ids && *p) {
                char *q;
                long v = strtol(p, &q, 10);
                if (q == p || v < INT32_MIN || v > INT32_MAX) { rc = bad("decode: ids are integers separated by spaces or commas, not '%.40s'", p); break; }
                ids[n++] = (int32_t)v;
                p = q + strspn(q, " ,");
            }
            char *text;
            size_t tl;
            if (!rc && (!ids || af_hf_tokenizer_decode(t, ids, n, !opt, &text, &tl))) {
                fprintf(stderr, "aneforge hf decode: %s\n", ids ? af_error_message() : "out of memory");
                rc = 1;
            } else if (!rc) {
                if (argc == 5) printf("%zu\n", tl); /* texts may hold any byte, NUL and newline too */
                fwrite(text, 1, tl, stdout);
                if (argc == 4) putchar('\n');
                af_free(text);
            }
            free(ids);
        } else {
            int32_t *ids;
            int64_t n;
            af_status st = opt ? af_hf_tokenizer_encode_special(t, buf + at, end - at, &ids, &n)
                               : af_hf_tokenizer_encode(t, buf + at, end - at, &ids, &n);
            if (st) { fprintf(stderr, "aneforge hf encode: %s\n", af_error_message()); rc = 1; break; }
            for (int64_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
            printf("\n");
            af_free(ids);
        }
        at = end + 1;
        if (argc == 4) break;
    }
    free(buf);
    af_hf_tokenizer_free(t);
    if (fflush(stdout) || ferror(stdout)) { fprintf(stderr, "aneforge hf %s: cannot write the output\n", verb); rc = 1; }
    return rc;
}

int cmd_hf(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) { usage(argc < 2 ? stderr : stdout); return argc < 2 ? 2 : 0; }
    if (!strcmp(argv[1], "info")) return argc == 3 ? info(argv[2]) : bad("%s", "info takes one DIR");
    if (!strcmp(argv[1], "forward")) return forward(argc, argv);
    if (!strcmp(argv[1], "train")) return train(argc, argv);
    if (!strcmp(argv[1], "convert")) return convert(argc, argv);
    if (!strcmp(argv[1], "encode")) return codec(argc, argv, false);
    if (!strcmp(argv[1], "decode")) return codec(argc, argv, true);
    return bad("unknown verb '%s' (info, forward, train, convert, encode, decode)", argv[1]);
}
