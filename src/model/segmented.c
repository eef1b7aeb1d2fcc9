/* Running a segmented model (compile/segment.h): one sub-model per segment, compiled for
 * the same target, and the host threading the values that cross the cuts as fp32
 * arrays. The accounting adds the sub-models' costs and the bytes handed over. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void model_free_segments(af_model *m) {
    for (int k = 0; m->sub && k < m->seg.nseg; k++) af_model_free(m->sub[k]);
    for (int v = m->plan.nin; m->vals && v < m->seg.nvalues; v++) free(m->vals[v]);
    free(m->sub);
    free(m->vals);
    segment_plan_free(&m->seg);
    m->sub = NULL;
    m->vals = NULL;
}

af_status model_compile_segments(af_model *m, const af_compile_opts *opts, char *msg, size_t n) {
    af_status st = segment_plan_build(&m->plan, &m->seg, m->cfg.fp16, msg, n);
    if (st) return st;
    m->sub = calloc((size_t)m->seg.nseg + 1, sizeof *m->sub);
    m->vals = calloc((size_t)m->seg.nvalues + 1, sizeof *m->vals);
    if (!m->sub || !m->vals) goto oom;
    for (int v = m->plan.nin; v < m->seg.nvalues; v++) {
        const af_tensor *t = m->seg.value[v];
        size_t count = (size_t)af_shape_count(t->shape);
        if (!(m->vals[v] = malloc(count * sizeof(float) + sizeof(float)))) goto oom;
        if (t->op == IR_OP_CONST) memcpy(m->vals[v], t->data, count * sizeof(float));
    }
    for (int k = 0; k < m->seg.nseg; k++) {
        segment *s = &m->seg.seg[k];
        m->sub[k] = af_compile(s->g, s->nin, s->in, s->nout, s->out, opts);
        if (!m->sub[k]) {
            const af_tensor *last = s->g->t[s->g->n - 1];
            snprintf(msg, n, "segment %d of %d (%s of %d node%s ending in %s%s%s): %s", k + 1, m->seg.nseg,
                     s->kind == SEG_BRIDGE ? "a bridge" : "a fused region", s->nnodes, s->nnodes == 1 ? "" : "s",
                     ir_ops[last->op].name, last->name ? " " : "", last->name ? last->name : "", af_error_message());
            return AF_ERR_UNSUPPORTED;
        }
        af_stats sub;
        af_model_stats(m->sub[k], &sub);
        m->stats.compiles += sub.compiles;
        af_model_stats_reset(m->sub[k]);
    }
    return AF_OK;
oom:
    snprintf(msg, n, "out of memory preparing the segments");
    return AF_ERR_NOMEM;
}

static void add_stats(af_stats *acc, const af_stats *s) {
    acc->compiles += s->compiles;
    acc->dispatches += s->dispatches;
    acc->bytes_in += s->bytes_in;
    acc->bytes_out += s->bytes_out;
    acc->engine_flops += s->engine_flops;
    acc->host_flops += s->host_flops;
}

/* Copies host value v (fp32) into a caller's buffer of either dtype. */
static void deliver(const float *v, af_buffer *b) {
    if (b->dtype == AF_F16)
        for (int64_t i = 0; i < b->count; i++) ((uint16_t *)b->data)[i] = af_f32_to_f16(v[i]);
    else
        memcpy(b->data, v, (size_t)b->count * sizeof(float));
}

af_status model_run_segments(af_model *m, const af_buffer *in, af_buffer *out) {
    const segment_plan *sp = &m->seg;
    int64_t elem = m->cfg.fp16 ? 2 : 4;
    for (int k = 0; k < sp->nseg; k++) {
        const segment *s = &sp->seg[k];
        af_buffer bin[64], bout[64], *bi = bin, *bo = bout;
        if ((s->nin > 64 && !(bi = malloc((size_t)s->nin * sizeof *bi))) ||
            (s->nout > 64 && !(bo = malloc((size_t)s->nout * sizeof *bo)))) {
            if (bi != bin) free(bi);
            return ir_fail(AF_ERR_NOMEM, "af_run: out of memory");
        }
        for (int i = 0; i < s->nin; i++) {
            int v = s->in_value[i];
            int64_t count = af_shape_count(s->in[i]->shape);
            if (v < m->plan.nin) bi[i] = in[v];
            else {
                bi[i] = AF_BUF_F32(m->vals[v], count);
                m->stats.segment_bytes += count * elem;
            }
        }
        for (int o = 0; o < s->nout; o++) bo[o] = AF_BUF_F32(m->vals[s->out_value[o]], af_shape_count(s->out[o]->shape));
        af_status st = af_run(m->sub[k], bi, bo);
        if (bi != bin) free(bi);
        if (bo != bout) free(bo);
        if (st) return st;
        af_stats sub;
        af_model_stats(m->sub[k], &sub);
        af_model_stats_reset(m->sub[k]);
        add_stats(&m->stats, &sub);
    }
    for (int o = 0; o < m->plan.nout; o++) {
        if (!out[o].data) continue;
        int v = sp->model_out_value[o];
        if (v >= m->plan.nin) deliver(m->vals[v], &out[o]);
        else if (in[v].dtype == out[o].dtype) memcpy(out[o].data, in[v].data, (size_t)out[o].count * (in[v].dtype == AF_F16 ? 2 : 4));
        else if (in[v].dtype == AF_F16)
            for (int64_t i = 0; i < out[o].count; i++) ((float *)out[o].data)[i] = af_f16_to_f32(((uint16_t *)in[v].data)[i]);
        else deliver(in[v].data, &out[o]);
    }
    return AF_OK;
}

size_t model_segments_memory(const af_model *m) {
    size_t bytes = 0;
    for (int k = 0; k < m->seg.nseg; k++) bytes += af_model_arena_bytes(m->sub[k]);
    for (int v = m->plan.nin; v < m->seg.nvalues; v++)
        bytes += (size_t)af_shape_count(m->seg.value[v]->shape) * sizeof(float);
    return bytes;
}
