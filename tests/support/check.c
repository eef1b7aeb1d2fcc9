#include "check.h"
#include <stdint.h>
#include <stdlib.h>

int check_passed, check_failed;

int check_finish(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    /* A suite that checked nothing proved nothing (a skipped loop, an early return). */
    if (check_passed + check_failed == 0) {
        fprintf(stderr, "%s: no check ran\n", suite);
        return 1;
    }
    return check_failed ? 1 : 0;
}

void check_close_scaled(const char *what, const float *got, const double *want, long n, double rel) {
    double scale = 1e-30, worst = 0;
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (long i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    CHECK(worst <= rel * scale, "%s: worst |got - want| %g (scale %g)", what, worst, scale);
}

double test_uniform(test_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

double test_normal(test_rng *r) {
    double u1 = test_uniform(r), u2 = test_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void test_fill_uniform(test_rng *r, float *x, long n, double lo, double hi) {
    for (long i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * test_uniform(r));
}

char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    char *b = n >= 0 && !fseek(f, 0, SEEK_SET) ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}
