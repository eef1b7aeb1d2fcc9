/* Writes the seed corpora of the data and checkpoint fuzz targets (a few valid files of
 * each form, made by the library's own writers where it has one, and a few near misses):
 *
 *   cc -Iinclude -Isrc fuzz/gen_seeds.c build/libaneforge.a -lopenblas -lm -lpthread -o gen_seeds
 *   ./gen_seeds tests/corpus        (writes idx/, cifar/, npy/, ckpt/, trainer_load/ under it)
 * (-lopenblas only when the library was built with it). The other files in those
 * directories are inputs the fuzzers found, merged in with libFuzzer's -merge=1. */
#define _POSIX_C_SOURCE 200809L
#include "train/ckpt.h"
#include "aneforge_data.h"
#include "train/trainer_io.h"
#include "fuzz_trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;

static void put(const char *dir, const char *name, const void *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) { perror(path); exit(1); }
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    uint8_t *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    remove(path);
    return b;
}

static void idx_seeds(void) {
    uint8_t lab[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 3, 1, 4, 1, 5};
    put("idx", "labels5.idx1", lab, sizeof lab);
    uint8_t img[16 + 18] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3};
    for (int i = 0; i < 18; i++) img[16 + i] = (uint8_t)(i * 14);
    put("idx", "images2x3x3.idx3", img, sizeof img);
    put("idx", "truncated.idx3", img, sizeof img - 1);
    const uint8_t gz[4] = {0x1f, 0x8b, 8, 0};
    put("idx", "gzip.idx1", gz, sizeof gz);
}

static void cifar_seeds(void) {
    enum { REC = 3073 };
    static uint8_t b[2 * REC];
    for (int i = 0; i < 2 * REC; i++) b[i] = (uint8_t)(i * 7 + 3);
    b[0] = 6, b[REC] = 9;
    put("cifar", "one_record.bin", b, REC);
    put("cifar", "two_records.bin", b, 2 * REC);
    put("cifar", "short.bin", b, REC - 1);
    b[REC] = 10;
    put("cifar", "bad_label.bin", b, 2 * REC);
}

static void npy_raw(const char *name, int major, const char *dict, const void *data, size_t n) {
    uint8_t b[512];
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major, b[7] = 0, b[8] = (uint8_t)hl, b[9] = 0;
    if (major == 2) b[10] = b[11] = 0;
    memcpy(b + pre, dict, hl);
    memcpy(b + pre + hl, data, n);
    put("npy", name, b, pre + hl + n);
}

static void npy_seeds(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/npy", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/npy/f4_2x3.npy", root);
    const float v[6] = {1, -2, 0.5f, 3e38f, -0.0f, 1e-40f};
    if (af_npy_write(path, v, 2, (const int64_t[]){2, 3})) { fprintf(stderr, "%s\n", af_error_message()); exit(1); }
    const uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7c00}; /* 1, -2, smallest subnormal, inf */
    npy_raw("f2_4.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }   \n", h, sizeof h);
    npy_raw("v2_scalar.npy", 2, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": ()}\n", v, 4);
    npy_raw("empty_0x3.npy", 1, "{'shape': (0, 3L), 'fortran_order': False, 'descr': '<f4'}\n", "", 0);
    npy_raw("fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", v, 8);
    /* af_npy_read_typed's kinds (fuzz_npy checks them too) */
    const uint8_t ib[16] = {0x80, 0xff, 0xff, 0x7f, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xe0, 0xff};
    npy_raw("i4_2x2.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }\n", ib, 16);
    npy_raw("b1_3.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n", (const uint8_t[]){1, 0, 1}, 3);
    npy_raw("u1_4.npy", 1, "{'descr': '<u1', 'fortran_order': False, 'shape': (4,), }\n", ib, 4);
    npy_raw("i8_2.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", ib, 16);
    npy_raw("f8_1.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", ib + 8, 8);
    npy_raw("u2_rank7.npy", 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 2), }\n", ib, 4);
}

/* Saves c and returns the file's bytes. */
static uint8_t *ckpt_bytes(const ckpt *c, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.gen_seed.ckpt", root);
    if (ckpt_save(c, path)) { fprintf(stderr, "%s\n", af_error_message()); exit(1); }
    return slurp(path, n);
}

static void ckpt_seeds(void) {
    ckpt *c = ckpt_new();
    size_t n;
    uint8_t *b = ckpt_bytes(c, &n);
    put("ckpt", "empty.ckpt", b, n);
    free(b);
    const float w[3] = {1, 2, 3};
    ckpt_put_i64(c, "step", 42);
    ckpt_put_str(c, "config", "mlp");
    ckpt_put(c, "param/w", w, sizeof w);
    ckpt_put(c, "e", NULL, 0);
    b = ckpt_bytes(c, &n);
    put("ckpt", "four_records.ckpt", b, n);
    b[8] = 2; /* a newer version: same checksum rules, "written by format version 2" */
    put("ckpt", "version2.ckpt", b, n);
    free(b);
    ckpt_free(c);
}

static void trainer_seeds(void) {
    for (int which = 0; which < FT_TRAINERS; which++) {
        af_trainer *t = ft_make_trainer(which);
        ckpt *c = ckpt_new();
        if (!t || !c || tr_export(t, c)) { fprintf(stderr, "%s\n", af_error_message()); exit(1); }
        size_t n;
        uint8_t *b = ckpt_bytes(c, &n), *f = malloc(n + 1);
        f[0] = (uint8_t)which; /* container form */
        memcpy(f + 1, b, n);
        char name[64];
        snprintf(name, sizeof name, "container_%s.bin", which ? "resident" : "host");
        put("trainer_load", name, f, n + 1);
        /* The same records in the compact form. */
        uint8_t *r = malloc(n + 1 + 4 * (size_t)ckpt_count(c)), *q = r;
        *q++ = (uint8_t)(which | 2);
        for (int64_t i = 0; i < ckpt_count(c); i++) {
            const char *nm = ckpt_name(c, i);
            int64_t bytes;
            const void *p = ckpt_get(c, nm, &bytes);
            *q++ = (uint8_t)strlen(nm);
            memcpy(q, nm, strlen(nm)), q += strlen(nm);
            *q++ = (uint8_t)bytes, *q++ = (uint8_t)(bytes >> 8);
            memcpy(q, p, (size_t)bytes), q += bytes;
        }
        snprintf(name, sizeof name, "records_%s.bin", which ? "resident" : "host");
        put("trainer_load", name, r, (size_t)(q - r));
        free(b), free(f), free(r);
        ckpt_free(c);
        af_trainer_free(t);
    }
}

int main(int argc, char **argv) {
    root = argc > 1 ? argv[1] : "tests/corpus";
    idx_seeds();
    cifar_seeds();
    npy_seeds();
    ckpt_seeds();
    trainer_seeds();
    return 0;
}
