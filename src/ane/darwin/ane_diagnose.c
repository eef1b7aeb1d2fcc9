/* What to tell the user when the engine's compiler refuses a program that passed the
 * family's walls (the real compiler often says only "ANECCompile() FAILED" or
 * "Validation diagnostics: none"): the op whose extent comes closest to one of the
 * family file's limits, the limit, what to try, and that `doctor --probe` would measure
 * the chip's real limits. Read from the MIL text, the one thing the runtime has. */
#include "ane/darwin/ane_runtime.h"
#include "engine/family.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[64], op[32];
    int rank;
    int64_t dim[8];
} mil_val;

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

void ane_rt_diagnose(const char *mil, size_t len, af_family_id family, char *out, size_t n) {
    const ane_family_info *fi = ane_family_info_of(family);
    out[0] = 0;
    if (!fi || !mil || !n) return;
    enum { MAXV = 4096 };
    mil_val *vals = malloc(sizeof *vals * MAXV);
    if (!vals) return;
    int nv = 0;
    double best = 0;
    char what[300] = "";
    const char *limit = NULL, *remedy = NULL;
    int64_t lim = 0;
    for (const char *s = mil, *end_all = mil + len; s < end_all;) {
        const char *e = memchr(s, '\n', (size_t)(end_all - s));
        if (!e) e = end_all;
        mil_val v;
        if (parse_line(s, e, &v) && nv < MAXV) {
            vals[nv++] = v;
            if (strcmp(v.op, "const")) {
                struct { double r; const char *lim_name, *rem; int64_t limv; int64_t got; const char *ax; } c[4] = {
                    { v.rank >= fi->max_rank ? 1.0 : 0.0, "max_rank", "fold leading axes together with af_reshape", fi->max_rank, v.rank, "rank" },
                    { 0, "max_spatial", "split the axis into chunks within the limit (slice, compute, concat)", fi->max_spatial, 0, "W" },
                    { 0, "max_axis", "split the axis into chunks within the limit (slice, compute, concat)", fi->max_axis, 0, "an axis" },
                    { 0, "max_kernel_w", "split the kernel into column groups and add the shifted results, or use af_conv2d (im2col)",
                      fi->max_kernel_w, 0, "kernel width" },
                };
                if (v.rank >= 1) { c[1].got = v.dim[v.rank - 1]; c[1].r = (double)c[1].got / (double)fi->max_spatial; }
                for (int i = 0; i < v.rank; i++)
                    if (v.dim[i] > c[2].got) { c[2].got = v.dim[i]; c[2].r = (double)v.dim[i] / (double)fi->max_axis; }
                const mil_val *w = !strcmp(v.op, "conv") ? weight_of(s, e, vals, nv) : NULL;
                if (w && w->rank == 4) { c[3].got = w->dim[3]; c[3].r = (double)c[3].got / (double)fi->max_kernel_w; }
                for (int i = 0; i < 4; i++)
                    if (c[i].r > best) {
                        best = c[i].r;
                        limit = c[i].lim_name;
                        remedy = c[i].rem;
                        lim = c[i].limv;
                        char shape[120] = "";
                        size_t k = 0;
                        for (int d = 0; d < v.rank && k < sizeof shape; d++)
                            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? ", " : "[", (long long)v.dim[d]);
                        if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
                        snprintf(what, sizeof what, "%s '%s' %s: %s = %lld", v.op, v.name, shape, c[i].ax, (long long)c[i].got);
                    }
            }
        }
        s = e + 1;
    }
    free(vals);
    if (!limit) return;
    snprintf(out, n, ". Likely cause: %s, %.0f%% of %s = %lld in the %s family file (%s); the engine's real limit may be lower. "
             "Try: %s. To measure this chip's limits: aneforge doctor --probe -o chip.json, then --target ane-sim:chip.json "
             "refuses what this engine refuses", what, best * 100.0, limit, (long long)lim, fi->name, fi->chips, remedy);
}
