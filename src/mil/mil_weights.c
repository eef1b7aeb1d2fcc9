/* The weight files BLOBFILE constants cite, opened once per path per program: in memory
 * first (mil_read_opts.blobs), then @model_path on disk, never outside the model folder
 * (neither by "..", nor by a symlink). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "mil/mil_ast.h"
#include "ir/file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mil_blobfile {
    char *path;
    milblob *b;
};

static bool unsafe_path(const char *rest) {
    if (!*rest || rest[0] == '/' || strchr(rest, '\\')) return true;
    for (const char *p = rest; *p; p++)
        if (p[0] == '.' && p[1] == '.' && (p == rest || p[-1] == '/') && (p[2] == '/' || !p[2])) return true;
    return false;
}

static bool open_blob(mil_mapper *M, const char *path, milblob **out, int line, int col) {
    const mil_read_opts *o = M->opts;
    for (int i = 0; o && i < o->nblobs; i++) {
        if (!o->blobs[i].path || strcmp(o->blobs[i].path, path)) continue;
        if (milblob_open_follow(o->blobs[i].bytes, o->blobs[i].n, out) != AF_OK)
            return mil_error(M->diag, AF_ERR_CORRUPT, line, col, "weight file %s: %s", path, af_error_message());
        return true;
    }
    const char *prefix = "@model_path/";
    if (strncmp(path, prefix, strlen(prefix)))
        return mil_error(M->diag, AF_ERR_UNSUPPORTED, line, col, "BLOBFILE path \"%s\" does not start with @model_path/", path);
    const char *rest = path + strlen(prefix);
    if (unsafe_path(rest)) return mil_error(M->diag, AF_ERR_INVALID, line, col, "BLOBFILE path \"%s\" leaves the model directory", path);
    const char *dir = NULL;
    if (!strncmp(rest, "weights/", 8) && o && o->weights_dir) { dir = o->weights_dir; rest += 8; }
    else if (o && o->model_dir) dir = o->model_dir;
    if (!dir) return mil_error(M->diag, AF_ERR_IO, line, col, "no weight file was given for \"%s\"", path);
    size_t n = strlen(dir) + strlen(rest) + 2;
    char *file = malloc(n);
    if (!file) return mil_error(M->diag, AF_ERR_NOMEM, line, col, "out of memory");
    snprintf(file, n, "%s/%s", dir, rest);
    /* The text's path stays inside the folder (unsafe_path); a symlink in it must too. */
    char *real_dir = realpath(dir, NULL), *real_file = real_dir ? realpath(file, NULL) : NULL;
    size_t dl = real_dir ? strlen(real_dir) : 0;
    bool inside = real_file && !strncmp(real_file, real_dir, dl) &&
                  (real_file[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
    if (real_dir && real_file && !inside) {
        mil_error(M->diag, AF_ERR_INVALID, line, col,
                  "weight file for \"%s\": %s resolves to %s, outside the folder %s (a symlink?); copy the "
                  "weights into the model folder", path, file, real_file, real_dir);
        free(real_dir), free(real_file), free(file);
        return false;
    }
    free(real_dir), free(real_file);
    af_status st = milblob_read_file_follow(file, out);
    free(file);
    if (st) return mil_error(M->diag, st, line, col, "weight file for \"%s\": %s", path, af_error_message());
    return true;
}

bool mil_blob_get(mil_mapper *M, const char *path, uint64_t offset, milblob_dtype *dt, const void **data,
                  int64_t *nbytes, int line, int col) {
    milblob *b = NULL;
    for (int i = 0; i < M->nfiles && !b; i++)
        if (!strcmp(M->files[i].path, path)) b = M->files[i].b;
    if (!b) {
        if (M->nfiles == M->capfiles) {
            int cap = M->capfiles ? M->capfiles * 2 : 4;
            struct mil_blobfile *nf = realloc(M->files, sizeof *nf * (size_t)cap);
            if (!nf) return mil_error(M->diag, AF_ERR_NOMEM, line, col, "out of memory");
            M->files = nf;
            M->capfiles = cap;
        }
        if (!open_blob(M, path, &b, line, col)) return false;
        M->files[M->nfiles++] = (struct mil_blobfile){ mil_strndup(M->arena, path, strlen(path)), b };
        if (!M->files[M->nfiles - 1].path) return mil_error(M->diag, AF_ERR_NOMEM, line, col, "out of memory");
    }
    if (milblob_get(b, offset, dt, data, nbytes) != AF_OK)
        return mil_error(M->diag, AF_ERR_CORRUPT, line, col, "no weight record at offset %llu in %s", (unsigned long long)offset, path);
    return true;
}

void mil_blobs_free(mil_mapper *M) {
    for (int i = 0; i < M->nfiles; i++) milblob_free(M->files[i].b);
}
