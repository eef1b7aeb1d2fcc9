/* The CPU executor: feed inputs, run the schedule, deliver outputs. */
#include "cpu/cpu_exec.h"
#include "cpu/fuse.h"
#include "cpu/fuse_swiglu.h"
#include "cpu/fuse_embed.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/kernels.h"
#include "cpu/mem_plan.h"
#include "cpu/sched.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_exec {
    const compile_plan *p; /* the caller's plan, or own when reordered */
    compile_plan own;      /* with fusion: the caller's request in the executor's order (sched.h) */
    cpu_exec_opts o;
    int64_t *offset;       /* per tensor id: float offset into the arena, or -1 */
    float **val;           /* per tensor id: where its values are during a run */
    float *arena;
    int64_t arena_floats;
    float *scratch;
    int64_t scratch_floats;
    float **baked;         /* per tensor id: the constant's values as compiled (fp16-rounded when fp16);
                            * NULL for a borrowed one read in place */
    const float **srcptr;  /* room for the widest node's source pointers */
    cpu_pool *pool;
    int *state_out;        /* per input: the output copied onto it after a run, or -1 */
    cpu_fusion *fusion;    /* per schedule index, or NULL: no fusion */
    cpu_bf16_cache *bf16_cache; /* bf16 only: weights' packings kept from forward to backward */
    /* cpu_exec_track_bounds: per output, the schedule index of the GEMM whose epilogue
     * bounds it (-1: none), per schedule index the output it bounds (-1), and the run's
     * largest |x| patterns */
    int *bound_by, *bounds_out;
    _Atomic uint32_t *out_max;
    bool *out_f32; /* per output: delivered as fp32 in the last run */
};

static bool needs_rounding(const cpu_exec *e, const af_tensor *t) {
    return !(t->flags & IR_TF_EXACT) && (e->o.fp16 || t->dtype == AF_F16); /* exact: MIL integers and bools */
}

void cpu_exec_free(cpu_exec *e) {
    if (!e) return;
    if (e->baked)
        for (int i = 0; i < e->p->ntensors; i++) free(e->baked[i]);
    free(e->baked);
    free(e->offset);
    free(e->val);
    free(e->arena);
    free(e->scratch);
    free(e->srcptr);
    free(e->state_out);
    free(e->fusion);
    free(e->bound_by);
    free(e->bounds_out);
    free((void *)e->out_max);
    free(e->out_f32);
    cpu_sched_free(&e->own);
    cpu_bf16_cache_free(e->bf16_cache);
    cpu_pool_release(e->pool);
    free(e);
}

static af_status refuse(cpu_exec *e, char *msg, size_t n, af_status st, const char *text) {
    snprintf(msg, n, "%s", text);
    cpu_exec_free(e);
    return st;
}

af_status cpu_exec_new(const compile_plan *p, const cpu_exec_opts *o, cpu_exec **out, char *msg, size_t n) {
    *out = NULL;
    cpu_exec *e = calloc(1, sizeof *e);
    if (!e) return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory");
    e->p = p;
    e->o = *o;
    if (e->o.threads < 1) e->o.threads = 1;
    size_t nt = (size_t)p->ntensors + 1;
    e->offset = malloc(sizeof *e->offset * nt);
    e->val = calloc(nt, sizeof *e->val);
    e->baked = calloc(nt, sizeof *e->baked);
    int widest = 1;
    for (int s = 0; s < p->nsched; s++) widest = p->sched[s]->nsrc > widest ? p->sched[s]->nsrc : widest;
    e->srcptr = malloc(sizeof *e->srcptr * (size_t)widest);
    if (!e->offset || !e->val || !e->baked || !e->srcptr) return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory");
    for (int id = 0; id < p->ntensors; id++) {
        af_tensor *t = p->g->t[id];
        if (!p->need[id] || t->op != IR_OP_CONST) continue;
        /* A borrowed constant (ir_const_borrow: a large model's frozen weights) is read
         * where it is when no rounding is needed: kernels only read their sources. */
        if ((t->flags & IR_TF_BORROWED) && !needs_rounding(e, t)) {
            e->val[id] = t->data;
            continue;
        }
        /* Constants are baked as compiled (fp16 when the program stores fp16): changing
         * one afterwards affects later compiles only, at every precision. */
        int64_t cnt = af_shape_count(t->shape);
        e->baked[id] = malloc((size_t)cnt * sizeof(float) + 1);
        if (!e->baked[id]) return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory");
        memcpy(e->baked[id], t->data, (size_t)cnt * sizeof(float));
        if (e->o.fp16 && !(t->flags & IR_TF_EXACT)) ir_round_f16_array(e->baked[id], cnt);
        e->val[id] = e->baked[id];
    }
    /* Fusing skips nodes and reordering moves them, so neither where every node's result
     * is observed or rounded (hooks name nodes by their place in p's schedule). */
    if (e->o.fuse && !e->o.fp16 && !e->o.fp16_accum && !e->o.after_node) {
        if (cpu_sched_sink(p, &e->own)) e->p = p = &e->own; /* else p's order: still correct */
        e->fusion = malloc(sizeof *e->fusion * (size_t)(p->nsched + 1));
        if (e->fusion && cpu_fuse_plan(p, e->fusion) == 0) {
            free(e->fusion);
            e->fusion = NULL;
        }
    }
    if (!cpu_plan_memory(p, e->fusion, e->o.threads, e->offset, &e->arena_floats, &e->scratch_floats))
        return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory planning buffers (or they would need more than "
                      "AF_MAX_ELEMENTS = 2^40 floats: make the conv's input or kernel smaller)");
    e->arena = malloc((size_t)(e->arena_floats + CPU_ALIGN_FLOATS) * sizeof(float));
    e->scratch = e->scratch_floats ? malloc((size_t)e->scratch_floats * sizeof(float)) : NULL;
    if (!e->arena || (e->scratch_floats && !e->scratch)) {
        snprintf(msg, n, "out of memory: the model needs %lld bytes", (long long)(e->arena_floats * 4));
        cpu_exec_free(e);
        return AF_ERR_NOMEM;
    }
    for (int id = 0; id < p->ntensors; id++)
        if (e->offset[id] >= 0) e->val[id] = e->arena + e->offset[id];
    if (e->o.threads > 1 && !(e->pool = cpu_pool_shared(e->o.threads))) return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory starting threads");
    if (e->o.bf16 && !(e->bf16_cache = cpu_bf16_cache_new())) return refuse(e, msg, n, AF_ERR_NOMEM, "out of memory");
    cpu_blas_set_threads(e->o.threads);
    *out = e;
    return AF_OK;
}

size_t cpu_exec_memory_bytes(const cpu_exec *e) { return e ? (size_t)(e->arena_floats + e->scratch_floats) * sizeof(float) : 0; }

/* Outputs at least this large are written in place when safe (see cpu_exec_run). */
#define DIRECT_MIN_FLOATS 4096

static size_t elem_bytes(const af_buffer *b) { return b->dtype == AF_F16 ? 2 : 4; }

/* Whether two caller buffers share any byte. */
static bool overlaps(const af_buffer *a, const af_buffer *b) {
    uintptr_t a0 = (uintptr_t)a->data, a1 = a0 + (uintptr_t)a->count * elem_bytes(a);
    uintptr_t b0 = (uintptr_t)b->data, b1 = b0 + (uintptr_t)b->count * elem_bytes(b);
    return a0 < b1 && b0 < a1;
}

static bool is_state(const cpu_exec *e, int i) { return e->state_out && e->state_out[i] >= 0; }

static void feed_inputs(cpu_exec *e, const af_buffer *in) {
    const compile_plan *p = e->p;
    for (int i = 0; i < p->nin; i++) {
        af_tensor *t = p->in[i];
        int64_t n = in[i].count;
        float *slot = e->arena + e->offset[t->id];
        if (is_state(e, i)) {
            e->val[t->id] = slot;
        } else if (in[i].dtype == AF_F16) {
            ir_f16_to_f32_array(in[i].data, slot, n);
            e->val[t->id] = slot;
        } else if (needs_rounding(e, t)) {
            memcpy(slot, in[i].data, (size_t)n * sizeof(float));
            ir_round_f16_array(slot, n);
            e->val[t->id] = slot;
        } else {
            e->val[t->id] = in[i].data; /* fed directly, no copy */
        }
    }
}

/* Outputs that this run computes are written straight into the caller's buffers (no
 * copy at the end) when that is safe: a delivered fp32 buffer for a scheduled node,
 * requested once, overlapping no fed input buffer (a directly fed input must stay
 * intact until its last reader), no constant's values and no other output buffer. The
 * checks scan the graph, so only outputs whose copy would cost more take this path;
 * small ones (a trainer's many gradients) keep the arena and the copy. */
static void place_outputs(cpu_exec *e, const af_buffer *in, af_buffer *out) {
    const compile_plan *p = e->p;
    for (int i = 0; i < p->nout; i++) {
        const af_tensor *t = p->out[i];
        if (e->offset[t->id] < 0 || t->op == IR_OP_INPUT) continue;
        e->val[t->id] = e->arena + e->offset[t->id];
        if (!out[i].data || out[i].dtype != AF_F32) continue;
        if (out[i].count < DIRECT_MIN_FLOATS || out[i].count < 4 * (int64_t)(p->ntensors + p->nout + p->nin)) continue;
        bool direct = true;
        for (int j = 0; j < p->nout && direct; j++)
            if (j != i && (p->out[j] == t || (out[j].data && overlaps(&out[i], &out[j])))) direct = false;
        for (int j = 0; j < p->nin && direct; j++)
            if (!is_state(e, j) && overlaps(&out[i], &in[j])) direct = false;
        for (int id = 0; id < p->ntensors && direct; id++) /* constants' values */
            if (e->val[id] && p->g->t[id]->op == IR_OP_CONST) {
                af_buffer cb = AF_BUF_F32(e->val[id], af_shape_count(p->g->t[id]->shape));
                if (overlaps(&out[i], &cb)) direct = false;
            }
        if (direct) e->val[t->id] = out[i].data;
    }
}

static void run_fused(cpu_exec *e, const af_tensor *t, const cpu_fusion *f) {
    if (f->kind == CPU_FUSE_SWIGLU_PAIR) { /* t's gradient and its sibling's, by operand */
        float *mine = e->val[t->id], *other = e->val[f->xr[0]];
        cpu_swiglu_grad_pair(e->pool, e->val[t->src[0]->id], e->val[t->src[1]->id], e->val[t->src[2]->id],
                             t->a.mode == 0 ? mine : other, t->a.mode == 0 ? other : mine, af_shape_count(t->shape));
        return;
    }
    const float *a = e->val[f->xr[0]];
    af_shape s = e->p->g->t[f->xr[0]]->shape;
    int64_t d = s.rank ? s.dim[s.rank - 1] : 1, rows = d > 0 ? af_shape_count(s) / d : 0;
    if (d <= 0) return; /* no values, nothing to write */
    float *out = e->val[(f->tail >= 0 ? e->p->sched[f->tail] : t)->id]; /* a fused add's result */
    if (f->kind == CPU_FUSE_RMS_DX)
        cpu_rms_dx(e->pool, a, e->val[f->xr[1]], e->val[f->xr[2]], e->val[f->xr[3]], f->scaled,
                   f->xr[4] >= 0 ? e->val[f->xr[4]] : NULL, out, rows, d);
    else if (f->kind == CPU_FUSE_SQ_MEAN)
        cpu_sq_mean(e->pool, a, out, rows, d);
    else
        cpu_mul_colsum(e->pool, a, e->val[f->xr[1]], f->scaled ? e->val[f->xr[2]] : NULL, out, rows, d);
}

/* The schedule index of the product whose epilogue sees every final value of output i,
 * or -1: a matmul_w or single-GEMM matmul (every path of theirs applies the epilogue to
 * each element it finishes) writing the output's own values, or those of the add it
 * absorbed, with nothing written into them after it (a tied embedding's rows) and no
 * rounding after it (fp16). Under bf16 the GEMM's kernel takes a lone bound from each
 * block it stores (k_gemm.c), and every other bf16 route applies the epilogue after the
 * product. */
static int bound_source(const cpu_exec *e, int i) {
    const compile_plan *p = e->p;
    const af_tensor *t = p->out[i];
    const cpu_fusion *f = e->fusion;
    int s = -1;
    for (int k = 0; k < p->nsched && s < 0; k++)
        if (p->sched[k] == t) s = k;
    if (s < 0 || e->o.fp16 || e->o.fp16_accum || e->o.after_node || t->dtype != AF_F32 ||
        e->offset[t->id] < 0)
        return -1;
    int h = s;
    if (f) {
        for (int k = 0; k < p->nsched; k++)
            if (f[k].acc_into == s) return -1;
        if (f[s].absorbed) {
            h = -1;
            for (int k = 0; k < p->nsched && h < 0; k++)
                if (!f[k].absorbed && f[k].tail == s) h = k;
        } else if (f[s].tail >= 0) {
            return -1;
        }
        if (h < 0 || f[h].kind || f[h].mask_x >= 0 || f[h].add_mul || f[h].relu_grad_x >= 0 || f[h].acc_into >= 0)
            return -1;
    }
    const af_tensor *g = p->sched[h];
    bool gemm = g->op == IR_OP_MATMUL_W || (g->op == IR_OP_MATMUL && cpu_matmul_is_one_gemm(g));
    return gemm && g->dtype == AF_F32 ? h : -1;
}

af_status cpu_exec_track_bounds(cpu_exec *e) {
    const compile_plan *p = e->p;
    if (e->bound_by) return AF_OK;
    e->bound_by = malloc(sizeof *e->bound_by * (size_t)(p->nout + 1));
    e->bounds_out = malloc(sizeof *e->bounds_out * (size_t)(p->nsched + 1));
    e->out_max = calloc((size_t)p->nout + 1, sizeof *e->out_max);
    e->out_f32 = calloc((size_t)p->nout + 1, sizeof *e->out_f32);
    if (!e->bound_by || !e->bounds_out || !e->out_max || !e->out_f32) {
        free(e->bound_by), free(e->bounds_out), free((void *)e->out_max), free(e->out_f32);
        e->bound_by = e->bounds_out = NULL, e->out_max = NULL, e->out_f32 = NULL;
        return ir_fail(AF_ERR_NOMEM, "out of memory");
    }
    for (int s = 0; s < p->nsched; s++) e->bounds_out[s] = -1;
    for (int i = 0; i < p->nout; i++) {
        e->bound_by[i] = bound_source(e, i);
        if (e->bound_by[i] >= 0) e->bounds_out[e->bound_by[i]] = i; /* two outputs of one tensor: the last's slot */
    }
    return AF_OK;
}

bool cpu_exec_output_bound(const cpu_exec *e, int i, float *bound) {
    if (!e->bound_by || i < 0 || i >= e->p->nout || e->bound_by[i] < 0 || !e->out_f32[i]) return false;
    int j = e->bounds_out[e->bound_by[i]]; /* two outputs of one tensor share one slot */
    *bound = cpu_absmax_value(atomic_load(&e->out_max[j])); /* INFINITY: an inf or nan inside */
    return true;
}

af_status cpu_exec_run(cpu_exec *e, const af_buffer *in, af_buffer *out) {
    const compile_plan *p = e->p;
    cpu_bf16_cache_step(e->bf16_cache); /* a new step: the inputs may have changed */
    feed_inputs(e, in);
    place_outputs(e, in, out);
    for (int i = 0; e->bound_by && i < p->nout; i++) {
        atomic_store(&e->out_max[i], 0);
        e->out_f32[i] = out[i].dtype == AF_F32;
    }
    const float **ins = e->srcptr;
    for (int s = 0; s < p->nsched; s++) {
        af_tensor *t = p->sched[s];
        const cpu_fusion *f = e->fusion ? &e->fusion[s] : NULL;
        if (f && f->absorbed) continue; /* runs inside another node */
        if (f && f->relu_grad_x >= 0) { /* select(x > x - x, g, x - x) in one pass */
            cpu_relu_grad(e->pool, e->val[f->relu_grad_x], e->val[t->src[1]->id], e->val[t->id],
                          af_shape_count(t->shape));
            continue;
        }
        if (f && f->kind) { /* an RMSNorm gradient chain or a swiglu gradient pair in one pass */
            run_fused(e, t, f);
            continue;
        }
        if (f && f->acc_into >= 0) { /* an embedding's rows added where a tied weight's gradient is */
            af_shape s = t->shape;
            int64_t v = s.dim[0], row = v > 0 ? af_shape_count(s) / v : 0;
            cpu_embed_acc(e->val[t->src[0]->id], e->val[t->src[1]->id], af_shape_count(t->src[1]->shape), v, row,
                          e->val[p->sched[f->acc_into]->id], e->scratch);
            continue;
        }
        if (f && f->add_mul) { /* (x + a) * b in one pass */
            cpu_add_mul(e->pool, e->val[t->src[0]->id], t->a.scalar, p->sched[f->tail]->a.scalar,
                        e->val[p->sched[f->tail]->id], af_shape_count(t->shape));
            continue;
        }
        cpu_epilogue ep = { 0 };
        float *out = e->val[t->id];
        if (f && f->mask_x >= 0) { /* a pool gradient writing its ReLU gradient's values */
            out = e->val[p->sched[f->tail]->id];
        } else if (f && f->tail >= 0) { /* a fused chain: the head writes the tail's values */
            ep = (cpu_epilogue){ .bias = f->bias_id >= 0 ? e->val[f->bias_id] : NULL, .relu = f->relu,
                                 .add = f->add_id >= 0 ? e->val[f->add_id] : NULL, .ld_add = t->shape.dim[t->shape.rank - 1] };
            out = e->val[p->sched[f->tail]->id];
        } else if (e->offset[t->id] < 0) { /* an aliasing reshape or slice: the source's values */
            e->val[t->id] = e->val[t->src[0]->id] + cpu_alias_offset(t);
            continue;
        }
        int bounds = e->bounds_out ? e->bounds_out[s] : -1;
        if (bounds >= 0) ep.absmax = &e->out_max[bounds]; /* an output the caller wants bounded */
        bool with_ep = (f && f->tail >= 0 && f->mask_x < 0) || bounds >= 0;
        for (int k = 0; k < t->nsrc; k++) ins[k] = e->val[t->src[k]->id];
        cpu_call c = { .t = t, .in = ins, .out = out, .pool = e->pool, .scratch = e->scratch,
                       .fp16_accum = e->o.fp16_accum, .fp16 = e->o.fp16, .ep = with_ep ? &ep : NULL,
                       .relu_x = f && f->mask_x >= 0 ? e->val[f->mask_x] : NULL, .bf16 = e->o.bf16, .bf16_cache = e->bf16_cache };
        cpu_kernels[t->op](&c);
        if (e->o.after_node && (!e->o.hook_at || e->o.hook_at[s])) e->o.after_node(e->o.hook_ctx, s, t, e->val[t->id], ins);
        if (needs_rounding(e, t)) ir_round_f16_array(e->val[t->id], af_shape_count(t->shape));
    }
    for (int i = 0; i < p->nout; i++) {
        const float *v = e->val[p->out[i]->id];
        if (!out[i].data) continue;
        if (out[i].dtype == AF_F16) ir_f32_to_f16_array(v, out[i].data, out[i].count);
        else if (out[i].data != v) memmove(out[i].data, v, (size_t)out[i].count * sizeof(float));
    }
    /* Resident state advances last, so every node above read the pre-run value. */
    for (int i = 0; e->state_out && i < p->nin; i++) {
        if (e->state_out[i] < 0) continue;
        af_tensor *t = p->in[i], *o = p->out[e->state_out[i]];
        float *slot = e->arena + e->offset[t->id];
        if (e->val[o->id] != slot) memcpy(slot, e->val[o->id], (size_t)af_shape_count(t->shape) * sizeof(float));
    }
    return AF_OK;
}

af_status cpu_exec_bind_state(cpu_exec *e, int in_index, int out_index) {
    if (!e->state_out) {
        e->state_out = malloc(sizeof *e->state_out * (size_t)(e->p->nin + 1));
        if (!e->state_out) return ir_fail(AF_ERR_NOMEM, "af_model_bind_state: out of memory");
        for (int i = 0; i < e->p->nin; i++) e->state_out[i] = -1;
    }
    e->state_out[in_index] = out_index;
    return AF_OK;
}

af_status cpu_exec_write_state(cpu_exec *e, int in_index, const float *src) {
    af_tensor *t = e->p->in[in_index];
    float *slot = e->arena + e->offset[t->id];
    int64_t n = af_shape_count(t->shape);
    memcpy(slot, src, (size_t)n * sizeof(float));
    if (needs_rounding(e, t)) ir_round_f16_array(slot, n); /* the program holds fp16 */
    return AF_OK;
}

af_status cpu_exec_read_state(const cpu_exec *e, int in_index, float *dst) {
    af_tensor *t = e->p->in[in_index];
    memcpy(dst, e->arena + e->offset[t->id], (size_t)af_shape_count(t->shape) * sizeof(float));
    return AF_OK;
}
