/* aneforge eval llama: its loss equals the mean next-token cross-entropy computed
 * directly by the host KV-cache forward (af_llama_gen, an independent forward checked
 * against PyTorch in test_llama) over the same windows, for the fixture models (GQA with
 * a tied classifier, and a separate classifier; both file versions), with a batch that
 * does not divide the windows and at the default seq; a train llama checkpoint evaluates
 * to its exported file's loss and to train llama's own val_loss; `aneforge export` writes
 * that checkpoint as version 0 and 1 files holding train llama --export's weights; bad
 * input exits 2 with a message. Runs the built binary (AF_CLI). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXDIR AF_SOURCE_DIR "/tests/fixtures/llama"

static void write_random(const char *path, int n, int vocab, unsigned long long seed) {
    test_rng r = { seed };
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (int32_t)(test_uniform(&r) * vocab);
    CHECK(af_tokens_write(path, t, n) == AF_OK, "write %s: %s", path, af_error_message());
    free(t);
}

/* eval's JSON loss for model over data with extra options, checked against the host forward at seq T. */
static double check_against_host(const char *model, const char *data, const char *opts, int T) {
    char args[2048], out[4096];
    snprintf(args, sizeof args, "eval llama --model %s --data %s %s --json", model, data, opts);
    int rc = cli_run(args, 0, out, sizeof out);
    double got = json_num(out, "loss");
    af_llama_weights *w = af_llama_load(model, NULL);
    int32_t *tok = NULL;
    int64_t n = 0;
    double ref = w && !af_tokens_read(data, 0, &tok, &n) ? host_window_loss(w, tok, n, T) : NAN;
    CHECK(rc == 0 && fabs(got - ref) <= 2e-6 * fabs(ref), "%s %s: eval %.6f vs host forward %.6f (exit %d: %s)", model, opts,
          got, ref, rc, out);
    CHECK(json_num(out, "seq") == T && json_num(out, "tokens") == (double)((n - 1) / T * T), "%s %s: windows: %s", model, opts,
          out);
    af_llama_weights_free(w);
    free(tok);
    return got;
}

int main(void) {
    char dir[] = "/tmp/af_eval_llamaXXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char data[128], big[128], tr[128], va[128], ck[128], ex[128], args[2048], out[4096];
    snprintf(data, sizeof data, "%s/data.bin", dir);
    snprintf(big, sizeof big, "%s/big.bin", dir);
    snprintf(tr, sizeof tr, "%s/train.bin", dir);
    snprintf(va, sizeof va, "%s/val.bin", dir);
    snprintf(ck, sizeof ck, "%s/run.ckpt", dir);
    snprintf(ex, sizeof ex, "%s/model.bin", dir);

    /* Fixture models: a (vocab 37, seq 16, GQA, tied) and b (vocab 29, seq 12, own classifier). */
    write_random(data, 151, 29, 4);
    const char *models[4] = { FIXDIR "/model_a_v0.bin", FIXDIR "/model_a_v1.bin", FIXDIR "/model_b_v0.bin", FIXDIR "/model_b_v1.bin" };
    for (int i = 0; i < 4; i++) {
        double a = check_against_host(models[i], data, "--seq 10 --batch 4", 10); /* 15 windows: 4 + 4 + 4 + 3 */
        double b = check_against_host(models[i], data, "--seq 10 --batch 1", 10);
        CHECK(a == b, "%s: batch 4 %.6f vs batch 1 %.6f", models[i], a, b);
        check_against_host(models[i], data, "", i < 2 ? 16 : 12); /* default: the model's seq_len */
    }

    /* A train llama checkpoint: eval equals its export's and train llama's val_loss. */
    write_random(tr, 2000, 12, 5);
    write_random(va, 300, 12, 6);
    snprintf(args, sizeof args, "train llama --config tiny --data %s --val %s --steps 6 --batch 2 --seq 16 --save %s --export %s --json",
             tr, va, ck, ex);
    int rc = cli_run(args, 0, out, sizeof out);
    double val_loss = json_num(out, "val_loss");
    CHECK(rc == 0 && val_loss > 0, "train: exit %d, %s", rc, out);
    double from_export = check_against_host(ex, va, "--seq 16", 16);
    snprintf(args, sizeof args, "eval llama --model %s --data %s --seq 16 --json", ck, va);
    rc = cli_run(args, 0, out, sizeof out);
    CHECK(rc == 0 && json_num(out, "loss") == from_export, "checkpoint %.6f vs its export %.6f (exit %d)", json_num(out, "loss"),
          from_export, rc);
    CHECK(fabs(from_export - val_loss) <= 2e-6, "eval %.6f vs train llama's val_loss %.6f", from_export, val_loss);

    /* aneforge export: the checkpoint as either version holds the weights train llama exported. */
    af_llama_weights *want = af_llama_load(ex, NULL);
    for (int version = 0; version <= 1; version++) {
        char conv[160];
        snprintf(conv, sizeof conv, "%s/conv%d.bin", dir, version);
        snprintf(args, sizeof args, "export --ckpt %s -o %s --version %d", ck, conv, version);
        rc = cli_run(args, 0, out, sizeof out);
        int got_version = -1;
        af_llama_weights *got = af_llama_load(conv, &got_version);
        CHECK(rc == 0 && got && want && got_version == version &&
                  !memcmp(af_llama_weights_config(got), af_llama_weights_config(want), sizeof(af_llama_config)) &&
                  !memcmp(af_llama_weights_data(got), af_llama_weights_data(want),
                          (size_t)af_llama_weight_count(af_llama_weights_config(want)) * sizeof(float)),
              "export --version %d: exit %d, the weights of train llama --export", version, rc);
        af_llama_weights_free(got);
    }
    af_llama_weights_free(want);
    rc = cli_run("export --ckpt /nonexistent.ckpt -o /tmp/x.bin", 1, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "nonexistent"), "export of a missing file: exit %d, %s", rc, out);

    /* Bad input: exit 2 and a message naming the problem. */
    write_random(big, 100, 50, 7);
    struct { char args[512]; const char *says; } bad[6];
    snprintf(bad[0].args, sizeof bad[0].args, "eval llama --model %s --data %s", models[0], big);
    bad[0].says = "vocab is 37";
    snprintf(bad[1].args, sizeof bad[1].args, "eval llama --model %s --data %s --seq 17", models[0], data);
    bad[1].says = "seq_len 16";
    snprintf(bad[2].args, sizeof bad[2].args, "eval llama --data %s", data);
    bad[2].says = "--model is required";
    snprintf(bad[3].args, sizeof bad[3].args, "eval mlp --model %s --data %s", models[0], data);
    bad[3].says = "eval llama";
    snprintf(bad[4].args, sizeof bad[4].args, "eval llama --model %s --data %s", data, data);
    bad[4].says = "--model";
    snprintf(bad[5].args, sizeof bad[5].args, "eval llama --model %s --data %s/missing.bin", models[0], dir);
    bad[5].says = "missing.bin";
    for (int i = 0; i < 6; i++) {
        rc = cli_run(bad[i].args, 1, out, sizeof out);
        CHECK(rc == 2 && strstr(out, bad[i].says), "'%s': exit %d, '%s' (want 2 and '%s')", bad[i].args, rc, out, bad[i].says);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
    if (system(args)) fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("eval_llama");
}
