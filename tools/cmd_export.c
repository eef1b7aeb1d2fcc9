/* aneforge export: writes a llama2.c model file from a `train llama --save` checkpoint
 * (or converts a llama2.c file between versions 0 and 1), so llama2.c's run.c and
 * export tooling can load what aneforge trained; with --format coreml, a Core ML
 * package (export_coreml.c). */
#include "cli.h"
#include "cli_args.h"
#include "llama_ckpt.h"
#include "aneforge.h"
#include "aneforge_hf.h"
#include "aneforge_llama.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: aneforge export --ckpt PATH -o|--out model.bin [--version 0|1]\n"
               "       aneforge export --ckpt PATH --format hf -o DIR\n"
               "       aneforge export --format coreml -o Model.mlpackage (--ckpt TRAIN.ckpt | --mil MODEL.mil|Model.mlpackage | --sample NAME)\n"
               "                       [--batch N] [--seq S | --kv-cache [--max-seq N]] [--ios 15..18] [--precision fp16|fp32] [--classes 0..9 | --labels FILE]\n"
               "                       [--author A] [--license L] [--model-version V] [--description D]\n\n"
               "--format coreml writes a Core ML package (mlProgram, fp16 or --precision fp32, for iOS 18 / macOS 15 or the\n"
               "deployment target --ios 15, 16 or 17, i.e. macOS 12..14, specification versions 6..9; iOS 15 has fp32 inputs\n"
               "and outputs cast to fp16 inside;\n"
               "--classes or --labels (one label a line) make a classifier with classLabel and its probabilities): from a 'train --save'\n"
               "checkpoint of the mlp or cnn (the forward for --batch inputs, default 1, input \"input\", output \"output\"),\n"
               "from a llama ('train llama --save' checkpoint or llama2.c model file: the stateless forward over --seq\n"
               "token ids, default the model's seq_len, logits [batch, seq * vocab]; vocabularies up to 2048; with --kv-cache\n"
               "a decode program for iOS 18: input_ids and position [1, 1], the KV cache in Core ML states of --max-seq\n"
               "positions, default the model's seq_len, logits [1, vocab]),\n"
               "from a MIL program or another Core ML package (imported, then written again), or from one of\n"
               "'mil emit's built-in programs. See docs/coreml.md.\n\n"
               "Writes the model in a 'train llama --save' checkpoint (or in a llama2.c model file) as a\n"
               "llama2.c model file: version 0 (default; what llama2.c's run.c reads) or version 1\n"
               "(export.py's \"ak42\" header). Pair it with the tokenizer the model was trained with:\n"
               "  run model.bin -z tok.bin\n"
               "--format hf writes a Hugging Face folder instead (config.json, model.safetensors in F32) that\n"
               "transformers' LlamaForCausalLM.from_pretrained(DIR) loads; q and k are permuted from\n"
               "llama2.c's interleaved RoPE pairs to Hugging Face's half-split ones (docs/hf.md).\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge export", fmt, a); }

int cmd_export(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--format")) {
            if (!strcmp(argv[i + 1], "coreml")) return cmd_export_coreml(argc, argv);
            if (strcmp(argv[i + 1], "llama2c") && strcmp(argv[i + 1], "hf"))
                return bad("--format is llama2c (default), hf or coreml, not '%s'", argv[i + 1]);
        }
    const char *ckpt = NULL, *out = NULL, *format = "llama2c";
    long version = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 0; }
        if (k[0] != '-') return bad("unexpected argument '%s'", k);
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        if (!strcmp(k, "--ckpt")) ckpt = v;
        else if (!strcmp(k, "-o") || !strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--format")) {
            if (strcmp(v, "llama2c") && strcmp(v, "hf")) return bad("--format is llama2c or hf, not '%s'", v);
            format = v;
        } else if (!strcmp(k, "--version")) { if (cli_parse_long(v, 0, 1, &version)) return bad("--version is 0 or 1, not '%s'", v); }
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
    if (!strcmp(format, "hf")) {
        af_hf_model *m = af_hf_from_llama(w);
        if (!m || af_hf_save(m, out)) {
            fprintf(stderr, "aneforge export: %s\n", af_error_message());
            rc = 1;
        } else
            fprintf(stderr, "export: %s: Hugging Face LlamaForCausalLM folder (config.json, model.safetensors)\n", out);
        af_hf_free(m);
    } else if (af_llama_save(w, out, (int)version)) {
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
