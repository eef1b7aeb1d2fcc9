/* aneforge train llama --save / --resume: a run of 12 steps straight and the same run
 * stopped after 6 (--stop-after, saved) then resumed to 12 give byte-identical exported
 * weights, final checkpoints and logs (every logged loss and validation), and the same
 * JSON losses; a checkpoint is refused for another model or other data, with messages.
 * Runs the built binary (AF_CLI). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The whole file, malloc'd (size in *n), or NULL. */
static char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) { free(b); b = NULL; }
    if (b) b[*n] = 0; /* the log is searched as a string */
    fclose(f);
    return b;
}

static void check_same_file(const char *a, const char *b, const char *what) {
    long na = -1, nb = -2;
    char *da = slurp(a, &na), *db = slurp(b, &nb);
    CHECK(da && db && na == nb && !memcmp(da, db, (size_t)na), "%s: %s (%ld bytes) and %s (%ld bytes) differ", what, a, na, b, nb);
    free(da);
    free(db);
}

/* A log's training record: its step and validation lines up to the first timing field
 * (elapsed_s onwards are wall-clock figures), without the header and end lines. */
static char *log_record(const char *path) {
    long n = 0;
    char *d = slurp(path, &n), *r = d ? malloc((size_t)n + 1) : NULL;
    size_t k = 0;
    for (char *line = d; r && line && *line;) {
        char *nl = strchr(line, '\n'), *cut = strstr(line, ",\"elapsed_s\"");
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (cut && cut < line + len) len = (size_t)(cut - line);
        if (!strncmp(line, "{\"step\":", 8)) {
            memcpy(r + k, line, len);
            k += len;
            r[k++] = '\n';
        }
        line = nl ? nl + 1 : NULL;
    }
    if (r) r[k] = 0;
    free(d);
    return r;
}

/* A 9-token pattern with a tenth of the ids replaced at random (seeded). */
static void write_tokens(const char *path, int n, unsigned long long seed) {
    static const int pattern[9] = { 3, 5, 7, 2, 9, 4, 0, 8, 6 };
    test_rng r = { seed };
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (int32_t)(test_uniform(&r) < 0.1 ? (int)(test_uniform(&r) * 10) : pattern[i % 9]);
    CHECK(af_tokens_write(path, t, n) == AF_OK, "write %s: %s", path, af_error_message());
    free(t);
}

int main(void) {
    char dir[] = "/tmp/af_llama_resumeXXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char tr[128], va[128], other[128], p[8][128], args[2048], out[8192], out2[8192];
    snprintf(tr, sizeof tr, "%s/train.bin", dir);
    snprintf(va, sizeof va, "%s/val.bin", dir);
    snprintf(other, sizeof other, "%s/other.bin", dir);
    const char *names[8] = { "straight.jsonl", "split.jsonl", "straight.bin", "split.bin", "straight.ckpt", "half.ckpt",
                             "split.ckpt", "tok.bin" };
    for (int i = 0; i < 8; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
    write_tokens(tr, 3000, 1);
    write_tokens(va, 400, 2);
    write_tokens(other, 3000, 3);
    const char *common = "train llama --config tiny --steps 12 --batch 2 --seq 16 --lr 0.005 --warmup 2 --weight-decay 0.1 "
                         "--eval-every 4 --seed 7 --json";

    snprintf(args, sizeof args, "%s --data %s --val %s --log %s --export %s --save %s", common, tr, va, p[0], p[2], p[4]);
    int rc = cli_run(args, 0, out, sizeof out);
    CHECK(rc == 0 && json_num(out, "steps") == 12, "straight run: exit %d, %s", rc, out);
    /* Stopped after 6 (between evaluations), saved, resumed to 12. */
    snprintf(args, sizeof args, "%s --data %s --val %s --log %s --save %s --stop-after 6", common, tr, va, p[1], p[5]);
    rc = cli_run(args, 1, out2, sizeof out2);
    CHECK(rc == 0 && strstr(out2, "stopped after step 6 of 12") && strstr(out2, "--resume"), "first half: exit %d, %s", rc, out2);
    snprintf(args, sizeof args, "%s --data %s --val %s --log %s --export %s --save %s --resume %s", common, tr, va, p[1], p[3],
             p[6], p[5]);
    rc = cli_run(args, 0, out2, sizeof out2);
    CHECK(rc == 0 && json_num(out2, "steps") == 12, "resumed run: exit %d, %s", rc, out2);
    CHECK(json_num(out, "train_loss") == json_num(out2, "train_loss") && json_num(out, "val_loss") == json_num(out2, "val_loss"),
          "final losses: straight %s vs resumed %s", out, out2);
    check_same_file(p[2], p[3], "exported weights");
    check_same_file(p[4], p[6], "final checkpoints (weights, Adam moments, step, window generator, recent losses)");
    char *la = log_record(p[0]), *lb = log_record(p[1]);
    CHECK(la && lb && *la && !strcmp(la, lb), "logs (every logged loss, learning rate and validation) differ:\n%s---\n%s",
          la ? la : "(none)", lb ? lb : "(none)");
    free(la);
    free(lb);
    long nlog = 0;
    char *log = slurp(p[0], &nlog);
    int vals = 0;
    for (const char *s = log; s && (s = strstr(s, "\"val_loss\"")); s++) vals++;
    CHECK(vals == 3, "the log holds the validations at steps 4, 8 and 12 (%d)", vals);
    free(log);

    /* Refusals: another model (vocab 259 from a byte tokenizer), other data, not a checkpoint. */
    af_tokenizer *bytes = af_tokenizer_byte_level();
    CHECK(bytes && af_tokenizer_save(bytes, p[7]) == AF_OK, "byte tokenizer: %s", af_error_message());
    af_tokenizer_free(bytes);
    struct { char args[1024]; const char *says; } bad[3];
    snprintf(bad[0].args, sizeof bad[0].args, "%s --data %s --tokenizer %s --resume %s", common, tr, p[7], p[5]);
    bad[0].says = "vocab 10";
    snprintf(bad[1].args, sizeof bad[1].args, "%s --data %s --resume %s", common, other, p[5]);
    bad[1].says = "same data";
    snprintf(bad[2].args, sizeof bad[2].args, "%s --data %s --resume %s", common, tr, va);
    bad[2].says = "cannot resume";
    for (int i = 0; i < 3; i++) {
        rc = cli_run(bad[i].args, 1, out, sizeof out);
        CHECK(rc != 0 && strstr(out, bad[i].says), "'%s': exit %d, '%s' (want '%s')", bad[i].args, rc, out, bad[i].says);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
    if (system(args)) fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("train_llama_resume");
}
