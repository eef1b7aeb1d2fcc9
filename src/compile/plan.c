/* plan_build: check the request, keep the nodes the outputs need, schedule them in
 * creation order (already topological) and record each value's last reader. */
#include "compile/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static af_status refuse(char *msg, size_t n, af_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return st;
}

/* Marks what the outputs need and checks that every needed leaf can be fed. */
static af_status check_request(compile_plan *p, af_graph *g, int nin, af_tensor *const *in, int nout,
                               af_tensor *const *out, char *msg, size_t n) {
    bool *need = p->need;
    for (int i = 0; i < nout; i++) {
        if (!out[i]) return refuse(msg, n, AF_ERR_INVALID, "output %d is NULL", i);
        if (out[i]->g != g) return refuse(msg, n, AF_ERR_INVALID, "output %d belongs to another graph", i);
        need[out[i]->id] = true;
    }
    for (int i = 0; i < nin; i++) {
        if (!in[i]) return refuse(msg, n, AF_ERR_INVALID, "input %d is NULL", i);
        if (in[i]->g != g) return refuse(msg, n, AF_ERR_INVALID, "input %d belongs to another graph", i);
        if (in[i]->op != IR_OP_INPUT)
            return refuse(msg, n, AF_ERR_INVALID,
                          "input %d ('%s') is a %s node, not an af_input or af_parameter; only leaves can be fed", i,
                          af_tensor_name(in[i]), ir_ops[in[i]->op].name);
        for (int j = 0; j < i; j++)
            if (in[j] == in[i]) return refuse(msg, n, AF_ERR_INVALID, "input '%s' is listed twice", af_tensor_name(in[i]));
    }
    for (int id = g->n - 1; id >= 0; id--) {
        if (!need[id]) continue;
        af_tensor *t = g->t[id];
        for (int k = 0; k < t->nsrc; k++) need[t->src[k]->id] = true;
    }
    for (int id = 0; id < g->n; id++) {
        af_tensor *t = g->t[id];
        if (!need[id] || t->op != IR_OP_INPUT) continue;
        bool listed = false;
        for (int i = 0; i < nin; i++) listed |= in[i] == t;
        if (!listed)
            return refuse(msg, n, AF_ERR_INVALID, "the outputs depend on %s '%s', which is not in the input list; add it to `in`",
                          (t->flags & IR_TF_PARAM) ? "parameter" : "input", af_tensor_name(t));
    }
    return AF_OK;
}

af_status plan_build(compile_plan *p, af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                     char *msg, size_t n) {
    *p = (compile_plan){ .g = g, .nin = nin, .nout = nout, .ntensors = g->n };
    p->need = calloc((size_t)g->n + 1, sizeof *p->need);
    p->in = malloc(sizeof *p->in * (size_t)(nin + 1));
    p->out = malloc(sizeof *p->out * (size_t)nout);
    p->sched = malloc(sizeof *p->sched * (size_t)(g->n + 1));
    p->last_read = malloc(sizeof *p->last_read * (size_t)(g->n + 1));
    if (!p->need || !p->in || !p->out || !p->sched || !p->last_read) {
        plan_free(p);
        return refuse(msg, n, AF_ERR_NOMEM, "out of memory");
    }
    af_status st = check_request(p, g, nin, in, nout, out, msg, n);
    if (st) { plan_free(p); return st; }
    if (nin) memcpy(p->in, in, sizeof *in * (size_t)nin);
    memcpy(p->out, out, sizeof *out * (size_t)nout);
    for (int id = 0; id < g->n; id++) {
        p->last_read[id] = -1;
        af_tensor *t = g->t[id];
        if (p->need[id] && !(ir_ops[t->op].flags & OPF_LEAF)) p->sched[p->nsched++] = t;
    }
    for (int s = 0; s < p->nsched; s++) {
        af_tensor *t = p->sched[s];
        for (int k = 0; k < t->nsrc; k++) p->last_read[t->src[k]->id] = s;
        p->flops += plan_node_flops(t);
    }
    return AF_OK;
}

void plan_free(compile_plan *p) {
    if (!p) return;
    free(p->need);
    free(p->in);
    free(p->out);
    free(p->sched);
    free(p->last_read);
    *p = (compile_plan){ 0 };
}

int64_t plan_node_flops(const af_tensor *t) {
    int64_t out = af_shape_count(t->shape), in = t->nsrc ? af_shape_count(t->src[0]->shape) : 0;
    switch (t->op) {
    case IR_OP_MATMUL: {
        af_shape a = t->src[0]->shape;
        int64_t k = a.rank < 2 ? a.dim[0] : t->a.ta ? a.dim[a.rank - 2] : a.dim[a.rank - 1];
        return 2 * out * k;
    }
    case IR_OP_MATMUL_W: return 2 * out * t->src[1]->shape.dim[1];
    case IR_OP_CONV: { /* w [Cout, Cin/groups, kH, kW] */
        af_shape w = t->src[1]->shape;
        return 2 * out * w.dim[1] * w.dim[2] * w.dim[3];
    }
    case IR_OP_CONV_WEIGHT_GRAD: /* dW [Cout, Cin, kH, kW] summed over dy's N*Ho*Wo positions */
        return 2 * out * af_shape_count(t->src[1]->shape) / t->src[1]->shape.dim[1];
    case IR_OP_CAUSAL_ATTENTION: case IR_OP_CAUSAL_ATTENTION_GRAD: { /* 2 (forward) or 5 products over j <= i */
        af_shape q = t->src[0]->shape;
        int64_t H, T;
        ir_attention_dims(t, &H, &T);
        int64_t pairs = q.dim[0] * H * T * (T + 1) / 2;
        return 2 * pairs * q.dim[3] * (t->op == IR_OP_CAUSAL_ATTENTION ? 2 : 5);
    }
    case IR_OP_CONV_TRANSPOSE: { /* w [Cin, Cout, kH, kW]: every input scatters Cout*kH*kW products */
        af_shape w = t->src[1]->shape;
        return 2 * in * w.dim[1] * w.dim[2] * w.dim[3];
    }
    case IR_OP_TRANSPOSE: case IR_OP_RESHAPE: case IR_OP_SLICE_BY_SIZE: case IR_OP_CONCAT: case IR_OP_SPLIT:
    case IR_OP_CAST: case IR_OP_INPUT: case IR_OP_CONST:
        return 0;
    default: return out > in ? out : in; /* every other op: about one operation per element */
    }
}
