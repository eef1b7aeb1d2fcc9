#define _XOPEN_SOURCE 700 /* mkdtemp */
#include "support/tmpdir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp[64];

const char *test_tmpdir_make(const char *prefix) {
    snprintf(tmp, sizeof tmp, "/tmp/%s_XXXXXX", prefix);
    return mkdtemp(tmp);
}

char *path_in(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
    return p[k];
}

static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { remove(dir); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        rm_rf(p);
    }
    closedir(d);
    rmdir(dir);
}

void test_tmpdir_remove(void) {
    if (tmp[0]) rm_rf(tmp);
}
