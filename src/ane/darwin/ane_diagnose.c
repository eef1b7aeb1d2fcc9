/* What to tell the user when the engine's compiler refuses a program that passed the
 * family's walls (the real compiler often says only "ANECCompile() FAILED" or
 * "Validation diagnostics: none"): the op whose extent comes closest to one of the
 * family file's limits, the limit, what to try, and that `doctor --probe` would measure
 * the chip's real limits. Read from the MIL text, the one thing the runtime has.
 *
 * The family file's limits a compiler refuses a program for, each a candidate here:
 * max_rank, max_spatial (W), max_axis, max_kernel_w (a conv's constant weight) and
 * wide_row_max (a reshape to one row that a concat reads). The other fields are not
 * refusals: crop_dma_saturates gives wrong numbers (ane-sim's quirks), compile_hangs_on_
 * large_batch a slow or hung compile (ane-sim warns at compile time), surface_align
 * concerns evaluation (every surface is in 128-byte steps), and compile_budget has its
 * own message where the runtime counts compiles (ane_runtime.c). */
#include "ane/darwin/ane_runtime.h"
#include "engine/family.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[64], op[32];
    int rank;
    int64_t dim[8];
} mil_val;

/* A value's extent as a fraction r of one family-file limit. */
typedef struct {
    double r;
    const char *field, *ax, *remedy;
    int64_t limit, got;
    const mil_val *v; /* the value it is about */
} near_limit;

/* "tensor<fp16, [1, 4, 8, 8]> conv_0 = conv(" -> a value; false for anything else. */
static bool parse_line(const char *s, const char *end, mil_val *v) {
    const char *t = strstr(s, "tensor<");
    if (!t || t >= end) return false;
    const char *b = memchr(t, '[', (size_t)(end - t));
    if (!b) return false;
    v->rank = 0;
    const char *p = b + 1;
    while (p < end && *p != ']' && v->rank < 8) {
        char *e;
        long long d = strtoll(p, &e, 10);
        if (e == p) return false;
        v->dim[v->rank++] = d;
        p = e;
        while (p < end && (*p == ',' || *p == ' ')) p++;
    }
    if (p >= end || *p != ']' || p[1] != '>') return false;
    p += 2;
    while (p < end && *p == ' ') p++;
    size_t k = 0;
    while (p < end && *p != ' ' && k + 1 < sizeof v->name) v->name[k++] = *p++;
    v->name[k] = 0;
    if (p + 3 > end || strncmp(p, " = ", 3)) return false;
    p += 3;
    k = 0;
    while (p < end && *p != '(' && *p != ' ' && k + 1 < sizeof v->op) v->op[k++] = *p++;
    v->op[k] = 0;
    return k > 0;
}

/* The weight's shape when line holds "weight = NAME" and NAME was declared earlier. */
static const mil_val *weight_of(const char *line, const char *end, const mil_val *vals, int n) {
    const char *w = strstr(line, "weight = ");
    if (!w || w >= end) return NULL;
    w += 9;
    size_t k = strcspn(w, ",)");
    for (int i = 0; i < n; i++)
        if (strlen(vals[i].name) == k && !strncmp(vals[i].name, w, k)) return &vals[i];
    return NULL;
}

/* True when name occurs in [s, end) as a whole identifier. */
static bool mentions(const char *s, const char *end, const char *name) {
    size_t k = strlen(name);
    for (const char *p = s; k && p + k <= end; p++) {
        if (memcmp(p, name, k)) continue;
        bool left = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool right = p + k == end || !(isalnum((unsigned char)p[k]) || p[k] == '_');
        if (left && right) return true;
    }
    return false;
}

/* A reshape whose result is a single row: every axis but the last is 1. */
static bool single_row(const mil_val *v) {
    if (strcmp(v->op, "reshape") || v->rank < 1) return false;
    for (int i = 0; i < v->rank - 1; i++)
        if (v->dim[i] != 1) return false;
    return true;
}

static const char *const split_remedy = "split the axis into chunks within the limit (slice, compute, concat)";

/* The limits value v (the line [s, e), vals[0..nv) before it, v last) comes near. */
static int limits_near(const ane_family_info *fi, const mil_val *v, const char *s, const char *e, const mil_val *vals,
                       int nv, near_limit *c) {
    int nc = 0;
    c[nc++] = (near_limit){ v->rank >= fi->max_rank ? 1.0 : 0.0, "max_rank", "rank", "fold leading axes together with af_reshape",
                            fi->max_rank, v->rank, v };
    if (v->rank >= 1)
        c[nc++] = (near_limit){ (double)v->dim[v->rank - 1] / (double)fi->max_spatial, "max_spatial", "W", split_remedy,
                                fi->max_spatial, v->dim[v->rank - 1], v };
    int64_t big = 0;
    for (int i = 0; i < v->rank; i++)
        if (v->dim[i] > big) big = v->dim[i];
    c[nc++] = (near_limit){ (double)big / (double)fi->max_axis, "max_axis", "an axis", split_remedy, fi->max_axis, big, v };
    const mil_val *w = !strcmp(v->op, "conv") ? weight_of(s, e, vals, nv) : NULL;
    if (w && w->rank == 4)
        c[nc++] = (near_limit){ (double)w->dim[3] / (double)fi->max_kernel_w, "max_kernel_w", "kernel width",
                                "split the kernel into column groups and add the shifted results, or use af_conv2d (im2col)",
                                fi->max_kernel_w, w->dim[3], v };
    const mil_val *row = NULL; /* a concat's widest single-row input */
    for (int i = 0; !strcmp(v->op, "concat") && i < nv - 1; i++)
        if (single_row(&vals[i]) && mentions(s, e, vals[i].name) && (!row || vals[i].dim[vals[i].rank - 1] > row->dim[row->rank - 1]))
            row = &vals[i];
    if (row)
        c[nc++] = (near_limit){ (double)row->dim[row->rank - 1] / (double)fi->wide_row_max, "wide_row_max",
                                "a single row fed to a concat",
                                "keep each tensor's natural row width and stack along axis 0 (concat([w, m, v], 0) -> "
                                "[3*rows, cols]), or compile one program per tensor",
                                fi->wide_row_max, row->dim[row->rank - 1], row };
    return nc;
}

/* "<op> '<name>' [d0, d1]: <extent> = <got>" */
static void describe_near(const near_limit *c, char *what, size_t n) {
    const mil_val *v = c->v;
    char shape[120] = "";
    size_t k = 0;
    for (int d = 0; d < v->rank && k < sizeof shape; d++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? ", " : "[", (long long)v->dim[d]);
    if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
    snprintf(what, n, "%s '%s' %s: %s = %lld", v->op, v->name, shape, c->ax, (long long)c->got);
}

void ane_rt_diagnose(const char *mil, size_t len, af_family_id family, char *out, size_t n) {
    const ane_family_info *fi = ane_family_info_of(family);
    out[0] = 0;
    if (!fi || !mil || !n) return;
    enum { MAXV = 4096 };
    mil_val *vals = malloc(sizeof *vals * MAXV);
    if (!vals) return;
    int nv = 0;
    near_limit best = { 0 };
    char what[300] = "";
    for (const char *s = mil, *end_all = mil + len; s < end_all;) {
        const char *e = memchr(s, '\n', (size_t)(end_all - s));
        if (!e) e = end_all;
        if (nv < MAXV && parse_line(s, e, &vals[nv])) {
            const mil_val *v = &vals[nv++];
            near_limit c[5];
            int nc = strcmp(v->op, "const") ? limits_near(fi, v, s, e, vals, nv, c) : 0;
            for (int i = 0; i < nc; i++)
                if (c[i].r > best.r) {
                    best = c[i];
                    describe_near(&c[i], what, sizeof what);
                }
        }
        s = e + 1;
    }
    free(vals);
    if (!best.field) return;
    snprintf(out, n, ". Likely cause: %s, %.0f%% of %s = %lld in the %s family file (%s); the engine's real limit may be lower. "
             "Try: %s. To measure this chip's limits: aneforge doctor --probe -o chip.json, then --target ane-sim:chip.json "
             "refuses what this engine refuses", what, best.r * 100.0, best.field, (long long)best.limit, fi->name, fi->chips,
             best.remedy);
}
