/* The library's file writers (af_npy_write, af_tokens_write, af_tokenizer_save,
 * af_llama_save; the MIL files through `aneforge mil emit` in tests/check_writes.py) meet real write failures (issue 23, defect 4): a file size
 * limit (RLIMIT_FSIZE, SIGXFSZ ignored: the write returns EFBIG as a full disk returns
 * ENOSPC) and /dev/full. Each fails with AF_ERR_IO and a message naming the file and the
 * errno text, leaves an older file at the path byte for byte as it was, and leaves no
 * temporary; without the limit each writes the whole file. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <dirent.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

enum { W_NPY, W_TOKENS, W_TOKENIZER, W_LLAMA, W_COUNT };
static const char *const NAMES[W_COUNT] = { "af_npy_write", "af_tokens_write", "af_tokenizer_save", "af_llama_save" };

static float vals[20000];
static int32_t toks[20000];

/* Writes with writer w to path: each file is well over 1 KB. */
static af_status write_with(int w, const char *path) {
    switch (w) {
    case W_NPY: return af_npy_write(path, vals, 1, (int64_t[]){ 20000 });
    case W_TOKENS: return af_tokens_write(path, toks, 20000);
    case W_TOKENIZER: {
        af_tokenizer *t = af_tokenizer_byte_level();
        af_status st = t ? af_tokenizer_save(t, path) : AF_ERR_NOMEM;
        af_tokenizer_free(t);
        return st;
    }
    default: {
        af_llama_config c;
        af_llama_weights *lw = af_llama_preset("tiny", 64, &c) ? NULL : af_llama_weights_new(&c);
        af_status st = lw ? af_llama_save(lw, path, 0) : AF_ERR_NOMEM;
        af_llama_weights_free(lw);
        return st;
    }
    }
}

/* Files in dir other than the one named keep. */
static int strays(const char *keep) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep)) {
            fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
            n++;
        }
    if (d) closedir(d);
    return n;
}

int main(void) {
    for (int i = 0; i < 20000; i++) vals[i] = (float)i * 0.5f, toks[i] = (int32_t)(i % 300);
    snprintf(dir, sizeof dir, "/tmp/af_write_errors_XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "mkdtemp failed\n"); return 1; }
    char path[128];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit returns EFBIG instead of killing us */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    for (int w = 0; w < W_COUNT; w++) {
        FILE *f = fopen(path, "wb");
        fputs("older file", f);
        fclose(f);
        struct rlimit lim = { 1024, old.rlim_max };
        setrlimit(RLIMIT_FSIZE, &lim);
        af_status st = write_with(w, path);
        setrlimit(RLIMIT_FSIZE, &old);
        const char *msg = af_error_message();
        CHECK(st == AF_ERR_IO, "%s past the file size limit: status %d", NAMES[w], st);
        CHECK(strstr(msg, path) && strstr(msg, "File too large"), "%s: message names the file and the errno text: %s", NAMES[w], msg);
        size_t n = 0;
        char *got = test_read_file(path, &n);
        CHECK(got && n == 10 && !memcmp(got, "older file", 10), "%s: the older file is left as it was (%zu bytes)", NAMES[w], n);
        free(got);
        CHECK(strays("out.bin") == 0, "%s: no temporary left", NAMES[w]);
        /* /dev/full: written in place (never renamed over), ENOSPC reported. */
        /* Through a link of our own: a writer that renamed over it replaces the link, never
         * the machine's /dev/full. */
        bool full = access("/dev/full", W_OK) == 0; /* Linux */
        char link[128];
        snprintf(link, sizeof link, "%s/full", dir);
        full = full && symlink("/dev/full", link) == 0;
        st = full ? write_with(w, link) : AF_ERR_IO;
        msg = full ? af_error_message() : "/full: No space left on device (no /dev/full here: not checked)";
        CHECK(st == AF_ERR_IO && strstr(msg, "/full") && strstr(msg, "No space left on device"), "%s to /dev/full: %d %s",
              NAMES[w], st, msg);
        remove(link);
        /* And without a limit, the whole file. */
        remove(path);
        CHECK(write_with(w, path) == AF_OK, "%s: %s", NAMES[w], af_error_message());
        struct stat sb;
        CHECK(!stat(path, &sb) && sb.st_size > 1024, "%s wrote %lld bytes", NAMES[w], (long long)sb.st_size);
        CHECK(strays("out.bin") == 0, "%s: no temporary left after a good write", NAMES[w]);
    }
    remove(path);
    rmdir(dir);
    return check_finish("write_errors");
}
