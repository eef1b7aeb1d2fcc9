#define _POSIX_C_SOURCE 200809L /* fileno */
/* aneforge: dispatches to one subcommand per file. */
#include "cli.h"
#include "cli_out.h"
#include "aneforge.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *help;
} commands[] = {
    { "ops", cmd_ops, "print the op table (--json for JSON)" },
    { "op", cmd_op, "run one op, fused or bridge, on .npy inputs (op NAME --in x=FILE.npy --attr k=v --out DIR)" },
    { "data", cmd_data, "fetch and inspect datasets (data fetch mnist|fashion|text, data tokenize, data info)" },
    { "bench", cmd_bench, "run benchmarks and print JSON (bench ops)" },
    { "tokenizer", cmd_tokenizer, "train, write and use llama2.c-format tokenizers (tokenizer train|bytes|encode|decode|info)" },
    { "train", cmd_train, "train the built-in mlp or cnn (mnist, fashion, cifar10) or a llama (train llama)" },
    { "dashboard", cmd_dashboard, "watch a training log (train --log) live in the terminal" },
    { "report", cmd_report, "one self-contained HTML page of training logs: curves, configuration, samples" },
    { "mil", cmd_mil, "write and run Apple MIL programs (mil emit, mil run, mil check)" },
    { "cost", cmd_cost, "estimate on-device ms per training step on M1..M5 for each plan (cost llama)" },
    { "generate", cmd_generate, "sample from a llama2.c model file (KV cache, run.c's sampler)" },
    { "eval", cmd_eval, "mean loss of a model over a token file (eval llama)" },
    { "hf", cmd_hf, "Hugging Face model folders: info, forward (logits and gradients), train, convert" },
    { "export", cmd_export, "write a llama2.c model file, a Hugging Face folder (--format hf) or a Core ML package (--format coreml)" },
    { "run", cmd_run_package, "run a Core ML package or MIL program on .npy inputs (the same as mil run)" },
    { "demo", cmd_demo, "build, compile and run a small example model" },
    { "doctor", cmd_doctor, "check the Neural Engine: chip, framework, compile and run a one-op program" },
};

static void usage(FILE *f) {
    fprintf(f, "aneforge %s: train neural networks on the Apple Neural Engine (or its simulator)\n\n"
               "usage: aneforge <command> [options]\n\ncommands:\n", AF_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun 'aneforge <command> --help' for a command's options.\n");
}

/* The library's warnings go to stderr, on their own line: a live progress bar is
 * redrawn after them. */
static void log_to_stderr(af_log_level level, const char *message, void *user) {
    (void)user;
    if (isatty(fileno(stderr))) fputs("\r\033[K", stderr); /* clear a half-drawn progress line */
    fprintf(stderr, "aneforge: %s%s\n", level == AF_LOG_WARN ? "warning: " : "", message);
}

int main(int argc, char **argv) {
    af_set_log(log_to_stderr, NULL);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("aneforge %s\n", af_version());
        /* What the CPU backend runs on this machine, from the CPU's own features. */
        af_cpu_info ci;
        af_cpu_info_get(&ci);
        printf("cpu: %s; features: %s; gemm: %s (kernel %s %dx%d); blas: %s\n", ci.model, ci.features, ci.gemm_path,
               ci.gemm_kernel, ci.gemm_mr, ci.gemm_nr, ci.blas ? ci.blas : "none");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            int rc = commands[i].run(argc - 1, argv + 1);
            /* --json and listings go to stdout: a failed write there (a full disk) is a failure. */
            return cli_stdout_check("aneforge") && !rc ? 1 : rc;
        }
    fprintf(stderr, "aneforge: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
