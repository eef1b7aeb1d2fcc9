/* Minimal test harness: CHECK records a failure and keeps going; each test file
 * ends with check_finish(), which prints "N passed, N failed" and sets the exit code:
 * non-zero when any check failed or when none ran. */
#ifndef AF_TEST_CHECK_H
#define AF_TEST_CHECK_H
#include <stdio.h>
#include <math.h>
#include <stddef.h>

extern int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define CHECK_NEAR(a, b, tol, what) \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s: %.9g vs %.9g (tol %g)", what, (double)(a), (double)(b), (double)(tol))

int check_finish(const char *suite);

/* One CHECK that n values are within rel of a reference's largest magnitude:
 * max |got - want| <= rel * max |want|; the message names what. */
void check_close_scaled(const char *what, const float *got, const double *want, long n, double rel);

/* Deterministic test data: a small seeded generator (splitmix64). */
typedef struct { unsigned long long s; } test_rng;
double test_uniform(test_rng *r);            /* [0, 1) */
double test_normal(test_rng *r);             /* N(0, 1) */
void test_fill_uniform(test_rng *r, float *x, long n, double lo, double hi);

/* A whole file, malloc'd with a NUL after its *len bytes; NULL when it cannot be read. */
char *test_read_file(const char *path, size_t *len);
#endif
