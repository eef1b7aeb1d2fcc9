/* fp32 compute precision: the emitter writes the engine's fp16 throughout, so the
 * emitted program is rewritten in place to fp32 (types, inline values, cast targets)
 * and its weight file rewritten with fp32 records. A constant's exact fp32 values are
 * taken from the graph constant it was emitted from (found by its values' fp16
 * rounding, preferring the same name), so the package holds the trained fp32 weights,
 * not their fp16 roundings; an adds/muls scalar likewise from its node's attribute; a
 * constant the lowering computed itself (a scale) keeps its fp16 value, widened. */
#include "coreml/coreml.h"
#include "mil/milblob.h"
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* The graph constant whose fp16 rounding is h (n elements), named `name` if several. */
static const float *exact_values(af_graph *g, const char *name, int64_t n, const uint16_t *h, const double *v) {
    const float *found = NULL;
    int matches = 0;
    for (int i = 0; g && i < g->n; i++) {
        const af_tensor *t = g->t[i];
        if (t->op != IR_OP_CONST || !t->data || af_shape_count(t->shape) != n) continue;
        bool same = true;
        for (int64_t k = 0; same && k < n; k++)
            same = af_f32_to_f16(t->data[k]) == (h ? h[k] : af_f32_to_f16((float)v[k]));
        if (!same) continue;
        if (t->name && !strcmp(t->name, name)) return t->data;
        found = t->data;
        matches++;
    }
    if (matches == 1) return found;
    /* an adds/muls scalar (an input normalisation's mean and 1/std): the graph's fp32
     * value when every such scalar with this fp16 rounding agrees */
    for (int i = 0; !matches && n == 1 && g && i < g->n; i++) {
        const af_tensor *t = g->t[i];
        if ((t->op != IR_OP_ADDS && t->op != IR_OP_MULS) || af_f32_to_f16(t->a.scalar) != (h ? h[0] : af_f32_to_f16((float)v[0])))
            continue;
        if (found && *found != t->a.scalar) return NULL;
        found = &t->a.scalar;
    }
    return matches ? NULL : found;
}

static void widen_type(mil_type *t) {
    if (t->dt == MIL_FP16) t->dt = MIL_FP32;
}

static af_status widen_lit(mil_lit *l, const char *name, af_graph *g, const milblob *b, milblob_writer *w) {
    if (l->type.dt == MIL_STRING && l->s && !strcmp(l->s, "fp16")) { /* cast(dtype = "fp16") */
        memcpy(l->s, "fp32", 4); /* the same length */
        return AF_OK;
    }
    if (l->type.dt != MIL_FP16) return AF_OK;
    l->type.dt = MIL_FP32;
    if (!l->blob) {
        const float *x = exact_values(g, name, l->count, NULL, l->v);
        for (int64_t k = 0; x && k < l->count; k++) l->v[k] = x[k];
        return AF_OK;
    }
    milblob_dtype dt;
    const void *data;
    int64_t nbytes;
    if (milblob_get(b, l->blob_offset, &dt, &data, &nbytes) || dt != AF_MILBLOB_FP16 || nbytes != l->count * 2)
        return ir_fail(AF_ERR_INVALID, "af_coreml_export: internal: constant %s has no fp16 record in the weight file", name);
    float *f = malloc(sizeof *f * (size_t)l->count);
    if (!f) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
    const uint16_t *h = data; /* little-endian hosts only, as the emitter */
    const float *x = exact_values(g, name, l->count, h, NULL);
    for (int64_t k = 0; k < l->count; k++) f[k] = x ? x[k] : af_f16_to_f32(h[k]);
    int64_t off = milblob_add(w, AF_MILBLOB_FP32, f, l->count * 4);
    free(f);
    if (off < 0) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
    l->blob_offset = (uint64_t)off;
    return AF_OK;
}

static af_status widen_value(mil_value *v, const char *name, af_graph *g, const milblob *b, milblob_writer *w) {
    if (v->kind == MIL_V_LIT) return widen_lit(v->lit, name, g, b, w);
    af_status st = AF_OK;
    for (int k = 0; !st && v->kind == MIL_V_TUPLE && k < v->n; k++) st = widen_value(&v->items[k], name, g, b, w);
    return st;
}

af_status coreml_fp32(mil_func *f, af_graph *g, const milblob_writer *w16, milblob_writer **w32) {
    size_t n;
    const uint8_t *bytes = milblob_bytes(w16, &n);
    milblob *b = NULL;
    *w32 = milblob_writer_new();
    if (!*w32) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
    af_status st = milblob_writer_count(w16) ? milblob_open(bytes, n, &b) : AF_OK;
    for (int i = 0; i < f->nparams; i++) widen_type(&f->params[i].type);
    for (int i = 0; !st && i < f->nstmts; i++) {
        mil_stmt *s = &f->stmts[i];
        for (int k = 0; k < s->nout; k++) widen_type(&s->out_types[k]);
        for (int k = 0; !st && k < s->nargs; k++) st = widen_value(&s->args[k].val, s->out_names[0], g, b, *w32);
    }
    milblob_free(b);
    if (st) {
        milblob_writer_free(*w32);
        *w32 = NULL;
    }
    return st;
}
