/* The MIL reader's front: mil_parse / af_mil_load and function selection; the weight
 * files BLOBFILE constants cite are mil_weights.c's. */
#include "mil/mil_ast.h"
#include "ir/file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

af_status mil_parse(const char *text, size_t len, const mil_read_opts *opts, mil_module *m) {
    if (!m) return ir_fail(AF_ERR_INVALID, "mil_parse: module is NULL");
    memset(m, 0, sizeof *m);
    if (!text && len) return ir_fail(AF_ERR_INVALID, "mil_parse: text is NULL");
    const char *src = opts && opts->source_name ? opts->source_name : "<mil>";
    if (len > AF_MIL_MAX_TEXT) return ir_fail(AF_ERR_UNSUPPORTED, "%s: the text is larger than %zu bytes", src, AF_MIL_MAX_TEXT);
    mil_arena arena = { 0 };
    mil_diag diag = { .source = src };
    mil_program prog;
    mil_mapper M = { .arena = &arena, .diag = &diag, .opts = opts, .mod = m };
    if (mil_parse_program(text ? text : "", len, &arena, &diag, &prog)) {
        const char *want = opts && opts->function ? opts->function : "main";
        for (int i = 0; i < prog.nfuncs && !M.f; i++)
            if (!strcmp(prog.funcs[i].name, want)) M.f = &prog.funcs[i];
        if (!M.f && prog.nfuncs == 1 && !(opts && opts->function)) M.f = &prog.funcs[0];
        if (!M.f) {
            char names[300] = "";
            for (int i = 0; i < prog.nfuncs; i++) {
                size_t k = strlen(names);
                if (k + 4 >= sizeof names) break;
                snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", prog.funcs[i].name);
            }
            mil_error(&diag, AF_ERR_INVALID, 1, 1, "the program has no function '%s' (it has: %s)%s", want,
                      prog.nfuncs ? names : "none", opts && opts->function ? "" : "; choose one by name");
        } else if (!(M.g = af_graph_new())) mil_error(&diag, AF_ERR_NOMEM, 1, 1, "out of memory");
        else mil_map_function(&M);
    }
    if (!diag.st && M.nguards) { /* the guards live as long as the graph */
        mil_index_guard *gs = ir_graph_own(M.g, malloc(sizeof *gs * (size_t)M.nguards));
        if (!gs) mil_error(&diag, AF_ERR_NOMEM, 1, 1, "out of memory");
        else memcpy(gs, M.guards, sizeof *gs * (size_t)M.nguards);
        m->guards = gs;
        m->nguards = gs ? M.nguards : 0;
    }
    free(M.guards);
    mil_blobs_free(&M);
    free(M.files);
    mil_arena_free(&arena);
    if (diag.st) {
        af_graph_free(M.g);
        memset(m, 0, sizeof *m);
        return ir_fail(diag.st, "%s", diag.msg);
    }
    m->g = M.g;
    return AF_OK;
}

bool mil_index_bad(const mil_index_guard *gd, const float *v, char *why, size_t n) {
    int64_t count = af_shape_count(gd->idx->shape), d = gd->extent, lo = gd->negative ? -d : 0;
    for (int64_t i = 0; i < count; i++)
        if (!(v[i] >= (float)lo && v[i] < (float)d) || v[i] != (float)(int64_t)v[i]) { /* NaN fails too */
            snprintf(why, n, "index %g (element %lld of the indices) is outside %lld..%lld, the axis of %lld entries%s",
                     (double)v[i], (long long)i, (long long)lo, (long long)(d - 1), (long long)d,
                     gd->negative ? " counted from either end" : "");
            return true;
        }
    return false;
}

af_status mil_check_indices(const char *source, const mil_index_guard *gd, const float *v) {
    char why[300];
    if (!mil_index_bad(gd, v, why, sizeof why)) return AF_OK;
    return ir_fail(AF_ERR_INVALID, "%s:%d:%d: %s: %s", source ? source : "<mil>", gd->line, gd->col, gd->op, why);
}

af_status mil_load_file(const char *mil_path, const char *weights_dir, const char *function, mil_module *m) {
    memset(m, 0, sizeof *m);
    uint64_t size = 0;
    FILE *f = ir_fopen_regular(mil_path, "MIL file", AF_MIL_MAX_TEXT, &size);
    if (!f) return AF_ERR_IO;
    size_t n = (size_t)size;
    char *text = malloc(n + 1);
    if (!text) { fclose(f); return ir_fail(AF_ERR_NOMEM, "MIL file %s: out of memory", mil_path); }
    bool err = fread(text, 1, n, f) != n;
    fclose(f);
    if (err) { free(text); return ir_fail(AF_ERR_IO, "cannot read MIL file %s (changed while read?)", mil_path); }
    char *dir = malloc(strlen(mil_path) + 2);
    if (!dir) { free(text); return ir_fail(AF_ERR_NOMEM, "MIL file %s: out of memory", mil_path); }
    strcpy(dir, mil_path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    mil_read_opts o = { .source_name = mil_path, .model_dir = dir, .weights_dir = weights_dir, .function = function };
    af_status st = mil_parse(text, n, &o, m);
    free(text);
    free(dir);
    return st;
}

af_status af_mil_load(const char *mil_path, const char *weights_dir, af_graph **g, int *nin, af_tensor ***in,
                      int *nout, af_tensor ***out) {
    /* Cleared first so a failure never leaves the caller a stale graph or array. */
    if (g) *g = NULL;
    if (nin) *nin = 0;
    if (in) *in = NULL;
    if (nout) *nout = 0;
    if (out) *out = NULL;
    if (!mil_path || !g) return ir_fail(AF_ERR_INVALID, "af_mil_load: mil_path or g is NULL");
    mil_module m;
    af_status st = mil_load_file(mil_path, weights_dir, NULL, &m);
    if (st) return st;
    *g = m.g;
    if (nin) *nin = m.nin;
    if (in) *in = m.in;
    if (nout) *nout = m.nout;
    if (out) *out = m.out;
    return AF_OK;
}

af_status mil_roundtrip(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                           mil_module *m) {
    if (!m) return ir_fail(AF_ERR_INVALID, "mil_roundtrip: module is NULL");
    memset(m, 0, sizeof *m);
    char *text;
    size_t len, nb;
    milblob_writer *w;
    int *order = malloc(sizeof *order * (size_t)(nin > 0 ? nin : 1));
    if (!order) return ir_fail(AF_ERR_NOMEM, "mil_roundtrip: out of memory");
    af_status st = mil_emit_mem(g, nin, in, nout, out, &text, &len, &w, order);
    if (st) { free(order); return st; }
    mil_blobsrc blob = { AF_MIL_WEIGHT_PATH, milblob_bytes(w, &nb), 0 };
    blob.n = nb;
    mil_read_opts o = { .source_name = "<roundtrip>", .nblobs = 1, .blobs = &blob };
    st = mil_parse(text, len, &o, m);
    if (!st && (m->nin != nin || m->nout != nout)) {
        af_graph_free(m->g);
        memset(m, 0, sizeof *m);
        st = ir_fail(AF_ERR_INVALID, "mil_roundtrip: the program came back with other arguments or results");
    }
    if (!st) { /* MIL order (alphabetical) back to the caller's order */
        af_tensor **t = ir_graph_own(m->g, calloc((size_t)nin + 1, sizeof *t));
        char **nm = ir_graph_own(m->g, calloc((size_t)nin + 1, sizeof *nm));
        if (!t || !nm) st = ir_fail(AF_ERR_NOMEM, "mil_roundtrip: out of memory");
        for (int k = 0; !st && k < nin; k++) {
            t[order[k]] = m->in[k];
            nm[order[k]] = m->in_names[k];
        }
        if (!st) { m->in = t; m->in_names = nm; }
        else { af_graph_free(m->g); memset(m, 0, sizeof *m); }
    }
    free(order);
    free(text);
    milblob_writer_free(w);
    return st;
}
