/* IDX reader (the MNIST / Fashion-MNIST container): a big-endian header
 *   0x00 0x00 <type> <ndims>, then ndims uint32 dims, then prod(dims) elements.
 * Only unsigned bytes (type 0x08) are needed for these datasets. */
#include "data/data.h"
#include "ir/ir.h"

#include <stdlib.h>

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

af_status data_idx_parse(const char *path, const uint8_t *buf, size_t len, int rank, int64_t *dims,
                         const uint8_t **out_data) {
    *out_data = NULL;
    if (rank < 1 || rank > 3) return ir_fail(AF_ERR_INVALID, "%s: IDX rank %d not supported", path, rank);
    if (len == 0)
        return ir_fail(AF_ERR_CORRUPT, "%s: file is empty (expected an IDX file)", path);
    /* data_idx_read decompresses; a gzip image here is one given to the parser alone */
    if (data_is_gzip(buf, len))
        return ir_fail(AF_ERR_CORRUPT, "%s is gzip-compressed: decompress it first", path);
    if (len < 4)
        return ir_fail(AF_ERR_CORRUPT, "%s: truncated header (%zu bytes, need at least 4)", path, len);
    uint32_t magic = be32(buf);
    uint32_t want = 0x00000800u | (uint32_t)rank;
    if ((magic & 0xffff0000u) != 0 || ((magic >> 8) & 0xff) != 0x08)
        return ir_fail(AF_ERR_CORRUPT, "%s: bad magic 0x%08x (expected 0x%08x, an IDX ubyte file)", path,
                       (unsigned)magic, (unsigned)want);
    if (magic != want)
        return ir_fail(AF_ERR_CORRUPT, "%s: has %u dimensions, expected %d (magic 0x%08x, expected 0x%08x)",
                       path, (unsigned)(magic & 0xff), rank, (unsigned)magic, (unsigned)want);
    size_t hdr = 4 + 4 * (size_t)rank;
    if (len < hdr)
        return ir_fail(AF_ERR_CORRUPT, "%s: truncated header (%zu bytes, need %zu)", path, len, hdr);
    /* Each dim is < 2^32, so checking the running product against the payload size
     * before each multiply keeps it from overflowing. */
    for (int i = 0; i < rank; i++)
        if (be32(buf + 4 + 4 * i) == 0)
            return ir_fail(AF_ERR_CORRUPT, "%s: dimension %d is 0", path, i);
    uint64_t payload = (uint64_t)(len - hdr), count = 1;
    for (int i = 0; i < rank; i++) {
        uint32_t d = be32(buf + 4 + 4 * i);
        if (count > payload / d)
            return ir_fail(AF_ERR_CORRUPT, "%s: header dims need more than the %llu data bytes present (truncated?)",
                           path, (unsigned long long)payload);
        count *= d;
        dims[i] = d;
    }
    if (count != payload)
        return ir_fail(AF_ERR_CORRUPT, "%s: header says %llu data bytes but the file holds %llu (%s)", path,
                       (unsigned long long)count, (unsigned long long)payload,
                       count > payload ? "truncated" : "trailing garbage");
    *out_data = buf + hdr;
    return AF_OK;
}

af_status data_idx_read(const char *path, const char *hint, int rank, size_t gz_cap, int64_t *dims,
                        uint8_t **out_buf, const uint8_t **out_data, int *gz) {
    *out_buf = NULL;
    *out_data = NULL;
    if (gz) *gz = 0;
    if (rank < 1 || rank > 3) return ir_fail(AF_ERR_INVALID, "%s: IDX rank %d not supported", path, rank);
    uint8_t *buf;
    size_t len;
    af_status st = data_read_file(path, hint, &buf, &len);
    if (st == AF_OK && data_is_gzip(buf, len)) {
        uint8_t *plain;
        size_t plen;
        st = data_gunzip(path, buf, len, gz_cap, &plain, &plen);
        free(buf);
        buf = st == AF_OK ? plain : NULL;
        len = plen;
        if (gz) *gz = 1;
    }
    if (st == AF_OK) st = data_idx_parse(path, buf, len, rank, dims, out_data);
    if (st != AF_OK) {
        free(buf);
        return st;
    }
    *out_buf = buf;
    return AF_OK;
}
