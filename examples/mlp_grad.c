/* Builds a two-layer MLP, differentiates a cross-entropy loss with af_backward, runs
 * the gradient program on the CPU and prints each gradient's norm. */
#include <aneforge.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    enum { B = 4, D = 8, H = 16, C = 3 };
    float w1[H * D], w2[C * H], x[B * D], y[B * C] = { 0 };
    for (int i = 0; i < H * D; i++) w1[i] = 0.1f * (float)((i * 37) % 11 - 5);
    for (int i = 0; i < C * H; i++) w2[i] = 0.1f * (float)((i * 17) % 7 - 3);
    for (int i = 0; i < B * D; i++) x[i] = (float)(i % 5) / 5.0f;
    for (int b = 0; b < B; b++) y[b * C + b % C] = 1.0f;

    af_graph *g = af_graph_new();
    af_tensor *xin = af_input(g, "x", AF_F32, AF_SHAPE(B, D));
    af_tensor *yin = af_input(g, "y", AF_F32, AF_SHAPE(B, C));
    af_tensor *p[4] = {
        af_parameter(g, "w1", AF_SHAPE(H, D), w1), af_parameter(g, "b1", AF_SHAPE(H), NULL),
        af_parameter(g, "w2", AF_SHAPE(C, H), w2), af_parameter(g, "b2", AF_SHAPE(C), NULL),
    };
    af_tensor *logits = af_linear(af_relu(af_linear(xin, p[0], p[1])), p[2], p[3]);
    af_loss *loss = af_softmax_cross_entropy(logits, yin);

    af_tensor *grads[4];
    if (af_backward(loss, 4, p, grads, NULL) != AF_OK) {
        fprintf(stderr, "backward: %s\n", af_error_message());
        return 1;
    }
    af_tensor *in[6] = { xin, yin, p[0], p[1], p[2], p[3] };
    af_tensor *out[5] = { af_loss_value(loss), grads[0], grads[1], grads[2], grads[3] };
    af_model *m = af_compile(g, 6, in, 5, out, NULL);
    if (!m) {
        fprintf(stderr, "compile: %s\n", af_error_message());
        return 1;
    }
    float lv, g0[H * D], g1[H], g2[C * H], g3[C];
    af_buffer ib[6] = { AF_BUF_F32(x, B * D), AF_BUF_F32(y, B * C), AF_BUF_F32(w1, H * D),
                        AF_BUF_F32(af_tensor_value(p[1]), H), AF_BUF_F32(w2, C * H), AF_BUF_F32(af_tensor_value(p[3]), C) };
    af_buffer ob[5] = { AF_BUF_F32(&lv, 1), AF_BUF_F32(g0, H * D), AF_BUF_F32(g1, H), AF_BUF_F32(g2, C * H), AF_BUF_F32(g3, C) };
    if (af_run(m, ib, ob) != AF_OK) {
        fprintf(stderr, "run: %s\n", af_error_message());
        return 1;
    }
    const float *gv[4] = { g0, g1, g2, g3 };
    printf("loss %.6f\n", lv);
    for (int i = 0; i < 4; i++) {
        double s = 0;
        for (int64_t j = 0; j < af_shape_count(af_tensor_shape(p[i])); j++) s += (double)gv[i][j] * gv[i][j];
        printf("|d loss / d %s| = %.6f\n", af_tensor_name(p[i]), sqrt(s));
    }
    af_model_free(m);
    af_graph_free(g);
    return 0;
}
