/* MIL reader: the symbol table and constants (inline literals and BLOBFILE records
 * turned into float values and IR constants). */
#include "mil/mil_ast.h"
#include "ir/fp16.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- symbols */

static uint32_t hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

mil_sym *mil_lookup(mil_mapper *M, const char *name) {
    if (!M->tabcap) return NULL;
    for (uint32_t i = hash(name) & (uint32_t)(M->tabcap - 1);; i = (i + 1) & (uint32_t)(M->tabcap - 1)) {
        int k = M->table[i];
        if (!k) return NULL;
        if (!strcmp(M->syms[k - 1].name, name)) return &M->syms[k - 1];
    }
}

mil_sym *mil_define(mil_mapper *M, const char *name, int def, const mil_type *ty, int line, int col) {
    if (mil_lookup(M, name)) { mil_error(M->diag, AF_ERR_CORRUPT, line, col, "variable '%s' is defined twice", name); return NULL; }
    if (M->nsyms == M->capsyms || M->nsyms * 2 >= M->tabcap) {
        mil_error(M->diag, AF_ERR_NOMEM, line, col, "internal: symbol table full");
        return NULL;
    }
    mil_sym *s = &M->syms[M->nsyms++];
    *s = (mil_sym){ .name = name, .def = def, .type = *ty };
    uint32_t i = hash(name) & (uint32_t)(M->tabcap - 1);
    while (M->table[i]) i = (i + 1) & (uint32_t)(M->tabcap - 1);
    M->table[i] = M->nsyms;
    return s;
}

/* ---------------------------------------------------------------- constants */

static int blob_code_bytes(mil_dtype dt, milblob_dtype *code) {
    switch (dt) {
    case MIL_FP16: *code = AF_MILBLOB_FP16; return 2;
    case MIL_FP32: *code = AF_MILBLOB_FP32; return 4;
    case MIL_INT8: *code = AF_MILBLOB_INT8; return 1;
    case MIL_UINT8: *code = AF_MILBLOB_UINT8; return 1;
    case MIL_INT16: *code = AF_MILBLOB_INT16; return 2;
    case MIL_UINT16: *code = AF_MILBLOB_UINT16; return 2;
    case MIL_INT32: *code = AF_MILBLOB_INT32; return 4;
    case MIL_UINT32: *code = AF_MILBLOB_UINT32; return 4;
    default: return 0;
    }
}

/* Sub-byte dtypes (palettized weights' indices): packed LSB-first, as MILBlob stores them. */
static bool sub_byte(mil_dtype dt, milblob_dtype *code) {
    switch (dt) {
    case MIL_INT4: *code = AF_MILBLOB_INT4; return true;
    case MIL_UINT1: *code = AF_MILBLOB_UINT1; return true;
    case MIL_UINT2: *code = AF_MILBLOB_UINT2; return true;
    case MIL_UINT3: *code = AF_MILBLOB_UINT3; return true;
    case MIL_UINT4: *code = AF_MILBLOB_UINT4; return true;
    case MIL_UINT6: *code = AF_MILBLOB_UINT6; return true;
    default: return false;
    }
}

static float *sub_byte_floats(mil_mapper *M, const mil_lit *lit, milblob_dtype want, float *f) {
    milblob_dtype got;
    const void *data;
    int64_t nbytes;
    int bits = milblob_dtype_bits(want);
    if (!mil_blob_get(M, lit->blob_path, lit->blob_offset, &got, &data, &nbytes, lit->line, lit->col)) return NULL;
    if (got != want || nbytes != (lit->count * bits + 7) / 8) {
        mil_error(M->diag, AF_ERR_CORRUPT, lit->line, lit->col, "the weight record at offset %llu holds %lld bytes of %s but the constant is %lld elements of %s",
                  (unsigned long long)lit->blob_offset, (long long)nbytes, milblob_dtype_name(got), (long long)lit->count, mil_dtype_name(lit->type.dt));
        return NULL;
    }
    const uint8_t *b = data;
    for (int64_t i = 0; i < lit->count; i++) {
        uint64_t pos = (uint64_t)i * (uint64_t)bits;
        unsigned v = b[pos / 8] >> (pos % 8);
        if (pos % 8 + (uint64_t)bits > 8) v |= (unsigned)b[pos / 8 + 1] << (8 - pos % 8);
        v &= (1u << bits) - 1;
        f[i] = want == AF_MILBLOB_INT4 && v >= 8 ? (float)v - 16.0f : (float)v;
    }
    return f;
}

/* Integers are held in fp32 (IR_TF_EXACT tensors): whole numbers are exact to 2^24. */
static bool int_fits(mil_mapper *M, const mil_lit *lit, double v, int64_t i, int line, int col) {
    if (fabs(v) <= 16777216.0) return true;
    return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col,
                     "%s value %.0f (element %lld) is beyond 2^24: the reader holds integers in fp32 and could not keep it exact",
                     mil_dtype_name(lit->type.dt), v, (long long)i);
}

static float *lit_floats(mil_mapper *M, const mil_lit *lit, int line, int col) {
    float *f = mil_alloc(M->arena, sizeof(float) * (size_t)(lit->count ? lit->count : 1));
    if (!f) { mil_error(M->diag, AF_ERR_NOMEM, line, col, "out of memory"); return NULL; }
    if (lit->v) {
        for (int64_t i = 0; i < lit->count; i++) {
            if (mil_dtype_is_int(lit->type.dt) && !int_fits(M, lit, lit->v[i], i, lit->line, lit->col)) return NULL;
            f[i] = (float)lit->v[i];
        }
        return f;
    }
    if (!lit->blob) { mil_error(M->diag, AF_ERR_INVALID, line, col, "a %s constant has no numeric value", mil_dtype_name(lit->type.dt)); return NULL; }
    milblob_dtype want, got;
    int size = blob_code_bytes(lit->type.dt, &want);
    const void *data;
    int64_t nbytes;
    if (!size && sub_byte(lit->type.dt, &want)) return sub_byte_floats(M, lit, want, f);
    if (!size) { mil_error(M->diag, AF_ERR_UNSUPPORTED, lit->line, lit->col, "BLOBFILE constants of dtype %s are not supported", mil_dtype_name(lit->type.dt)); return NULL; }
    if (!mil_blob_get(M, lit->blob_path, lit->blob_offset, &got, &data, &nbytes, lit->line, lit->col)) return NULL;
    if (got != want || nbytes != lit->count * size) {
        mil_error(M->diag, AF_ERR_CORRUPT, lit->line, lit->col, "the weight record at offset %llu holds %lld bytes of %s but the constant is %lld elements of %s",
                  (unsigned long long)lit->blob_offset, (long long)nbytes, milblob_dtype_name(got), (long long)lit->count,
                  mil_dtype_name(lit->type.dt));
        return NULL;
    }
    const uint8_t *b = data;
    for (int64_t i = 0; i < lit->count; i++) {
        const uint8_t *q = b + i * size;
        switch (lit->type.dt) {
        case MIL_FP16: f[i] = af_f16_to_f32((uint16_t)(q[0] | q[1] << 8)); break;
        case MIL_FP32: { uint32_t u = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24; memcpy(&f[i], &u, 4); break; }
        case MIL_INT8: f[i] = (int8_t)q[0]; break;
        case MIL_UINT8: f[i] = q[0]; break;
        case MIL_INT16: f[i] = (int16_t)(q[0] | q[1] << 8); break;
        case MIL_UINT16: f[i] = (uint16_t)(q[0] | q[1] << 8); break;
        case MIL_INT32: {
            int32_t v = (int32_t)((uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24);
            if (!int_fits(M, lit, v, i, lit->line, lit->col)) return NULL;
            f[i] = (float)v;
            break;
        }
        default: {
            uint32_t v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            if (!int_fits(M, lit, v, i, lit->line, lit->col)) return NULL;
            f[i] = (float)v;
            break;
        }
        }
    }
    return f;
}

const float *mil_const_values(mil_mapper *M, mil_sym *s, int line, int col) {
    if (!s->vals) s->vals = lit_floats(M, s->lit, line, col);
    return s->vals;
}

bool mil_scalar_of(mil_mapper *M, const mil_value *v, double *out) {
    const mil_lit *lit = NULL;
    if (v->kind == MIL_V_LIT) lit = v->lit;
    else if (v->kind == MIL_V_IDENT) {
        mil_sym *s = mil_lookup(M, v->ident);
        lit = s ? s->lit : NULL;
    }
    if (!lit || lit->count != 1 || !lit->v) return false;
    *out = lit->v[0];
    return true;
}

bool mil_shape_of(mil_mapper *M, const mil_type *ty, af_shape *s, int line, int col) {
    if (ty->kind != MIL_TY_TENSOR || ty->dynamic) return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "needs a tensor with a static shape");
    if (ty->rank > AF_MAX_RANK) return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "rank %d is above the IR's %d", ty->rank, AF_MAX_RANK);
    int64_t n = 1;
    s->rank = ty->rank;
    for (int i = 0; i < ty->rank; i++) {
        if (ty->dim[i] < 1) return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "dimension %d is %lld; the IR needs >= 1", i, (long long)ty->dim[i]);
        s->dim[i] = ty->dim[i];
        n *= ty->dim[i];
        if (n > AF_MIL_MAX_ELEMS) return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "tensor larger than %lld elements", (long long)AF_MIL_MAX_ELEMS);
    }
    return true;
}

/* An IR constant holding a literal's values (bools as 0/1). */
af_tensor *mil_const_tensor(mil_mapper *M, const char *name, const mil_lit *lit, const float *vals, int line, int col) {
    af_shape s;
    if (!(mil_dtype_is_float(lit->type.dt) || lit->type.dt == MIL_BOOL || mil_dtype_is_int(lit->type.dt))) {
        mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "%s tensors cannot be op inputs", mil_dtype_name(lit->type.dt));
        return NULL;
    }
    if (!mil_shape_of(M, &lit->type, &s, line, col)) return NULL;
    if (!vals && !(vals = lit_floats(M, lit, line, col))) return NULL;

    af_tensor *t = af_const(M->g, name, s, vals);
    if (!t) mil_error(M->diag, AF_ERR_NOMEM, line, col, "%s", af_graph_error(M->g) ? af_graph_error(M->g) : "out of memory");
    return t;
}

