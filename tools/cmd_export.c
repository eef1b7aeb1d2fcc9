/* aneforge export: writes a llama2.c model file from a `train llama --save` checkpoint
 * (or converts a llama2.c file between versions 0 and 1), so llama2.c's run.c and
 * export tooling can load what aneforge trained. */
#include "cli.h"
#include "cli_args.h"
#include "llama_ckpt.h"
#include "aneforge.h"
#include "aneforge_llama.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge export --ckpt PATH -o model.bin [--version 0|1]\n\n"
               "Writes the model in a 'train llama --save' checkpoint (or in a llama2.c model file) as a\n"
               "llama2.c model file: version 0 (default; what llama2.c's run.c reads) or version 1\n"
               "(export.py's \"ak42\" header). Pair it with the tokenizer the model was trained with:\n"
               "  run model.bin -z tok.bin\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge export", fmt, a); }

int cmd_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL;
    long version = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 0; }
        if (k[0] != '-') return bad("unexpected argument '%s'", k);
        if (!v) return bad("%s needs a value", k);
        i++;
        if (!strcmp(k, "--ckpt")) ckpt = v;
        else if (!strcmp(k, "-o") || !strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--version")) { if (cli_parse_long(v, 0, 1, &version)) return bad("--version is 0 or 1, not '%s'", v); }
        else return bad("unknown option '%s'", k);
    }
    if (!ckpt) return bad("%s", "--ckpt is required: a 'train llama --save' checkpoint or a llama2.c model file");
    if (!out) return bad("%s", "-o is required: where to write the model file");
    af_llama_weights *w = llama_model_load(ckpt);
    if (!w) {
        fprintf(stderr, "aneforge export: --ckpt: %s\n", af_error_message());
        return 2;
    }
    int rc = 0;
    if (af_llama_save(w, out, (int)version)) {
        fprintf(stderr, "aneforge export: %s\n", af_error_message());
        rc = 1;
    } else {
        const af_llama_config *c = af_llama_weights_config(w);
        fprintf(stderr, "export: %s: llama2.c version %ld, dim %d, %d layers, %d heads (%d KV), hidden %d, vocab %d, seq_len %d\n",
                out, version, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim, c->vocab_size, c->seq_len);
    }
    af_llama_weights_free(w);
    return rc;
}
