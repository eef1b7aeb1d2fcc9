/* af_run on the CPU: feed inputs, run the schedule, deliver outputs. */
#include "compile/model.h"
#include "compile/target.h"
#include "cpu/kernels.h"
#include "ir/fp16.h"

#include <math.h>
#include <string.h>

static bool needs_rounding(const af_model *m, const af_tensor *t) { return m->fp16 || t->dtype == AF_F16; }

static af_status check_buffer(const af_buffer *b, const af_tensor *t, const char *what, int i) {
    int64_t n = af_shape_count(t->shape);
    if (!b->data) return af_fail(AF_ERR_INVALID, "af_run: %s %d ('%s') has no data", what, i, af_tensor_name(t));
    if (b->dtype != AF_F32 && b->dtype != AF_F16)
        return af_fail(AF_ERR_INVALID, "af_run: %s %d ('%s') has unknown dtype %d", what, i, af_tensor_name(t), (int)b->dtype);
    if (b->count != n) {
        char s[100];
        af_shape_str(t->shape, s, sizeof s);
        return af_fail(AF_ERR_SHAPE, "af_run: %s %d ('%s') holds %lld elements but its shape %s needs %lld",
                       what, i, af_tensor_name(t), (long long)b->count, s, (long long)n);
    }
    return AF_OK;
}

/* ane-sim: values past the range become +-inf (the engine saturates, it does not clamp). */
static void saturate(float *v, int64_t n, float lim) {
    for (int64_t i = 0; i < n; i++)
        if (v[i] > lim) v[i] = INFINITY;
        else if (v[i] < -lim) v[i] = -INFINITY;
}

/* The engine's numerics on top of the CPU kernel's result (compile/target.h). */
static void apply_quirks(af_model *m, int s, const float *const *ins) {
    const af_tensor *t = m->sched[s];
    unsigned q = m->quirk[s];
    if (q & AF_QUIRK_WGRAD_CROP) af_sim_wgrad_crop(m, s, ins);
    if (q & AF_QUIRK_ACC_SAT) saturate(m->val[t->id], af_shape_count(t->shape), AF_ANE_ACC_MAX);
    if (q & AF_QUIRK_CROP_SAT) saturate(m->val[t->id], af_shape_count(t->shape), AF_ANE_CROP_MAX);
    if (q & AF_QUIRK_PRECISION) af_sim_precision_check(m, s, ins);
}

/* Per run: an ANE program is one dispatch moving its fed inputs and delivered outputs
 * as fp16; on the CPU target all the work is the host's. */
static void count_run(af_model *m, const af_buffer *in, const af_buffer *out) {
    if (m->target == AF_TARGET_CPU) { m->stats.host_flops += m->run_flops; return; }
    m->stats.dispatches++;
    m->stats.engine_flops += m->run_flops;
    for (int i = 0; i < m->nin; i++)
        if (!(m->state_out && m->state_out[i] >= 0)) m->stats.bytes_in += 2 * in[i].count;
    for (int i = 0; i < m->nout; i++)
        if (out[i].data) m->stats.bytes_out += 2 * out[i].count;
}

/* Outputs at least this large are written in place when safe (see af_run). */
#define DIRECT_MIN_FLOATS 4096

static size_t elem_bytes(const af_buffer *b) { return b->dtype == AF_F16 ? 2 : 4; }

/* Whether two caller buffers share any byte. */
static bool overlaps(const af_buffer *a, const af_buffer *b) {
    uintptr_t a0 = (uintptr_t)a->data, a1 = a0 + (uintptr_t)a->count * elem_bytes(a);
    uintptr_t b0 = (uintptr_t)b->data, b1 = b0 + (uintptr_t)b->count * elem_bytes(b);
    return a0 < b1 && b0 < a1;
}

af_status af_run(af_model *m, const af_buffer *in, af_buffer *out) {
    if (!m) return af_fail(AF_ERR_INVALID, "af_run: model is NULL");
    if ((m->nin && !in) || !out) return af_fail(AF_ERR_INVALID, "af_run: input or output buffer array is NULL");
    for (int i = 0; i < m->nin; i++) {
        if (m->state_out && m->state_out[i] >= 0) continue; /* resident: not fed */
        af_status st = check_buffer(&in[i], m->in[i], "input", i);
        if (st) return st;
    }
    for (int i = 0; i < m->nout; i++) {
        if (!out[i].data) continue; /* not delivered */
        af_status st = check_buffer(&out[i], m->out[i], "output", i);
        if (st) return st;
    }
    for (int i = 0; i < m->nin; i++) {
        af_tensor *t = m->in[i];
        int64_t n = in[i].count;
        float *slot = m->arena + m->offset[t->id];
        if (m->state_out && m->state_out[i] >= 0) {
            m->val[t->id] = slot;
        } else if (in[i].dtype == AF_F16) {
            af_f16_to_f32_array(in[i].data, slot, n);
            m->val[t->id] = slot;
        } else if (needs_rounding(m, t)) {
            memcpy(slot, in[i].data, (size_t)n * sizeof(float));
            af_round_f16_array(slot, n);
            m->val[t->id] = slot;
        } else {
            m->val[t->id] = in[i].data; /* fed directly, no copy */
        }
    }
    /* Outputs that this run computes are written straight into the caller's buffers
     * (no copy at the end) when that is safe: a delivered fp32 buffer for a scheduled
     * node, requested once, overlapping no fed input buffer (a directly fed input must stay
     * intact until its last reader), no constant's values and no other output buffer.
     * The checks scan the graph, so only outputs whose copy would cost more take this
     * path; small ones (a trainer's many gradients) keep the arena and the copy. */
    for (int i = 0; i < m->nout; i++) {
        const af_tensor *t = m->out[i];
        if (m->offset[t->id] < 0 || t->op == AF_OP_INPUT) continue;
        m->val[t->id] = m->arena + m->offset[t->id];
        if (!out[i].data || out[i].dtype != AF_F32) continue;
        if (out[i].count < DIRECT_MIN_FLOATS || out[i].count < 4 * (int64_t)(m->ntensors + m->nout + m->nin)) continue;
        bool direct = true;
        for (int j = 0; j < m->nout && direct; j++)
            if (j != i && (m->out[j] == t || (out[j].data && overlaps(&out[i], &out[j])))) direct = false;
        for (int j = 0; j < m->nin && direct; j++)
            if (!(m->state_out && m->state_out[j] >= 0) && overlaps(&out[i], &in[j])) direct = false;
        for (int id = 0; id < m->ntensors && direct; id++) /* baked constants (af_tensor_value) */
            if (m->val[id] && m->g->t[id]->op == AF_OP_CONST) {
                af_buffer cb = AF_BUF_F32(m->val[id], af_shape_count(m->g->t[id]->shape));
                if (overlaps(&out[i], &cb)) direct = false;
            }
        if (direct) m->val[t->id] = out[i].data;
    }
    if (m->quirk) af_sim_program_use(m); /* reloads the program if it was evicted */
    const float **ins = m->srcptr;
    for (int s = 0; s < m->nsched; s++) {
        af_tensor *t = m->sched[s];
        if (m->offset[t->id] < 0) { /* an aliasing reshape: same values, new shape */
            m->val[t->id] = m->val[t->src[0]->id];
            continue;
        }
        for (int k = 0; k < t->nsrc; k++) ins[k] = m->val[t->src[k]->id];
        cpu_call c = { .t = t, .in = ins, .out = m->val[t->id], .pool = m->pool, .scratch = m->scratch,
                       .fp16_accum = m->fp16_accum, .fp16 = m->fp16 };
        cpu_kernels[t->op](&c);
        if (m->quirk && m->quirk[s]) apply_quirks(m, s, ins);
        if (needs_rounding(m, t)) af_round_f16_array(m->val[t->id], af_shape_count(t->shape));
    }
    for (int i = 0; i < m->nout; i++) {
        const float *v = m->val[m->out[i]->id];
        if (!out[i].data) continue;
        if (out[i].dtype == AF_F16) af_f32_to_f16_array(v, out[i].data, out[i].count);
        else if (out[i].data != v) memmove(out[i].data, v, (size_t)out[i].count * sizeof(float));
    }
    /* Resident state advances last, so every node above read the pre-run value. */
    for (int i = 0; m->state_out && i < m->nin; i++) {
        if (m->state_out[i] < 0) continue;
        af_tensor *t = m->in[i], *o = m->out[m->state_out[i]];
        float *slot = m->arena + m->offset[t->id];
        if (m->val[o->id] != slot) memcpy(slot, m->val[o->id], (size_t)af_shape_count(t->shape) * sizeof(float));
    }
    count_run(m, in, out);
    return AF_OK;
}
