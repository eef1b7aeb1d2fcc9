/* Import: a Model protobuf (untrusted bytes) -> MIL text for the MIL reader. Every
 * length, count and nesting is bounded: the walk follows the schema's fixed depth
 * (control-flow blocks, tuples and lists are refused, so nothing recurses), element
 * counts are checked against the declared shape before any value is written, and the
 * text is capped at AF_MIL_MAX_TEXT. */
#include "coreml/coreml.h"
#include "mil/mil.h"
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

#define DEC_MAX_STATES 64

typedef struct {
    mil_dtype dt;
    int rank;
    int64_t dim[MIL_MAX_RANK];
    bool state; /* StateType wrapping this tensor type */
} ptype;

/* A state: a function's state argument, or the model description's entry. */
typedef struct {
    char name[128];
    ptype t;
} dstate;

typedef struct {
    const char *source;
    pb_buf *out;
    dstate states[DEC_MAX_STATES]; /* the function being read: its state arguments */
    int nstates;
    dstate described[DEC_MAX_STATES]; /* ModelDescription.state(13) */
    int ndescribed;
    char why[400];
    af_status st; /* AF_ERR_CORRUPT unless unsup() said first */
    /* a classifier's classify op is left out: the function returns its probabilities
     * in place of its label and label -> probability results */
    char cls_prob[128], cls_out[2][128];
    bool cls_returned;
} dec;

static bool bad(dec *d, const char *fmt, const char *a, const char *b) {
    if (!d->why[0]) snprintf(d->why, sizeof d->why, fmt, a ? a : "", b ? b : "");
    return false;
}

/* A well-formed value aneforge cannot express. */
static bool unsup(dec *d, const char *fmt, const char *a, const char *b) {
    if (!d->why[0]) d->st = AF_ERR_UNSUPPORTED;
    return bad(d, fmt, a, b);
}

/* Reads the next field; false on malformed bytes (with the reason set). *more is false at the end. */
static bool next(dec *d, pb_rd *r, pb_field *f, bool *more, const char *where) {
    const char *why = NULL;
    int k = pb_next(r, f, &why);
    if (k < 0) return bad(d, "malformed protobuf in %s: %s", where, why);
    *more = k > 0;
    return true;
}

static bool want_len(dec *d, const pb_field *f, const char *where) {
    return f->wt == PB_LEN || bad(d, "malformed protobuf: %s has the wrong wire type", where, NULL);
}

/* A string field copied into s (size n), checked to be a MIL identifier when ident. */
static bool get_str(dec *d, const pb_field *f, char *s, size_t n, bool ident, const char *what) {
    if (!want_len(d, f, what)) return false;
    if (f->len >= n) return unsup(d, "%s is longer than %s allows", what, "aneforge");
    memcpy(s, f->data, f->len);
    s[f->len] = 0;
    if (strlen(s) != f->len) return unsup(d, "%s holds a NUL byte", what, NULL);
    if (!ident) {
        for (size_t i = 0; i < f->len; i++)
            if (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20)
                return unsup(d, "%s \"%s\" holds a quote, backslash or control character", what, s);
        return true;
    }
    bool ok = f->len > 0 && !(s[0] >= '0' && s[0] <= '9');
    for (size_t i = 0; ok && i < f->len; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    return ok || unsup(d, "%s \"%s\" is not a MIL identifier ([A-Za-z_][A-Za-z0-9_]*)", what, s);
}

static bool value_type_in(dec *d, const pb_field *vf, ptype *t, const char *what, bool outer);

/* TensorType { dataType(1), rank(2), dimensions(3) } inside ValueType { tensorType(1) },
 * or a state wrapping one: ValueType { stateType(5): StateType { wrappedType(1) } }. */
static bool value_type(dec *d, const pb_field *vf, ptype *t, const char *what) { return value_type_in(d, vf, t, what, true); }

static bool state_type(dec *d, const pb_field *sf, ptype *t, const char *what) {
    if (!want_len(d, sf, what)) return false;
    pb_rd r = pb_sub(sf);
    pb_field f, wrapped = { 0 };
    bool more;
    while (next(d, &r, &f, &more, what) && more)
        if (f.field == 1) wrapped = f;
    if (d->why[0]) return false;
    if (!wrapped.field) return bad(d, "%s is a state without a wrapped type", what, NULL);
    if (!value_type_in(d, &wrapped, t, what, false)) return false;
    if (!t->rank) return unsup(d, "%s is a state of a scalar; Core ML states wrap tensors", what, NULL);
    t->state = true;
    return true;
}

static bool value_type_in(dec *d, const pb_field *vf, ptype *t, const char *what, bool outer) {
    memset(t, 0, sizeof *t);
    if (!want_len(d, vf, what)) return false;
    pb_rd r = pb_sub(vf);
    pb_field f;
    bool more, seen = false;
    int64_t rank = 0; /* proto3 leaves a zero rank out */
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 5 && outer) return state_type(d, &f, t, what);
        if (f.field >= 2 && f.field <= 5) {
            static const char *kinds[] = { "", "", "a list", "a tuple", "a dictionary", "a state" };
            return unsup(d, "%s is %s; aneforge imports tensors only", what, kinds[f.field]);
        }
        if (f.field != 1) continue;
        if (!want_len(d, &f, what)) return false;
        seen = true;
        pb_rd tr = pb_sub(&f);
        pb_field g;
        bool m2;
        while (next(d, &tr, &g, &m2, what) && m2) {
            if (g.field == 1 && g.wt == PB_VARINT) {
                if (g.v > 64 || (t->dt = coreml_mil_dtype((int)g.v)) == MIL_DT_NONE) {
                    char c[24];
                    snprintf(c, sizeof c, "%llu", (unsigned long long)g.v);
                    return bad(d, "%s has data type %s, not one MIL.proto defines", what, c);
                }
            } else if (g.field == 2 && g.wt == PB_VARINT) rank = (int64_t)g.v;
            else if (g.field == 3) {
                if (!want_len(d, &g, what)) return false;
                if (t->rank == MIL_MAX_RANK) return unsup(d, "%s has more than 8 dimensions", what, NULL);
                pb_rd dr = pb_sub(&g);
                pb_field h;
                bool m3, known = false;
                while (next(d, &dr, &h, &m3, what) && m3) {
                    if (h.field == 2) return unsup(d, "%s has a flexible (unknown) dimension; aneforge needs fixed shapes", what, NULL);
                    if (h.field != 1 || !want_len(d, &h, what)) continue;
                    pb_rd cr = pb_sub(&h);
                    pb_field c;
                    bool m4;
                    while (next(d, &cr, &c, &m4, what) && m4)
                        if (c.field == 1 && c.wt == PB_VARINT) {
                            if (c.v > ((uint64_t)1 << 40)) return unsup(d, "%s has a dimension over 2^40", what, NULL);
                            t->dim[t->rank] = (int64_t)c.v;
                            known = true;
                        }
                    if (d->why[0]) return false;
                }
                if (d->why[0]) return false;
                if (!known) return bad(d, "%s has a dimension without a size", what, NULL);
                t->rank++;
            }
        }
        if (d->why[0]) return false;
    }
    if (d->why[0]) return false;
    if (!seen || t->dt == MIL_DT_NONE) return bad(d, "%s has no tensor type", what, NULL);
    if (rank != t->rank) return bad(d, "%s declares a rank other than its number of dimensions", what, NULL);
    return true;
}

static void type_text(pb_buf *o, const ptype *t) {
    if (!t->rank) { pb_printf(o, "%s", mil_dtype_name(t->dt)); return; }
    pb_printf(o, "%stensor<%s, [", t->state ? "state<" : "", mil_dtype_name(t->dt));
    for (int i = 0; i < t->rank; i++) pb_printf(o, "%s%lld", i ? ", " : "", (long long)t->dim[i]);
    pb_printf(o, "]>%s", t->state ? ">" : "");
}

static int64_t count_of(const ptype *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i] && n > AF_MIL_MAX_ELEMS / t->dim[i]) return -1;
        n *= t->dim[i];
    }
    return n;
}

/* The values of a TensorValue oneof member rep (kind 1..7) written as a MIL list. */
static bool tensor_values(dec *d, int kind, const pb_field *rep, const ptype *t, int64_t count, const char *what) {
    pb_buf *o = d->out;
    int64_t got = 0;
    char h[40];
    if (kind == 4) { /* RepeatedStrings: one scalar string */
        pb_rd r = pb_sub(rep);
        pb_field f;
        bool more;
        char s[1024];
        while (next(d, &r, &f, &more, what) && more)
            if (f.field == 1) {
                if (got++ || !get_str(d, &f, s, sizeof s, false, what)) return unsup(d, "%s is a string tensor aneforge cannot read", what, NULL);
                pb_printf(o, "string(\"%s\")", s);
            }
        return !d->why[0] && (got == 1 || unsup(d, "%s is a string tensor aneforge cannot read", what, NULL));
    }
    bool rank0 = t->rank == 0;
    if (rank0) pb_printf(o, "%s(", mil_dtype_name(t->dt));
    else { type_text(o, t); pb_printf(o, "(["); }
    pb_rd r = pb_sub(rep);
    pb_field f;
    bool more;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 1) continue;
        /* one value per field (unpacked), or a packed run */
        pb_rd vals = { NULL, NULL };
        uint8_t one[10];
        if (kind == 7) {
            if (!want_len(d, &f, what)) return false;
            int bytes = t->dt == MIL_FP16 ? 2 : (t->dt == MIL_INT8 || t->dt == MIL_UINT8) ? 1 : 0;
            if (!bytes) return unsup(d, "%s holds %s values as bytes, which aneforge cannot read", what, mil_dtype_name(t->dt));
            if ((int64_t)f.len != count * bytes) return bad(d, "%s holds a different number of values than its shape", what, NULL);
            for (int64_t i = 0; i < count; i++) {
                double v;
                if (bytes == 2) v = af_f16_to_f32((uint16_t)(f.data[2 * i] | f.data[2 * i + 1] << 8));
                else v = t->dt == MIL_INT8 ? (double)(int8_t)f.data[i] : (double)f.data[i];
                pb_printf(o, "%s%s", got++ ? ", " : "", bytes == 2 ? mil_hexfloat(v, h) : (snprintf(h, sizeof h, "%d", (int)v), h));
            }
            continue;
        }
        int wt = kind == 1 ? PB_I32 : kind == 6 ? PB_I64 : PB_VARINT;
        if (f.wt == PB_LEN) vals = pb_sub(&f);
        else if (f.wt == wt) {
            size_t k = 0;
            uint64_t v = f.v;
            if (wt == PB_VARINT) { do { one[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v); }
            else for (; k < (wt == PB_I32 ? 4u : 8u); k++) one[k] = (uint8_t)(f.v >> (8 * k));
            vals.p = one;
            vals.end = one + k;
        } else return bad(d, "malformed protobuf: %s has values of the wrong wire type", what, NULL);
        while (vals.p < vals.end) {
            if (got >= count) return bad(d, "%s holds more values than its shape", what, NULL);
            double v;
            if (wt == PB_VARINT) {
                pb_rd one_r = vals;
                uint64_t u = 0;
                int sh = 0;
                bool done = false;
                while (one_r.p < one_r.end && sh < 70) {
                    uint8_t c = *one_r.p++;
                    u |= (uint64_t)(c & 0x7f) << sh;
                    sh += 7;
                    if (!(c & 0x80)) { done = true; break; }
                }
                if (!done) return bad(d, "malformed protobuf: a varint in %s runs past its field", what, NULL);
                vals = one_r;
                if (kind == 3) v = u != 0;
                else if (kind == 5) v = (double)(int64_t)u;
                else v = (double)(int32_t)(uint32_t)u;
            } else {
                size_t k = wt == PB_I32 ? 4 : 8;
                if ((size_t)(vals.end - vals.p) < k) return bad(d, "malformed protobuf: %s has a partial value", what, NULL);
                uint64_t u = 0;
                for (size_t i = 0; i < k; i++) u |= (uint64_t)vals.p[i] << (8 * i);
                vals.p += k;
                if (k == 4) { uint32_t u4 = (uint32_t)u; float x; memcpy(&x, &u4, 4); v = x; }
                else memcpy(&v, &u, 8);
            }
            got++;
            if (kind == 3) pb_printf(o, "%s%s", got > 1 ? ", " : "", v != 0 ? "true" : "false");
            else if (kind == 1 || kind == 6) pb_printf(o, "%s%s", got > 1 ? ", " : "", mil_hexfloat(v, h));
            else pb_printf(o, "%s%.0f", got > 1 ? ", " : "", v);
        }
    }
    if (d->why[0]) return false;
    if (got != count) return bad(d, "%s holds a different number of values than its shape", what, NULL);
    pb_printf(o, rank0 ? ")" : "])");
    return true;
}

/* Value { type(2), immediateValue(3) { tensor(1) }, blobFileValue(5) } as a MIL literal. */
static bool value_text(dec *d, const pb_field *vf, const char *what) {
    if (!want_len(d, vf, what)) return false;
    pb_rd r = pb_sub(vf);
    pb_field f, typef = { 0 }, imm = { 0 }, blob = { 0 };
    bool more;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 2) typef = f;
        else if (f.field == 3) imm = f;
        else if (f.field == 5) blob = f;
    }
    if (d->why[0]) return false;
    if (!typef.field) return bad(d, "%s has no type", what, NULL);
    ptype t;
    if (!value_type(d, &typef, &t, what)) return false;
    if (t.state) return bad(d, "%s is a value of a state type; only function inputs are states", what, NULL);
    int64_t count = count_of(&t);
    if (count < 0) return unsup(d, "%s has more elements than aneforge allows", what, NULL);
    if (blob.field) {
        if (!want_len(d, &blob, what)) return false;
        char path[512] = "";
        uint64_t off = 0;
        pb_rd br = pb_sub(&blob);
        while (next(d, &br, &f, &more, what) && more) {
            if (f.field == 1 && !get_str(d, &f, path, sizeof path, false, "a weight file name")) return false;
            if (f.field == 2 && f.wt == PB_VARINT) off = f.v;
        }
        if (d->why[0]) return false;
        if (!path[0]) return bad(d, "%s cites a weight file without a name", what, NULL);
        if (!t.rank) return unsup(d, "%s is a scalar stored in a weight file", what, NULL);
        type_text(d->out, &t);
        pb_printf(d->out, "(BLOBFILE(path = string(\"%s\"), offset = uint64(%llu)))", path, (unsigned long long)off);
        return true;
    }
    if (!imm.field || !want_len(d, &imm, what)) return bad(d, "%s has neither an immediate value nor a weight file", what, NULL);
    if (count > AF_MIL_MAX_INLINE) return unsup(d, "%s has more inline elements than aneforge allows", what, NULL);
    pb_rd ir = pb_sub(&imm);
    pb_field tv = { 0 };
    while (next(d, &ir, &f, &more, what) && more) {
        if (f.field >= 2 && f.field <= 4) return unsup(d, "%s is a tuple, list or dictionary value; aneforge imports tensors only", what, NULL);
        if (f.field == 1) tv = f;
    }
    if (d->why[0]) return false;
    if (!tv.field || !want_len(d, &tv, what)) return bad(d, "%s has no tensor value", what, NULL);
    pb_rd tr = pb_sub(&tv);
    pb_field rep = { 0 };
    while (next(d, &tr, &f, &more, what) && more)
        if (f.field >= 1 && f.field <= 7) rep = f;
    if (d->why[0]) return false;
    if (!rep.field) { /* an empty message: zero elements, or the default (all zeros) */
        if (count) return bad(d, "%s has no values", what, NULL);
        return unsup(d, "%s is an empty tensor, which aneforge cannot hold", what, NULL);
    }
    if (!want_len(d, &rep, what)) return false;
    return tensor_values(d, rep.field, &rep, &t, count, what);
}

/* NamedValueType { name(1), type(2) } */
static bool named_type(dec *d, const pb_field *nf, char *name, size_t n, ptype *t, const char *what) {
    if (!want_len(d, nf, what)) return false;
    pb_rd r = pb_sub(nf);
    pb_field f, tf = { 0 };
    bool more;
    name[0] = 0;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 1 && !get_str(d, &f, name, n, true, what)) return false;
        if (f.field == 2) tf = f;
    }
    if (d->why[0]) return false;
    if (!name[0] || !tf.field) return bad(d, "%s has no name or no type", what, NULL);
    char w[300];
    snprintf(w, sizeof w, "%s %s", what, name);
    return value_type(d, &tf, t, w);
}

/* A map entry { key(1): string, value(2) }. */
static bool map_entry(dec *d, const pb_field *ef, char *key, size_t n, pb_field *val, const char *what) {
    if (!want_len(d, ef, what)) return false;
    pb_rd r = pb_sub(ef);
    pb_field f;
    bool more;
    key[0] = 0;
    memset(val, 0, sizeof *val);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 1 && !get_str(d, &f, key, n, true, what)) return false;
        if (f.field == 2) *val = f;
    }
    if (d->why[0]) return false;
    return key[0] || bad(d, "%s has an entry without a key", what, NULL);
}

/* classify(probabilities, classes): remembers its probabilities' name and its two
 * results' names instead of writing a statement (MIL text has no dictionary type). */
static bool classify(dec *d, const pb_field *of, const char *what) {
    if (d->cls_prob[0]) return unsup(d, "%s: the program has two classify ops", what, NULL);
    pb_rd r = pb_sub(of);
    pb_field f;
    bool more;
    int nout = 0;
    char key[128];
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 3) { /* NamedValueType { name(1), type(2) }: the name only */
            if (!want_len(d, &f, what)) return false;
            if (nout == 2) return bad(d, "%s has more than two outputs", what, NULL);
            pb_rd nr = pb_sub(&f);
            pb_field nf;
            bool m2;
            while (next(d, &nr, &nf, &m2, what) && m2)
                if (nf.field == 1 && !get_str(d, &nf, d->cls_out[nout], sizeof d->cls_out[0], true, what)) return false;
            if (d->why[0]) return false;
            nout++;
        } else if (f.field == 2) {
            pb_field arg;
            if (!map_entry(d, &f, key, sizeof key, &arg, what)) return false;
            if (strcmp(key, "probabilities")) continue;
            if (!arg.field || !want_len(d, &arg, what)) return bad(d, "%s input %s has no argument", what, key);
            pb_rd ar = pb_sub(&arg), br;
            pb_field b, v;
            bool mb, mv;
            while (next(d, &ar, &b, &mb, what) && mb) {
                if (b.field != 1 || !want_len(d, &b, what)) continue;
                br = pb_sub(&b);
                while (next(d, &br, &v, &mv, what) && mv)
                    if (v.field == 1 && !get_str(d, &v, d->cls_prob, sizeof d->cls_prob, true, what)) return false;
            }
        }
    }
    if (d->why[0]) return false;
    if (!d->cls_prob[0]) return bad(d, "%s has no probabilities input naming a value", what, NULL);
    return true;
}

/* The one name an input's Argument { arguments(1): Binding { name(1) } } binds. */
static bool bound_name(dec *d, const pb_field *arg, char *name, size_t n, const char *what) {
    name[0] = 0;
    if (!arg->field || !want_len(d, arg, what)) return bad(d, "%s has an input without an argument", what, NULL);
    pb_rd ar = pb_sub(arg);
    pb_field b, v;
    bool mb, mv;
    int nb = 0;
    while (next(d, &ar, &b, &mb, what) && mb) {
        if (b.field != 1 || !want_len(d, &b, what)) continue;
        nb++;
        pb_rd br = pb_sub(&b);
        while (next(d, &br, &v, &mv, what) && mv)
            if (v.field == 1 && !get_str(d, &v, name, n, true, what)) return false;
        if (d->why[0]) return false;
    }
    if (d->why[0]) return false;
    return (nb == 1 && name[0]) || unsup(d, "%s: an input binds something other than one named value", what, NULL);
}

/* write_state(input = state, data = value) has no output; MIL text has no statement
 * without one, so it is read as coremltools' dialect op coreml_update_state, whose
 * output (the value, typed as the state's wrapped tensor) nothing reads. */
static bool write_state(dec *d, const pb_field *of, int index, const char *what) {
    char key[128], st[128] = "", val[128] = "";
    pb_rd r = pb_sub(of);
    pb_field f;
    bool more;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 3) return bad(d, "%s has outputs; write_state has none", what, NULL);
        if (f.field != 2) continue;
        pb_field arg;
        if (!map_entry(d, &f, key, sizeof key, &arg, what)) return false;
        if (!strcmp(key, "input") && !bound_name(d, &arg, st, sizeof st, what)) return false;
        if (!strcmp(key, "data") && !bound_name(d, &arg, val, sizeof val, what)) return false;
    }
    if (d->why[0]) return false;
    if (!st[0] || !val[0]) return bad(d, "%s needs the inputs input (the state) and data", what, NULL);
    const dstate *s = NULL;
    for (int i = 0; i < d->nstates && !s; i++)
        if (!strcmp(d->states[i].name, st)) s = &d->states[i];
    if (!s) return bad(d, "%s writes \"%s\", which is not a state input of the function", what, st);
    ptype t = s->t;
    t.state = false;
    pb_printf(d->out, "            ");
    type_text(d->out, &t);
    pb_printf(d->out, " write_state_%d_%s = coreml_update_state(state = %s, value = %s)[name = string(\"write_state_%d_%s\")];\n",
              index, st, st, val, index, st);
    return !d->out->oom || bad(d, "out of memory", NULL, NULL);
}

/* Operation { type(1), inputs(2), outputs(3), blocks(4), attributes(5) } as a statement. */
static bool operation(dec *d, const pb_field *of, int index) {
    pb_buf *o = d->out;
    char what[200], type[128] = "", key[128];
    snprintf(what, sizeof what, "operation %d", index);
    if (!want_len(d, of, what)) return false;
    pb_rd r = pb_sub(of);
    pb_field f;
    bool more;
    int nout = 0;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field == 1 && !get_str(d, &f, type, sizeof type, true, what)) return false;
        if (f.field == 4) return unsup(d, "%s (%s) has nested blocks (control flow), which aneforge cannot import", what, type);
    }
    if (d->why[0]) return false;
    if (!type[0]) return bad(d, "%s has no type", what, NULL);
    snprintf(what, sizeof what, "operation %d (%s)", index, type);
    if (!strcmp(type, "classify")) return classify(d, of, what);
    if (!strcmp(type, "write_state")) return write_state(d, of, index, what);
    /* outputs first: T a, T b = */
    char first[128] = "";
    r = pb_sub(of);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 3) continue;
        char name[128];
        ptype t;
        if (!named_type(d, &f, name, sizeof name, &t, what)) return false;
        if (!nout) strcpy(first, name);
        pb_printf(o, nout++ ? ", " : "            ");
        type_text(o, &t);
        pb_printf(o, " %s", name);
    }
    if (d->why[0]) return false;
    if (!nout) return bad(d, "%s has no outputs", what, NULL);
    pb_printf(o, " = %s(", type);
    int nin = 0;
    r = pb_sub(of);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 2) continue;
        pb_field arg;
        if (!map_entry(d, &f, key, sizeof key, &arg, what)) return false;
        if (!arg.field || !want_len(d, &arg, what)) return bad(d, "%s input %s has no argument", what, key);
        pb_printf(o, "%s%s = ", nin++ ? ", " : "", key);
        /* Argument { arguments(1): Binding { name(1) | value(2) } } */
        int nb = 0;
        pb_rd ar = pb_sub(&arg);
        pb_field b;
        bool mb;
        size_t mark = o->n;
        pb_printf(o, "(");
        while (next(d, &ar, &b, &mb, what) && mb) {
            if (b.field != 1 || !want_len(d, &b, what)) continue;
            pb_rd br = pb_sub(&b);
            pb_field v;
            bool mv;
            int set = 0;
            pb_printf(o, nb++ ? ", " : "");
            while (next(d, &br, &v, &mv, what) && mv) {
                char id[128];
                if (v.field == 1) {
                    if (set++ || !get_str(d, &v, id, sizeof id, true, what)) return bad(d, "%s input %s has a bad binding", what, key);
                    pb_printf(o, "%s", id);
                } else if (v.field == 2) {
                    if (set++ || !value_text(d, &v, what)) return bad(d, "%s input %s has a bad binding", what, key);
                }
            }
            if (d->why[0]) return false;
            if (!set) return bad(d, "%s input %s has an empty binding", what, key);
        }
        if (d->why[0]) return false;
        if (!nb) return bad(d, "%s input %s binds nothing", what, key);
        if (nb == 1) { /* a single binding is written bare, without the tuple's parentheses */
            memmove(o->p + mark, o->p + mark + 1, o->n - mark - 1);
            o->n--;
        } else pb_printf(o, ")");
    }
    if (d->why[0]) return false;
    pb_printf(o, ")[name = string(\"%s\")", first);
    r = pb_sub(of);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 5) continue;
        pb_field val;
        if (!map_entry(d, &f, key, sizeof key, &val, what)) return false;
        if (!strcmp(key, "name")) continue;
        if (!val.field) return bad(d, "%s attribute %s has no value", what, key);
        pb_printf(o, ", %s = ", key);
        if (!value_text(d, &val, what)) return false;
    }
    if (d->why[0]) return false;
    pb_printf(o, "];\n");
    if (o->n > AF_MIL_MAX_TEXT) return unsup(d, "the program is larger than %s allows", "aneforge", NULL);
    return !o->oom || bad(d, "out of memory", NULL, NULL);
}

/* Block { inputs(1), outputs(2), operations(3) } */
static bool block(dec *d, const pb_field *bf) {
    if (!want_len(d, bf, "a block")) return false;
    pb_rd r = pb_sub(bf);
    pb_field f;
    bool more;
    int nops = 0, nret = 0;
    while (next(d, &r, &f, &more, "a block") && more) {
        if (f.field == 1) return unsup(d, "a function block has inputs of its own, which aneforge cannot import", NULL, NULL);
        if (f.field == 3 && !operation(d, &f, nops++)) return false;
    }
    if (d->why[0]) return false;
    pb_printf(d->out, "        } -> (");
    r = pb_sub(bf);
    while (next(d, &r, &f, &more, "a block") && more) {
        if (f.field != 2) continue;
        char name[128];
        if (!get_str(d, &f, name, sizeof name, true, "a block output")) return false;
        bool cls = d->cls_prob[0] && (!strcmp(name, d->cls_out[0]) || !strcmp(name, d->cls_out[1]));
        if (cls && d->cls_returned) continue; /* the probabilities are returned once */
        pb_printf(d->out, "%s%s", nret++ ? ", " : "", cls ? d->cls_prob : name);
        d->cls_returned |= cls;
    }
    if (d->why[0]) return false;
    if (!nret) return bad(d, "a function returns nothing", NULL, NULL);
    pb_printf(d->out, ");\n");
    return true;
}

/* A function's state input: described in the model description with its shape, fp16. */
static bool state_input(dec *d, const char *name, const ptype *t) {
    if (d->nstates == DEC_MAX_STATES) return unsup(d, "a function has more than 64 states", NULL, NULL);
    const dstate *ds = NULL;
    for (int i = 0; i < d->ndescribed && !ds; i++)
        if (!strcmp(d->described[i].name, name)) ds = &d->described[i];
    if (!ds) return bad(d, "state input %s is not among the model description's states (ModelDescription.state)", name, NULL);
    bool same = ds->t.rank == t->rank && t->dt == MIL_FP16;
    for (int i = 0; same && i < t->rank; i++) same = ds->t.dim[i] == t->dim[i];
    if (!same) return bad(d, "state input %s differs from its description (Core ML states are fp16, of the described shape)", name, NULL);
    dstate *s = &d->states[d->nstates++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->t = *t;
    return true;
}

/* ModelDescription { state(13): FeatureDescription { name(1), type(3): FeatureType {
 * stateType(8): StateFeatureType { arrayType(1): ArrayFeatureType { shape(1),
 * dataType(2) } } } } }: the states, which the state inputs must match. */
static bool description(dec *d, const pb_field *df) {
    const char *what = "the model description's states";
    if (!want_len(d, df, what)) return false;
    pb_rd r = pb_sub(df);
    pb_field f;
    bool more;
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 13) continue;
        if (!want_len(d, &f, what)) return false;
        if (d->ndescribed == DEC_MAX_STATES) return unsup(d, "the model describes more than 64 states", NULL, NULL);
        dstate *s = &d->described[d->ndescribed];
        memset(s, 0, sizeof *s);
        pb_rd fr = pb_sub(&f);
        pb_field g, at = { 0 };
        bool m2;
        while (next(d, &fr, &g, &m2, what) && m2) {
            if (g.field == 1 && !get_str(d, &g, s->name, sizeof s->name, true, "a state's name")) return false;
            if (g.field != 3 || !want_len(d, &g, what)) continue;
            pb_rd tr = pb_sub(&g);
            pb_field h;
            bool m3;
            while (next(d, &tr, &h, &m3, what) && m3) {
                if (h.field != 8 || !want_len(d, &h, what)) {
                    if (h.field >= 1 && h.field <= 7) return bad(d, "a state's description is not a stateType", NULL, NULL);
                    continue;
                }
                pb_rd sr = pb_sub(&h);
                pb_field k;
                bool m4;
                while (next(d, &sr, &k, &m4, what) && m4)
                    if (k.field == 1 && want_len(d, &k, what)) at = k;
                if (d->why[0]) return false;
            }
            if (d->why[0]) return false;
        }
        if (d->why[0]) return false;
        if (!s->name[0] || !at.field) return bad(d, "%s: an entry without a name or an array type", what, NULL);
        pb_rd ar = pb_sub(&at);
        while (next(d, &ar, &g, &m2, what) && m2) {
            if (g.field == 2 && g.wt == PB_VARINT) s->t.dt = g.v == 65552 ? MIL_FP16 : MIL_DT_NONE;
            if (g.field != 1) continue;
            pb_rd vals = pb_sub(&g), one = { 0 };
            uint8_t b[10];
            if (g.wt == PB_VARINT) { /* unpacked: one dimension per field */
                size_t k = 0;
                uint64_t v = g.v;
                do { b[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
                one.p = b, one.end = b + k, vals = one;
            } else if (g.wt != PB_LEN) return bad(d, "%s: a shape of the wrong wire type", what, NULL);
            while (vals.p < vals.end) {
                uint64_t v = 0;
                int shift = 0;
                for (;;) {
                    if (vals.p == vals.end || shift > 63) return bad(d, "%s: a malformed shape", what, NULL);
                    uint8_t c = *vals.p++;
                    v |= (uint64_t)(c & 0x7f) << shift;
                    shift += 7;
                    if (!(c & 0x80)) break;
                }
                if (s->t.rank == MIL_MAX_RANK) return unsup(d, "a state has more than 8 dimensions", NULL, NULL);
                if (v < 1 || v > ((uint64_t)1 << 40)) return bad(d, "%s: a dimension of 0 or over 2^40", what, NULL);
                s->t.dim[s->t.rank++] = (int64_t)v;
            }
        }
        if (d->why[0]) return false;
        if (s->t.dt != MIL_FP16) return unsup(d, "state %s is not fp16 (Core ML's states are)", s->name, NULL);
        d->ndescribed++;
    }
    return !d->why[0];
}

/* Function { inputs(1), opset(2), block_specializations(3) } */
static bool function(dec *d, const char *name, const pb_field *ff) {
    char what[200], opset[64] = "", key[64];
    snprintf(what, sizeof what, "function %s", name);
    d->cls_prob[0] = d->cls_out[0][0] = d->cls_out[1][0] = 0;
    d->cls_returned = false;
    if (!want_len(d, ff, what)) return false;
    pb_rd r = pb_sub(ff);
    pb_field f, chosen = { 0 };
    bool more;
    int nspec = 0;
    while (next(d, &r, &f, &more, what) && more)
        if (f.field == 2 && !get_str(d, &f, opset, sizeof opset, true, what)) return false;
    if (d->why[0]) return false;
    r = pb_sub(ff);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 3) continue;
        pb_field b;
        if (!map_entry(d, &f, key, sizeof key, &b, what)) return false;
        nspec++;
        if (!strcmp(key, opset) || !chosen.field) chosen = b;
    }
    if (d->why[0]) return false;
    if (!chosen.field) return bad(d, "%s has no block", what, NULL);
    if (!opset[0]) return bad(d, "%s names no opset", what, NULL);
    pb_printf(d->out, "    func %s<%s>(", name, opset);
    int nin = 0;
    d->nstates = 0;
    r = pb_sub(ff);
    while (next(d, &r, &f, &more, what) && more) {
        if (f.field != 1) continue;
        char in[128];
        ptype t;
        if (!named_type(d, &f, in, sizeof in, &t, "a function input")) return false;
        if (t.state && !state_input(d, in, &t)) return false;
        pb_printf(d->out, "%s", nin++ ? ", " : "");
        type_text(d->out, &t);
        pb_printf(d->out, " %s", in);
    }
    if (d->why[0]) return false;
    pb_printf(d->out, ") {\n");
    (void)nspec;
    return block(d, &chosen);
}

/* Program { version(1), functions(2) } */
static bool program(dec *d, const pb_field *pf) {
    if (!want_len(d, pf, "the program")) return false;
    pb_rd r = pb_sub(pf);
    pb_field f;
    bool more;
    int nf = 0;
    pb_printf(d->out, "program(1.0)\n{\n");
    while (next(d, &r, &f, &more, "the program") && more) {
        if (f.field == 1 && f.wt == PB_VARINT && f.v != 1) return unsup(d, "the program has version %s; aneforge reads version 1", f.v > 9 ? "over 9" : (char[2]){ (char)('0' + f.v), 0 }, NULL);
        if (f.field != 2) continue;
        char name[128];
        pb_field fv;
        if (!map_entry(d, &f, name, sizeof name, &fv, "a function entry")) return false;
        if (!fv.field) return bad(d, "function %s has no body", name, NULL);
        if (++nf > 64) return unsup(d, "the program has more than 64 functions", NULL, NULL);
        if (!function(d, name, &fv)) return false;
    }
    if (d->why[0]) return false;
    if (!nf) return bad(d, "the program has no functions", NULL, NULL);
    pb_printf(d->out, "}\n");
    return true;
}

af_status coreml_decode(const uint8_t *bytes, size_t n, const char *source, pb_buf *text) {
    memset(text, 0, sizeof *text);
    dec d = { .source = source ? source : "<model.mlmodel>", .out = text, .st = AF_OK };
    pb_rd r = { bytes, bytes + n };
    pb_field f, prog = { 0 }, desc = { 0 };
    bool more;
    int other = 0;
    uint64_t spec = 0;
    while (next(&d, &r, &f, &more, "the model") && more) {
        if (f.field == 1 && f.wt == PB_VARINT) spec = f.v;
        else if (f.field == 502) prog = f;
        else if (f.field == 2) desc = f;
        else if (f.field >= 200 && f.field < 1000 && !other) other = f.field;
    }
    af_status st = AF_ERR_CORRUPT;
    if (!d.why[0] && !prog.field) {
        st = AF_ERR_UNSUPPORTED;
        if (other == 500 || other == 303 || other == 403)
            snprintf(d.why, sizeof d.why, "the model is a neural network (the older Core ML format), not an ML program; "
                     "convert it again with coremltools' convert_to=\"mlprogram\"");
        else if (other) snprintf(d.why, sizeof d.why, "the model is not an ML program (its type is field %d of Model); aneforge imports mlProgram models only", other);
        else { st = AF_ERR_CORRUPT; snprintf(d.why, sizeof d.why, "no mlProgram in the model (is this a Core ML model file?)"); }
    } else if (!d.why[0] && (spec < 6 || spec > 10)) {
        st = AF_ERR_UNSUPPORTED;
        snprintf(d.why, sizeof d.why, "specification version %llu; ML programs are versions 6 (iOS 15) to 10", (unsigned long long)spec);
    } else if (!d.why[0]) {
        if (!desc.field || description(&d, &desc)) program(&d, &prog);
        st = d.st ? d.st : AF_ERR_CORRUPT;
        if (!text->oom) pb_raw(text, "", 1), text->n--; /* NUL-terminate */
        if (text->oom && !d.why[0]) st = AF_ERR_NOMEM, snprintf(d.why, sizeof d.why, "out of memory");
    }
    if (!d.why[0]) return AF_OK;
    pb_free(text);
    return ir_fail(st, "%s: %s", d.source, d.why);
}
