/* The program cache and the process-wide compile and load budgets (budget.h). */
#include "sim/budget.h"
#include "sim/guards.h"
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

/* One simulated engine as a process sees it (af_sim_engine in aneforge.h). */
struct af_sim_engine {
    pthread_mutex_t lock;
    atomic_int refs;  /* the creator's, plus one per model compiled on it */
    entry *e;
    int n, cap;
    int compiles, hits, loaded, loads, evictions;
    int compile_limit, load_limit;
    uint64_t tick, gen;
};

static af_sim_engine default_engine = { .lock = PTHREAD_MUTEX_INITIALIZER, .refs = 1, .compile_limit = AF_ANE_COMPILE_LIMIT,
                                        .load_limit = AF_ANE_LOAD_LIMIT, .gen = 1 };

static af_sim_engine *engine_or_default(af_sim_engine *E) { return E ? E : &default_engine; }

af_sim_engine *af_sim_engine_new(void) {
    af_sim_engine *E = calloc(1, sizeof *E);
    if (!E) { ir_fail(AF_ERR_NOMEM, "af_sim_engine_new: out of memory"); return NULL; }
    int rc = pthread_mutex_init(&E->lock, NULL);
    if (rc) {
        free(E);
        ir_fail(AF_ERR_NOMEM, "af_sim_engine_new: cannot create its lock: %s", strerror(rc));
        return NULL;
    }
    atomic_init(&E->refs, 1);
    E->compile_limit = AF_ANE_COMPILE_LIMIT;
    E->load_limit = AF_ANE_LOAD_LIMIT;
    E->gen = 1;
    return E;
}

static void engine_release(af_sim_engine *E) {
    if (!E || E == &default_engine || atomic_fetch_sub(&E->refs, 1) > 1) return;
    pthread_mutex_destroy(&E->lock);
    free(E->e);
    free(E);
}

void af_sim_engine_free(af_sim_engine *E) { engine_release(E); }

static int find(const af_sim_engine *E, const uint64_t key[2]) {
    for (int i = 0; i < E->n; i++)
        if (E->e[i].key[0] == key[0] && E->e[i].key[1] == key[1]) return i;
    return -1;
}

static int add(af_sim_engine *E, const uint64_t key[2]) {
    if (E->n == E->cap) {
        int cap = E->cap ? 2 * E->cap : 64;
        entry *e = realloc(E->e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        E->e = e;
        E->cap = cap;
    }
    E->e[E->n] = (entry){ .key = { key[0], key[1] } };
    return E->n++;
}

/* Unloads the least recently used loaded program other than `keep` (-1: any). */
static bool evict_lru(af_sim_engine *E, int keep) {
    int lru = -1;
    for (int j = 0; j < E->n; j++)
        if (j != keep && E->e[j].loaded && (lru < 0 || E->e[j].last < E->e[lru].last)) lru = j;
    if (lru < 0) return false;
    E->e[lru].loaded = 0;
    E->loaded--;
    E->evictions++;
    return true;
}

/* Loads entry i, first unloading the least recently used other program when all the
 * slots are taken; its models reload it on their next run. */
static void load(af_sim_engine *E, int i) {
    entry *e = &E->e[i];
    e->last = ++E->tick;
    if (e->loaded) return;
    while (E->loaded >= E->load_limit && evict_lru(E, i)) {}
    e->loaded = 1;
    E->loaded++;
    E->loads++;
}

af_status ane_program_acquire(ane_program *prog, af_sim_engine *engine, const compile_plan *m, af_family_id family,
                              bool *compiled, char *msg, size_t n) {
    af_sim_engine *E = engine_or_default(engine);
    *compiled = false;
    ane_program_key(m, family, prog->key);
    pthread_mutex_lock(&E->lock);
    int i = find(E, prog->key);
    if (i >= 0) {
        E->hits++;
    } else {
        if (E->compiles >= E->compile_limit) {
            int done = E->compiles;
            pthread_mutex_unlock(&E->lock);
            snprintf(msg, n, "ane-sim: the compile budget is spent: this process has compiled %d programs and the engine's compiler "
                             "fails after about %d per process. Remedy: reuse programs (recompiling identical content hits the "
                             "program cache), feed changing weights as inputs instead of baking them, or restart the process "
                             "(af_ane_budget_reset emulates a restart)", done, AF_ANE_COMPILE_LIMIT);
            return AF_ERR_UNSUPPORTED;
        }
        i = add(E, prog->key);
        if (i < 0) {
            pthread_mutex_unlock(&E->lock);
            snprintf(msg, n, "out of memory in the program cache");
            return AF_ERR_NOMEM;
        }
        E->compiles++;
        *compiled = true;
    }
    E->e[i].users++;
    load(E, i);
    prog->gen = E->gen;
    prog->held = 1;
    prog->engine = E;
    if (E != &default_engine) atomic_fetch_add(&E->refs, 1); /* the model keeps its engine alive */
    pthread_mutex_unlock(&E->lock);
    if (*compiled) ane_guard_compile_time(m, family); /* a real compile: warn if it may take minutes */
    return AF_OK;
}

void ane_program_use(ane_program *prog) {
    if (!prog->held) return;
    af_sim_engine *E = prog->engine;
    pthread_mutex_lock(&E->lock);
    int i = find(E, prog->key);
    if (prog->gen != E->gen || i < 0) { /* the cache was reset: the model still owns its compiled program */
        if (i < 0) i = add(E, prog->key);
        if (i >= 0) E->e[i].users++;
        prog->gen = E->gen;
    }
    if (i >= 0) load(E, i);
    pthread_mutex_unlock(&E->lock);
}

void ane_program_release(ane_program *prog) {
    if (!prog || !prog->held) return;
    af_sim_engine *E = prog->engine;
    pthread_mutex_lock(&E->lock);
    int i = prog->gen == E->gen ? find(E, prog->key) : -1;
    if (i >= 0 && E->e[i].users > 0) E->e[i].users--; /* the compiled program stays cached */
    prog->held = 0;
    pthread_mutex_unlock(&E->lock);
    engine_release(E);
}

/* ------------------------------------------------------------------ public counters */

void af_ane_budget(const af_sim_engine *engine, af_ane_budget_info *out) {
    if (!out) return;
    af_sim_engine *E = engine_or_default((af_sim_engine *)engine);
    pthread_mutex_lock(&E->lock);
    *out = (af_ane_budget_info){ .compiles = E->compiles, .compile_limit = E->compile_limit, .cache_hits = E->hits,
                                 .loaded = E->loaded, .load_limit = E->load_limit, .loads = E->loads,
                                 .evictions = E->evictions, .cached = E->n };
    pthread_mutex_unlock(&E->lock);
}

void af_ane_budget_set_limits(af_sim_engine *engine, int compile_limit, int load_limit) {
    af_sim_engine *E = engine_or_default(engine);
    pthread_mutex_lock(&E->lock);
    E->compile_limit = compile_limit > 0 ? compile_limit : AF_ANE_COMPILE_LIMIT;
    E->load_limit = load_limit > 0 ? load_limit : AF_ANE_LOAD_LIMIT;
    while (E->loaded > E->load_limit && evict_lru(E, -1)) {} /* shrink: unload the least recently used */
    pthread_mutex_unlock(&E->lock);
}

void af_ane_budget_reset(af_sim_engine *engine) {
    af_sim_engine *E = engine_or_default(engine);
    pthread_mutex_lock(&E->lock);
    free(E->e);
    E->e = NULL;
    E->n = E->cap = 0;
    E->compiles = E->hits = E->loaded = E->loads = E->evictions = 0;
    E->gen++;
    pthread_mutex_unlock(&E->lock);
}
