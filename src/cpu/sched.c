/* The CPU executor's order (sched.h). */
#include "cpu/sched.h"
#include "cpu/mem_plan.h"

#include <stdlib.h>

static bool is_leaf(const af_tensor *t) { return (ir_ops[t->op].flags & OPF_LEAF) != 0; }

bool cpu_sched_sink(const compile_plan *p, compile_plan *q) {
    int n = p->ntensors;
    *q = *p;
    q->sched = malloc(sizeof *q->sched * (size_t)(p->nsched + 1));
    q->last_read = malloc(sizeof *q->last_read * (size_t)(n + 1));
    bool *sink = calloc((size_t)n + 1, sizeof *sink), *done = calloc((size_t)n + 1, sizeof *done);
    int *cursor = calloc((size_t)n + 1, sizeof *cursor);
    af_tensor **stack = malloc(sizeof *stack * (size_t)(p->nsched + 1));
    bool ok = q->sched && q->last_read && sink && done && cursor && stack;
    for (int s = 0; ok && s < p->nsched; s++) {
        af_tensor *t = p->sched[s];
        int64_t held = 0; /* the computed sources, whose buffers waiting would keep */
        bool src_sunk = false;
        for (int k = 0; k < t->nsrc; k++) {
            if (!is_leaf(t->src[k])) held += af_shape_count(t->src[k]->shape);
            src_sunk |= sink[t->src[k]->id];
        }
        sink[t->id] = cpu_is_alias(t) ? src_sunk : af_shape_count(t->shape) > held;
    }
    for (int i = 0; ok && i < p->nout; i++) sink[p->out[i]->id] = false; /* outputs stay where they are */
    /* The other nodes in their order, each preceded by the waiting nodes it reads that
     * have not run yet (depth first, with an explicit stack: a chain can be long). */
    int m = 0;
    for (int s = 0; ok && s < p->nsched; s++) {
        if (sink[p->sched[s]->id]) continue;
        int top = 0;
        stack[top++] = p->sched[s];
        while (top) {
            af_tensor *u = stack[top - 1];
            af_tensor *next = NULL;
            while (!next && cursor[u->id] < u->nsrc) {
                af_tensor *src = u->src[cursor[u->id]++];
                if (sink[src->id] && !done[src->id]) next = src;
            }
            if (next) {
                stack[top++] = next;
                continue;
            }
            top--;
            done[u->id] = true;
            q->sched[m++] = u;
        }
    }
    if (ok && m != p->nsched) ok = false; /* every needed node is an output or has a reader */
    for (int id = 0; ok && id < n; id++) q->last_read[id] = -1;
    for (int s = 0; ok && s < m; s++)
        for (int k = 0; k < q->sched[s]->nsrc; k++) q->last_read[q->sched[s]->src[k]->id] = s;
    free(sink);
    free(done);
    free(cursor);
    free(stack);
    if (!ok) cpu_sched_free(q);
    return ok;
}

void cpu_sched_free(compile_plan *q) {
    if (!q) return;
    free(q->sched);
    free(q->last_read);
    q->sched = NULL;
    q->last_read = NULL;
}
