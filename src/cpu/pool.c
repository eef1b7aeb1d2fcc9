/* A fixed pthread pool. Between jobs workers first poll for a short while (a training
 * step dispatches jobs back to back, and a futex wake-up costs as much as a small
 * job), then sleep on a condition variable so an idle pool never holds a core. A job's
 * chunks are claimed from a shared counter by the caller and by whichever workers are
 * awake: on a busy machine a worker that the scheduler has not run yet leaves its chunk
 * to the caller instead of stalling the whole job until it gets a core. */
#define _POSIX_C_SOURCE 200809L
#include "cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

/* More threads than this is a configuration mistake, not a speed-up. */
#define POOL_MAX_THREADS 256

typedef struct {
    cpu_pool *pool;
    int index; /* 1..threads-1 */
} worker_arg;

struct cpu_pool {
    int threads;
    pthread_t *workers;
    worker_arg *args;
    pthread_mutex_t run_lock; /* serializes callers that share one pool */
    pthread_mutex_t lock;     /* guards everything below */
    pthread_cond_t work_cv;   /* a new job was published, or stop */
    pthread_cond_t done_cv;   /* the job is over: every chunk done, no worker inside */
    _Atomic uint64_t generation; /* bumped once per job (written under lock) */
    _Atomic int next;         /* the next unclaimed chunk of the current job */
    _Atomic int done;         /* chunks of the current job finished */
    _Atomic int active;       /* workers inside the current job (changed under lock) */
    int stop;
    /* the current job */
    cpu_range_fn fn;
    void *ctx;
    int64_t n;
    int nchunks;
};

int cpu_num_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    if (n > POOL_MAX_THREADS) return POOL_MAX_THREADS;
    return (int)n;
}

/* Static split: chunk i of c covers [n*i/c, n*(i+1)/c), sizes differ by at most 1. */
static void chunk_range(int64_t n, int nchunks, int i, int64_t *b, int64_t *e) {
    *b = n / nchunks * i + (n % nchunks) * i / nchunks;
    *e = n / nchunks * (i + 1) + (n % nchunks) * (i + 1) / nchunks;
}

/* How long a worker or the caller polls before sleeping: POOL_SPIN_NS hot, then up to
 * POOL_POLL_NS in all, yielding the core between polls (to any other runnable thread:
 * more threads than cores, other processes). A worker's idle time is not the gap between
 * jobs but its chunk's end to the next job, which an uneven split stretches past 50 us
 * a third of the time: llama a (seq 256) woke a sleeping worker 96-102 times a step
 * (318 jobs), 1.7 with 1 ms. A wake-up costs little on bare metal, but in a KVM guest
 * (Zen 3 here) the sleeping vCPU took 15-50 us (median), 70-960 us (p90) and up to 3 ms
 * to start its chunk; llama a's and b's steps ran a median 3.5% faster with the 1 ms
 * poll (8 pairs each, docs/results.md). */
#define POOL_SPIN_NS 50000
#define POOL_POLL_NS 1000000

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One wait between polls started at `start`; false once the poll time is up. */
static bool poll_pause(int64_t start) {
    int64_t t = now_ns() - start;
    if (t > POOL_POLL_NS) return false;
    if (t > POOL_SPIN_NS) sched_yield();
    else
        for (int i = 0; i < 64; i++) atomic_signal_fence(memory_order_seq_cst);
    return true;
}

/* Polls until *v != old or the poll time is up. */
static void spin_while_equal_u64(_Atomic uint64_t *v, uint64_t old) {
    int64_t start = now_ns();
    while (atomic_load_explicit(v, memory_order_acquire) == old)
        if (!poll_pause(start)) return;
}

/* Polls until the job is over (every chunk done, no worker still inside it) or the
 * poll time is up; returns whether it is over. */
static bool spin_until_over(cpu_pool *p, int nchunks) {
    int64_t start = now_ns();
    while (atomic_load(&p->done) < nchunks || atomic_load(&p->active) > 0)
        if (!poll_pause(start)) return false;
    return true;
}

/* Set while this thread runs a chunk: a nested cpu_pool_for then runs inline (waiting on
 * a pool from inside one of its own jobs would never end). */
static _Thread_local bool in_chunk;

/* Runs chunks of the current job until none is left unclaimed. */
static void run_chunks(cpu_pool *p, cpu_range_fn fn, void *ctx, int64_t n, int nchunks) {
    in_chunk = true;
    for (;;) {
        int c = atomic_fetch_add_explicit(&p->next, 1, memory_order_acq_rel);
        if (c >= nchunks) break;
        int64_t b, e;
        chunk_range(n, nchunks, c, &b, &e);
        fn(ctx, b, e);
        atomic_fetch_add(&p->done, 1);
    }
    in_chunk = false;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    cpu_pool *p = wa->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (!p->stop && p->generation == seen) {
            pthread_mutex_unlock(&p->lock);
            spin_while_equal_u64(&p->generation, seen);
            pthread_mutex_lock(&p->lock);
        }
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->lock);
        if (p->stop) break;
        seen = p->generation; /* a job missed while asleep is over: only the latest counts */
        cpu_range_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t n = p->n;
        int nchunks = p->nchunks;
        /* Enter the job, then check it is not over: the caller reads done, then active,
         * so (all sequentially consistent) either it sees this worker inside and waits,
         * or this worker sees every chunk done and stays out of a job whose context may
         * be gone. Job changes need the lock, so the snapshot above stays current. */
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->done) >= nchunks) {
            if (atomic_fetch_sub(&p->active, 1) == 1) pthread_cond_signal(&p->done_cv);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        run_chunks(p, fn, ctx, n, nchunks);
        pthread_mutex_lock(&p->lock);
        atomic_fetch_sub(&p->active, 1);
        if (atomic_load(&p->done) >= nchunks && atomic_load(&p->active) == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void pool_destroy(cpu_pool *p, int started) {
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < started; i++) pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->run_lock);
    free(p->workers);
    free(p->args);
    free(p);
}

/* The pool's locks and conditions; on a failure those made are destroyed again. */
static int sync_init(cpu_pool *p) {
    if (pthread_mutex_init(&p->run_lock, NULL)) return -1;
    if (pthread_mutex_init(&p->lock, NULL)) goto no_lock;
    if (pthread_cond_init(&p->work_cv, NULL)) goto no_work;
    if (pthread_cond_init(&p->done_cv, NULL)) goto no_done;
    return 0;
no_done:
    pthread_cond_destroy(&p->work_cv);
no_work:
    pthread_mutex_destroy(&p->lock);
no_lock:
    pthread_mutex_destroy(&p->run_lock);
    return -1;
}

cpu_pool *cpu_pool_new(int threads) {
    if (threads <= 0) threads = cpu_num_cores();
    if (threads > POOL_MAX_THREADS) threads = POOL_MAX_THREADS;
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = threads;
    int nw = threads - 1;
    p->workers = calloc((size_t)(nw > 0 ? nw : 1), sizeof *p->workers);
    p->args = calloc((size_t)(nw > 0 ? nw : 1), sizeof *p->args);
    if (!p->workers || !p->args) {
        free(p->workers);
        free(p->args);
        free(p);
        return NULL;
    }
    if (sync_init(p)) { /* out of resources: no pool (callers then run inline) */
        free(p->workers);
        free(p->args);
        free(p);
        return NULL;
    }
    for (int i = 0; i < nw; i++) {
        p->args[i].pool = p;
        p->args[i].index = i + 1;
        if (pthread_create(&p->workers[i], NULL, worker_main, &p->args[i]) != 0) {
            pool_destroy(p, i);
            return NULL;
        }
    }
    return p;
}

void cpu_pool_free(cpu_pool *p) {
    if (p) pool_destroy(p, p->threads - 1);
}

int cpu_pool_threads(const cpu_pool *p) { return p ? p->threads : 1; }

/* The shared pools: one per thread count, with its users. */
typedef struct shared_pool {
    cpu_pool *pool;
    int refs;
    struct shared_pool *next;
} shared_pool;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_pool *shared_pools;

cpu_pool *cpu_pool_shared(int threads) {
    if (threads <= 0) threads = cpu_num_cores();
    if (threads > POOL_MAX_THREADS) threads = POOL_MAX_THREADS;
    cpu_pool *got = NULL;
    pthread_mutex_lock(&shared_lock);
    for (shared_pool *s = shared_pools; s && !got; s = s->next)
        if (s->pool->threads == threads) {
            s->refs++;
            got = s->pool;
        }
    if (!got) {
        shared_pool *s = malloc(sizeof *s);
        if (s && (s->pool = cpu_pool_new(threads))) {
            s->refs = 1;
            s->next = shared_pools;
            shared_pools = s;
            got = s->pool;
        } else {
            free(s);
        }
    }
    pthread_mutex_unlock(&shared_lock);
    return got;
}

void cpu_pool_release(cpu_pool *p) {
    if (!p) return;
    cpu_pool *stop = NULL;
    pthread_mutex_lock(&shared_lock);
    for (shared_pool **at = &shared_pools; *at; at = &(*at)->next) {
        shared_pool *s = *at;
        if (s->pool != p) continue;
        if (--s->refs == 0) {
            *at = s->next;
            stop = s->pool;
            free(s);
        }
        break;
    }
    pthread_mutex_unlock(&shared_lock);
    cpu_pool_free(stop); /* joins the workers outside the registry's lock */
}

void cpu_pool_for(cpu_pool *p, int64_t n, int64_t min_chunk, cpu_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    if (!p || p->threads <= 1 || n < 2 * min_chunk || in_chunk) {
        fn(ctx, 0, n);
        return;
    }
    int64_t maxc = n / min_chunk; /* every chunk gets at least min_chunk items */
    int nchunks = maxc < p->threads ? (int)maxc : p->threads;

    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->nchunks = nchunks;
    atomic_store(&p->next, 0);
    atomic_store(&p->done, 0);
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->lock);

    run_chunks(p, fn, ctx, n, nchunks);

    if (!spin_until_over(p, nchunks)) {
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->done) < nchunks || atomic_load(&p->active) > 0) pthread_cond_wait(&p->done_cv, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&p->run_lock);
}
