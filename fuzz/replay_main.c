/* A main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on
 * every file in the directories given (the seed corpora), so `make test` and
 * `make test-asan` replay them with any compiler. Fails if a directory is empty. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t cap = 4096, n = 0, k;
    uint8_t *b = malloc(cap);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0)
        if ((n += k) == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    fclose(f);
    if (!b) return 0;
    uint8_t *exact = malloc(n ? n : 1); /* exactly n bytes, so ASan sees any overread */
    if (exact) memcpy(exact, b, n), LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    free(b);
    return exact != NULL;
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "cannot open corpus %s\n", argv[a]);
            return 1;
        }
        int runs = 0;
        struct dirent *e;
        char path[4096];
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            runs += replay(path);
        }
        closedir(d);
        printf("%s: %d inputs replayed\n", argv[a], runs);
        if (runs == 0) return 1;
    }
    return 0;
}
