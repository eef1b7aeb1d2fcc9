/* af_compile, af_run and the model's public functions: the target-neutral checks and
 * the dispatch to the backend that the options name. */
#include "model/model.h"
#include "cpu/pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void af_model_free(af_model *m) {
    if (!m) return;
    if (m->state) m->be->free(m->state);
    model_free_segments(m);
    if (m->lock_ready) pthread_mutex_destroy(&m->lock);
    af_graph_free(m->plan.g); /* the model's hold on its graph */
    plan_free(&m->plan);
    free(m->state_bound);
    free(m);
}

static af_model *fail_model(af_model *m, af_status st, const char *fmt, ...) {
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ir_fail(st, "af_compile: %s", buf);
    af_model_free(m);
    return NULL;
}

/* The caller's options with the defaults and the environment applied. */
static af_status configure(const backend_iface *be, const af_compile_opts *opts, backend_cfg *cfg, char *msg, size_t n) {
    af_compile_opts o = opts ? *opts : (af_compile_opts){ 0 };
    *cfg = (backend_cfg){ .target = o.target, .precision = o.precision, .via_mil = o.via_mil > 0,
                          .precision_check = o.precision_check != AF_OFF,
                          .ane_framework = o.ane_framework, .family_asked = o.family, .sim_engine = o.sim_engine };
    cfg->threads = o.threads > 0 ? o.threads : cpu_num_cores();
    cfg->fp16 = backend_fp16(be, &o);
    if ((unsigned)o.precision > AF_PRECISION_BF16) {
        snprintf(msg, n, "precision %d is unknown; use AF_PRECISION_DEFAULT, _FP32, _FP16 or _BF16", (int)o.precision);
        return AF_ERR_INVALID;
    }
    if (o.precision == AF_PRECISION_BF16 && be->engine) {
        snprintf(msg, n, "precision bf16 runs on the CPU target only (the %s target computes in fp16); use "
                         "AF_PRECISION_FP16 or AF_PRECISION_DEFAULT there", be->name);
        return AF_ERR_INVALID;
    }
    if (be->engine && af_family_resolve(o.family, &cfg->family)) {
        snprintf(msg, n, "%s", af_error_message());
        return AF_ERR_INVALID;
    }
    return be->configure ? be->configure(cfg, msg, n) : AF_OK;
}

af_model *af_compile(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                     const af_compile_opts *opts) {
    ir_clear_error();
    if (!g) return fail_model(NULL, AF_ERR_INVALID, "graph is NULL");
    if (g->error) return fail_model(NULL, AF_ERR_INVALID, "the graph has an error: %s", g->error);
    if (nout < 1 || !out) return fail_model(NULL, AF_ERR_INVALID, "no outputs requested; pass at least one tensor in `out`");
    if (nin < 0) return fail_model(NULL, AF_ERR_INVALID, "nin = %d is negative", nin);
    if (nin > 0 && !in) return fail_model(NULL, AF_ERR_INVALID, "nin = %d but in is NULL", nin);
    af_target target = opts ? opts->target : AF_TARGET_CPU;
    const backend_iface *be = backend_for(target);
    if (!be) return fail_model(NULL, AF_ERR_INVALID, "unknown target %d; use AF_TARGET_CPU, AF_TARGET_ANE_SIM or AF_TARGET_ANE", (int)target);

    af_model *m = calloc(1, sizeof *m);
    if (!m) return fail_model(NULL, AF_ERR_NOMEM, "out of memory");
    /* Zeroed memory is not an initialised mutex (it happens to be one on glibc only). */
    int lrc = pthread_mutex_init(&m->lock, NULL);
    if (lrc) {
        free(m);
        return fail_model(NULL, AF_ERR_NOMEM, "cannot create the model's lock: %s", strerror(lrc));
    }
    m->lock_ready = true;
    m->be = be;
    char msg[900];
    af_status st = configure(be, opts, &m->cfg, msg, sizeof msg);
    if (!st) st = plan_build(&m->plan, g, nin, in, nout, out, msg, sizeof msg);
    if (st) return fail_model(m, st, "%s", msg);
    ir_graph_retain(g); /* the model runs from the graph's nodes: the caller may free it first */
    /* Bridge ops cut engine programs: each segment becomes a model of its own. A plan that
     * is one bridge node is itself a bridge segment and goes to the backend. */
    if (be->engine && plan_has_bridge(&m->plan) && m->plan.nsched > 1) {
        if ((st = model_compile_segments(m, opts, msg, sizeof msg))) return fail_model(m, st, "%s", msg);
        return m;
    }
    for (int s = 0; be->unsupported && s < m->plan.nsched; s++) {
        const char *why = be->unsupported(&m->cfg, m->plan.sched[s]);
        if (why) return fail_model(m, AF_ERR_UNSUPPORTED, "the %s backend cannot run %s '%s' (node %d): %s", be->name,
                                   ir_ops[m->plan.sched[s]->op].name, af_tensor_name(m->plan.sched[s]), m->plan.sched[s]->id, why);
    }
    if (be->validate && (st = be->validate(&m->cfg, &m->plan, msg, sizeof msg))) return fail_model(m, st, "%s", msg);
    msg[0] = 0;
    if ((st = be->init(&m->cfg, &m->plan, &m->state, &m->stats, msg, sizeof msg)))
        return fail_model(m, st, "%s", msg[0] ? msg : af_error_message());
    return m;
}

static af_status check_buffer(const af_buffer *b, const af_tensor *t, const char *what, int i) {
    int64_t n = af_shape_count(t->shape);
    if (!b->data) return ir_fail(AF_ERR_INVALID, "af_run: %s %d ('%s') has no data", what, i, af_tensor_name(t));
    if (b->dtype != AF_F32 && b->dtype != AF_F16)
        return ir_fail(AF_ERR_INVALID, "af_run: %s %d ('%s') has unknown dtype %d", what, i, af_tensor_name(t), (int)b->dtype);
    if (b->count != n) {
        char s[100];
        ir_shape_str(t->shape, s, sizeof s);
        return ir_fail(AF_ERR_SHAPE, "af_run: %s %d ('%s') holds %lld elements but its shape %s needs %lld", what, i,
                       af_tensor_name(t), (long long)b->count, s, (long long)n);
    }
    return AF_OK;
}

af_status af_run(af_model *m, const af_buffer *in, af_buffer *out) {
    if (!m) return ir_fail(AF_ERR_INVALID, "af_run: model is NULL");
    const compile_plan *p = &m->plan;
    if ((p->nin && !in) || !out) return ir_fail(AF_ERR_INVALID, "af_run: input or output buffer array is NULL");
    for (int i = 0; i < p->nin; i++) {
        if (m->state_bound && m->state_bound[i]) continue; /* resident: not fed */
        af_status st = check_buffer(&in[i], p->in[i], "input", i);
        if (st) return st;
    }
    for (int i = 0; i < p->nout; i++) {
        if (!out[i].data) continue; /* not delivered */
        af_status st = check_buffer(&out[i], p->out[i], "output", i);
        if (st) return st;
    }
    pthread_mutex_lock(&m->lock);
    af_status st = m->sub ? model_run_segments(m, in, out) : m->be->run(m->state, in, out, &m->stats);
    pthread_mutex_unlock(&m->lock);
    return st;
}

static af_status check_input(const af_model *m, int in_index, const char *fn) {
    if (!m) return ir_fail(AF_ERR_INVALID, "%s: model is NULL", fn);
    if (in_index < 0 || in_index >= m->plan.nin)
        return ir_fail(AF_ERR_INVALID, "%s: input index %d is out of range (the model has %d inputs)", fn, in_index, m->plan.nin);
    if (m->sub)
        return ir_fail(AF_ERR_UNSUPPORTED, "%s: the model is cut into %d segments around its bridge ops; resident state "
                       "needs one program: feed the state as an input and read it from the output instead", fn, m->seg.nseg);
    return AF_OK;
}

af_status af_model_bind_state(af_model *m, int in_index, int out_index, const float *init) {
    af_status st = check_input(m, in_index, "af_model_bind_state");
    if (st) return st;
    if (out_index < 0 || out_index >= m->plan.nout)
        return ir_fail(AF_ERR_INVALID, "af_model_bind_state: output index %d is out of range (the model has %d outputs)", out_index,
                       m->plan.nout);
    af_tensor *in = m->plan.in[in_index], *out = m->plan.out[out_index];
    if (!ir_shape_eq(in->shape, out->shape)) {
        char a[100], b[100];
        ir_shape_str(in->shape, a, sizeof a);
        ir_shape_str(out->shape, b, sizeof b);
        return ir_fail(AF_ERR_SHAPE, "af_model_bind_state: input '%s' %s and output %d %s differ in shape", af_tensor_name(in), a,
                       out_index, b);
    }
    if (!m->state_bound && !(m->state_bound = calloc((size_t)m->plan.nin + 1, 1)))
        return ir_fail(AF_ERR_NOMEM, "af_model_bind_state: out of memory");
    if ((st = m->be->bind_state(m->state, in_index, out_index))) return st;
    m->state_bound[in_index] = 1;
    return init ? af_model_write_state(m, in_index, init) : AF_OK;
}

af_status af_model_write_state(af_model *m, int in_index, const float *src) {
    af_status st = check_input(m, in_index, "af_model_write_state");
    if (st) return st;
    if (!src) return ir_fail(AF_ERR_INVALID, "af_model_write_state: src is NULL");
    pthread_mutex_lock(&m->lock);
    st = m->be->write_state(m->state, in_index, src);
    pthread_mutex_unlock(&m->lock);
    return st;
}

af_status af_model_read_state(const af_model *m, int in_index, float *dst) {
    af_status st = check_input(m, in_index, "af_model_read_state");
    if (st) return st;
    if (!dst) return ir_fail(AF_ERR_INVALID, "af_model_read_state: dst is NULL");
    af_model *mm = (af_model *)m; /* reading state still waits for a run in progress */
    pthread_mutex_lock(&mm->lock);
    st = m->be->read_state(m->state, in_index, dst);
    pthread_mutex_unlock(&mm->lock);
    return st;
}

bool model_track_output_bounds(af_model *m) {
    return m && m->state && m->be->track_bounds && m->be->track_bounds(m->state) == AF_OK;
}

bool model_output_bound(const af_model *m, int out_index, float *bound) {
    return m && m->state && m->be->output_bound && m->be->output_bound(m->state, out_index, bound);
}

int af_model_num_nodes(const af_model *m) { return m ? m->plan.nsched : 0; }
size_t af_model_arena_bytes(const af_model *m) {
    if (!m) return 0;
    return m->sub ? model_segments_memory(m) : m->be->memory_bytes(m->state);
}
af_family_id af_model_family(const af_model *m) { return m && m->be->engine ? m->cfg.family : AF_FAMILY_DEFAULT; }

void af_model_stats(const af_model *m, af_stats *out) {
    if (!out) return;
    *out = (af_stats){ 0 };
    if (!m) return;
    af_model *mm = (af_model *)m;
    pthread_mutex_lock(&mm->lock);
    *out = m->stats;
    out->segments = m->sub ? m->seg.nseg : 1;
    pthread_mutex_unlock(&mm->lock);
}
void af_model_stats_reset(af_model *m) {
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stats = (af_stats){ 0 };
    pthread_mutex_unlock(&m->lock);
}
