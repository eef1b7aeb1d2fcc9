/* The MIL emitter: IR graph -> Apple's MIL text (program(1.3), func main<ios18>) and
 * the MILBlob weight file. Layout, naming and the choice between inline and BLOBFILE
 * constants live here; how each op lowers lives in mil_lower.c. */
#define _POSIX_C_SOURCE 200809L
#include "mil/mil_emit.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- driver */

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const mil_arg_entry *)a).name, (*(const mil_arg_entry *)b).name);
}

static void emitter_free(mil_emitter *e) {
    for (int i = 0; i < e->nnames; i++) free(e->names[i]);
    free(e->names);
    free(e->var);
    free(e->text.s);
    milblob_writer_free(e->blob);
}

static af_status fail_emit(mil_emitter *e, af_status st, const char *fmt, ...) {
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emitter_free(e);
    return ir_fail(st, "af_mil_emit: %s", buf);
}

af_status mil_emit_mem(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                          char **text, size_t *len, milblob_writer **blob, int *arg_order) {
    mil_emitter e = { .g = g };
    if (text) *text = NULL;
    if (blob) *blob = NULL;
    if (!g || !text || !blob) return ir_fail(AF_ERR_INVALID, "af_mil_emit: graph or result pointer is NULL");
    if (g->error) return ir_fail(AF_ERR_INVALID, "af_mil_emit: the graph has an error: %s", g->error);
    if (nout < 1 || !out || nin < 0 || (nin && !in)) return ir_fail(AF_ERR_INVALID, "af_mil_emit: needs at least one output and valid input arrays");
    e.var = calloc((size_t)g->n, sizeof *e.var);
    bool *need = calloc((size_t)g->n + 1, sizeof *need);
    mil_arg_entry *args = calloc((size_t)nin + 1, sizeof *args);
    e.blob = milblob_writer_new();
    if (!e.var || !need || !args || !e.blob) { free(need); free(args); return fail_emit(&e, AF_ERR_NOMEM, "out of memory"); }
    af_status st = AF_OK;
    for (int i = 0; i < nout && !st; i++) {
        if (!out[i] || out[i]->g != g) st = ir_fail(AF_ERR_INVALID, "output %d is NULL or from another graph", i);
        else need[out[i]->id] = true;
    }
    for (int i = 0; i < nin && !st; i++) {
        if (!in[i] || in[i]->g != g || in[i]->op != IR_OP_INPUT) st = ir_fail(AF_ERR_INVALID, "input %d is not an af_input or af_parameter of this graph", i);
        for (int j = 0; j < i && !st; j++)
            if (in[j] == in[i]) st = ir_fail(AF_ERR_INVALID, "input '%s' is listed twice", af_tensor_name(in[i]));
    }
    for (int id = g->n - 1; id >= 0 && !st; id--)
        if (need[id])
            for (int k = 0; k < g->t[id]->nsrc; k++) need[g->t[id]->src[k]->id] = true;
    for (int id = 0; id < g->n && !st; id++) {
        af_tensor *t = g->t[id];
        if (!need[id] || t->op != IR_OP_INPUT) continue;
        bool listed = false;
        for (int i = 0; i < nin; i++) listed |= in[i] == t;
        if (!listed) st = ir_fail(AF_ERR_INVALID, "the outputs depend on '%s', which is not in the input list", af_tensor_name(t));
    }
    if (st) { free(need); free(args); return fail_emit(&e, st, "%s", af_error_message()); }

    /* Function arguments, alphabetical by their MIL names. */
    for (int i = 0; i < nin; i++) {
        e.var[in[i]->id] = mil_unique_name(&e, in[i]->name ? in[i]->name : "input");
        args[i] = (mil_arg_entry){ e.var[in[i]->id], in[i] };
    }
    qsort(args, (size_t)nin, sizeof *args, name_cmp);
    for (int k = 0; k < nin && arg_order; k++)
        for (int i = 0; i < nin; i++)
            if (in[i] == args[k].t) arg_order[k] = i;
    mil_sb_printf(&e.text, "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"%s\"}, "
                           "{\"coremlc-version\", \"%s\"}})]\n{\n    func main<ios18>(", AF_MIL_BUILD_MIL, AF_MIL_BUILD_COREMLC);
    for (int i = 0; i < nin; i++) {
        char type[200];
        mil_type_str(type, sizeof type, "fp16", args[i].t->shape);
        mil_sb_printf(&e.text, "%s%s %s", i ? ", " : "", type, args[i].name);
    }
    mil_sb_printf(&e.text, ") {\n");
    free(args);

    /* Ops in a canonical order, depth-first from the outputs with sources in order, and
     * numbered in that order: the text depends on the graph's structure only, not on
     * the order its nodes were created in (C leaves the evaluation order of nested
     * builder calls to the compiler). */
    int *order = malloc(sizeof *order * (size_t)g->n), norder = 0;
    int64_t *stack = malloc(sizeof *stack * (size_t)g->n * 2);
    uint8_t *done = calloc((size_t)g->n, 1);
    if (!order || !stack || !done) {
        free(order); free(stack); free(done); free(need);
        return fail_emit(&e, AF_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nout; i++) {
        int sp = 0;
        if (done[out[i]->id]) continue;
        stack[sp++] = out[i]->id;
        stack[sp++] = 0;
        done[out[i]->id] = 1;
        while (sp > 0) {
            af_tensor *t = g->t[stack[sp - 2]];
            int64_t k = stack[sp - 1];
            if (k < t->nsrc) {
                stack[sp - 1]++;
                int sid = t->src[k]->id;
                if (!done[sid]) { done[sid] = 1; stack[sp++] = sid; stack[sp++] = 0; }
                continue;
            }
            sp -= 2;
            if (!(ir_ops[t->op].flags & OPF_LEAF)) order[norder++] = t->id;
        }
    }
    free(stack);
    free(done);
    for (int oi = 0; oi < norder && !e.st; oi++) {
        int id = order[oi];
        af_tensor *t = g->t[id];
        char base[80];
        snprintf(base, sizeof base, "%s_%d", ir_ops[t->op].name, oi);
        const char *v = mil_unique_name(&e, t->name ? t->name : base);
        if (ir_ops[t->op].flags & OPF_CPU_ONLY) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s is a CPU-only kernel with no MIL form; graphs for engine "
                             "targets are built without af_graph_set_target(g, AF_TARGET_CPU)", ir_ops[t->op].name);
        }
        if (ir_ops[t->op].flags & OPF_BRIDGE) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s is a bridge op with no MIL form (the MIL frontend never "
                             "emits its layer); the engine targets run it as its own net.plist program, cut from the "
                             "MIL program around it", ir_ops[t->op].name);
        }
        if (!mil_lower(&e, t, v) && !e.st) {
            free(need);
            free(order);
            return fail_emit(&e, AF_ERR_UNSUPPORTED, "op %s has no MIL lowering", ir_ops[t->op].name);
        }
        e.var[id] = v;
    }
    free(order);
    free(need);

    /* Returned values: an input, a constant or a repeat gets its own identity. */
    const char **ret = calloc((size_t)nout, sizeof *ret);
    if (!ret) return fail_emit(&e, AF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nout && !e.st; i++) {
        af_tensor *t = out[i];
        const char *v = mil_operand(&e, t);
        bool repeat = ir_ops[t->op].flags & OPF_LEAF;
        for (int j = 0; j < i; j++) repeat |= ret[j] == v;
        if (repeat) {
            char base[200], type[200];
            snprintf(base, sizeof base, "%s_out", v);
            const char *o = mil_unique_name(&e, base);
            mil_type_str(type, sizeof type, "fp16", t->shape);
            mil_kv kv[1] = { { "x", v } };
            mil_stmt(&e, type, o, "identity", 1, kv);
            v = o;
        }
        ret[i] = v;
    }
    mil_sb_printf(&e.text, "        } -> (");
    for (int i = 0; i < nout; i++) mil_sb_printf(&e.text, "%s%s", i ? ", " : "", ret[i]);
    mil_sb_printf(&e.text, ");\n}\n");
    free(ret);
    if (e.st || e.text.oom) return fail_emit(&e, e.st ? e.st : AF_ERR_NOMEM, "%s", e.st == AF_ERR_INVALID ? "internal: a source was not emitted before its user" : "out of memory");
    *text = e.text.s;
    *len = e.text.len;
    *blob = e.blob;
    e.text.s = NULL;
    e.blob = NULL;
    emitter_free(&e);
    return AF_OK;
}

/* ---------------------------------------------------------------- files */

/* mkdir -p */
static af_status make_dir(const char *path) {
    char *p = ir_strdup(path);
    if (!p) return ir_fail(AF_ERR_NOMEM, "af_mil_emit: out of memory");
    for (char *q = p + 1;; q++) {
        if (*q && *q != '/') continue;
        char c = *q;
        *q = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            af_status st = ir_fail(AF_ERR_IO, "af_mil_emit: cannot create directory %s: %s", p, strerror(errno));
            free(p);
            return st;
        }
        *q = c;
        if (!c) break;
    }
    free(p);
    return AF_OK;
}

af_status af_mil_emit(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out, const char *dir) {
    if (!dir || !*dir) return ir_fail(AF_ERR_INVALID, "af_mil_emit: dir is NULL or empty");
    char *text;
    size_t len;
    milblob_writer *w;
    af_status st = mil_emit_mem(g, nin, in, nout, out, &text, &len, &w, NULL);
    if (st) return st;
    size_t n = strlen(dir) + 64;
    char *path = malloc(n);
    if (!path) { free(text); milblob_writer_free(w); return ir_fail(AF_ERR_NOMEM, "af_mil_emit: out of memory"); }
    st = make_dir(dir);
    if (!st) {
        snprintf(path, n, "%s/weights", dir);
        st = make_dir(path);
    }
    if (!st) {
        snprintf(path, n, "%s/weights/%s", dir, AF_MIL_WEIGHT_FILE);
        st = milblob_write_file(w, path);
    }
    if (!st) {
        snprintf(path, n, "%s/model.mil", dir);
        st = ir_write_file(path, text, len, "af_mil_emit"); /* whole or not at all */
    }
    free(path);
    free(text);
    milblob_writer_free(w);
    return st;
}
