/* Finding the dataset files: see data_find.h. */
#define _XOPEN_SOURCE 700
#include "data_find.h"
#include "aneforge_data.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PCAP = 4096 };

int data_has_file(const char *dir, const char *set, const char *name) {
    char p[PCAP];
    struct stat sb;
    for (int gz = 0; gz < 2; gz++) {
        int n = snprintf(p, sizeof p, "%s/%s/%s%s", dir, set, name, gz ? ".gz" : "");
        if (n > 0 && n < PCAP && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
    }
    return 0;
}

const char *data_shipped_dir(int i) {
    static char exe_rel[PCAP];
    const char *places[3] = { NULL, NULL, NULL };
    int n = 0;
#ifdef __linux__
    char exe[PCAP];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash && snprintf(exe_rel, sizeof exe_rel, "%.*s/../share/aneforge", (int)(slash - exe), exe) < PCAP)
            places[n++] = exe_rel;
    }
#endif
#ifdef AF_DATA_INSTALL_DIR
    places[n++] = AF_DATA_INSTALL_DIR;
#endif
#ifdef AF_SOURCE_DIR
    places[n++] = AF_SOURCE_DIR "/data";
#endif
    return i >= 0 && i < n ? places[i] : NULL;
}

static const char *idx_name(int i) {
    const char *n = "?";
    af_dataset_file(AF_DATA_MNIST, i, &n, NULL);
    return n;
}

const char *data_dir_for(af_dataset_kind kind, const char *dir) {
    if (kind != AF_DATA_MNIST) return dir; /* only MNIST is shipped */
    int split[2] = { 0, 2 };
    int here = 1;
    for (int s = 0; s < 2; s++)
        here &= data_has_file(dir, "mnist", idx_name(split[s])) &&
                data_has_file(dir, "mnist", idx_name(split[s] + 1));
    if (here) return dir;
    const char *p;
    for (int i = 0; (p = data_shipped_dir(i)); i++) {
        int all = 1;
        for (int f = 0; f < 4; f++) all &= data_has_file(p, "mnist", idx_name(f));
        if (all) return p;
    }
    return dir;
}
