/* Export: MIL text -> syntax tree -> CoreML.Specification.Model protobuf (coreml.h). */
#include "coreml/coreml.h"
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

/* ValueType { tensorType(1): TensorType { dataType(1), rank(2), dimensions(3):
 * Dimension { constant(1): { size(1) } } } } */
static void value_type(pb_buf *b, int field, const mil_type *t) {
    pb_buf tt = { 0 }, vt = { 0 };
    pb_uint(&tt, 1, (uint64_t)coreml_proto_dtype(t->dt));
    pb_uint(&tt, 2, (uint64_t)t->rank);
    for (int i = 0; i < t->rank; i++) {
        pb_buf c = { 0 }, d = { 0 };
        pb_uint(&c, 1, (uint64_t)t->dim[i]);
        pb_msg(&d, 1, &c);
        pb_msg(&tt, 3, &d);
    }
    pb_msg(&vt, 1, &tt);
    if (t->state) { /* ValueType { stateType(5): StateType { wrappedType(1): ValueType } } */
        pb_buf st = { 0 }, outer = { 0 };
        pb_msg(&st, 1, &vt);
        pb_msg(&outer, 5, &st);
        pb_msg(b, field, &outer);
        return;
    }
    pb_msg(b, field, &vt);
}

/* Value { type(2), immediateValue(3): { tensor(1): TensorValue } | blobFileValue(5) } */
static bool value_lit(pb_buf *b, int field, const mil_lit *l, char *why, size_t nwhy) {
    pb_buf v = { 0 };
    value_type(&v, 2, &l->type);
    if (l->blob) {
        pb_buf bf = { 0 };
        pb_str(&bf, 1, l->blob_path);
        pb_uint(&bf, 2, l->blob_offset);
        pb_msg(&v, 5, &bf);
        pb_msg(b, field, &v);
        return true;
    }
    pb_buf tv = { 0 }, rep = { 0 }, packed = { 0 };
    int kind;
    mil_dtype dt = l->type.dt;
    if (dt == MIL_STRING) {
        kind = 4;
        pb_str(&rep, 1, l->s ? l->s : "");
    } else if (dt == MIL_FP32) {
        kind = 1;
        for (int64_t i = 0; i < l->count; i++) {
            float f = (float)l->v[i];
            uint8_t le[4];
            uint32_t u;
            memcpy(&u, &f, 4);
            for (int k = 0; k < 4; k++) le[k] = (uint8_t)(u >> (8 * k));
            pb_raw(&packed, le, 4);
        }
    } else if (dt == MIL_FP16 || dt == MIL_INT8 || dt == MIL_UINT8) { /* coremltools keeps these as raw bytes */
        kind = 7;
        for (int64_t i = 0; i < l->count; i++) {
            if (dt == MIL_FP16) {
                uint16_t h = af_f32_to_f16((float)l->v[i]);
                uint8_t le[2] = { (uint8_t)h, (uint8_t)(h >> 8) };
                pb_raw(&packed, le, 2);
            } else {
                uint8_t c = (uint8_t)(int8_t)l->v[i];
                pb_raw(&packed, &c, 1);
            }
        }
    } else if (dt == MIL_BOOL || dt == MIL_INT16 || dt == MIL_UINT16 || dt == MIL_INT32 || dt == MIL_UINT32) {
        kind = dt == MIL_BOOL ? 3 : 2;
        for (int64_t i = 0; i < l->count; i++) pb_varint(&packed, (uint64_t)(int64_t)l->v[i]);
    } else if (dt == MIL_INT64 || dt == MIL_UINT64) {
        kind = 5;
        for (int64_t i = 0; i < l->count; i++) pb_varint(&packed, (uint64_t)(int64_t)l->v[i]);
    } else {
        pb_free(&v), pb_free(&tv), pb_free(&rep), pb_free(&packed);
        snprintf(why, nwhy, "a %s literal has no Core ML immediate form", mil_dtype_name(dt));
        return false;
    }
    if (kind != 4) pb_msg(&rep, 1, &packed);
    pb_msg(&tv, kind, &rep);
    pb_buf iv = { 0 };
    pb_msg(&iv, 1, &tv);
    pb_msg(&v, 3, &iv);
    pb_msg(b, field, &v);
    return true;
}

static void string_value(pb_buf *b, int field, const char *s) {
    mil_lit l = { .type = { .kind = MIL_TY_TENSOR, .dt = MIL_STRING }, .count = 1, .s = (char *)s };
    char why[8];
    value_lit(b, field, &l, why, sizeof why);
}

/* Binding { name(1) | value(2) } */
static bool binding(pb_buf *arg, const mil_value *v, char *why, size_t n) {
    pb_buf bd = { 0 };
    if (v->kind == MIL_V_IDENT) pb_str(&bd, 1, v->ident);
    else if (!value_lit(&bd, 2, v->lit, why, n)) { pb_free(&bd); return false; }
    pb_msg(arg, 1, &bd);
    return true;
}

static bool operation(pb_buf *blk, const mil_stmt *s, char *why, size_t n);

/* coreml_update_state is coremltools' dialect op: a package holds write_state(input =
 * state, data = value), which has no output, then read_state(input = state) for the
 * value, left out when nothing reads it (as coremltools' milproto writer does). */
static bool update_state(pb_buf *blk, const mil_func *f, int at, char *why, size_t n) {
    const mil_stmt *s = &f->stmts[at];
    const mil_arg *st = NULL, *val = NULL;
    for (int i = 0; i < s->nargs; i++) {
        if (!strcmp(s->args[i].name, "state")) st = &s->args[i];
        if (!strcmp(s->args[i].name, "value")) val = &s->args[i];
    }
    if (!st || !val || s->nout != 1) { snprintf(why, n, "coreml_update_state %s needs state, value and one output", s->nout ? s->out_names[0] : ""); return false; }
    char wname[200];
    snprintf(wname, sizeof wname, "%s_write_state", s->out_names[0]);
    const char *wnames[1] = { wname };
    mil_arg wargs[2] = { { "input", st->val, 0, 0 }, { "data", val->val, 0, 0 } };
    mil_stmt w = { .nout = 0, .out_names = wnames, .op = "write_state", .nargs = 2, .args = wargs };
    if (!operation(blk, &w, why, n)) return false;
    bool used = false;
    for (int i = at + 1; !used && i < f->nstmts; i++)
        for (int k = 0; !used && k < f->stmts[i].nargs; k++) {
            const mil_value *v = &f->stmts[i].args[k].val;
            used = v->kind == MIL_V_IDENT && !strcmp(v->ident, s->out_names[0]);
            for (int j = 0; !used && v->kind == MIL_V_TUPLE && j < v->n; j++)
                used = v->items[j].kind == MIL_V_IDENT && !strcmp(v->items[j].ident, s->out_names[0]);
        }
    for (int i = 0; !used && i < f->nret; i++) used = !strcmp(f->ret[i].name, s->out_names[0]);
    if (!used) return true;
    mil_arg rargs[1] = { { "input", st->val, 0, 0 } };
    mil_stmt r = { .nout = 1, .out_types = s->out_types, .out_names = s->out_names, .op = "read_state", .nargs = 1, .args = rargs };
    return operation(blk, &r, why, n);
}

/* Operation { type(1), inputs(2): map<string, Argument>, outputs(3), attributes(5) };
 * a statement without outputs (write_state) carries its name in out_names[0]. */
static bool operation(pb_buf *blk, const mil_stmt *s, char *why, size_t n) {
    pb_buf op = { 0 };
    bool is_const = !strcmp(s->op, "const");
    pb_str(&op, 1, s->op);
    for (int i = 0; i < s->nargs; i++) {
        const mil_arg *a = &s->args[i];
        pb_buf ent = { 0 };
        pb_str(&ent, 1, a->name);
        bool ok = true;
        if (is_const) {
            ok = a->val.kind == MIL_V_LIT && value_lit(&ent, 2, a->val.lit, why, n);
            if (!ok && a->val.kind != MIL_V_LIT) snprintf(why, n, "const %s has a non-literal %s", s->out_names[0], a->name);
            if (ok) pb_msg(&op, 5, &ent);
        } else {
            pb_buf arg = { 0 };
            if (a->val.kind == MIL_V_TUPLE)
                for (int k = 0; ok && k < a->val.n; k++) ok = binding(&arg, &a->val.items[k], why, n);
            else ok = binding(&arg, &a->val, why, n);
            pb_msg(&ent, 2, &arg);
            if (ok) pb_msg(&op, 2, &ent);
        }
        pb_free(&ent);
        if (!ok) { pb_free(&op); return false; }
    }
    for (int i = 0; i < s->nout; i++) {
        pb_buf nv = { 0 };
        pb_str(&nv, 1, s->out_names[i]);
        value_type(&nv, 2, &s->out_types[i]);
        pb_msg(&op, 3, &nv);
    }
    pb_buf ent = { 0 };
    pb_str(&ent, 1, "name");
    string_value(&ent, 2, s->out_names[0]);
    pb_msg(&op, 5, &ent);
    pb_msg(blk, 3, &op);
    return true;
}

/* FeatureDescription { name(1), type(3): FeatureType { multiArrayType(5):
 * ArrayFeatureType { shape(1), dataType(2) } } } */
static bool feature(pb_buf *desc, int field, const char *name, const mil_type *t, char *why, size_t n) {
    int adt = coreml_array_dtype(t->dt);
    if (!adt || t->kind != MIL_TY_TENSOR) {
        snprintf(why, n, "%s is %s, which no Core ML multiarray feature holds", name, mil_dtype_name(t->dt));
        return false;
    }
    pb_buf fd = { 0 }, ft = { 0 }, at = { 0 }, shape = { 0 };
    pb_str(&fd, 1, name);
    for (int i = 0; i < t->rank; i++) pb_varint(&shape, (uint64_t)t->dim[i]);
    if (!t->rank) pb_varint(&shape, 1);
    pb_msg(&at, 1, &shape);
    pb_uint(&at, 2, (uint64_t)adt);
    pb_msg(&ft, 5, &at);
    pb_msg(&fd, 3, &ft);
    pb_msg(desc, field, &fd);
    return true;
}

static const mil_type *type_of(const mil_func *f, const char *name) {
    for (int i = 0; i < f->nparams; i++)
        if (!strcmp(f->params[i].name, name)) return &f->params[i].type;
    for (int i = 0; i < f->nstmts; i++)
        for (int k = 0; k < f->stmts[i].nout; k++)
            if (!strcmp(f->stmts[i].out_names[k], name)) return &f->stmts[i].out_types[k];
    return NULL;
}

static void meta_entry(pb_buf *md, const char *k, const char *v) {
    pb_buf e = { 0 };
    pb_str(&e, 1, k);
    pb_str(&e, 2, v);
    pb_msg(md, 100, &e);
}

bool coreml_encode_func(const mil_func *f, const af_coreml_opts *o, pb_buf *model, char *why, size_t n) {
    int ios = o && o->ios ? o->ios : COREML_IOS_MAX;
    char opset[32];
    snprintf(opset, sizeof opset, "CoreML%d", ios - 10); /* coremltools' names: iOS 16 is CoreML6 */
    pb_buf desc = { 0 }, blk = { 0 }, fn = { 0 };
    bool ok = coreml_states_check(f, ios, why, n), classifier = o && o->nclasses > 0;
    for (int i = 0; ok && i < f->nparams; i++)
        ok = f->params[i].type.state ? coreml_state_feature(&desc, f->params[i].name, &f->params[i].type, why, n)
                                     : feature(&desc, 1, f->params[i].name, &f->params[i].type, why, n);
    if (ok && classifier) {
        const mil_type *t = f->nret ? type_of(f, f->ret[0].name) : NULL;
        ok = t && coreml_classify_check(o, f->nret, t, why, n);
        if (ok) coreml_classify_features(&desc, o);
    }
    for (int i = 0; ok && !classifier && i < f->nret; i++) {
        const mil_type *t = type_of(f, f->ret[i].name);
        ok = t && feature(&desc, 10, f->ret[i].name, t, why, n);
    }
    pb_buf md = { 0 };
    if (o) {
        pb_str(&md, 1, o->description);
        pb_str(&md, 2, o->version);
        pb_str(&md, 3, o->author);
        pb_str(&md, 4, o->license);
    }
    meta_entry(&md, "com.github.apple.coremltools.source", "aneforge " AF_VERSION);
    pb_msg(&desc, 100, &md);
    for (int i = 0; ok && i < f->nstmts; i++)
        ok = !strcmp(f->stmts[i].op, "coreml_update_state") ? update_state(&blk, f, i, why, n) : operation(&blk, &f->stmts[i], why, n);
    if (ok && classifier) coreml_classify_op(&blk, o, f->ret[0].name, type_of(f, f->ret[0].name));
    for (int i = 0; ok && !classifier && i < f->nret; i++) pb_str(&blk, 2, f->ret[i].name);
    for (int i = 0; ok && i < f->nparams; i++) {
        pb_buf nv = { 0 };
        pb_str(&nv, 1, f->params[i].name);
        value_type(&nv, 2, &f->params[i].type);
        pb_msg(&fn, 1, &nv);
    }
    if (!ok) { pb_free(&desc), pb_free(&blk), pb_free(&fn); return false; }
    pb_str(&fn, 2, opset);
    pb_buf spec = { 0 };
    pb_str(&spec, 1, opset);
    pb_msg(&spec, 2, &blk);
    pb_msg(&fn, 3, &spec);
    pb_buf prog = { 0 }, fent = { 0 };
    pb_uint(&prog, 1, 1);
    pb_str(&fent, 1, f->name);
    pb_msg(&fent, 2, &fn);
    pb_msg(&prog, 2, &fent);
    pb_uint(model, 1, (uint64_t)(ios - 9)); /* iOS 16 is specification 7 */
    pb_msg(model, 2, &desc);
    pb_msg(model, 502, &prog);
    return true;
}

af_status coreml_encode(const char *text, size_t len, const af_coreml_opts *o, af_graph *g, const milblob_writer *w16,
                        milblob_writer **w32, pb_buf *model) {
    memset(model, 0, sizeof *model);
    *w32 = NULL;
    if (o && o->precision && o->precision != 16 && o->precision != 32)
        return ir_fail(AF_ERR_INVALID, "af_coreml_export: precision %d: choose 16 or 32 (bits)", o->precision);
    if (o && o->nclasses < 0) return ir_fail(AF_ERR_INVALID, "af_coreml_export: nclasses %d is negative", o->nclasses);
    mil_arena arena = { 0 };
    mil_diag diag = { .source = "<emitted MIL>" };
    mil_program prog;
    af_status st = AF_OK;
    char why[300] = "";
    if (o && o->ios && (o->ios < COREML_IOS_MIN || o->ios > COREML_IOS_MAX))
        return ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_export: deployment target iOS %d: choose %d to %d (iOS %d..%d / macOS "
                       "12..15, specification versions %d to %d)", o->ios, COREML_IOS_MIN, COREML_IOS_MAX, COREML_IOS_MIN,
                       COREML_IOS_MAX, COREML_IOS_MIN - 9, COREML_IOS_MAX - 9);
    if (!mil_parse_program(text, len, &arena, &diag, &prog)) st = ir_fail(diag.st, "af_coreml_export: %s", diag.msg);
    else if (prog.nfuncs != 1) st = ir_fail(AF_ERR_INVALID, "af_coreml_export: the emitted program has %d functions, not 1", prog.nfuncs);
    else if (o && o->precision == 32 && (st = coreml_fp32(&prog.funcs[0], g, w16, w32))) (void)0;
    else if ((st = coreml_target(&prog.funcs[0], &arena, o && o->ios ? o->ios : COREML_IOS_MAX))) (void)0;
    else if (!coreml_encode_func(&prog.funcs[0], o, model, why, sizeof why)) st = ir_fail(AF_ERR_UNSUPPORTED, "af_coreml_export: %s", why);
    else if (model->oom) st = ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory encoding the model");
    mil_arena_free(&arena);
    if (st) {
        pb_free(model);
        milblob_writer_free(*w32);
        *w32 = NULL;
    }
    return st;
}
