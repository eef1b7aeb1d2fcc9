/* CIFAR-10 binary reader: each file is a run of 3073-byte records, one label byte
 * (0..9) then 3072 pixel bytes as three 32x32 planes (R, G, B), i.e. CHW already. */
#include "data/data.h"
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

enum { CIFAR_PIX = 3 * 32 * 32, CIFAR_REC = 1 + CIFAR_PIX };

af_status data_cifar_append(const char *path, const uint8_t *buf, size_t len, uint8_t **pixels,
                            uint8_t **labels, size_t *count) {
    if (len == 0)
        return ir_fail(AF_ERR_CORRUPT, "%s: file is empty (expected CIFAR-10 records of %d bytes)", path, CIFAR_REC);
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b)
        return ir_fail(AF_ERR_CORRUPT, "%s is gzip-compressed: gunzip it first (and untar cifar-10-binary.tar.gz)", path);
    if (len % CIFAR_REC != 0)
        return ir_fail(AF_ERR_CORRUPT, "%s: size %zu is not a whole number of %d-byte records (truncated?)",
                       path, len, CIFAR_REC);
    size_t n = len / CIFAR_REC;
    /* A valid file fits in memory, so n * CIFAR_PIX < len cannot overflow; only the
     * running total across files needs a check. */
    if (*count > (SIZE_MAX / CIFAR_PIX) - n) return ir_fail(AF_ERR_CORRUPT, "%s: total record count overflows", path);
    for (size_t i = 0; i < n; i++)
        if (buf[i * CIFAR_REC] >= 10)
            return ir_fail(AF_ERR_CORRUPT, "%s: record %zu has label %u (must be 0..9)", path, i,
                           (unsigned)buf[i * CIFAR_REC]);
    uint8_t *p = realloc(*pixels, (*count + n) * CIFAR_PIX);
    if (p) *pixels = p;
    uint8_t *l = p ? realloc(*labels, *count + n) : NULL;
    if (l) *labels = l;
    if (!p || !l) return ir_fail(AF_ERR_NOMEM, "%s: out of memory for %zu records", path, *count + n);
    for (size_t i = 0; i < n; i++) {
        l[*count + i] = buf[i * CIFAR_REC];
        memcpy(p + (*count + i) * CIFAR_PIX, buf + i * CIFAR_REC + 1, CIFAR_PIX);
    }
    *count += n;
    return AF_OK;
}

af_status data_cifar_read(int nfiles, const char *const *paths, const char *hint,
                        uint8_t **out_pixels, uint8_t **out_labels, int64_t *out_count) {
    *out_pixels = NULL;
    *out_labels = NULL;
    *out_count = 0;
    if (nfiles < 1 || !paths) return ir_fail(AF_ERR_INVALID, "CIFAR-10: need at least one file (got %d)", nfiles);
    for (int f = 0; f < nfiles; f++)
        if (!paths[f]) return ir_fail(AF_ERR_INVALID, "CIFAR-10: path %d is NULL", f);

    uint8_t *pixels = NULL, *labels = NULL;
    size_t count = 0;
    af_status st = AF_OK;
    for (int f = 0; f < nfiles && st == AF_OK; f++) {
        uint8_t *buf;
        size_t len;
        st = data_read_file(paths[f], hint, &buf, &len);
        if (st != AF_OK) break;
        st = data_cifar_append(paths[f], buf, len, &pixels, &labels, &count);
        free(buf);
    }
    if (st != AF_OK) {
        free(pixels);
        free(labels);
        return st;
    }
    *out_pixels = pixels;
    *out_labels = labels;
    *out_count = (int64_t)count;
    return AF_OK;
}
