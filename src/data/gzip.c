/* gzip (RFC 1952) decompression through zlib, for the datasets shipped or downloaded
 * compressed. The bytes are untrusted: the output is capped (a 1 KB bomb can claim
 * gigabytes), each member's CRC-32 and length are checked by zlib, concatenated members
 * are joined as gzip(1) does, and anything else after the last member is refused. */
#include "data/data.h"
#include "ir/ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int data_is_gzip(const uint8_t *buf, size_t len) { return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b; }

af_status data_gunzip(const char *path, const uint8_t *in, size_t len, size_t cap, uint8_t **out,
                      size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (cap == SIZE_MAX) cap--; /* the buffer holds cap + 1 */
    if (!data_is_gzip(in, len))
        return ir_fail(AF_ERR_CORRUPT, "%s: not a gzip file (it does not start with 1f 8b)", path);
    /* The last member's trailer holds its size mod 2^32: a first guess for the buffer,
     * never trusted beyond the cap. */
    size_t guess = len >= 18 ? (size_t)in[len - 4] | (size_t)in[len - 3] << 8 | (size_t)in[len - 2] << 16 |
                                   (size_t)in[len - 1] << 24
                             : 0;
    /* deflate expands at most ~1032:1; a larger claim is a lie, so it sizes nothing */
    size_t most = len > SIZE_MAX / 1032 ? SIZE_MAX : len * 1032;
    size_t size = guess > len && guess <= most ? guess : len > SIZE_MAX / 4 ? SIZE_MAX : 4 * len;
    if (size < 4096) size = 4096;
    if (size > cap) size = cap;
    uint8_t *buf = malloc(size + 1); /* + 1: room to notice output past the cap */
    if (!buf) return ir_fail(AF_ERR_NOMEM, "%s: cannot allocate %zu bytes to decompress it", path, size);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        free(buf);
        return ir_fail(AF_ERR_NOMEM, "%s: zlib could not start (inflateInit2)", path);
    }
    size_t used = 0, pos = 0;
    af_status st = AF_OK;
    for (;;) {
        if (used > cap) {
            st = ir_fail(AF_ERR_CORRUPT, "%s: decompresses to more than %zu bytes (the limit for this file): "
                         "not a dataset file, or a damaged one", path, cap);
            break;
        }
        if (used == size + 1) { /* full below the cap: grow */
            size_t nsize = size > cap / 2 ? cap : size * 2;
            uint8_t *nb = realloc(buf, nsize + 1);
            if (!nb) {
                st = ir_fail(AF_ERR_NOMEM, "%s: cannot allocate %zu bytes to decompress it", path, nsize);
                break;
            }
            buf = nb;
            size = nsize;
        }
        /* zlib counts in unsigned int: at most 1 GiB in and out per call */
        size_t in_step = len - pos < (1u << 30) ? len - pos : (1u << 30);
        size_t out_step = size + 1 - used < (1u << 30) ? size + 1 - used : (1u << 30);
        z.next_in = (Bytef *)(in + pos);
        z.avail_in = (uInt)in_step;
        z.next_out = buf + used;
        z.avail_out = (uInt)out_step;
        int r = inflate(&z, Z_NO_FLUSH);
        pos += in_step - z.avail_in;
        used += out_step - z.avail_out;
        if (r == Z_OK) continue;
        if (r == Z_STREAM_END) {
            if (used > cap) continue; /* reported above */
            if (pos == len) break;
            if (!data_is_gzip(in + pos, len - pos)) {
                st = ir_fail(AF_ERR_CORRUPT, "%s: %zu bytes of trailing garbage after the gzip data", path, len - pos);
                break;
            }
            inflateReset(&z); /* another member follows, as `cat a.gz b.gz` makes */
            continue;
        }
        if (r == Z_BUF_ERROR) { /* no progress with room to write: the input ran out */
            st = ir_fail(AF_ERR_CORRUPT, "%s: truncated gzip data (%zu bytes decompressed before it ends)", path, used);
            break;
        }
        if (r == Z_MEM_ERROR) {
            st = ir_fail(AF_ERR_NOMEM, "%s: zlib ran out of memory", path);
            break;
        }
        st = ir_fail(AF_ERR_CORRUPT, "%s: damaged gzip data (zlib: %s)", path, z.msg ? z.msg : "stream error");
        break;
    }
    inflateEnd(&z);
    if (st != AF_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = used;
    return AF_OK;
}
