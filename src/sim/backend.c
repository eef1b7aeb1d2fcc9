/* ane-sim: the simulated Neural Engine. The CPU executor computes in fp16 storage with
 * fp16 reduce_sum accumulation, and this backend adds what makes it the engine: the
 * family's compiler walls at compile time, its numerics on the nodes they touch
 * (observed through the executor's after-node hook), the program cache and compile
 * budget, and the engine's accounting (one dispatch per run, fp16 bytes in and out).
 * With via_mil the program is first emitted to MIL text and weights and parsed back,
 * so it runs as the engine would receive it. A bridge segment (a plan of one bridge
 * node, compile/segment.h) runs its op's CPU kernel in fp16 storage, once its net.plist
 * program has been built for the family (the build is the op's per-family gate). */
#include "sim/backend.h"
#include "sim/guards.h"
#include "mil/mil.h"
#include "netplist/netplist.h"
#include "sim/budget.h"
#include "engine/family.h"
#include "engine/walls.h"
#include "sim/quirks.h"
#include "sim/wgrad.h"
#include "compile/segment.h"
#include "cpu/cpu_exec.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const compile_plan *outer;  /* the plan af_compile made (buffers are checked against it) */
    compile_plan mil_plan;      /* via MIL: the plan of the parsed-back graph */
    af_graph *mil_graph;        /* via MIL: the parsed-back graph, owned */
    cpu_exec *exec;
    unsigned char *quirk;       /* per schedule index of the executed plan: AF_QUIRK_* bits */
    ane_program prog;
    int64_t flops;
    bool *is_state;             /* per input: bound as resident state */
    float acc_max;              /* the family's matmul_overflow: matmul/conv outputs beyond it become +-inf */
} sim_state;

static void sim_free(void *state) {
    sim_state *s = state;
    if (!s) return;
    ane_program_release(&s->prog);
    cpu_exec_free(s->exec);
    free(s->quirk);
    free(s->is_state);
    plan_free(&s->mil_plan);
    af_graph_free(s->mil_graph);
    free(s);
}

/* ane-sim: values past the range become +-inf (the engine saturates, it does not clamp). */
static void saturate(float *v, int64_t n, float lim) {
    for (int64_t i = 0; i < n; i++)
        if (v[i] > lim) v[i] = INFINITY;
        else if (v[i] < -lim) v[i] = -INFINITY;
}

static void apply_quirks(void *ctx, int s, const af_tensor *t, float *out, const float *const *ins) {
    sim_state *st = ctx;
    unsigned q = st->quirk[s];
    if (q & AF_QUIRK_WGRAD_CROP) ane_wgrad_crop(t, out, ins);
    if (q & AF_QUIRK_ACC_SAT) saturate(out, af_shape_count(t->shape), st->acc_max);
    if (q & AF_QUIRK_CROP_SAT) saturate(out, af_shape_count(t->shape), AF_ANE_CROP_MAX);
    if ((q & AF_QUIRK_PRECISION) && ane_precision_check(t, ins))
        st->quirk[s] &= (unsigned char)~AF_QUIRK_PRECISION; /* reported once per node */
}

static af_status sim_validate(const backend_cfg *cfg, const compile_plan *p, char *msg, size_t n) {
    if (cfg->precision == AF_PRECISION_FP32) {
        snprintf(msg, n, "ane-sim computes in fp16 only; drop AF_PRECISION_FP32 or compile for AF_TARGET_CPU");
        return AF_ERR_UNSUPPORTED;
    }
    if (plan_has_bridge(p)) {
        if (p->nsched != 1) {
            snprintf(msg, n, "ane-sim: a program mixing bridge ops with other ops must be segmented first (af_compile does)");
            return AF_ERR_INVALID;
        }
        netplist_program np;
        if (!netplist_for_node(p->sched[0], cfg->family, &np, msg, n)) return AF_ERR_UNSUPPORTED;
        netplist_free(&np);
    }
    return ane_rules_validate(p, cfg->family, msg, n);
}

static atomic_llong via_mil_models;
long long sim_via_mil_count(void) { return atomic_load(&via_mil_models); }

/* Emits the plan to MIL and parses it back; the executed plan is the parsed one. */
static af_status build_via_mil(sim_state *s, const compile_plan *p, char *msg, size_t n) {
    mil_module mod = { 0 };
    af_status st = mil_roundtrip(p->g, p->nin, p->in, p->nout, p->out, &mod);
    if (st) { snprintf(msg, n, "ane-sim through MIL: %s", af_error_message()); return st; }
    s->mil_graph = mod.g;
    st = plan_build(&s->mil_plan, mod.g, mod.nin, mod.in, mod.nout, mod.out, msg, n);
    if (!st) atomic_fetch_add(&via_mil_models, 1);
    return st;
}

static af_status sim_init(const backend_cfg *cfg, const compile_plan *p, void **state, af_stats *stats, char *msg, size_t n) {
    sim_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(msg, n, "out of memory"); return AF_ERR_NOMEM; }
    s->outer = p;
    const ane_family_info *fi = ane_family_info_of(cfg->family);
    s->acc_max = fi ? (float)fi->matmul_overflow : AF_ANE_ACC_MAX;
    s->is_state = calloc((size_t)p->nin + 1, sizeof *s->is_state);
    af_status st = s->is_state ? AF_OK : AF_ERR_NOMEM;
    if (!st && cfg->via_mil && !plan_has_bridge(p)) st = build_via_mil(s, p, msg, n); /* a bridge has no MIL */
    const compile_plan *run = s->mil_graph ? &s->mil_plan : p;
    if (!st && !(s->quirk = ane_rules_quirks(run, cfg->family, cfg->precision_check))) st = AF_ERR_NOMEM;
    if (!st) {
        cpu_exec_opts o = { .fp16 = true, .fp16_accum = true, .threads = cfg->threads,
                            .after_node = apply_quirks, .hook_at = s->quirk, .hook_ctx = s };
        st = cpu_exec_new(run, &o, &s->exec, msg, n);
    }
    bool compiled = false;
    if (!st) st = ane_program_acquire(&s->prog, cfg->sim_engine, run, cfg->family, &compiled, msg, n);
    if (st) { sim_free(s); return st; }
    stats->compiles += compiled;
    s->flops = run->flops;
    *state = s;
    return AF_OK;
}

/* One run is one dispatch moving its fed inputs and delivered outputs as fp16. */
static af_status sim_run(void *state, const af_buffer *in, af_buffer *out, af_stats *stats) {
    sim_state *s = state;
    ane_program_use(&s->prog); /* reloads the program if it was evicted */
    af_status st = cpu_exec_run(s->exec, in, out);
    if (st) return st;
    stats->dispatches++;
    stats->engine_flops += s->flops;
    for (int i = 0; i < s->outer->nin; i++)
        if (!s->is_state[i]) stats->bytes_in += 2 * in[i].count;
    for (int i = 0; i < s->outer->nout; i++)
        if (out[i].data) stats->bytes_out += 2 * out[i].count;
    return AF_OK;
}

static af_status sim_bind(void *state, int i, int o) {
    sim_state *s = state;
    af_status st = cpu_exec_bind_state(s->exec, i, o);
    if (!st) s->is_state[i] = true;
    return st;
}
static af_status sim_write(void *s, int i, const float *src) { return cpu_exec_write_state(((sim_state *)s)->exec, i, src); }
static af_status sim_read(void *s, int i, float *dst) { return cpu_exec_read_state(((sim_state *)s)->exec, i, dst); }
static size_t sim_bytes(const void *s) { return cpu_exec_memory_bytes(((const sim_state *)s)->exec); }

/* Native CPU kernels (OPF_CPU_ONLY) have no engine form; only graphs targeted at the
 * CPU contain them. */
static const char *sim_unsupported(const backend_cfg *cfg, const af_tensor *t) {
    (void)cfg;
    return ane_node_unsupported(t);
}

const backend_iface ane_sim_backend = {
    .name = "ane-sim",
    .target = AF_TARGET_ANE_SIM,
    .engine = true, .fp16_by_default = true,
    .validate = sim_validate,
    .unsupported = sim_unsupported,
    .init = sim_init,
    .run = sim_run,
    .bind_state = sim_bind,
    .write_state = sim_write,
    .read_state = sim_read,
    .memory_bytes = sim_bytes,
    .free = sim_free,
};
