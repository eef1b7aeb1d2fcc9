/* The CPU thread pool (src/cpu/pool.c), which every parallel kernel runs on:
 *  - cpu_pool_for visits every index of [0, n) exactly once, whatever n, min_chunk and
 *    thread count, and gives no range shorter than min_chunk unless n itself is;
 *  - a loop started inside a chunk runs inline on that thread and still covers its range;
 *  - thousands of back-to-back jobs (the workers polling) and jobs after idle gaps longer
 *    than the poll (the workers asleep) all complete with every index once;
 *  - an idle pool does not hold a core: after its poll time the workers sleep, so the
 *    process's CPU time barely moves while the caller sleeps;
 *  - cpu_pool_shared hands out one pool per thread count and stops it on the last release. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "cpu/pool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    _Atomic int *hits;
    int64_t min_chunk, n;
    _Atomic int short_ranges;
    cpu_pool *pool; /* for the nested loop, or NULL */
} cover_job;

static void mark(void *ctx, int64_t b, int64_t e) {
    cover_job *j = ctx;
    if (e - b < j->min_chunk && e - b < j->n) atomic_fetch_add(&j->short_ranges, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&j->hits[i], 1);
}

/* Each chunk runs a loop of its own over its range on the same pool: it must run inline. */
static void nested(void *ctx, int64_t b, int64_t e) {
    cover_job *j = ctx;
    cover_job inner = { j->hits + b, 1, e - b, 0, NULL };
    cpu_pool_for(j->pool, e - b, 1, mark, &inner);
    atomic_fetch_add(&j->short_ranges, atomic_load(&inner.short_ranges));
}

/* Runs one loop over n with fn and checks every index was visited exactly once. */
static int covered_once(cpu_pool *p, int64_t n, int64_t min_chunk, cpu_range_fn fn, const char *what) {
    _Atomic int *hits = calloc((size_t)(n > 0 ? n : 1), sizeof *hits);
    cover_job j = { hits, min_chunk, n, 0, p };
    cpu_pool_for(p, n, min_chunk, fn, &j);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += atomic_load(&hits[i]) != 1;
    CHECK(wrong == 0, "%s: n %lld, min_chunk %lld, %d threads: %lld indices not visited exactly once", what,
          (long long)n, (long long)min_chunk, cpu_pool_threads(p), (long long)wrong);
    CHECK(atomic_load(&j.short_ranges) == 0, "%s: n %lld: a range shorter than min_chunk %lld", what, (long long)n,
          (long long)min_chunk);
    free(hits);
    return wrong == 0;
}

static double process_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {}
}

static void coverage(void) {
    const int threads[] = { 1, 2, 3, 8 };
    const int64_t sizes[] = { 0, 1, 2, 3, 7, 64, 1000, 100003 };
    const int64_t chunks[] = { 1, 5, 1000 };
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        cpu_pool *p = cpu_pool_new(threads[t]);
        CHECK(p != NULL, "cpu_pool_new(%d)", threads[t]);
        if (!p) continue;
        CHECK(cpu_pool_threads(p) == threads[t], "threads: %d, asked %d", cpu_pool_threads(p), threads[t]);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
                covered_once(p, sizes[s], chunks[c], mark, "flat");
                covered_once(p, sizes[s], chunks[c], nested, "nested");
            }
        cpu_pool_free(p);
    }
    covered_once(NULL, 1000, 1, mark, "no pool"); /* NULL runs inline */
}

/* Many jobs back to back, then jobs each after a gap past the poll time. */
static void handoffs(void) {
    cpu_pool *p = cpu_pool_new(2);
    CHECK(p != NULL, "cpu_pool_new(2)");
    if (!p) return;
    int bad = 0;
    for (int i = 0; i < 5000 && !bad; i++) bad = !covered_once(p, 2 + i % 64, 1, mark, "back to back");
    for (int i = 0; i < 12 && !bad; i++) {
        sleep_ms(3); /* past the 1 ms poll: the worker is asleep when the job is posted */
        bad = !covered_once(p, 4096, 1, mark, "after a sleep");
    }
    cpu_pool_free(p);
}

/* After a job and the poll time, the workers sleep: 300 ms with the caller asleep cost
 * the process far less than a core (a worker that never stopped polling would add
 * about 300 ms of CPU time each). */
static void idle_pool_sleeps(void) {
    cpu_pool *p = cpu_pool_new(3);
    CHECK(p != NULL, "cpu_pool_new(3)");
    if (!p) return;
    covered_once(p, 100000, 1, mark, "before idling");
    sleep_ms(50); /* well past the poll */
    double t0 = process_cpu_s();
    sleep_ms(300);
    double used = process_cpu_s() - t0;
    CHECK(used < 0.06, "an idle pool of 3 used %.3f s of CPU in 0.3 s (its workers should sleep)", used);
    covered_once(p, 100000, 1, mark, "after idling"); /* and wake up again */
    cpu_pool_free(p);
}

static void shared_pools(void) {
    cpu_pool *a = cpu_pool_shared(2), *b = cpu_pool_shared(2), *c = cpu_pool_shared(3);
    CHECK(a && a == b, "cpu_pool_shared(2) twice: %p and %p, want the same pool", (void *)a, (void *)b);
    CHECK(c && c != a && cpu_pool_threads(c) == 3, "cpu_pool_shared(3): its own pool of 3");
    if (a) covered_once(a, 1000, 1, mark, "shared");
    cpu_pool_release(b);
    if (a) covered_once(a, 1000, 1, mark, "shared, one user left"); /* still running */
    cpu_pool_release(a);
    cpu_pool_release(c);
    cpu_pool_release(NULL); /* a no-op */
    cpu_pool *d = cpu_pool_shared(2); /* a fresh pool after the last release */
    CHECK(d != NULL && cpu_pool_threads(d) == 2, "cpu_pool_shared(2) after the last release");
    if (d) covered_once(d, 1000, 1, mark, "shared again");
    cpu_pool_release(d);
}

int main(void) {
    coverage();
    handoffs();
    idle_pool_sleeps();
    shared_pools();
    return check_finish("test_pool");
}
