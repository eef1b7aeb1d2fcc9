/* `aneforge train` says where its loss and accuracy come from (issue 9, part 6): on a
 * stand-in MNIST (all-zero images and labels in files of the real sizes), the --json
 * result and every --log line carry "loss_source": host_fp32 for the host and device
 * plans (computed from the logits on the host), graph_fp32 / graph_fp16 for the resident
 * and unrolled plans (computed inside the step program), and test accuracy is marked
 * host_fp32. Runs the built binary (AF_CLI, set by CMake). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "train/ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef AF_CLI
#define AF_CLI "./aneforge"
#endif

/* An IDX file: big-endian magic and dims, then the (zero) payload as a sparse tail. */
static int write_idx(const char *path, uint32_t magic, int ndims, const uint32_t *dims, long payload) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint32_t words[4] = { magic };
    for (int i = 0; i < ndims; i++) words[1 + i] = dims[i];
    for (int i = 0; i <= ndims; i++) {
        unsigned char b[4] = { (unsigned char)(words[i] >> 24), (unsigned char)(words[i] >> 16), (unsigned char)(words[i] >> 8),
                               (unsigned char)words[i] };
        fwrite(b, 1, 4, f);
    }
    int rc = ftruncate(fileno(f), 4L * (ndims + 1) + payload);
    return fclose(f) || rc ? -1 : 0;
}

static int make_data(const char *dir) {
    char sub[300], p[400];
    snprintf(sub, sizeof sub, "%s/mnist", dir);
    mkdir(dir, 0700);
    mkdir(sub, 0700);
    const char *split[2] = { "train", "t10k" };
    const uint32_t n[2] = { 60000, 10000 };
    for (int i = 0; i < 2; i++) {
        uint32_t img[3] = { n[i], 28, 28 };
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", sub, split[i]);
        if (write_idx(p, 0x803, 3, img, (long)n[i] * 784)) return -1;
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", sub, split[i]);
        if (write_idx(p, 0x801, 1, &n[i], (long)n[i])) return -1;
    }
    return 0;
}

/* Runs a training command; its last stdout line goes to json. */
static int train(const char *dir, const char *args, const char *log, char *json, size_t cap) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ANEFORGE_DATA=%s %s train mlp --data mnist --epochs 1 --limit 256 --batch 32 --unroll 2 --threads 1 "
                              "--json --log %s %s 2>/dev/null", dir, AF_CLI, log, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[4096];
    json[0] = 0;
    while (fgets(line, sizeof line, p)) snprintf(json, cap, "%s", line);
    return pclose(p);
}

static int count_lines(const char *path, const char *needle, int *total) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    *total = 0;
    while (f && fgets(line, sizeof line, f)) {
        (*total)++;
        n += strstr(line, needle) != NULL;
    }
    if (f) fclose(f);
    return n;
}

int main(void) {
    char dir[64], log[96], json[4096];
    snprintf(dir, sizeof dir, "/tmp/af_test_cli_%d", (int)getpid());
    snprintf(log, sizeof log, "%s/run.jsonl", dir);
    CHECK(make_data(dir) == 0, "cannot write the stand-in data under %s", dir);
    const struct { const char *args, *source; } runs[] = {
        { "--plan host", "host_fp32" },
        { "--plan device --precision fp16", "host_fp32" },
        { "--plan resident", "graph_fp32" },
        { "--plan unrolled --precision fp16", "graph_fp16" },
        { "--plan unrolled --target ane-sim:m1", "graph_fp16" },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        remove(log);
        int rc = train(dir, runs[i].args, log, json, sizeof json);
        char want[64];
        snprintf(want, sizeof want, "\"loss_source\":\"%s\"", runs[i].source);
        CHECK(rc == 0 && strstr(json, want) && strstr(json, "\"test_acc_source\":\"host_fp32\"") && strstr(json, "\"skipped_consecutive\":0"),
              "%s: rc %d, json %s", runs[i].args, rc, json);
        int total, tagged = count_lines(log, want, &total);
        CHECK(total >= 2 && tagged == total, "%s: %d of %d log lines say %s", runs[i].args, tagged, total, want);
    }
    /* Resuming from a checkpoint whose data position is negative fails cleanly (it used
     * to index before the epoch's permutation). */
    char ck[128], bad_ck[128];
    snprintf(ck, sizeof ck, "%s/run.ckpt", dir);
    snprintf(bad_ck, sizeof bad_ck, "%s/bad.ckpt", dir);
    char args[400];
    snprintf(args, sizeof args, "--plan host --save %s", ck);
    CHECK(train(dir, args, log, json, sizeof json) == 0, "save run: %s", json);
    const char *field[2] = { "cli.pos", "cli.epoch" };
    for (int i = 0; i < 2; i++) {
        ckpt *c = NULL;
        CHECK(ckpt_load(ck, &c) == AF_OK && ckpt_put_i64(c, field[i], -3) == AF_OK && ckpt_save(c, bad_ck) == AF_OK,
              "craft %s: %s", field[i], af_error_message());
        ckpt_free(c);
        snprintf(args, sizeof args, "--plan host --resume %s", bad_ck);
        CHECK(train(dir, args, log, json, sizeof json) != 0, "resume with %s = -3 was accepted", field[i]);
    }
    snprintf(args, sizeof args, "--plan host --resume %s", ck);
    CHECK(train(dir, args, log, json, sizeof json) == 0, "resume from the good checkpoint");
    remove(ck);
    remove(bad_ck);

    char p[400];
    const char *files[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
    for (int i = 0; i < 4; i++) { snprintf(p, sizeof p, "%s/mnist/%s", dir, files[i]); remove(p); }
    remove(log);
    snprintf(p, sizeof p, "%s/mnist", dir);
    rmdir(p);
    rmdir(dir);
    return check_finish("train_cli");
}
