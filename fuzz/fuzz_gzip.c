/* libFuzzer target for the gzip reader (src/data/gzip.c), which reads the compressed
 * datasets: any input is refused cleanly (nothing returned) or decompresses to at most
 * the cap; an accepted output, compressed again by zlib, decompresses back to itself,
 * and goes on through the IDX parser as a loaded dataset file would.
 *
 *   make fuzz   (builds build-fuzz/fuzz_gzip; seeds in tests/corpus/gzip) */
#include "data/data.h"
#include "fuzz_util.h"

#include <string.h>
#include <zlib.h>

enum { CAP = 1 << 20 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *out = (uint8_t *)1;
    size_t len = 1;
    if (data_gunzip("fuzz.gz", data, size, CAP, &out, &len) != AF_OK) {
        REQUIRE(out == NULL && len == 0);
        return 0;
    }
    REQUIRE(out != NULL && len <= CAP && data_is_gzip(data, size));
    volatile unsigned sum = 0;
    for (size_t i = 0; i < len; i++) sum += out[i]; /* every byte is in bounds */
    (void)sum;
    /* again through zlib's compressor: the same bytes come back */
    z_stream z;
    memset(&z, 0, sizeof z);
    REQUIRE(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    size_t zcap = deflateBound(&z, (uLong)len) + 32;
    uint8_t *zb = malloc(zcap), *back = NULL;
    REQUIRE(zb != NULL);
    z.next_in = out, z.avail_in = (uInt)len, z.next_out = zb, z.avail_out = (uInt)zcap;
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t zn = zcap - z.avail_out, blen = 0;
    deflateEnd(&z);
    REQUIRE(data_gunzip("again.gz", zb, zn, len, &back, &blen) == AF_OK);
    REQUIRE(blen == len && (len == 0 || !memcmp(back, out, len)));
    free(back);
    free(zb);
    for (int rank = 1; rank <= 3; rank += 2) {
        int64_t dims[3];
        const uint8_t *payload;
        if (data_idx_parse("fuzz.idx", out, len, rank, dims, &payload) == AF_OK)
            REQUIRE(payload >= out && payload <= out + len);
    }
    free(out);
    return 0;
}
