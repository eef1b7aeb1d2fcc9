/* af_compile: check the request, keep the nodes the outputs need, schedule them in
 * creation order (already topological), and plan one arena with buffer reuse by
 * liveness so a run allocates nothing. */
#include "compile/model.h"
#include "compile/target.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_FLOATS 16 /* 64-byte alignment for every buffer */

typedef struct { int64_t off, size; } block;
typedef struct { block *b; int n, cap; int64_t top, peak; } allocator; /* peak: the arena size */

static int64_t alloc_take(allocator *a, int64_t size) {
    size = (size + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->b[i].size >= size && (best < 0 || a->b[i].size < a->b[best].size)) best = i;
    if (best < 0) {
        int64_t off = a->top;
        a->top += size;
        if (a->top > a->peak) a->peak = a->top; /* freeing the end lowers top, never the size needed */
        return off;
    }
    int64_t off = a->b[best].off;
    a->b[best].off += size;
    a->b[best].size -= size;
    if (a->b[best].size == 0) a->b[best] = a->b[--a->n];
    return off;
}

static bool alloc_give(allocator *a, int64_t off, int64_t size) {
    size = (size + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    /* Merge with neighbours so freed space can serve larger buffers later. */
    for (int i = 0; i < a->n; i++) {
        if (a->b[i].off + a->b[i].size == off) { off = a->b[i].off; size += a->b[i].size; a->b[i--] = a->b[--a->n]; }
        else if (off + size == a->b[i].off) { size += a->b[i].size; a->b[i--] = a->b[--a->n]; }
    }
    if (off + size == a->top) { a->top = off; return true; }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        block *nb = realloc(a->b, (size_t)cap * sizeof *nb);
        if (!nb) return false;
        a->b = nb;
        a->cap = cap;
    }
    a->b[a->n++] = (block){ off, size };
    return true;
}

void af_model_free(af_model *m) {
    if (!m) return;
    if (m->baked)
        for (int i = 0; i < m->ntensors; i++) free(m->baked[i]);
    free(m->baked);
    free(m->in);
    free(m->out);
    free(m->sched);
    free(m->offset);
    free(m->val);
    free(m->arena);
    free(m->scratch);
    free(m->srcptr);
    free(m->state_out);
    af_sim_program_release(m);
    free(m->quirk);
    cpu_pool_free(m->pool);
    af_graph_free(m->owned_graph);
    af_graph_free(m->g); /* drops the model's reference */
    free(m);
}

static af_model *fail_model(af_model *m, af_status st, const char *msg, ...) {
    char buf[900];
    va_list ap;
    va_start(ap, msg);
    vsnprintf(buf, sizeof buf, msg, ap);
    va_end(ap);
    af_fail(st, "af_compile: %s", buf);
    af_model_free(m);
    return NULL;
}

/* Checks the request and marks what the outputs need. */
static af_model *check_request(af_model *m, af_graph *g, int nin, af_tensor *const *in, int nout,
                               af_tensor *const *out, bool *need) {
    for (int i = 0; i < nout; i++) {
        if (!out[i]) return fail_model(m, AF_ERR_INVALID, "output %d is NULL", i);
        if (out[i]->g != g) return fail_model(m, AF_ERR_INVALID, "output %d belongs to another graph", i);
        need[out[i]->id] = true;
    }
    for (int i = 0; i < nin; i++) {
        if (!in[i]) return fail_model(m, AF_ERR_INVALID, "input %d is NULL", i);
        if (in[i]->g != g) return fail_model(m, AF_ERR_INVALID, "input %d belongs to another graph", i);
        if (in[i]->op != AF_OP_INPUT)
            return fail_model(m, AF_ERR_INVALID, "input %d ('%s') is a %s node, not an af_input or af_parameter; only leaves can be fed",
                              i, af_tensor_name(in[i]), af_ops[in[i]->op].name);
        for (int j = 0; j < i; j++)
            if (in[j] == in[i]) return fail_model(m, AF_ERR_INVALID, "input '%s' is listed twice", af_tensor_name(in[i]));
    }
    for (int id = g->n - 1; id >= 0; id--) {
        if (!need[id]) continue;
        af_tensor *t = g->t[id];
        for (int k = 0; k < t->nsrc; k++) need[t->src[k]->id] = true;
    }
    for (int id = 0; id < g->n; id++) {
        af_tensor *t = g->t[id];
        if (!need[id] || t->op != AF_OP_INPUT) continue;
        bool listed = false;
        for (int i = 0; i < nin; i++) listed |= in[i] == t;
        if (!listed)
            return fail_model(m, AF_ERR_INVALID, "the outputs depend on %s '%s', which is not in the input list; add it to `in`",
                              (t->flags & AF_TF_PARAM) ? "parameter" : "input", af_tensor_name(t));
    }
    return m;
}

/* Plans the arena: inputs and outputs keep their buffers for the whole run,
 * intermediates are freed after their last reader. */
/* A reshape re-labels its source's buffer instead of copying it (the executor points
 * it at the source's values each run); constants keep their copy so baked data is
 * never shared with a writable buffer. */
static bool is_alias(const af_tensor *t) { return t->op == AF_OP_RESHAPE && t->src[0]->op != AF_OP_CONST; }

static bool plan_memory(af_model *m) {
    af_graph *g = m->g;
    int *last = calloc((size_t)g->n, sizeof *last), *root = malloc((size_t)g->n * sizeof *root);
    bool *keep = calloc((size_t)g->n, sizeof *keep);
    allocator al = { 0 };
    bool ok = last && keep && root;
    for (int id = 0; ok && id < g->n; id++) root[id] = id;
    /* Uses and lifetimes belong to the buffer's owner: the root of a chain of aliases. */
    for (int s = 0; ok && s < m->nsched; s++) {
        af_tensor *t = m->sched[s];
        if (is_alias(t)) root[t->id] = root[t->src[0]->id];
        for (int k = 0; k < t->nsrc; k++) last[root[t->src[k]->id]] = s;
    }
    for (int i = 0; ok && i < m->nout; i++) keep[root[m->out[i]->id]] = true;
    for (int i = 0; ok && i < m->nin; i++) {
        keep[m->in[i]->id] = true;
        m->offset[m->in[i]->id] = alloc_take(&al, af_shape_count(m->in[i]->shape));
    }
    for (int s = 0; ok && s < m->nsched; s++) {
        af_tensor *t = m->sched[s];
        if (!is_alias(t)) m->offset[t->id] = alloc_take(&al, af_shape_count(t->shape));
        int64_t sc = cpu_scratch_floats(t, m->threads);
        if (sc > m->scratch_floats) m->scratch_floats = sc;
        for (int k = 0; k < t->nsrc && ok; k++) {
            af_tensor *src = g->t[root[t->src[k]->id]];
            bool dup = false; /* the same buffer twice must be freed once */
            for (int j = 0; j < k; j++) dup |= root[t->src[j]->id] == src->id;
            if (!dup && last[src->id] == s && !keep[src->id] && src->op != AF_OP_CONST && src->op != AF_OP_INPUT)
                ok = alloc_give(&al, m->offset[src->id], af_shape_count(src->shape));
        }
    }
    m->arena_floats = al.peak;
    free(al.b);
    free(last);
    free(keep);
    free(root);
    return ok;
}

af_model *af_compile(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                     const af_compile_opts *opts) {
    af_clear_error();
    if (!g) return fail_model(NULL, AF_ERR_INVALID, "graph is NULL");
    if (g->error) return fail_model(NULL, AF_ERR_INVALID, "the graph has an error: %s", g->error);
    if (nout < 1 || !out) return fail_model(NULL, AF_ERR_INVALID, "no outputs requested; pass at least one tensor in `out`");
    if (nin < 0) return fail_model(NULL, AF_ERR_INVALID, "nin = %d is negative", nin);
    if (nin > 0 && !in) return fail_model(NULL, AF_ERR_INVALID, "nin = %d but in is NULL", nin);
    af_compile_opts o = opts ? *opts : (af_compile_opts){ 0 };
    if (o.target != AF_TARGET_CPU && o.target != AF_TARGET_ANE_SIM && o.target != AF_TARGET_ANE)
        return fail_model(NULL, AF_ERR_INVALID, "unknown target %d", (int)o.target);
    if (o.target == AF_TARGET_ANE)
        return fail_model(NULL, AF_ERR_UNSUPPORTED, "the ANE runtime target is available only on Apple Silicon; use AF_TARGET_ANE_SIM");
    if (o.target == AF_TARGET_ANE_SIM && o.via_mil >= 0) {
        const char *env = getenv("ANEFORGE_SIM_VIA_MIL");
        if (o.via_mil > 0 || (env && !strcmp(env, "1"))) return af_sim_compile_via_mil(g, nin, in, nout, out, &o);
    }

    af_model *m = calloc(1, sizeof *m);
    bool *need = calloc((size_t)g->n, sizeof *need);
    if (!m || !need) { free(need); return fail_model(m, AF_ERR_NOMEM, "out of memory"); }
    m->g = af_graph_retain(g); /* the model keeps its graph alive (af_graph_free may come first) */
    m->target = o.target;
    m->fp16 = o.precision == AF_PRECISION_FP16 || (o.precision == AF_PRECISION_DEFAULT && o.target != AF_TARGET_CPU);
    if (o.target == AF_TARGET_ANE_SIM) { /* the engine stores and adds in fp16 (reduce_sum too) */
        if (o.precision == AF_PRECISION_FP32) {
            free(need);
            return fail_model(m, AF_ERR_UNSUPPORTED, "ane-sim computes in fp16 only; drop AF_PRECISION_FP32 or compile for AF_TARGET_CPU");
        }
        if (af_family_resolve(o.family, &m->family)) { free(need); return fail_model(m, AF_ERR_INVALID, "%s", af_error_message()); }
        m->fp16 = m->fp16_accum = 1;
    }
    m->ntensors = g->n;
    if (!check_request(m, g, nin, in, nout, out, need)) { free(need); return NULL; }

    m->nin = nin;
    m->nout = nout;
    m->in = malloc(sizeof *m->in * (size_t)(nin + 1));
    m->out = malloc(sizeof *m->out * (size_t)nout);
    m->sched = malloc(sizeof *m->sched * (size_t)g->n);
    m->offset = malloc(sizeof *m->offset * (size_t)g->n);
    m->val = calloc((size_t)g->n, sizeof *m->val);
    m->baked = calloc((size_t)g->n, sizeof *m->baked);
    if (!m->in || !m->out || !m->sched || !m->offset || !m->val || !m->baked) { free(need); return fail_model(m, AF_ERR_NOMEM, "out of memory"); }
    if (nin) memcpy(m->in, in, sizeof *in * (size_t)nin);
    memcpy(m->out, out, sizeof *out * (size_t)nout);
    for (int id = 0; id < g->n; id++) {
        m->offset[id] = -1;
        af_tensor *t = g->t[id];
        if (!need[id]) continue;
        if (t->op == AF_OP_CONST) { /* a copy: later changes to the constant reach only later compiles */
            int64_t n = af_shape_count(t->shape);
            m->baked[id] = malloc((size_t)n * sizeof(float) + 1);
            if (!m->baked[id]) { free(need); return fail_model(m, AF_ERR_NOMEM, "out of memory"); }
            memcpy(m->baked[id], t->data, (size_t)n * sizeof(float));
            if (m->fp16) af_round_f16_array(m->baked[id], n);
            m->val[id] = m->baked[id];
        } else if (t->op != AF_OP_INPUT) {
            m->sched[m->nsched++] = t;
        }
    }
    if (m->target == AF_TARGET_ANE_SIM) { /* the family's compiler walls and limits */
        char msg[900];
        af_status st = af_sim_validate(m, msg, sizeof msg);
        if (st) { free(need); return fail_model(m, st, "%s", msg); }
    }
    int widest = 1;
    for (int s = 0; s < m->nsched; s++) widest = m->sched[s]->nsrc > widest ? m->sched[s]->nsrc : widest;
    m->srcptr = malloc(sizeof *m->srcptr * (size_t)widest);
    m->threads = o.threads > 0 ? o.threads : cpu_num_cores();
    bool ok = m->srcptr && plan_memory(m);
    free(need);
    if (!ok) return fail_model(m, AF_ERR_NOMEM, "out of memory planning buffers");
    m->arena = malloc((size_t)(m->arena_floats + ALIGN_FLOATS) * sizeof(float));
    m->scratch = m->scratch_floats ? malloc((size_t)m->scratch_floats * sizeof(float)) : NULL;
    if (!m->arena || (m->scratch_floats && !m->scratch)) return fail_model(m, AF_ERR_NOMEM, "out of memory: the model needs %lld bytes", (long long)(m->arena_floats * 4));
    for (int id = 0; id < g->n; id++)
        if (m->offset[id] >= 0) m->val[id] = m->arena + m->offset[id];
    m->run_flops = af_program_flops(m);
    if (m->target == AF_TARGET_ANE_SIM) { /* numerics, then the program cache and compile budget */
        char msg[900];
        if (af_sim_set_quirks(m)) return fail_model(m, AF_ERR_NOMEM, "out of memory");
        af_status st = af_sim_program_acquire(m, msg, sizeof msg);
        if (st) return fail_model(m, st, "%s", msg);
    }
    int threads = m->threads;
    if (threads > 1) m->pool = cpu_pool_new(threads);
    cpu_blas_set_threads(threads);
    return m;
}

int af_model_num_nodes(const af_model *m) { return m ? m->nsched : 0; }
size_t af_model_arena_bytes(const af_model *m) { return m ? (size_t)(m->arena_floats + m->scratch_floats) * sizeof(float) : 0; }

void af_model_stats(const af_model *m, af_stats *out) {
    if (out) *out = m ? m->stats : (af_stats){ 0 };
}
void af_model_stats_reset(af_model *m) {
    if (m) m->stats = (af_stats){ 0 };
}
