/* A net.plist program as an IR graph: the inputs as fp16 [N, C, H, W] tensors, the
 * constants baked from weights.0 / weights.1, and every unit rebuilt from the project's ops by its
 * Type's reader. This is how the fake framework runs net.plist programs, and what the
 * fuzz target drives with arbitrary programs. */
#include "netplist/netplist.h"
#include "ir/fp16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[NETPLIST_NAME];
    af_tensor *t;
} named;

static af_tensor *lookup(const named *v, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(v[k].name, name)) return v[k].t;
    return NULL;
}

static af_tensor *constant(af_graph *g, const netplist_constant *c, const netplist_weights *w, char *err, size_t errn) {
    int64_t n = netplist_dims_count(c->dims);
    const uint8_t *w1 = w ? w->bytes[c->file] : NULL;
    size_t w1_len = w ? w->len[c->file] : 0;
    if (!w1 || (uint64_t)c->byte_offset + (uint64_t)n * 2 > w1_len) {
        snprintf(err, errn, "net.plist: constant %s lies outside weights.%d (%zu bytes)", c->name, c->file, w1 ? w1_len : 0);
        return NULL;
    }
    uint16_t *h = malloc((size_t)n * sizeof *h + 2);
    float *f = malloc((size_t)n * sizeof *f + 4);
    af_tensor *t = NULL;
    if (h && f) { /* little-endian fp16 */
        for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)(w1[c->byte_offset + 2 * i] | (w1[c->byte_offset + 2 * i + 1] << 8));
        if (c->u16) for (int64_t i = 0; i < n; i++) f[i] = h[i]; /* an index constant: the integer */
        else ir_f16_to_f32_array(h, f, n);
        t = af_const(g, c->name, netplist_shape4(c->dims), f);
    }
    if (!t) snprintf(err, errn, "net.plist: constant %s: %s", c->name, af_graph_error(g) ? af_graph_error(g) : "out of memory");
    free(h);
    free(f);
    return t;
}

bool netplist_graph(const netplist_program *p, const netplist_weights *w, af_graph *g, af_tensor **in,
                    af_tensor **out, char *err, size_t errn) {
    named v[NETPLIST_MAX_INPUTS + NETPLIST_MAX_CONSTS + NETPLIST_MAX_UNITS];
    int nv = 0;
    err[0] = 0;
    for (int k = 0; k < p->ninputs; k++) {
        af_tensor *t = af_input(g, p->inputs[k].name, AF_F16, netplist_shape4(p->inputs[k].dims));
        if (!t) {
            snprintf(err, errn, "net.plist: input %s: %s", p->inputs[k].name, af_graph_error(g) ? af_graph_error(g) : "refused");
            return false;
        }
        in[k] = t;
        snprintf(v[nv].name, NETPLIST_NAME, "%s", p->inputs[k].name);
        v[nv++].t = t;
    }
    for (int k = 0; k < p->nconsts; k++) {
        af_tensor *t = constant(g, &p->consts[k], w, err, errn);
        if (!t) return false;
        snprintf(v[nv].name, NETPLIST_NAME, "%s", p->consts[k].name);
        v[nv++].t = t;
    }
    af_tensor *last = NULL;
    for (int k = 0; k < p->nunits; k++) {
        const netplist_unit *u = &p->units[k];
        bridge_read_fn read = netplist_unit_reader(u->type);
        af_tensor *src[NETPLIST_MAX_BOTTOM];
        for (int b = 0; b < u->nbottom; b++)
            if (!(src[b] = lookup(v, nv, u->bottom[b]))) {
                snprintf(err, errn, "net.plist: unit %s reads '%s', which is not declared before it", u->name, u->bottom[b]);
                return false;
            }
        if (!read) {
            snprintf(err, errn, "net.plist: unit %s has Type %s, which no reader models", u->name, u->type);
            return false;
        }
        last = NULL;
        if (!read(u, src, u->nbottom, &last, err, errn) || !last) {
            if (af_graph_error(g)) snprintf(err, errn, "net.plist: unit %s (%s): %s", u->name, u->type, af_graph_error(g));
            else if (!err[0]) snprintf(err, errn, "net.plist: unit %s (%s) was refused", u->name, u->type);
            return false;
        }
        snprintf(v[nv].name, NETPLIST_NAME, "%s", u->name);
        v[nv++].t = last;
    }
    *out = last;
    return last != NULL;
}
