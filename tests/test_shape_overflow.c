/* Shape inference with attributes near the int / int64 limits: every result is the
 * exact formula (checked in double, which holds these values exactly) or an error that
 * names the attribute; nothing wraps (the old code computed 2 * pad as int, so a pad of
 * 2^31 - 1 became -2 and the conv was accepted with a wrong, smaller output). */
#include "aneforge.h"
#include "support/check.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

static af_shape shp4(int64_t a, int64_t b, int64_t c, int64_t d) { int64_t v[4] = { a, b, c, d }; return af_shape_make(4, v); }

/* The graph's error after building with f, or "" when the build succeeded. */
static const char *conv_err(af_shape xs, af_shape ws, int pad, int stride, int dil, int transpose, af_shape *out) {
    static char msg[600];
    af_graph *g = af_graph_new();
    af_tensor *x = af_input(g, "x", AF_F32, xs), *w = af_input(g, "w", AF_F32, ws);
    int p[2] = { pad, pad }, s[2] = { stride, stride }, d[2] = { dil, dil };
    af_tensor *y = transpose ? af_conv_transpose(x, w, s, p, d) : af_conv(x, w, s, p, d, 1);
    if (y && out) *out = af_tensor_shape(y);
    snprintf(msg, sizeof msg, "%s", y ? "" : af_graph_error(g) ? af_graph_error(g) : "(no message)");
    af_graph_free(g);
    return msg;
}

int main(void) {
    af_shape out;
    /* The reproduction: pad = INT_MAX on a 3x3 conv. */
    const char *e = conv_err(shp4(1, 1, 3, 3), shp4(1, 1, 3, 3), INT_MAX, 1, 1, 0, NULL);
    CHECK(strstr(e, "pad = (2147483647, 2147483647)") && strstr(e, "AF_MAX_ELEMENTS"), "pad INT_MAX: '%s'", e);
    e = conv_err(shp4(1, 1, 3, 3), shp4(1, 1, 3, 3), 1 << 30, 1, 1, 0, NULL);
    CHECK(strstr(e, "pad = (1073741824, 1073741824)"), "pad 2^30: '%s'", e);
    /* A large pad that fits: (H + 2p - k) / s + 1, in double. */
    int pads[] = { 1000, 200000 };
    for (int i = 0; i < 2; i++) {
        memset(&out, 0, sizeof out);
        e = conv_err(shp4(1, 1, 3, 3), shp4(1, 1, 3, 3), pads[i], 7, 1, 0, &out);
        double want = (double)(int64_t)((3.0 + 2.0 * pads[i] - 3.0) / 7.0) + 1;
        CHECK(!*e && out.rank == 4 && (double)out.dim[2] == want && (double)out.dim[3] == want,
              "pad %d: '%s' dim %lld want %.0f", pads[i], e, (long long)out.dim[2], want);
    }
    /* dilation x (kernel - 1) passes int64 (2^31 x 2^33): refused, naming dilation. */
    e = conv_err(shp4(1, 1, 8, 1), shp4(1, 1, (int64_t)1 << 33, 1), 0, 1, INT_MAX, 0, NULL);
    CHECK(strstr(e, "dilation 2147483647") && strstr(e, "exceeds the padded input"), "dilation: '%s'", e);
    /* conv_transpose: (H - 1) x stride passes int64 (2^38 x 2^31). */
    e = conv_err(shp4(1, 1, (int64_t)1 << 38, 1), shp4(1, 1, 1, 1), 0, INT_MAX, 1, 1, NULL);
    CHECK(strstr(e, "stride 2147483647") && strstr(e, "AF_MAX_ELEMENTS"), "conv_transpose stride: '%s'", e);
    e = conv_err(shp4(1, 1, 5, 5), shp4(1, 1, 3, 3), 3, 2, 1, 1, &out);
    CHECK(!*e && out.dim[2] == (5 - 1) * 2 - 2 * 3 + (3 - 1) + 1, "conv_transpose small: '%s' %lld", e, (long long)out.dim[2]);
    e = conv_err(shp4(1, 1, 5, 5), shp4(1, 1, 3, 3), INT_MAX, 2, 1, 1, NULL);
    CHECK(strstr(e, "pad 2147483647 too large"), "conv_transpose pad: '%s'", e);

    /* Pools: 2 * pad in int64, so pad INT_MAX is "more than half the kernel", not -2. */
    {
        af_graph *g = af_graph_new();
        af_tensor *x = af_input(g, "x", AF_F32, shp4(1, 1, 4, 4));
        int k[2] = { 3, 3 }, s[2] = { 1, 1 }, p[2] = { INT_MAX, INT_MAX };
        CHECK(af_max_pool(x, k, s, p) == NULL && strstr(af_graph_error(g), "pad 2147483647 is more than half the kernel 3"),
              "pool: '%s'", af_graph_error(g) ? af_graph_error(g) : "(accepted)");
        af_graph_free(g);
    }
    /* slice / split / input_view: begin + size would wrap past INT64_MAX. */
    {
        af_graph *g = af_graph_new();
        int64_t d4[1] = { 4 };
        af_tensor *x = af_input(g, "x", AF_F32, af_shape_make(1, d4));
        int64_t b[1] = { 1 }, sz[1] = { INT64_MAX };
        CHECK(af_slice(x, b, sz) == NULL && strstr(af_graph_error(g), "size 9223372036854775807 from begin 1 overruns axis 0"),
              "slice: '%s'", af_graph_error(g) ? af_graph_error(g) : "(accepted)");
        af_graph_free(g);
        g = af_graph_new();
        x = af_input(g, "x", AF_F32, af_shape_make(1, d4));
        CHECK(af_input_view(x, 2, INT64_MAX) == NULL && strstr(af_graph_error(g), "offset 2 of size 9223372036854775807"),
              "input_view: '%s'", af_graph_error(g) ? af_graph_error(g) : "(accepted)");
        af_graph_free(g);
        g = af_graph_new();
        x = af_input(g, "x", AF_F32, af_shape_make(1, d4));
        int64_t parts[2] = { INT64_MAX - 1, 2 };
        af_tensor *o[2] = { 0 };
        CHECK(af_split(x, 0, 2, parts, o) != AF_OK && af_graph_error(g) && strstr(af_graph_error(g), "sizes[0] = 9223372036854775806 is not in 1..4"),
              "split: %s", af_graph_error(g) ? af_graph_error(g) : "(accepted)");
        af_graph_free(g);
    }
    return check_finish("shape_overflow");
}
