/* The program cache and the process-wide compile and load budgets (sim_budget.h). */
#include "ane/sim_budget.h"
#include "ane/guards.h"
#include "ir/fp16.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ content hash */

/* Two independent 64-bit lanes: a 128-bit key makes accidental collisions negligible
 * without keeping the (possibly large) program text around. */
typedef struct { uint64_t a, b; } hash128;

static void mix(hash128 *h, uint64_t w) {
    h->a = (h->a ^ w) * 0x9E3779B97F4A7C15ULL;
    h->a ^= h->a >> 29;
    h->b = (h->b + w + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    h->b ^= h->b >> 31;
}

static uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    return k ^ (k >> 33);
}

static uint64_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void mix_shape(hash128 *h, af_shape s) {
    mix(h, (uint64_t)s.rank);
    for (int i = 0; i < s.rank; i++) mix(h, (uint64_t)s.dim[i]);
}

/* The values as the engine stores them: fp16 bits, four to a word. */
static void mix_const(hash128 *h, const af_tensor *t) {
    mix(h, 0xC0); /* tag: a constant */
    mix_shape(h, t->shape);
    int64_t n = af_shape_count(t->shape);
    uint64_t w = 0;
    for (int64_t i = 0; i < n; i++) {
        w = (w << 16) | af_f32_to_f16(t->data[i]);
        if ((i & 3) == 3) { mix(h, w); w = 0; }
    }
    mix(h, w);
}

static void mix_attrs(hash128 *h, const ir_attrs *a) {
    for (int i = 0; i < AF_MAX_RANK; i++) { mix(h, (uint64_t)a->ints[i]); mix(h, (uint64_t)a->sizes[i]); }
    int v[] = { a->naxes, a->axis, a->keep_dims, a->ta, a->tb, a->mode, a->groups, a->kernel[0], a->kernel[1],
                a->stride[0], a->stride[1], a->pad[0], a->pad[1], a->dilation[0], a->dilation[1], (int)a->to };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) mix(h, (uint64_t)(int64_t)v[i]);
    mix(h, af_f32_to_f16(a->scalar)); /* baked into the program as an fp16 literal */
    mix(h, float_bits(a->eps));
}

/* Tensors are numbered by first appearance in the program, so the same program built
 * in another graph (other ids, other names) hashes the same. Names are not content. */
static int64_t local_id(hash128 *h, int64_t *loc, int64_t *next, const af_tensor *t) {
    if (loc[t->id] < 0) {
        if (t->op == IR_OP_CONST) mix_const(h, t);
        loc[t->id] = (*next)++;
    }
    return loc[t->id];
}

void ane_program_key(const compile_plan *m, af_family_id family, uint64_t key[2]) {
    hash128 h = { 0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL };
    int64_t *loc = malloc(sizeof *loc * (size_t)(m->ntensors + 1)), next = 0;
    mix(&h, (uint64_t)family);
    mix(&h, (uint64_t)m->nin);
    mix(&h, (uint64_t)m->nout);
    if (!loc) { /* no room to number tensors: a unique key, so the cache never lies */
        static _Atomic uint64_t unique;
        mix(&h, ++unique ^ (uint64_t)(uintptr_t)m);
    } else {
        for (int i = 0; i < m->ntensors; i++) loc[i] = -1;
        for (int i = 0; i < m->nin; i++) {
            loc[m->in[i]->id] = next++;
            mix(&h, (uint64_t)m->in[i]->dtype);
            mix_shape(&h, m->in[i]->shape);
        }
        for (int s = 0; s < m->nsched; s++) {
            const af_tensor *t = m->sched[s];
            for (int k = 0; k < t->nsrc; k++) local_id(&h, loc, &next, t->src[k]); /* constants first */
            mix(&h, (uint64_t)t->op);
            mix(&h, (uint64_t)t->dtype);
            mix_shape(&h, t->shape);
            mix(&h, (uint64_t)t->nsrc);
            for (int k = 0; k < t->nsrc; k++) mix(&h, (uint64_t)loc[t->src[k]->id]);
            mix_attrs(&h, &t->a);
            loc[t->id] = next++;
        }
        for (int i = 0; i < m->nout; i++) mix(&h, (uint64_t)local_id(&h, loc, &next, m->out[i]));
    }
    free(loc);
    key[0] = fmix(h.a ^ (h.b >> 1));
    key[1] = fmix(h.b + h.a);
}

/* ------------------------------------------------------------------ the cache */

typedef struct {
    uint64_t key[2];
    int users;      /* live models holding the program */
    int loaded;
    uint64_t last;  /* tick of the last load or run: the LRU order */
} entry;

static struct {
    pthread_mutex_t lock;
    entry *e;
    int n, cap;
    int compiles, hits, loaded, loads, evictions;
    int compile_limit, load_limit;
    uint64_t tick, gen;
} B = { .lock = PTHREAD_MUTEX_INITIALIZER, .compile_limit = AF_ANE_COMPILE_LIMIT, .load_limit = AF_ANE_LOAD_LIMIT, .gen = 1 };

static int find(const uint64_t key[2]) {
    for (int i = 0; i < B.n; i++)
        if (B.e[i].key[0] == key[0] && B.e[i].key[1] == key[1]) return i;
    return -1;
}

static int add(const uint64_t key[2]) {
    if (B.n == B.cap) {
        int cap = B.cap ? 2 * B.cap : 64;
        entry *e = realloc(B.e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        B.e = e;
        B.cap = cap;
    }
    B.e[B.n] = (entry){ .key = { key[0], key[1] } };
    return B.n++;
}

/* Loads entry i, first unloading the least recently used other program when all the
 * slots are taken; its models reload it on their next run. */
static void load(int i) {
    entry *e = &B.e[i];
    e->last = ++B.tick;
    if (e->loaded) return;
    while (B.loaded >= B.load_limit) {
        int lru = -1;
        for (int j = 0; j < B.n; j++)
            if (j != i && B.e[j].loaded && (lru < 0 || B.e[j].last < B.e[lru].last)) lru = j;
        if (lru < 0) break;
        B.e[lru].loaded = 0;
        B.loaded--;
        B.evictions++;
    }
    e->loaded = 1;
    B.loaded++;
    B.loads++;
}

af_status ane_program_acquire(ane_program *prog, const compile_plan *m, af_family_id family, bool *compiled,
                                 char *msg, size_t n) {
    *compiled = false;
    ane_program_key(m, family, prog->key);
    pthread_mutex_lock(&B.lock);
    int i = find(prog->key);
    if (i >= 0) {
        B.hits++;
    } else {
        if (B.compiles >= B.compile_limit) {
            int done = B.compiles;
            pthread_mutex_unlock(&B.lock);
            snprintf(msg, n, "ane-sim: the compile budget is spent: this process has compiled %d programs and the engine's compiler "
                             "fails after about %d per process. Remedy: reuse programs (recompiling identical content hits the "
                             "program cache), feed changing weights as inputs instead of baking them, or restart the process "
                             "(af_ane_budget_reset emulates a restart)", done, AF_ANE_COMPILE_LIMIT);
            return AF_ERR_UNSUPPORTED;
        }
        i = add(prog->key);
        if (i < 0) {
            pthread_mutex_unlock(&B.lock);
            snprintf(msg, n, "out of memory in the program cache");
            return AF_ERR_NOMEM;
        }
        B.compiles++;
        *compiled = true;
    }
    B.e[i].users++;
    load(i);
    prog->gen = B.gen;
    prog->held = 1;
    pthread_mutex_unlock(&B.lock);
    if (*compiled) ane_guard_compile_time(m, family); /* a real compile: warn if it may take minutes */
    return AF_OK;
}

void ane_program_use(ane_program *prog) {
    if (!prog->held) return;
    pthread_mutex_lock(&B.lock);
    int i = find(prog->key);
    if (prog->gen != B.gen || i < 0) { /* the cache was reset: the model still owns its compiled program */
        if (i < 0) i = add(prog->key);
        if (i >= 0) B.e[i].users++;
        prog->gen = B.gen;
    }
    if (i >= 0) load(i);
    pthread_mutex_unlock(&B.lock);
}

void ane_program_release(ane_program *prog) {
    if (!prog || !prog->held) return;
    pthread_mutex_lock(&B.lock);
    int i = prog->gen == B.gen ? find(prog->key) : -1;
    if (i >= 0 && B.e[i].users > 0) B.e[i].users--; /* the compiled program stays cached */
    prog->held = 0;
    pthread_mutex_unlock(&B.lock);
}

/* ------------------------------------------------------------------ public counters */

void af_ane_budget(af_ane_budget_info *out) {
    if (!out) return;
    pthread_mutex_lock(&B.lock);
    *out = (af_ane_budget_info){ .compiles = B.compiles, .compile_limit = B.compile_limit, .cache_hits = B.hits,
                                 .loaded = B.loaded, .load_limit = B.load_limit, .loads = B.loads,
                                 .evictions = B.evictions, .cached = B.n };
    pthread_mutex_unlock(&B.lock);
}

void af_ane_budget_set_limits(int compile_limit, int load_limit) {
    pthread_mutex_lock(&B.lock);
    B.compile_limit = compile_limit > 0 ? compile_limit : AF_ANE_COMPILE_LIMIT;
    B.load_limit = load_limit > 0 ? load_limit : AF_ANE_LOAD_LIMIT;
    while (B.loaded > B.load_limit) { /* shrink: unload the least recently used */
        int lru = -1;
        for (int j = 0; j < B.n; j++)
            if (B.e[j].loaded && (lru < 0 || B.e[j].last < B.e[lru].last)) lru = j;
        B.e[lru].loaded = 0;
        B.loaded--;
        B.evictions++;
    }
    pthread_mutex_unlock(&B.lock);
}

void af_ane_budget_reset(void) {
    pthread_mutex_lock(&B.lock);
    free(B.e);
    B.e = NULL;
    B.n = B.cap = 0;
    B.compiles = B.hits = B.loaded = B.loads = B.evictions = 0;
    B.gen++;
    pthread_mutex_unlock(&B.lock);
}
