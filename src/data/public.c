/* The data layer's helpers as public calls (aneforge_data.h): the file, digest and gzip
 * functions every reader here uses, for applications that read the same way. */
#include "data/data.h"
#include "data/sha256.h"
#include "ir/file.h"
#include "ir/ir.h"

int af_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    if (!path) return ir_fail(AF_ERR_INVALID, "af_open_regular: path is NULL"), -1;
    return ir_open_regular(path, what, max_bytes, size);
}

af_status af_read_file(const char *path, const char *hint, uint8_t **data, size_t *len) {
    if (!data || !len) return ir_fail(AF_ERR_INVALID, "af_read_file: data and len must not be NULL");
    return data_read_file(path, hint, data, len);
}

void *af_write_open(const char *path) {
    if (!path) return ir_fail(AF_ERR_INVALID, "af_write_open: path is NULL"), NULL;
    return ir_open_write(path);
}

af_status af_write_close(void *file, const char *path, int ok) {
    if (!file || !path) return ir_fail(AF_ERR_INVALID, "af_write_close: file and path must not be NULL");
    return ir_close_written(file, path, ok != 0);
}

void af_sha256(const void *data, size_t len, char hex[65]) {
    uint8_t dig[32];
    data_sha256(data, len, dig);
    data_sha256_hex(dig, hex);
}

af_status af_sha256_file(const char *path, char hex[65]) {
    if (!path || !hex) return ir_fail(AF_ERR_INVALID, "af_sha256_file: path and hex must not be NULL");
    return data_sha256_file(path, hex);
}

af_status af_gunzip(const char *path, const uint8_t *in, size_t len, size_t cap, uint8_t **out, size_t *out_len) {
    if (!in || !out || !out_len) return ir_fail(AF_ERR_INVALID, "af_gunzip: in, out and out_len must not be NULL");
    return data_gunzip(path ? path : "gzip data", in, len, cap, out, out_len);
}

af_status af_dataset_file(af_dataset_kind kind, int file, const char **name, const char **sha256) {
    const char *sum = data_idx_sha256(kind, file);
    if (!sum)
        return ir_fail(AF_ERR_INVALID, "af_dataset_file: kind %d file %d: only MNIST and Fashion-MNIST files 0..3 "
                                       "(train images, train labels, test images, test labels) are listed",
                       (int)kind, file);
    if (name) *name = data_idx_names[file];
    if (sha256) *sha256 = sum;
    return AF_OK;
}
