/* `aneforge tokenizer`: train a BPE tokenizer (llama2.c's tokenizer.bin), write the
 * byte-level one, encode, decode and inspect. */
#include "cli.h"
#include "text_cli.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge tokenizer <command> [options]\n\n"
            "commands:\n"
            "  train --vocab N IN.txt -o TOK.bin [--sep LINE]   learn a BPE vocabulary of N tokens (260..65536)\n"
            "                                                   from the documents of IN.txt (cut at lines\n"
            "                                                   equal to LINE, default \"%%\"; '' = one document)\n"
            "  bytes -o TOK.bin                                 write the byte-level tokenizer (259 tokens)\n"
            "  encode --tokenizer TOK.bin [--bos] [--eos] [--no-prefix] TEXT\n"
            "                                                   print TEXT's token ids, encoded as llama2.c's run.c does\n"
            "  decode --tokenizer TOK.bin ID...                 print the text of the ids\n"
            "  info --tokenizer TOK.bin [--show N]              vocabulary size and the first N learnt tokens\n\n"
            "TOK.bin is llama2.c's tokenizer.bin format; llama2.c's own tokenizer.bin works too.\n");
}

/* Prints bytes with C escapes, for showing tokens. */
static void print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\\' || c == '"') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

static int train(const char *in, const char *out, int vocab, const char *sep) {
    text_docs d;
    if (text_docs_read(in, sep, &d)) return 1;
    clock_t t0 = clock();
    af_tokenizer *t = af_tokenizer_train(d.n, d.doc, d.len, vocab);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    int rc = 1;
    if (!t || af_tokenizer_save(t, out) != AF_OK) {
        fprintf(stderr, "aneforge tokenizer train: %s\n", af_error_message());
        goto done;
    }
    /* How well it compresses its own training text. */
    int64_t bytes = 0, tokens = 0;
    int nchar = 0, nmerge = 0;
    for (int64_t i = 0; i < d.n; i++) {
        int32_t *ids;
        int64_t n;
        if (af_tokenizer_encode(t, d.doc[i], d.len[i], 0, &ids, &n) != AF_OK) {
            fprintf(stderr, "aneforge tokenizer train: %s\n", af_error_message());
            goto done;
        }
        bytes += (int64_t)d.len[i];
        tokens += n;
        af_free(ids);
    }
    for (int id = 259; id < af_tokenizer_vocab_size(t); id++) {
        size_t len;
        const char *s = af_tokenizer_token(t, id, &len, NULL);
        /* characters are one code point: their first byte says how long it is */
        unsigned char c = (unsigned char)s[0];
        size_t cp = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len == cp) nchar++;
        else nmerge++;
    }
    printf("tokenizer: %d tokens (3 special, 256 bytes, %d merges, %d characters) from %lld documents, %lld bytes, "
           "in %.1f s\n", af_tokenizer_vocab_size(t), nmerge, nchar, (long long)d.n, (long long)bytes, secs);
    if (af_tokenizer_vocab_size(t) < vocab)
        printf("tokenizer: stopped below --vocab %d: no pair of tokens occurs twice more\n", vocab);
    printf("tokenizer: the training text encodes to %lld tokens (%.2f bytes per token): %s\n", (long long)tokens,
           tokens ? (double)bytes / (double)tokens : 0.0, out);
    rc = 0;
done:
    af_tokenizer_free(t);
    text_docs_free(&d);
    return rc;
}

static int encode(af_tokenizer *t, const char *text, unsigned flags) {
    int32_t *ids;
    int64_t n;
    if (af_tokenizer_encode(t, text, strlen(text), flags, &ids, &n) != AF_OK) {
        fprintf(stderr, "aneforge tokenizer encode: %s\n", af_error_message());
        return 1;
    }
    for (int64_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", (int)ids[i]);
    printf("\n");
    af_free(ids);
    return 0;
}

static int decode(af_tokenizer *t, int nids, char **args) {
    int32_t *ids = malloc(((size_t)nids + 1) * sizeof *ids);
    if (!ids) return 1;
    for (int i = 0; i < nids; i++) {
        char *end;
        long v = strtol(args[i], &end, 10);
        if (*end || end == args[i] || v < 0 || v > 0x7fffffff) {
            fprintf(stderr, "aneforge tokenizer decode: '%s' is not a token id\n", args[i]);
            free(ids);
            return 2;
        }
        ids[i] = (int32_t)v;
    }
    char *text;
    size_t len;
    int rc = 0;
    if (af_tokenizer_decode(t, ids, nids, &text, &len) != AF_OK) {
        fprintf(stderr, "aneforge tokenizer decode: %s\n", af_error_message());
        rc = 1;
    } else {
        fwrite(text, 1, len, stdout);
        printf("\n");
        af_free(text);
    }
    free(ids);
    return rc;
}

static int info(af_tokenizer *t, const char *path, int show) {
    int n = af_tokenizer_vocab_size(t), longest = 0;
    for (int id = 0; id < n; id++) {
        size_t len;
        af_tokenizer_token(t, id, &len, NULL);
        if ((int)len > longest) longest = (int)len;
    }
    printf("%s: %d tokens, the longest %d bytes\n", path, n, longest);
    for (int id = 259; id < n && id < 259 + show; id++) {
        size_t len;
        float score;
        const char *s = af_tokenizer_token(t, id, &len, &score);
        printf("  %5d %10g \"", id, (double)score);
        print_escaped(s, len);
        printf("\"\n");
    }
    return 0;
}

int cmd_tokenizer(int argc, char **argv) {
    const char *sub = argc > 1 ? argv[1] : NULL, *tok_path = NULL, *out = NULL, *in = NULL, *sep = TEXT_DEFAULT_SEP, *v;
    int vocab = 0, show = 20, nargs = 0;
    unsigned flags = 0;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return 1;
    if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        usage(sub ? stdout : stderr);
        free(args);
        return sub ? 0 : 2;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(args);
            return 0;
        } else if ((v = text_opt(argc, argv, &i, "--tokenizer"))) {
            tok_path = v;
        } else if ((v = text_opt(argc, argv, &i, "-o"))) {
            out = v;
        } else if ((v = text_opt(argc, argv, &i, "--vocab"))) {
            vocab = atoi(v);
        } else if ((v = text_opt(argc, argv, &i, "--sep"))) {
            sep = v;
        } else if ((v = text_opt(argc, argv, &i, "--show"))) {
            show = atoi(v);
        } else if (!strcmp(argv[i], "--bos")) {
            flags |= AF_ENCODE_BOS;
        } else if (!strcmp(argv[i], "--eos")) {
            flags |= AF_ENCODE_EOS;
        } else if (!strcmp(argv[i], "--no-prefix")) {
            flags |= AF_ENCODE_NO_PREFIX;
        } else if (argv[i][0] != '-' || argv[i][1] == 0) {
            args[nargs++] = argv[i];
        } else {
            fprintf(stderr, "aneforge tokenizer: unexpected argument '%s'\n\n", argv[i]);
            usage(stderr);
            free(args);
            return 2;
        }
    }
    int rc = 2;
    if (!strcmp(sub, "train") && nargs == 1 && out && vocab) {
        in = args[0];
        rc = train(in, out, vocab, sep);
    } else if (!strcmp(sub, "bytes") && nargs == 0 && out) {
        af_tokenizer *t = af_tokenizer_byte_level();
        rc = !t || af_tokenizer_save(t, out) != AF_OK;
        if (rc) fprintf(stderr, "aneforge tokenizer bytes: %s\n", af_error_message());
        else printf("tokenizer: wrote the byte-level tokenizer (259 tokens) to %s\n", out);
        af_tokenizer_free(t);
    } else if ((!strcmp(sub, "encode") && nargs == 1) || (!strcmp(sub, "decode") && nargs >= 0) ||
               (!strcmp(sub, "info") && nargs == 0)) {
        af_tokenizer *t = tok_path ? af_tokenizer_load(tok_path) : NULL;
        if (!tok_path) fprintf(stderr, "aneforge tokenizer %s: give --tokenizer TOK.bin\n", sub);
        else if (!t) fprintf(stderr, "aneforge tokenizer %s: %s\n", sub, af_error_message());
        else if (!strcmp(sub, "encode")) rc = encode(t, args[0], flags);
        else if (!strcmp(sub, "decode")) rc = decode(t, nargs, args);
        else rc = info(t, tok_path, show);
        if (tok_path && !t) rc = 1;
        af_tokenizer_free(t);
    } else {
        usage(stderr);
    }
    free(args);
    return rc;
}
