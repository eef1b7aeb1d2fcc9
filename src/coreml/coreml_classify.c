/* A classifier's description and its `classify` op, laid out as coremltools lays out an
 * mlProgram classifier (field numbers from Model.proto, FeatureTypes.proto, MIL.proto):
 * the probabilities feed classify(probabilities, classes = a list literal), whose two
 * results are the model's outputs "classLabel" and "classLabel_probs". */
#include "coreml/coreml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROTO_STRING 2  /* MIL.proto DataType */
#define PROTO_FLOAT64 12
#define PROTO_INT64 24

static bool is_int(const char *s, long long *v) {
    char *end;
    if (!s || !*s) return false;
    *v = strtoll(s, &end, 10);
    return !*end && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'));
}

/* Integer labels when every label is a decimal integer (ct.ClassifierConfig([0, 1, 2])). */
static bool int_labels(const af_coreml_opts *o) {
    long long v;
    for (int i = 0; i < o->nclasses; i++)
        if (!is_int(o->class_labels[i], &v)) return false;
    return true;
}

bool coreml_classify_check(const af_coreml_opts *o, int nret, const mil_type *prob, char *why, size_t n) {
    if (!o->class_labels) return snprintf(why, n, "nclasses is %d but class_labels is NULL", o->nclasses), false;
    for (int i = 0; i < o->nclasses; i++)
        if (!o->class_labels[i] || !*o->class_labels[i]) return snprintf(why, n, "class label %d is NULL or empty", i), false;
    for (int i = 0; i < o->nclasses; i++)
        for (int k = 0; k < i; k++)
            if (!strcmp(o->class_labels[i], o->class_labels[k]))
                return snprintf(why, n, "class label '%s' is given twice (labels %d and %d)", o->class_labels[i], k, i), false;
    if (nret != 1) return snprintf(why, n, "a classifier has one output (the probabilities), this program has %d", nret), false;
    int64_t count = 1;
    for (int i = 0; i < prob->rank; i++) count *= prob->dim[i];
    bool shape = prob->rank >= 1 && prob->rank <= 2 && prob->dim[prob->rank - 1] == o->nclasses && count == o->nclasses;
    if (!shape) {
        char dims[120] = "";
        for (int i = 0; i < prob->rank; i++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", i ? ", " : "", (long long)prob->dim[i]);
        return snprintf(why, n, "the classifier's output has shape [%s]; %d class labels need [1, %d] or [%d] (export "
                        "batch 1)", dims, o->nclasses, o->nclasses, o->nclasses), false;
    }
    return true;
}

/* ValueType { tensorType(1): { dataType(1) } }: a scalar of dtype dt */
static void scalar_type(pb_buf *b, int field, int dt) {
    pb_buf tt = { 0 }, vt = { 0 };
    pb_uint(&tt, 1, (uint64_t)dt);
    pb_msg(&vt, 1, &tt);
    pb_msg(b, field, &vt);
}

/* Value { type(2), immediateValue(3): { tensor(1): TensorValue { strings(4) | longInts(5) } } } */
static void label_value(pb_buf *b, int field, const char *label, bool ints) {
    pb_buf v = { 0 }, iv = { 0 }, tv = { 0 }, rep = { 0 };
    scalar_type(&v, 2, ints ? PROTO_INT64 : PROTO_STRING);
    if (ints) {
        long long x = 0;
        is_int(label, &x);
        pb_buf packed = { 0 };
        pb_varint(&packed, (uint64_t)x);
        pb_msg(&rep, 1, &packed);
        pb_msg(&tv, 5, &rep);
    } else {
        pb_str(&rep, 1, label);
        pb_msg(&tv, 4, &rep);
    }
    pb_msg(&iv, 1, &tv);
    pb_msg(&v, 3, &iv);
    pb_msg(b, field, &v);
}

static void input(pb_buf *op, const char *key, pb_buf *binding) {
    pb_buf ent = { 0 }, arg = { 0 };
    pb_str(&ent, 1, key);
    pb_msg(&arg, 1, binding);
    pb_msg(&ent, 2, &arg);
    pb_msg(op, 2, &ent);
}

/* TensorType { dataType(1), rank(2), dimensions(3): { constant(1): { size(1) } } } */
static void tensor_type(pb_buf *b, int field, int dt, const mil_type *t) {
    pb_buf tt = { 0 }, vt = { 0 };
    pb_uint(&tt, 1, (uint64_t)dt);
    pb_uint(&tt, 2, (uint64_t)t->rank);
    for (int i = 0; i < t->rank; i++) {
        pb_buf c = { 0 }, d = { 0 };
        pb_uint(&c, 1, (uint64_t)t->dim[i]);
        pb_msg(&d, 1, &c);
        pb_msg(&tt, 3, &d);
    }
    pb_msg(&vt, 1, &tt);
    pb_msg(b, field, &vt);
}

/* Operation.attributes(5) "name" */
static void op_name(pb_buf *op, const char *name) {
    pb_buf ent = { 0 }, nval = { 0 }, ntv = { 0 }, nrep = { 0 }, niv = { 0 };
    pb_str(&ent, 1, "name");
    scalar_type(&nval, 2, PROTO_STRING);
    pb_str(&nrep, 1, name);
    pb_msg(&ntv, 4, &nrep);
    pb_msg(&niv, 1, &ntv);
    pb_msg(&nval, 3, &niv);
    pb_msg(&ent, 2, &nval);
    pb_msg(op, 5, &ent);
}

void coreml_classify_op(pb_buf *blk, const af_coreml_opts *o, const char *prob, const mil_type *pt) {
    bool ints = int_labels(o);
    int dt = ints ? PROTO_INT64 : PROTO_STRING;
    pb_buf op = { 0 }, bd = { 0 };
    if (pt->dt != MIL_FP32) { /* classify reads fp32 probabilities: cast(x, dtype = "fp32") first */
        pb_buf cast = { 0 }, v = { 0 }, iv = { 0 }, tv = { 0 }, rep = { 0 };
        pb_str(&cast, 1, "cast");
        pb_str(&bd, 1, prob);
        input(&cast, "x", &bd);
        scalar_type(&v, 2, PROTO_STRING);
        pb_str(&rep, 1, "fp32");
        pb_msg(&tv, 4, &rep);
        pb_msg(&iv, 1, &tv);
        pb_msg(&v, 3, &iv);
        pb_msg(&bd, 2, &v);
        input(&cast, "dtype", &bd);
        pb_buf nv = { 0 };
        pb_str(&nv, 1, "classify_probabilities");
        tensor_type(&nv, 2, coreml_proto_dtype(MIL_FP32), pt);
        pb_msg(&cast, 3, &nv);
        op_name(&cast, "classify_probabilities");
        pb_msg(blk, 3, &cast);
        prob = "classify_probabilities";
    }
    pb_str(&op, 1, "classify");
    pb_str(&bd, 1, prob);
    input(&op, "probabilities", &bd);
    /* classes: ListType { type(1), length(2): Dimension { constant(1): { size(1) } } }
     * with ImmediateValue.list(3): ListValue { values(1)... } */
    pb_buf val = { 0 }, vt = { 0 }, lt = { 0 }, len = { 0 }, c = { 0 }, iv = { 0 }, lv = { 0 };
    scalar_type(&lt, 1, dt);
    pb_uint(&c, 1, (uint64_t)o->nclasses);
    pb_msg(&len, 1, &c);
    pb_msg(&lt, 2, &len);
    pb_msg(&vt, 2, &lt);
    pb_msg(&val, 2, &vt);
    for (int i = 0; i < o->nclasses; i++) label_value(&lv, 1, o->class_labels[i], ints);
    pb_msg(&iv, 3, &lv);
    pb_msg(&val, 3, &iv);
    pb_msg(&bd, 2, &val);
    input(&op, "classes", &bd);
    /* outputs: the label (a scalar) and DictionaryType { keyType(1), valueType(2) } */
    pb_buf nv = { 0 }, dv = { 0 }, d = { 0 }, dvt = { 0 };
    pb_str(&nv, 1, "classLabel");
    scalar_type(&nv, 2, dt);
    pb_msg(&op, 3, &nv);
    pb_str(&dv, 1, "classLabel_probs");
    scalar_type(&d, 1, dt);
    scalar_type(&d, 2, PROTO_FLOAT64);
    pb_msg(&dvt, 4, &d);
    pb_msg(&dv, 2, &dvt);
    pb_msg(&op, 3, &dv);
    op_name(&op, "classify_0");
    pb_msg(blk, 3, &op);
    pb_str(blk, 2, "classLabel");
    pb_str(blk, 2, "classLabel_probs");
}

/* FeatureDescription { name(1), type(3): FeatureType { int64Type(1) | stringType(3) |
 * dictionaryType(6): { int64KeyType(1) | stringKeyType(2) } } }, then
 * predictedFeatureName(11) and predictedProbabilitiesName(12). */
void coreml_classify_features(pb_buf *desc, const af_coreml_opts *o) {
    bool ints = int_labels(o);
    pb_buf fd = { 0 }, ft = { 0 }, empty = { 0 };
    pb_str(&fd, 1, "classLabel");
    pb_msg(&ft, ints ? 1 : 3, &empty);
    pb_msg(&fd, 3, &ft);
    pb_msg(desc, 10, &fd);
    pb_buf pd = { 0 }, pt = { 0 }, dt = { 0 }, key = { 0 };
    pb_str(&pd, 1, "classLabel_probs");
    pb_msg(&dt, ints ? 1 : 2, &key);
    pb_msg(&pt, 6, &dt);
    pb_msg(&pd, 3, &pt);
    pb_msg(desc, 10, &pd);
    pb_str(desc, 11, "classLabel");
    pb_str(desc, 12, "classLabel_probs");
}
