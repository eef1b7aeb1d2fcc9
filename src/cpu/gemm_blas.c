/* The BLAS libraries behind cpu_sgemm (gemm.h): OpenBLAS opened at run time, Accelerate
 * on macOS, the policy that decides when a product goes to them rather than to our
 * kernels (gemm.c), and what the build and the machine report about them. */
#if defined(AF_HAVE_ACCELERATE)
#include <Accelerate/Accelerate.h>
#elif defined(AF_HAVE_BLAS)
#include <dlfcn.h>
#endif

#include "cpu/gemm.h"
#include "cpu/cpu_features.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
/* OpenBLAS is opened (dlopen) the first time a product may go to it, never at load time:
 * its pthread build starts a thread server that spins on sched_yield for a while, which
 * on a small machine takes a core from our pool even when our kernels do all the work
 * (a tenth of a short MLP run's CPU time on Zen 4). cblas's row-major and transpose
 * codes, so no header is needed. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
typedef struct {
    cblas_sgemm_fn sgemm;
    char *(*corename)(void);    /* may be NULL */
    void (*set_threads)(int);   /* may be NULL */
} openblas_api;

static void *symbol(void *h, const char *name) { return h ? dlsym(h, name) : NULL; }

/* The opened library, or NULL when it cannot be opened. */
static const openblas_api *openblas(void) {
    static openblas_api api;
    static atomic_int state; /* 0 not tried, 1 open, 2 absent */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int st = atomic_load(&state);
    if (!st) {
        pthread_mutex_lock(&lock);
        if (!(st = atomic_load(&state))) {
            void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
            if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
            void *f = symbol(h, "cblas_sgemm"), *c = symbol(h, "openblas_get_corename"), *t = symbol(h, "openblas_set_num_threads");
            memcpy(&api.sgemm, &f, sizeof f); /* object to function pointer, as POSIX allows */
            memcpy(&api.corename, &c, sizeof c);
            memcpy(&api.set_threads, &t, sizeof t);
            /* One thread: products large enough to split are split over our pool. */
            if (api.sgemm && api.set_threads) api.set_threads(1);
            st = api.sgemm ? 1 : 2;
            atomic_store(&state, st);
        }
        pthread_mutex_unlock(&lock);
    }
    return st == 1 ? &api : NULL;
}
#endif

#if defined(AF_HAVE_BLAS)
static void blas_call(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#if defined(AF_HAVE_ACCELERATE)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
#else
    openblas()->sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)M,
                      (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
#endif
}

#if !defined(AF_HAVE_ACCELERATE)
/* OpenBLAS runs on one thread and large products are split over our own pool instead:
 * OpenBLAS's idle workers spin in sched_yield for a long while after every threaded
 * call, and on a small machine they steal the cores our pool's threads need (a third
 * of a CNN training step went to that). Accelerate manages its own threads. */
#define BLAS_SPLIT_MIN_MACS ((int64_t)1 << 21)

typedef struct {
    int ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc, parts;
    float alpha, beta;
    const float *A, *B;
    float *C;
} blas_split;

/* Part i of C: a band of rows (with op(A)'s matching rows) or of columns (with op(B)'s). */
static void blas_part(void *p, int64_t i0, int64_t i1) {
    const blas_split *s = p;
    for (int64_t i = i0; i < i1; i++) {
        int64_t extent = s->by_rows ? s->M : s->N, a = extent * i / s->parts, b = extent * (i + 1) / s->parts;
        if (a == b) continue;
        if (s->by_rows)
            blas_call(s->ta, s->tb, b - a, s->N, s->K, s->alpha, s->A + (s->ta ? a : a * s->lda), s->lda, s->B, s->ldb,
                      s->beta, s->C + a * s->ldc, s->ldc);
        else
            blas_call(s->ta, s->tb, s->M, b - a, s->K, s->alpha, s->A, s->lda, s->B + (s->tb ? a * s->ldb : a), s->ldb,
                      s->beta, s->C + a, s->ldc);
    }
}
#endif
#endif

bool cpu_sgemm_blas(cpu_pool *p, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc) {
#if defined(AF_HAVE_BLAS)
    /* cblas takes int sizes and rejects leading dimensions shorter than a row. */
    int64_t arow = ta ? M : K, brow = tb ? K : N;
    if (M <= 0 || N <= 0 || K <= 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX ||
        ldb > INT_MAX || ldc > INT_MAX || lda < arow || ldb < brow || ldc < N)
        return false;
#if defined(AF_HAVE_ACCELERATE)
    (void)p;
    blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    if (!openblas()) return false;
    int threads = cpu_pool_threads(p);
    if (threads < 2 || M * N * K < BLAS_SPLIT_MIN_MACS) {
        blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else {
        blas_split s = { ta, tb, M >= N, M, N, K, lda, ldb, ldc, threads, alpha, beta, A, B, C };
        cpu_pool_for(p, threads, 1, blas_part, &s);
    }
#endif
    return true;
#else
    (void)p, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return false;
#endif
}

#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
/* OpenBLAS picks its kernels from the CPU's name; the core it picked, when it says. */
static const char *openblas_core(void) {
    const openblas_api *ob = openblas();
    return ob && ob->corename ? ob->corename() : NULL;
}

static bool name_is(const char *name, const char *const *list) {
    for (; *list; list++) {
        const char *a = name, *b = *list;
        while (*a && *b && (*a | 0x20) == (*b | 0x20)) a++, b++;
        if (!*a && !*b) return true;
    }
    return false;
}

/* Whether OpenBLAS's own choice uses the widest vector ISA the CPU has, checked against
 * the CPU's features: on a CPU it cannot name it falls back to SSE3 ("Prescott") and is
 * 2-3x slower than our kernels; where it named the CPU it is as fast or faster. */
static bool openblas_fits_cpu(void) {
    const char *core = openblas_core();
    if (!core) return false; /* cannot tell: our kernels are the safe choice */
    static const char *const avx512[] = { "SkylakeX", "Cooperlake", "SapphireRapids", NULL };
    static const char *const avx2[] = { "Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL };
    const cpu_features *f = cpu_features_get();
    if (f->avx512f) return name_is(core, avx512);
    if (f->avx2 && f->fma) return name_is(core, avx2);
    return true; /* arm64 builds use NEON kernels for every core; elsewhere ours are plain C */
}
#endif

/* Whether cpu_sgemm hands products to BLAS rather than to our kernel uk: Accelerate always (it reaches Apple's
 * matrix units, which no hand-written kernel can). OpenBLAS never on an x86 CPU with our
 * AVX-512 or AVX2 kernels: where OpenBLAS cannot name the CPU it runs SSE3 kernels 2-3x
 * slower, and where it can, a whole training step is as fast or faster on ours (the MLP
 * at batch 128: 0.58 against 0.70-0.75 ms/step on Zen 4, the CNN the same), so a build's
 * speed no longer depends on which BLAS it found. Elsewhere OpenBLAS when its kernels fit
 * the CPU's features, or when no SIMD kernel of ours does. Decided once. */
bool cpu_gemm_prefers_blas(const gemm_ukernel *uk) {
#if defined(AF_HAVE_ACCELERATE)
    (void)uk;
    return true;
#elif defined(AF_HAVE_BLAS)
    static atomic_int decided; /* 0 unknown, 1 ours, 2 BLAS */
    int d = atomic_load(&decided);
    if (!d) {
        bool ours_x86 = uk->simd && (!strcmp(uk->name, "avx512") || !strcmp(uk->name, "avx2"));
        d = !ours_x86 && (!uk->simd || openblas_fits_cpu()) ? 2 : 1;
        atomic_store(&decided, d);
    }
    return d == 2;
#else
    (void)uk;
    return false;
#endif
}

const char *cpu_blas_name(void) {
#if defined(AF_HAVE_ACCELERATE)
    return "accelerate";
#elif defined(AF_HAVE_BLAS)
    return "openblas";
#else
    return NULL;
#endif
}

/* cpu_gemm_path's text where BLAS runs the products: the library, with the core OpenBLAS
 * picked. */
const char *cpu_blas_path(void) {
#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
    static char path[64];
    if (!path[0]) { /* racing first calls write the same text */
        const char *core = openblas_core();
        snprintf(path, sizeof path, "openblas%s%s", core ? " " : "", core ? core : "");
    }
    return path;
#else
    return cpu_blas_name();
#endif
}

void cpu_blas_set_threads(int n) {
    (void)n; /* OpenBLAS is set to one thread when opened (products are split over the pool) */
}

int cpu_have_blas(void) {
#if defined(AF_HAVE_ACCELERATE)
    return 1;
#elif defined(AF_HAVE_BLAS)
    return openblas() != NULL;
#else
    return 0;
#endif
}

const char *cpu_blas_core(void) {
#if defined(AF_HAVE_BLAS) && !defined(AF_HAVE_ACCELERATE)
    return openblas_core();
#else
    return NULL;
#endif
}
