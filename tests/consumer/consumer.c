/* An outside program: only the installed headers and library. It computes
 * y = relu(x W^T + b) for fixed numbers on the CPU and checks it against the same sum
 * done here in double, that the header and the library agree on the version, and that
 * the data and llama headers are installed beside it (a byte-level encode, af_free). */
#include <aneforge.h>
#include <aneforge_data.h>
#include <aneforge_llama.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(af_version(), AF_VERSION) != 0) {
        fprintf(stderr, "header %s but library %s\n", AF_VERSION, af_version());
        return 1;
    }
    enum { B = 3, D = 4, H = 2 };
    float w[H * D], bias[H], x[B * D], y[B * H];
    for (int i = 0; i < H * D; i++) w[i] = (float)(i % 5) * 0.25f - 0.5f;
    for (int i = 0; i < H; i++) bias[i] = 0.1f * (float)(i + 1);
    for (int i = 0; i < B * D; i++) x[i] = (float)(i % 7) - 3.0f;
    af_graph *g = af_graph_new();
    af_tensor *xt = af_input(g, "x", AF_F32, AF_SHAPE(B, D));
    af_tensor *wt = af_parameter(g, "w", AF_SHAPE(H, D), w);
    af_tensor *bt = af_parameter(g, "b", AF_SHAPE(H), bias);
    af_tensor *yt = af_relu(af_linear(xt, wt, bt));
    af_tensor *in[3] = { xt, wt, bt };
    af_model *m = af_compile(g, 3, in, 1, &yt, NULL);
    if (!m) { fprintf(stderr, "compile: %s\n", af_error_message()); return 1; }
    af_buffer ib[3] = { AF_BUF_F32(x, B * D), AF_BUF_F32(w, H * D), AF_BUF_F32(bias, H) };
    af_buffer ob[1] = { AF_BUF_F32(y, B * H) };
    if (af_run(m, ib, ob) != AF_OK) { fprintf(stderr, "run: %s\n", af_error_message()); return 1; }
    int bad = 0;
    for (int r = 0; r < B; r++)
        for (int h = 0; h < H; h++) {
            double s = bias[h];
            for (int d = 0; d < D; d++) s += (double)x[r * D + d] * w[h * D + d];
            if (s < 0) s = 0;
            if (fabs(s - y[r * H + h]) > 1e-5) bad++;
        }
    af_model_free(m);
    af_graph_free(g);
    af_tokenizer *t = af_tokenizer_byte_level();
    int32_t *ids = NULL;
    int64_t n = 0;
    af_llama_config c;
    if (!t || af_tokenizer_encode(t, "ab", 2, AF_ENCODE_NO_PREFIX, &ids, &n) || n != 2 || ids[0] != 'a' + 3 ||
        af_llama_preset("tiny", 259, &c))
        bad++;
    af_free(ids);
    af_tokenizer_free(t);
    printf("consumer (aneforge %s): %s\n", af_version(), bad ? "WRONG" : "ok");
    return bad != 0;
}
