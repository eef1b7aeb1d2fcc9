/* The package folder: af_coreml_export writes it (built in a temporary folder beside
 * the target, then renamed into place), af_coreml_load reads it. */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include "coreml/coreml.h"
#include "mil/mil.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* The package's folders and files under root, removed again on failure (deepest first). */
static const char *const dirs[] = { COREML_DATA, COREML_DATA "/" COREML_ITEM_DIR, COREML_DATA "/" COREML_ITEM_DIR "/weights" };
static const char *const files[] = { "Manifest.json", COREML_DATA "/" COREML_ITEM_DIR "/model.mlmodel",
                                     COREML_DATA "/" COREML_ITEM_DIR "/weights/" AF_MIL_WEIGHT_FILE };

static void remove_tree(const char *root) {
    for (int i = 2; i >= 0; i--) {
        char *p = join(root, files[i]);
        if (p) remove(p);
        free(p);
    }
    for (int i = 2; i >= 0; i--) {
        char *p = join(root, dirs[i]);
        if (p) rmdir(p);
        free(p);
    }
    rmdir(root);
}

static af_status write_package(const char *tmp, const pb_buf *model, const pb_buf *manifest, const milblob_writer *w) {
    for (int i = 0; i < 3; i++) {
        char *p = join(tmp, dirs[i]);
        if (!p) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
        int bad = mkdir(p, 0777) && errno != EEXIST;
        af_status st = bad ? ir_fail(AF_ERR_IO, "af_coreml_export: cannot create %s: %s", p, strerror(errno)) : AF_OK;
        free(p);
        if (st) return st;
    }
    size_t nb;
    const uint8_t *blob = milblob_bytes(w, &nb);
    const void *data[3] = { manifest->p, model->p, blob };
    size_t len[3] = { manifest->n, model->n, nb };
    for (int i = 0; i < 3; i++) {
        char *p = join(tmp, files[i]);
        if (!p) return ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
        af_status st = ir_write_file(p, data[i], len[i], "af_coreml_export");
        free(p);
        if (st) return st;
    }
    return AF_OK;
}

af_status coreml_write_package(const char *path, const pb_buf *model, const milblob_writer *w) {
    pb_buf manifest = { 0 };
    af_status st = coreml_manifest_write(model, &manifest);
    char *tmp = st ? NULL : malloc(strlen(path) + 16);
    if (!st && !tmp) st = ir_fail(AF_ERR_NOMEM, "af_coreml_export: out of memory");
    if (!st) {
        sprintf(tmp, "%s.part-XXXXXX", path);
        if (!mkdtemp(tmp)) {
            st = ir_fail(AF_ERR_IO, "af_coreml_export: cannot create a folder beside %s: %s", path, strerror(errno));
            free(tmp);
            tmp = NULL;
        }
    }
    if (!st) st = write_package(tmp, model, &manifest, w);
    if (!st && rename(tmp, path))
        st = ir_fail(AF_ERR_IO, "af_coreml_export: cannot rename the package to %s: %s", path, strerror(errno));
    if (st && tmp) remove_tree(tmp);
    if (!st) chmod(path, 0755); /* mkdtemp made it 0700 */
    free(tmp);
    pb_free(&manifest);
    return st;
}

af_status af_coreml_export(af_graph *g, int nin, af_tensor *const *in, int nout, af_tensor *const *out,
                           const af_coreml_opts *o, const char *path) {
    if (!path || !*path) return ir_fail(AF_ERR_INVALID, "af_coreml_export: path is NULL or empty");
    struct stat sb;
    if (!stat(path, &sb))
        return ir_fail(AF_ERR_IO, "af_coreml_export: %s already exists; remove it or choose another path", path);
    char *text;
    size_t len;
    milblob_writer *w;
    af_status st = mil_emit_mem(g, nin, in, nout, out, &text, &len, &w, NULL);
    if (st) return st;
    pb_buf model;
    milblob_writer *w32;
    st = coreml_encode(text, len, o, g, w, &w32, &model);
    free(text);
    if (!st) st = coreml_write_package(path, &model, w32 ? w32 : w);
    pb_free(&model);
    milblob_writer_free(w);
    milblob_writer_free(w32);
    return st;
}

/* The whole of a regular file of at most max bytes, NUL-terminated, in *out. */
static af_status slurp(const char *path, const char *what, uint64_t max, char **out, size_t *n) {
    uint64_t size = 0;
    *out = NULL;
    FILE *f = ir_fopen_regular(path, what, max, &size);
    if (!f) return AF_ERR_IO; /* the message names the file and why */
    af_status st = AF_OK;
    char *p = malloc((size_t)size + 1);
    if (!p) st = ir_fail(AF_ERR_NOMEM, "%s %s: out of memory", what, path);
    else if (fread(p, 1, (size_t)size, f) != (size_t)size) {
        free(p);
        p = NULL;
        st = ir_fail(AF_ERR_IO, "cannot read %s %s (changed while read?)", what, path);
    } else p[size] = 0;
    fclose(f);
    *n = (size_t)size;
    *out = p;
    return st;
}

/* The model file a package (or a bare model file) names, malloc'd in *file. */
static af_status model_file(const char *path, char **file) {
    struct stat sb;
    *file = NULL;
    if (stat(path, &sb)) return ir_fail(AF_ERR_IO, "af_coreml_load: cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return (*file = ir_strdup(path)) ? AF_OK : ir_fail(AF_ERR_NOMEM, "af_coreml_load: out of memory");
    char *mpath = join(path, "Manifest.json"), *json = NULL, rel[1024];
    size_t n;
    af_status st = mpath ? slurp(mpath, "Core ML manifest", COREML_MAX_MANIFEST, &json, &n) : ir_fail(AF_ERR_NOMEM, "af_coreml_load: out of memory");
    if (!st) st = coreml_manifest_root(json, n, mpath, rel, sizeof rel);
    if (!st) {
        bool unsafe = rel[0] == '/' || !rel[0] || strchr(rel, '\\');
        for (const char *p = rel; !unsafe && *p; p++)
            if (p[0] == '.' && p[1] == '.' && (p == rel || p[-1] == '/') && (p[2] == '/' || !p[2])) unsafe = true;
        if (unsafe) st = ir_fail(AF_ERR_CORRUPT, "%s: the root model path \"%s\" leaves the package", mpath, rel);
        else {
            char *data = join(path, COREML_DATA);
            *file = data ? join(data, rel) : NULL;
            free(data);
            if (!*file) st = ir_fail(AF_ERR_NOMEM, "af_coreml_load: out of memory");
        }
    }
    free(json);
    free(mpath);
    return st;
}

af_status af_coreml_load(const char *path, af_graph **g, int *nin, af_tensor ***in, int *nout, af_tensor ***out) {
    if (g) *g = NULL;
    if (nin) *nin = 0;
    if (in) *in = NULL;
    if (nout) *nout = 0;
    if (out) *out = NULL;
    if (!path || !g) return ir_fail(AF_ERR_INVALID, "af_coreml_load: path or g is NULL");
    mil_module m;
    af_status st = coreml_load_module(path, NULL, &m);
    if (st) return st;
    *g = m.g;
    if (nin) *nin = m.nin;
    if (in) *in = m.in;
    if (nout) *nout = m.nout;
    if (out) *out = m.out;
    return AF_OK;
}

af_status af_coreml_open(const char *path, const char *function, af_mil_program **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_coreml_open: out is NULL");
    *out = NULL;
    if (!path) return ir_fail(AF_ERR_INVALID, "af_coreml_open: path is NULL");
    mil_module m;
    af_status st = coreml_load_module(path, function, &m);
    return st ? st : mil_program_wrap(&m, path, out);
}

af_status coreml_load_module(const char *path, const char *function, mil_module *m) {
    memset(m, 0, sizeof *m);
    char *file, *bytes = NULL;
    af_status st = model_file(path, &file);
    if (st) return st;
    size_t n;
    if ((st = slurp(file, "Core ML model", COREML_MAX_MODEL, &bytes, &n))) { free(file); return st; }
    pb_buf text;
    st = coreml_decode((const uint8_t *)bytes, n, file, &text);
    free(bytes);
    if (!st) {
        char *dir = ir_strdup(file), *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash) *slash = 0;
        size_t sn = strlen(file) + 40;
        char *src = malloc(sn);
        if (!dir || !src) st = ir_fail(AF_ERR_NOMEM, "af_coreml_load: out of memory");
        else {
            snprintf(src, sn, "%s (as MIL)", file);
            mil_read_opts o = { .source_name = src, .model_dir = slash ? dir : ".", .function = function };
            st = mil_parse((const char *)text.p, text.n, &o, m);
        }
        free(dir);
        free(src);
    }
    pb_free(&text);
    free(file);
    return st;
}
