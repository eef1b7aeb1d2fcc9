/* Segmenting a plan around its bridge ops (segment.h). Each segment's graph is a copy of
 * its nodes over new inputs, so it is compiled from its own input shapes like any
 * graph; the original graph is only read. */
#include "compile/segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool plan_has_bridge(const compile_plan *p) {
    for (int s = 0; s < p->nsched; s++)
        if (ir_ops[p->sched[s]->op].flags & OPF_BRIDGE) return true;
    return false;
}

void segment_plan_free(segment_plan *sp) {
    for (int k = 0; k < sp->nseg; k++) {
        segment *s = &sp->seg[k];
        af_graph_free(s->g);
        free(s->in);
        free(s->out);
        free(s->in_value);
        free(s->out_value);
    }
    free(sp->seg);
    free(sp->value);
    free(sp->model_out_value);
    memset(sp, 0, sizeof *sp);
}

typedef struct {
    const compile_plan *p;
    segment_plan *sp;
    int *seg_of;          /* per tensor id: its segment, or -1 */
    int *value_of;        /* per tensor id: its host value, or -1 */
    af_tensor **local;    /* per tensor id: its copy in the segment being built */
    bool *is_out;         /* per tensor id: a segment output */
    bool fp16_boundaries;
} cutter;

static int new_value(cutter *c, const af_tensor *t) {
    segment_plan *sp = c->sp;
    sp->value[sp->nvalues] = t;
    c->value_of[t->id] = sp->nvalues;
    return sp->nvalues++;
}

/* A copy of leaf or boundary value t in the segment's graph: constants are baked again,
 * everything else becomes an input fed from its host value. */
static af_tensor *boundary(cutter *c, segment *s, const af_tensor *t) {
    af_graph *g = s->g;
    af_tensor *copy;
    if (t->op == IR_OP_CONST) {
        copy = ir_node_new(g, IR_OP_CONST, 0, NULL, t->shape, t->dtype, &t->a);
        if (!copy) return NULL;
        size_t bytes = (size_t)af_shape_count(t->shape) * sizeof(float);
        copy->data = malloc(bytes + sizeof(float));
        if (!copy->data) return NULL;
        memcpy(copy->data, t->data, bytes);
        copy->flags = t->flags;
    } else {
        bool computed = t->op != IR_OP_INPUT; /* crosses a cut as an fp16 array on the engines */
        copy = ir_node_new(g, IR_OP_INPUT, 0, NULL, t->shape, computed && c->fp16_boundaries ? AF_F16 : t->dtype, NULL);
        if (!copy) return NULL;
        copy->flags = t->flags & IR_TF_EXACT; /* whole numbers stay exact across the cut */
        s->in[s->nin] = copy;
        s->in_value[s->nin++] = c->value_of[t->id];
    }
    if (t->name) copy->name = ir_strdup(t->name);
    c->local[t->id] = copy;
    return copy;
}

static af_status build_segment(cutter *c, segment *s, int first, int last, char *msg, size_t n) {
    const compile_plan *p = c->p;
    int cap = 0;
    for (int k = first; k <= last; k++) cap += p->sched[k]->nsrc + 1;
    s->g = af_graph_new();
    s->in = calloc((size_t)cap + 1, sizeof *s->in);
    s->out = calloc((size_t)cap + 1, sizeof *s->out);
    s->in_value = calloc((size_t)cap + 1, sizeof *s->in_value);
    s->out_value = calloc((size_t)cap + 1, sizeof *s->out_value);
    if (!s->g || !s->in || !s->out || !s->in_value || !s->out_value) goto oom;
    s->g->cpu_only = p->g->cpu_only;
    s->nnodes = last - first + 1;
    for (int i = 0; i < p->ntensors; i++) c->local[i] = NULL;
    for (int k = first; k <= last; k++) {
        const af_tensor *t = p->sched[k];
        af_tensor *src[64], **srcp = src;
        if (t->nsrc > 64 && !(srcp = malloc((size_t)t->nsrc * sizeof *srcp))) goto oom;
        for (int j = 0; j < t->nsrc; j++) {
            const af_tensor *x = t->src[j];
            srcp[j] = c->local[x->id] ? c->local[x->id] : boundary(c, s, x);
            if (!srcp[j]) {
                if (srcp != src) free(srcp);
                goto oom;
            }
        }
        af_tensor *copy = ir_node_new(s->g, t->op, t->nsrc, srcp, t->shape, t->dtype, &t->a);
        if (srcp != src) free(srcp);
        if (!copy) goto oom;
        copy->flags = t->flags;
        if (t->name) copy->name = ir_strdup(t->name);
        c->local[t->id] = copy;
        if (c->is_out[t->id]) {
            s->out[s->nout] = copy;
            s->out_value[s->nout++] = new_value(c, t);
        }
    }
    if (s->g->error) {
        snprintf(msg, n, "segmenting the graph: %s", s->g->error);
        return AF_ERR_INVALID;
    }
    return AF_OK;
oom:
    snprintf(msg, n, "out of memory segmenting the graph");
    return AF_ERR_NOMEM;
}

af_status segment_plan_build(const compile_plan *p, segment_plan *sp, bool fp16_boundaries, char *msg, size_t n) {
    memset(sp, 0, sizeof *sp);
    cutter c = {.p = p, .sp = sp, .fp16_boundaries = fp16_boundaries};
    int nt = p->ntensors;
    c.seg_of = malloc(sizeof *c.seg_of * (size_t)(nt + 1));
    c.value_of = malloc(sizeof *c.value_of * (size_t)(nt + 1));
    c.local = calloc((size_t)nt + 1, sizeof *c.local);
    c.is_out = calloc((size_t)nt + 1, sizeof *c.is_out);
    sp->seg = calloc((size_t)p->nsched + 1, sizeof *sp->seg);
    sp->value = calloc((size_t)(p->nin + p->nsched + p->nout) + 1, sizeof *sp->value);
    sp->model_out_value = calloc((size_t)p->nout + 1, sizeof *sp->model_out_value);
    af_status st = AF_ERR_NOMEM;
    if (!c.seg_of || !c.value_of || !c.local || !c.is_out || !sp->seg || !sp->value || !sp->model_out_value) {
        snprintf(msg, n, "out of memory segmenting the graph");
        goto done;
    }
    for (int i = 0; i < nt; i++) c.seg_of[i] = -1, c.value_of[i] = -1;
    /* which segment runs each node: a run of ordinary nodes, or one bridge node */
    int nseg = 0;
    bool open_fused = false;
    for (int k = 0; k < p->nsched; k++) {
        const af_tensor *t = p->sched[k];
        bool bridge = ir_ops[t->op].flags & OPF_BRIDGE;
        if (bridge || !open_fused) nseg++;
        open_fused = !bridge;
        c.seg_of[t->id] = nseg - 1;
    }
    /* segment outputs: values read in another segment, and the model's outputs */
    for (int k = 0; k < p->nsched; k++) {
        const af_tensor *t = p->sched[k];
        for (int j = 0; j < t->nsrc; j++) {
            int s = c.seg_of[t->src[j]->id];
            if (s >= 0 && s != c.seg_of[t->id]) c.is_out[t->src[j]->id] = true;
        }
    }
    for (int o = 0; o < p->nout; o++)
        if (c.seg_of[p->out[o]->id] >= 0) c.is_out[p->out[o]->id] = true;
    for (int i = 0; i < p->nin; i++) new_value(&c, p->in[i]);
    for (int k = 0, first = 0; k < p->nsched; k++) {
        int s = c.seg_of[p->sched[k]->id];
        if (k + 1 < p->nsched && c.seg_of[p->sched[k + 1]->id] == s) continue;
        segment *seg = &sp->seg[sp->nseg++];
        seg->kind = ir_ops[p->sched[k]->op].flags & OPF_BRIDGE ? SEG_BRIDGE : SEG_FUSED;
        if ((st = build_segment(&c, seg, first, k, msg, n))) goto done;
        first = k + 1;
    }
    for (int o = 0; o < p->nout; o++) {
        const af_tensor *t = p->out[o];
        if (c.value_of[t->id] < 0) new_value(&c, t); /* a constant output: the host holds it */
        sp->model_out_value[o] = c.value_of[t->id];
    }
    st = AF_OK;
done:
    free(c.seg_of);
    free(c.value_of);
    free(c.local);
    free(c.is_out);
    if (st) segment_plan_free(sp);
    return st;
}
