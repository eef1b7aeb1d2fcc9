/* aneforge demo: a small two-layer network built, compiled and run on the CPU. */
#include "cli.h"
#include "aneforge.h"

#include <stdio.h>
#include <string.h>

int cmd_demo(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: aneforge demo\n\nBuilds y = softmax(relu(x W1^T) W2^T) for a batch of 4, runs it in fp32 and in\nfp16-storage mode, and prints both.\n");
        return 0;
    }
    enum { B = 4, D = 8, H = 16, C = 3 };
    float w1[H * D], w2[C * H], x[B * D];
    for (int i = 0; i < H * D; i++) w1[i] = (float)((i * 37 % 17) - 8) / 16.0f;
    for (int i = 0; i < C * H; i++) w2[i] = (float)((i * 11 % 13) - 6) / 8.0f;
    for (int i = 0; i < B * D; i++) x[i] = (float)(i % 7) / 7.0f;
    af_graph *g = af_graph_new();
    af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(B, D));
    af_tensor *h = af_relu(af_matmul_w(in, af_const(g, "w1", AF_SHAPE(H, D), w1)));
    af_tensor *y = af_softmax(af_matmul_w(h, af_const(g, "w2", AF_SHAPE(C, H), w2)), -1);
    for (int p = 0; p < 2; p++) {
        af_compile_opts o = { .precision = p ? AF_PRECISION_FP16 : AF_PRECISION_FP32 };
        af_model *m = af_compile(g, 1, &in, 1, &y, &o);
        if (!m) {
            fprintf(stderr, "aneforge demo: %s\n", af_error_message());
            af_graph_free(g);
            return 1;
        }
        float out[B * C];
        af_buffer ib = AF_BUF_F32(x, B * D), ob = AF_BUF_F32(out, B * C);
        if (af_run(m, &ib, &ob)) {
            fprintf(stderr, "aneforge demo: %s\n", af_error_message());
            af_model_free(m);
            af_graph_free(g);
            return 1;
        }
        printf("%s probabilities:\n", p ? "fp16" : "fp32");
        for (int b = 0; b < B; b++) printf("  %.6f %.6f %.6f\n", out[b * C], out[b * C + 1], out[b * C + 2]);
        af_model_free(m);
    }
    af_graph_free(g);
    return 0;
}
