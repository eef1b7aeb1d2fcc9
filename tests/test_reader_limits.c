/* Every reader is bounded (issue 23, items 8, 10, 11): the library's and the CLI's file
 * readers refuse a directory, a device and a pipe by name before reading a byte (a pipe
 * without blocking), cap file sizes with a message naming the cap; the dashboard and the
 * report refuse /dev/zero and a directory instead of reading forever or reporting nothing;
 * a MIL weight path that a symlink takes out of the model folder is refused; generate
 * refuses a tokenizer whose size is not the model's vocabulary (ids beyond it vanished
 * from the text); eval llama caps its default window at 65536 tokens and shows progress;
 * an error message that wraps the current one ("trainer: %s", af_error_message()) keeps
 * it intact. An alarm turns a reader that hangs (the old behaviour on a FIFO) into a
 * failure. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "mil/milblob.h"
#include "data/data.h"
#include "data/sha256.h"
#include "ir/file.h"
#include "ir/ir.h"
#include "train/ckpt.h"
#include "../tools/llama_nll.c"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/af_reader_limitsXXXXXX";

static const char *tpath(const char *name) {
    static char p[8][512];
    static int k;
    k = (k + 1) & 7;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int msg_has(const char *s) { return strstr(af_error_message(), s) != NULL; }

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "write %s", path);
}

/* ------------------------------------------------------------- messages */

static void test_wrapped_message(void) {
    ir_fail(AF_ERR_NOMEM, "e: out of memory");
    ir_fail(AF_ERR_NOMEM, "trainer: %s", af_error_message());
    CHECK(!strcmp(af_error_message(), "trainer: e: out of memory"), "wrapped once: '%s'", af_error_message());
    ir_fail(AF_ERR_NOMEM, "outer: %s (%d)", af_error_message(), 7);
    CHECK(!strcmp(af_error_message(), "outer: trainer: e: out of memory (7)"), "wrapped twice: '%s'", af_error_message());
}

/* ------------------------------------------------------------- library readers */

typedef struct { const char *path, *says; } bad_file;

/* Each library reader on each kind of non-file: fails, with the kind in the message. */
static void test_library_readers(const bad_file *bad, int nbad) {
    for (int i = 0; i < nbad; i++) {
        const char *p = bad[i].path, *says = bad[i].says;
        ckpt *c = NULL;
        CHECK(ckpt_load(p, &c) == AF_ERR_IO && !c && msg_has(says) && msg_has("checkpoint"), "ckpt_load(%s): %s", p,
              af_error_message());
        int ver = 0;
        CHECK(af_llama_load(p, &ver) == NULL && msg_has(says), "af_llama_load(%s): %s", p, af_error_message());
        CHECK(af_tokenizer_load(p) == NULL && msg_has(says), "af_tokenizer_load(%s): %s", p, af_error_message());
        int32_t *tok = NULL;
        int64_t n = 0;
        CHECK(af_tokens_read(p, 0, &tok, &n) != AF_OK && msg_has(says), "af_tokens_read(%s): %s", p, af_error_message());
        af_graph *g = NULL;
        CHECK(af_mil_load(p, NULL, &g, NULL, NULL, NULL, NULL) != AF_OK && !g && msg_has(says), "af_mil_load(%s): %s", p,
              af_error_message());
        milblob *b = NULL;
        CHECK(milblob_read_file(p, &b) != AF_OK && !b && msg_has(says), "milblob_read_file(%s): %s", p, af_error_message());
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(data_read_file(p, NULL, &buf, &len) != AF_OK && !buf && msg_has(says), "data_read_file(%s): %s", p,
              af_error_message());
        char hex[65];
        CHECK(data_sha256_file(p, hex) != AF_OK && msg_has(says), "data_sha256_file(%s): %s", p, af_error_message());
        CHECK(af_dataset_load_idx(p, p) == NULL && msg_has(says), "af_dataset_load_idx(%s): %s", p, af_error_message());
    }
}

static void test_size_cap(void) {
    const char *p = tpath("eleven.bin");
    write_bytes(p, "01234567890", 11);
    uint64_t size = 0;
    int fd = ir_open_regular(p, "thing", 11, &size);
    CHECK(fd >= 0 && size == 11, "11 bytes under a cap of 11: %s", af_error_message());
    if (fd >= 0) close(fd);
    CHECK(ir_open_regular(p, "thing", 10, &size) < 0 && msg_has("is 11 bytes; the limit for a thing is 10 bytes"),
          "cap 10: %s", af_error_message());
    CHECK(ir_open_regular(tpath("missing"), "thing", 0, NULL) < 0 && msg_has("cannot open thing") &&
              msg_has("No such file"), "missing: %s", af_error_message());
}

/* ------------------------------------------------------------- MIL weights and symlinks */

static void test_mil_symlink(void) {
    size_t n = 0, wn = 0;
    char *mil = test_read_file(AF_SOURCE_DIR "/tests/golden/conv/model.mil", &n);
    char *w = test_read_file(AF_SOURCE_DIR "/tests/golden/conv/weights/weight.bin", &wn);
    CHECK(mil && w, "golden conv files");
    if (!mil || !w) goto done;
    const char *outside = tpath("outside.bin");
    write_bytes(outside, w, wn);
    char model_dir[512], wdir[600], model[700], link[700], real[700];
    snprintf(model_dir, sizeof model_dir, "%s", tpath("m"));
    snprintf(wdir, sizeof wdir, "%s/weights", model_dir);
    snprintf(model, sizeof model, "%s/model.mil", model_dir);
    snprintf(link, sizeof link, "%s/weight.bin", wdir);
    snprintf(real, sizeof real, "%s/real.bin", wdir);
    CHECK(mkdir(model_dir, 0755) == 0 && mkdir(wdir, 0755) == 0, "mkdir");
    write_bytes(model, mil, n);
    write_bytes(real, w, wn);
    af_graph *g = NULL;
    /* weights/weight.bin -> a file outside the model folder: refused. */
    CHECK(symlink(outside, link) == 0, "symlink");
    af_status st = af_mil_load(model, NULL, &g, NULL, NULL, NULL, NULL);
    CHECK(st != AF_OK && !g && msg_has("outside the folder") && msg_has("weights/weight.bin"),
          "a symlink out of the folder: status %d, %s", (int)st, af_error_message());
    af_graph_free(g), g = NULL;
    /* -> a file inside it: fine. */
    CHECK(unlink(link) == 0 && symlink("real.bin", link) == 0, "relink");
    st = af_mil_load(model, NULL, &g, NULL, NULL, NULL, NULL);
    CHECK(st == AF_OK && g, "a symlink inside the folder: %s", af_error_message());
    af_graph_free(g), g = NULL;
    /* A directory where the weight file should be. */
    CHECK(unlink(link) == 0 && mkdir(link, 0755) == 0, "weight.bin as a directory");
    st = af_mil_load(model, NULL, &g, NULL, NULL, NULL, NULL);
    CHECK(st != AF_OK && !g && msg_has("is a directory"), "weight file a directory: %s", af_error_message());
done:
    free(mil);
    free(w);
}

/* ------------------------------------------------------------- the CLI */

static int run(const char *args, char *out, size_t cap) {
    /* timeout: the old dashboard and report read /dev/zero forever */
    return cli_run_bin("timeout 60 " AF_CLI, args, 1, out, cap);
}

#define DASH_CAP_TEST ((size_t)2 << 20) /* above the dashboard's 1 MiB line cap */

static void test_cli_logs(void) {
    static char out[1 << 16];
    const char *cases[][2] = {
        {"dashboard --once /dev/zero", "log /dev/zero is a character device, not a regular file"},
        {"report /dev/zero -o %s/r.html", "log /dev/zero is a character device, not a regular file"},
        {"report %s -o %s/r.html", "is a directory, not a regular file"},
        {"dashboard --once %s", "is a directory, not a regular file"},
        {"dashboard %s/fifo", "is a pipe (FIFO), not a regular file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, cases[i][0], dir, dir);
        int rc = run(args, out, sizeof out);
        CHECK(rc == 1 && strstr(out, cases[i][1]), "%s: exit %d, '%.300s'", args, rc, out);
    }
    /* A line longer than the cap is skipped (counted unreadable); the lines around it count. */
    const char *log = tpath("long.jsonl");
    FILE *f = fopen(log, "wb");
    if (f) {
        fputs("{\"step\":1,\"loss\":2.5}\n{\"x\":\"", f);
        for (size_t k = 0; k < DASH_CAP_TEST; k++) fputc('a', f);
        fputs("\"}\n{\"step\":2,\"loss\":2.25}\n", f);
        fclose(f);
    }
    char args[1024];
    snprintf(args, sizeof args, "report %s -o %s/r.html", log, dir);
    int rc = run(args, out, sizeof out);
    size_t hn = 0;
    char *html = test_read_file(tpath("r.html"), &hn);
    CHECK(rc == 0 && html && strstr(html, "(3 lines, some unreadable)"), "report of a 2 MiB line: exit %d, %s", rc, out);
    free(html);
}

/* A tiny random model of vocab V written as a llama2.c file. */
static int write_model(const char *path, int vocab, int seq) {
    af_llama_config c;
    if (af_llama_preset("tiny", vocab, &c) != AF_OK) return 0;
    c.seq_len = seq;
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) return 0;
    /* zero weights: uniform logits, finite everywhere, all these tests need */
    int ok = af_llama_save(w, path, 1) == AF_OK;
    af_llama_weights_free(w);
    return ok;
}

static void test_cli_models(void) {
    static char out[1 << 16];
    char args[2048];
    const char *model = tpath("v300.bin"), *tok = tpath("bytes.tok"), *data = tpath("t.bin");
    CHECK(write_model(model, 300, 32), "model: %s", af_error_message());
    af_tokenizer *bytes = af_tokenizer_byte_level();
    CHECK(bytes && af_tokenizer_save(bytes, tok) == AF_OK, "tokenizer: %s", af_error_message());
    int tn = af_tokenizer_vocab_size(bytes);
    af_tokenizer_free(bytes);
    /* generate: 259 tokenizer entries for a vocabulary of 300. */
    snprintf(args, sizeof args, "generate --model %s --tokenizer %s --prompt hi --steps 20", model, tok);
    int rc = run(args, out, sizeof out);
    char want[200];
    snprintf(want, sizeof want, "the tokenizer has %d tokens but the model's vocabulary is 300", tn);
    CHECK(rc == 2 && strstr(out, want) && strstr(out, "trained with"), "generate, small tokenizer: exit %d, '%s'", rc, out);
    /* A directory as a model file: named as such (it said "header says dim = 0"). */
    snprintf(args, sizeof args, "generate --model %s --tokens 1", dir);
    rc = run(args, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "is a directory, not a regular file"), "generate, directory model: exit %d, '%s'", rc, out);
    /* eval llama --progress: one stderr line per batch; none without it (not a terminal). */
    int32_t t[81];
    for (int i = 0; i < 81; i++) t[i] = (int32_t)(i * 37 % 300);
    CHECK(af_tokens_write(data, t, 81) == AF_OK, "tokens: %s", af_error_message());
    snprintf(args, sizeof args, "eval llama --model %s --data %s --seq 16 --batch 2 --progress", model, data);
    rc = run(args, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "eval: 2/5 windows (32 tokens)\neval: 4/5 windows (64 tokens)\neval: 5/5 windows (80 tokens)\n"),
          "eval --progress: exit %d, '%s'", rc, out);
    snprintf(args, sizeof args, "eval llama --model %s --data %s --seq 16 --batch 2", model, data);
    rc = run(args, out, sizeof out);
    CHECK(rc == 0 && !strstr(out, "eval: ") && strstr(out, "in 5 windows of 16"), "eval quiet: exit %d, '%s'", rc, out);
    /* The default window: the model's seq_len, fewer for a short file, never above 65536. */
    CHECK(llama_eval_window(149000, 1 << 20, 0) == 65536, "seq_len 2^20: %d", llama_eval_window(149000, 1 << 20, 0));
    CHECK(llama_eval_window(149000, 256, 0) == 256 && llama_eval_window(100, 1 << 20, 0) == 99 &&
              llama_eval_window(149000, 1 << 20, 17) == 17, "default windows");
}

int main(void) {
    alarm(240); /* a reader that blocks (the old FIFO case) fails the test instead of hanging it */
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    const char *fifo = tpath("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    const bad_file bad[] = { { dir, "is a directory" }, { "/dev/zero", "is a character device" }, { fifo, "is a pipe (FIFO)" } };
    test_wrapped_message();
    test_library_readers(bad, 3);
    test_size_cap();
    test_mil_symlink();
    test_cli_logs();
    test_cli_models();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("reader_limits");
}
