/* The text commands end to end on a small stand-in for Debian's fortune files:
 * `data fetch text` splits every fortune into exactly one of train.txt and val.txt, the
 * same way twice, and reports the files' SHA-256; `tokenizer train` writes a loadable
 * tokenizer; `data tokenize` writes a token file whose documents (cut at BOS) decode to
 * the fortunes; `tokenizer encode` / `decode` agree with the library. A missing fortune
 * directory says how to install it. Runs the built binary (AF_CLI, set by CMake). */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "support/cli_run.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "data/sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static char dir[64];

static const char *path(const char *name) {
    static char buf[8][256];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

/* Runs the CLI with args; stdout and stderr into out (cap bytes). Returns the exit code. */
static int cli(const char *args, char *out, size_t cap) { return cli_run(args, 1, out, cap); }

static char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    char *b = calloc(1, 1 << 20);
    *n = f && b ? fread(b, 1, (1 << 20) - 1, f) : 0;
    if (f) fclose(f);
    return b;
}

static void put(const char *p, const char *text) {
    FILE *f = fopen(p, "wb");
    if (f) fputs(text, f), fclose(f);
}

/* The fortunes: 24 in two files, one with UTF-8 and tabs, one repeated in both. */
enum { NF = 24 };
static char fortunes[NF][200];

static void make_fortunes(void) {
    static const char *const sayings[] = {
        "A day for firm decisions!!!!!  Or is it?", "Advancement in position.",
        "Caf\xc3\xa9 au lait,\n\tsaid the na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac traveller.",
        "You will be surprised by a loud noise.", "Do not read this fortune.",
        "He who laughs last\nthinks slowest.\n\t\t-- anonymous",
    };
    for (int i = 0; i < NF; i++) snprintf(fortunes[i], sizeof fortunes[i], "%s (%d)", sayings[i % 6], i);
    char a[8192] = "", b[8192] = "";
    for (int i = 0; i < NF; i++) {
        char *f = i < NF / 2 ? a : b;
        strcat(f, fortunes[i]);
        strcat(f, "\n%\n");
    }
    strcat(b, fortunes[0]); /* repeated: must land on the same side */
    strcat(b, "\n");
    mkdir(path("src"), 0700);
    put(path("src/alpha"), a);
    put(path("src/beta"), b);
    put(path("src/alpha.dat"), "\x00\x00\x00\x02 strfile index, not text");
    symlink("alpha", path("src/alpha.u8"));
}

/* How many times each fortune occurs in the "%"-separated file p; -1 for a document
 * that is none of them. */
static int count_docs(const char *p, int *seen) {
    size_t n;
    char *text = slurp(p, &n);
    int docs = 0;
    for (char *s = text, *e; s && *s; s = e + 3) {
        e = strstr(s, "\n%\n");
        if (!e) break;
        *e = 0;
        int k = -1;
        for (int i = 0; i < NF; i++)
            if (!strcmp(s, fortunes[i])) k = i;
        if (k < 0) {
            free(text);
            return -1;
        }
        seen[k]++;
        docs++;
    }
    free(text);
    return docs;
}

static void test_fetch(void) {
    char out[8192], args[4096];
    snprintf(args, sizeof args, "data fetch text --from %s --dir %s --val-percent 30", path("src"), dir);
    int rc = cli(args, out, sizeof out);
    CHECK(rc == 0, "fetch text: rc %d: %s", rc, out);
    int train[NF] = { 0 }, val[NF] = { 0 };
    int nt = count_docs(path("text/train.txt"), train), nv = count_docs(path("text/val.txt"), val);
    int once = 1;
    for (int i = 0; i < NF; i++) once &= (train[i] + val[i]) == (i == 0 ? 2 : 1) && !(train[i] && val[i]);
    CHECK(nt > 0 && nv > 0 && nt + nv == NF + 1 && once,
          "each fortune in one split (the repeated one twice on one side): %d train, %d val", nt, nv);
    char hex[65];
    CHECK(data_sha256_file(path("text/train.txt"), hex) == AF_OK && strstr(out, hex), "reports train.txt's sha256");
    CHECK(strstr(out, "2 fortune files"), "the .dat index and the .u8 link are not fortune files: %s", out);
    size_t n1, n2;
    char *first = slurp(path("text/val.txt"), &n1);
    rc = cli(args, out, sizeof out);
    char *second = slurp(path("text/val.txt"), &n2);
    CHECK(rc == 0 && n1 == n2 && !memcmp(first, second, n1), "the split is the same every time");
    free(first);
    free(second);

    snprintf(args, sizeof args, "data fetch text --from %s --dir %s", path("nowhere"), dir);
    rc = cli(args, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "apt-get install -y fortunes"), "a missing source says how to install it: %s", out);
    snprintf(args, sizeof args, "data info --dir %s", dir);
    CHECK(cli(args, out, sizeof out) == 0 && strstr(out, "text     ok"), "data info lists the text: %s", out);
}

static void test_tokenizer_and_tokens(void) {
    char out[8192], args[4096];
    snprintf(args, sizeof args, "tokenizer train --vocab 300 %s -o %s", path("text/train.txt"), path("tok.bin"));
    int rc = cli(args, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "bytes per token"), "tokenizer train: rc %d: %s", rc, out);
    af_tokenizer *t = af_tokenizer_load(path("tok.bin"));
    CHECK(t && af_tokenizer_vocab_size(t) > 259 && af_tokenizer_vocab_size(t) <= 300, "the trained tokenizer loads: %s",
          af_error_message());
    if (!t) return;

    snprintf(args, sizeof args, "data tokenize --tokenizer %s %s -o %s", path("tok.bin"), path("text/train.txt"),
             path("train.bin"));
    rc = cli(args, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "tokens"), "data tokenize: rc %d: %s", rc, out);
    int32_t *ids;
    int64_t n;
    CHECK(af_tokens_read(path("train.bin"), af_tokenizer_vocab_size(t), &ids, &n) == AF_OK && n > 0,
          "the token file reads back: %s", af_error_message());
    /* Each document starts with BOS; decoding one gives its fortune. */
    int seen[NF] = { 0 }, docs = count_docs(path("text/train.txt"), seen), matched = 0, starts = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && ids[j] != AF_TOKEN_BOS) j++;
        starts += ids[i] == AF_TOKEN_BOS;
        int32_t doc[4096];
        for (int64_t k = i; k < j && k - i < 4096; k++) doc[k - i] = ids[k];
        char *text;
        size_t len;
        if (af_tokenizer_decode(t, doc, j - i, &text, &len) == AF_OK)
            for (int f = 0; f < NF; f++) matched += seen[f] && len == strlen(fortunes[f]) && !memcmp(text, fortunes[f], len);
        free(text);
        i = j;
    }
    CHECK(starts == docs && matched == docs, "%d documents, %d start with BOS, %d decode to their fortune", docs, starts,
          matched);
    free(ids);

    /* encode and decode on the command line agree with the library */
    const char *text = "Caf\xc3\xa9 decisions";
    int32_t *want;
    int64_t nw;
    CHECK(af_tokenizer_encode(t, text, strlen(text), AF_ENCODE_BOS, &want, &nw) == AF_OK, "encode");
    char expect[1024] = "", num[16];
    for (int64_t i = 0; i < nw; i++) snprintf(num, sizeof num, "%s%d", i ? " " : "", (int)want[i]), strcat(expect, num);
    snprintf(args, sizeof args, "tokenizer encode --tokenizer %s --bos '%s'", path("tok.bin"), text);
    rc = cli(args, out, sizeof out);
    CHECK(rc == 0 && !strncmp(out, expect, strlen(expect)) && out[strlen(expect)] == '\n', "encode prints %s: %s", expect, out);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer %s %s", path("tok.bin"), expect);
    rc = cli(args, out, sizeof out);
    CHECK(rc == 0 && !strncmp(out, text, strlen(text)), "decode gives the text back: %s", out);
    free(want);
    snprintf(args, sizeof args, "tokenizer decode --tokenizer %s 1 99999", path("tok.bin"));
    CHECK(cli(args, out, sizeof out) == 1 && strstr(out, "outside the vocabulary"), "a bad id: %s", out);
    snprintf(args, sizeof args, "tokenizer bytes -o %s", path("bytes.bin"));
    CHECK(cli(args, out, sizeof out) == 0, "tokenizer bytes: %s", out);
    af_tokenizer *b = af_tokenizer_load(path("bytes.bin"));
    CHECK(b && af_tokenizer_vocab_size(b) == 259, "the byte-level tokenizer file loads");
    af_tokenizer_free(b);
    af_tokenizer_free(t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/af_test_text_cli_%d", (int)getpid());
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    make_fortunes();
    test_fetch();
    test_tokenizer_and_tokens();
    const char *files[] = { "src/alpha", "src/beta", "src/alpha.dat", "src/alpha.u8", "text/train.txt", "text/val.txt",
                            "tok.bin", "train.bin", "bytes.bin" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) remove(path(files[i]));
    rmdir(path("src"));
    rmdir(path("text"));
    rmdir(dir);
    return check_finish("text_cli");
}
