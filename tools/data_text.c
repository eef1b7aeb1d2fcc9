/* `aneforge data fetch text`: an English corpus from the fortune files of Debian's
 * `fortunes` package, split into train and validation text; `aneforge data tokenize`:
 * text to a uint16 token file. */
#define _XOPEN_SOURCE 700
#include "data_text.h"
#include "text_cli.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FORTUNES_DIR "/usr/share/games/fortunes"
enum { PATH_CAP = 4096, MAX_FILES = 4096 };

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The fortune files in dir, sorted: regular files (not the .u8 links), not the .dat
 * indexes strfile writes. */
static int list_fortune_files(const char *dir, char ***names) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **v = malloc(MAX_FILES * sizeof *v);
    int n = 0;
    struct dirent *e;
    while (v && n < MAX_FILES && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char p[PATH_CAP];
        struct stat sb;
        if (e->d_name[0] == '.' || (l > 4 && !strcmp(e->d_name + l - 4, ".dat"))) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= PATH_CAP || lstat(p, &sb) || !S_ISREG(sb.st_mode)) continue;
        if (!(v[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (!v) return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    return n;
}

/* Which split a document goes to: by a hash of its text, so the split does not depend
 * on the order of the files and a fortune repeated in two files lands once per side. */
static int is_val(const char *s, size_t n, int val_percent) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return (int)(h % 100) < val_percent;
}

typedef struct {
    FILE *f;
    char path[PATH_CAP], part[PATH_CAP];
    int64_t docs, bytes;
} split_out;

static int open_split(split_out *o, const char *dir, const char *name) {
    memset(o, 0, sizeof *o);
    if (snprintf(o->path, PATH_CAP, "%s/%s", dir, name) >= PATH_CAP ||
        snprintf(o->part, PATH_CAP, "%s.part", o->path) >= PATH_CAP) {
        fprintf(stderr, "aneforge data: path too long: %s/%s\n", dir, name);
        return 1;
    }
    if (!(o->f = fopen(o->part, "wb"))) {
        fprintf(stderr, "aneforge data: cannot create %s: %s\n", o->part, strerror(errno));
        return 1;
    }
    return 0;
}

/* Each document followed by a line "%": the fortune format, which `data tokenize` and
 * `tokenizer train` read by default. */
static int put_doc(split_out *o, const char *s, size_t n) {
    o->docs++;
    o->bytes += (int64_t)n + 3;
    return fwrite(s, 1, n, o->f) == n && fputs("\n%\n", o->f) >= 0;
}

static int close_split(split_out *o, int ok) {
    if (o->f && fclose(o->f) != 0) ok = 0;
    o->f = NULL;
    if (ok && rename(o->part, o->path) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "aneforge data: cannot write %s: %s\n", o->path, strerror(errno));
        remove(o->part);
    }
    return ok;
}

static int mkdirs(const char *path) {
    char p[PATH_CAP];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return 1;
            *s = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST;
}

static void fetch_usage(FILE *f) {
    fprintf(f, "usage: aneforge data fetch text [--dir DIR] [--from SRC] [--val-percent P]\n\n"
               "Reads the fortune files in SRC (default " FORTUNES_DIR ", Debian's `fortunes`\n"
               "package: apt-get install -y fortunes), splits the fortunes by a hash of their\n"
               "text into DIR/text/train.txt and DIR/text/val.txt (P%% of them, default 10),\n"
               "one fortune after another, each followed by a line \"%%\".\n");
}

int data_fetch_text(int argc, char **argv, const char *data_dir) {
    const char *from = FORTUNES_DIR, *v;
    int val_percent = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fetch_usage(stdout);
            return 0;
        } else if ((v = text_opt(argc, argv, &i, "--dir"))) {
            data_dir = v;
        } else if ((v = text_opt(argc, argv, &i, "--from"))) {
            from = v;
        } else if ((v = text_opt(argc, argv, &i, "--val-percent"))) {
            val_percent = atoi(v);
            if (val_percent < 1 || val_percent > 50) {
                fprintf(stderr, "aneforge data: --val-percent %s: give 1..50\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "aneforge data: unexpected argument '%s'\n\n", argv[i]);
            fetch_usage(stderr);
            return 2;
        }
    }
    char **names = NULL;
    int nfiles = list_fortune_files(from, &names);
    if (nfiles <= 0) {
        fprintf(stderr, "text: no fortune files in %s. Install Debian's package and rerun:\n"
                        "  apt-get install -y fortunes\n"
                        "or pass --from DIR holding fortune files (text, fortunes separated by lines \"%%\").\n", from);
        if (names) free(names);
        return 1;
    }
    char dest[PATH_CAP];
    snprintf(dest, sizeof dest, "%s/text", data_dir);
    if (mkdirs(dest)) {
        fprintf(stderr, "aneforge data: cannot create %s: %s\n", dest, strerror(errno));
        return 1;
    }
    split_out out[2];
    int ok = !open_split(&out[0], dest, "train.txt") && !open_split(&out[1], dest, "val.txt");
    for (int k = 0; ok && k < nfiles; k++) {
        char p[PATH_CAP];
        text_docs d;
        snprintf(p, sizeof p, "%s/%s", from, names[k]);
        if (text_docs_read(p, TEXT_DEFAULT_SEP, &d)) {
            ok = 0;
            break;
        }
        for (int64_t i = 0; ok && i < d.n; i++) {
            split_out *o = &out[is_val(d.doc[i], d.len[i], val_percent)];
            ok = put_doc(o, d.doc[i], d.len[i]);
        }
        text_docs_free(&d);
    }
    for (int s = 0; s < 2; s++) ok = close_split(&out[s], ok) && ok;
    for (int k = 0; k < nfiles; k++) free(names[k]);
    free(names);
    if (!ok) return 1;
    printf("text: %d fortune files from %s\n", nfiles, from);
    for (int s = 0; s < 2; s++) {
        char hex[65] = "?";
        af_sha256_file(out[s].path, hex);
        printf("  %-9s %6lld fortunes %9lld bytes  sha256 %s\n", s ? "val.txt" : "train.txt", (long long)out[s].docs,
               (long long)out[s].bytes, hex);
    }
    printf("text: wrote %s/train.txt and val.txt\n", dest);
    return 0;
}

static void tokenize_usage(FILE *f) {
    fprintf(f, "usage: aneforge data tokenize --tokenizer TOK.bin IN.txt -o OUT.bin [--sep LINE] [--eos] [--no-bos]\n\n"
               "Encodes each document of IN.txt (documents end at lines equal to LINE, default \"%%\";\n"
               "--sep '' makes the whole file one document; each is stripped of surrounding\n"
               "whitespace) with BOS first, as llama2.c's tinystories.py does, and writes the ids\n"
               "as uint16 little-endian (llama2.c's .bin token files).\n");
}

int data_tokenize(int argc, char **argv) {
    const char *tok_path = NULL, *in = NULL, *out = NULL, *sep = TEXT_DEFAULT_SEP, *v;
    unsigned flags = AF_ENCODE_BOS;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            tokenize_usage(stdout);
            return 0;
        } else if ((v = text_opt(argc, argv, &i, "--tokenizer"))) {
            tok_path = v;
        } else if ((v = text_opt(argc, argv, &i, "-o"))) {
            out = v;
        } else if ((v = text_opt(argc, argv, &i, "--sep"))) {
            sep = v;
        } else if (!strcmp(argv[i], "--eos")) {
            flags |= AF_ENCODE_EOS;
        } else if (!strcmp(argv[i], "--no-bos")) {
            flags &= ~(unsigned)AF_ENCODE_BOS;
        } else if (argv[i][0] != '-' && !in) {
            in = argv[i];
        } else {
            fprintf(stderr, "aneforge data tokenize: unexpected argument '%s'\n\n", argv[i]);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!tok_path || !in || !out) {
        tokenize_usage(stderr);
        return 2;
    }
    af_tokenizer *t = af_tokenizer_load(tok_path);
    if (!t) {
        fprintf(stderr, "aneforge data tokenize: %s\n", af_error_message());
        return 1;
    }
    text_docs d;
    if (text_docs_read(in, sep, &d)) {
        af_tokenizer_free(t);
        return 1;
    }
    clock_t t0 = clock();
    int32_t *all = NULL;
    int64_t n = 0, cap = 0, bytes = 0;
    int ok = 1;
    for (int64_t i = 0; ok && i < d.n; i++) {
        int32_t *ids;
        int64_t m;
        if (af_tokenizer_encode(t, d.doc[i], d.len[i], flags, &ids, &m) != AF_OK) {
            fprintf(stderr, "aneforge data tokenize: %s\n", af_error_message());
            ok = 0;
            break;
        }
        if (n + m > cap) {
            cap = 2 * (n + m) + 1024;
            int32_t *g = realloc(all, (size_t)cap * sizeof *g);
            if (!g) {
                fprintf(stderr, "aneforge data tokenize: out of memory for %lld tokens\n", (long long)cap);
                ok = 0;
            } else {
                all = g;
            }
        }
        for (int64_t j = 0; ok && j < m; j++) all[n++] = (int32_t)ids[j]; /* ids < 65536: the vocabulary's limit */
        bytes += (int64_t)d.len[i];
        af_free(ids);
    }
    if (ok && af_tokens_write(out, all, n) != AF_OK) {
        fprintf(stderr, "aneforge data tokenize: %s\n", af_error_message());
        ok = 0;
    }
    if (ok)
        printf("tokenize: %lld documents, %lld bytes of text -> %lld tokens (%.2f bytes per token, vocab %d) in "
               "%.1f s: %s\n", (long long)d.n, (long long)bytes, (long long)n, n ? (double)bytes / (double)n : 0.0,
               af_tokenizer_vocab_size(t), (double)(clock() - t0) / CLOCKS_PER_SEC, out);
    free(all);
    text_docs_free(&d);
    af_tokenizer_free(t);
    return ok ? 0 : 1;
}

void data_text_info(const char *data_dir) {
    const char *names[2] = { "train.txt", "val.txt" };
    int present = 0;
    char p[2][PATH_CAP];
    struct stat sb[2];
    for (int s = 0; s < 2; s++) {
        snprintf(p[s], PATH_CAP, "%s/text/%s", data_dir, names[s]);
        present += stat(p[s], &sb[s]) == 0 && S_ISREG(sb[s].st_mode);
    }
    if (present == 2)
        printf("text     ok: %s (%lld bytes) and val.txt (%lld bytes) in %s/text\n", names[0], (long long)sb[0].st_size,
               (long long)sb[1].st_size, data_dir);
    else
        printf("text     missing: run `aneforge data fetch text` (needs Debian's fortunes package)\n");
}
