/* Trains an MLP (784-128-10) or a small CNN on MNIST with the public API only:
 *
 *   aneforge data fetch mnist            # once, into ./data
 *   ./build/example_train_mnist mlp      # or: cnn
 *
 * The model is given to the trainer as code (an af_net): make_params creates the
 * weights, forward builds the output from a batch and the current weights. */
#include <aneforge.h>
#include <aneforge_data.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 42;
static float uniform_pm(float bound) { /* xorshift64*: small and seeded */
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return bound * (2.0f * (float)((rng * 2685821657736338717ULL) >> 40) / (float)(1 << 24) - 1.0f);
}

static af_tensor *dense(af_graph *g, const char *name, int64_t rows, int64_t cols, int64_t fan_in) {
    float *v = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) v[i] = uniform_pm(1.0f / sqrtf((float)fan_in));
    af_tensor *p = af_parameter(g, name, rows == 1 ? AF_SHAPE(cols) : AF_SHAPE(rows, cols), v);
    free(v);
    return p;
}

static int mlp_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx; (void)max;
    p[0] = dense(g, "w1", 128, 784, 784);
    p[1] = dense(g, "b1", 1, 128, 784);
    p[2] = dense(g, "w2", 10, 128, 128);
    p[3] = dense(g, "b2", 1, 10, 128);
    return 4;
}

static af_tensor *mlp_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    af_tensor *flat = af_reshape(x, AF_SHAPE(af_tensor_shape(x).dim[0], 784));
    return af_linear(af_relu(af_linear(flat, w[0], w[1])), w[2], w[3]);
}

static af_tensor *conv_weight(af_graph *g, const char *name, int cout, int cin) {
    float *v = malloc(sizeof(float) * (size_t)(cout * cin * 9));
    for (int i = 0; i < cout * cin * 9; i++) v[i] = uniform_pm(1.0f / sqrtf((float)cin * 9));
    af_tensor *p = af_conv_param(g, name, cout, cin, 3, 3, v); /* PyTorch layout in */
    free(v);
    return p;
}

static int cnn_params(void *ctx, af_graph *g, af_tensor **p, int max) {
    (void)ctx; (void)max;
    p[0] = conv_weight(g, "conv1", 16, 1);
    p[1] = conv_weight(g, "conv2", 32, 16);
    p[2] = dense(g, "fc.w", 10, 32 * 7 * 7, 32 * 7 * 7);
    p[3] = dense(g, "fc.b", 1, 10, 32 * 7 * 7);
    return 4;
}

static af_tensor *cnn_forward(void *ctx, af_tensor *x, af_tensor *const *w) {
    (void)ctx;
    int k[2] = { 2, 2 };
    af_tensor *h = af_avg_pool(af_relu(af_conv2d(x, w[0], 1, 1)), k, k, NULL);  /* 16 x 14 x 14 */
    h = af_avg_pool(af_relu(af_conv2d(h, w[1], 1, 1)), k, k, NULL);             /* 32 x 7 x 7 */
    return af_linear(af_reshape(h, AF_SHAPE(af_tensor_shape(x).dim[0], -1)), w[2], w[3]);
}

int main(int argc, char **argv) {
    int cnn = argc > 1 && !strcmp(argv[1], "cnn");
    af_dataset *train = af_dataset_load(AF_DATA_MNIST, NULL, 1), *test = af_dataset_load(AF_DATA_MNIST, NULL, 0);
    if (!train || !test) {
        fprintf(stderr, "%s\n", af_error_message());
        return 1;
    }
    af_net net = { .make_params = cnn ? cnn_params : mlp_params, .forward = cnn ? cnn_forward : mlp_forward,
                   .sample = AF_SHAPE(1, 28, 28), .out_dim = 10 };
    af_train_opts o = af_train_defaults(); /* Adam, lr 1e-3, batch 128, host plan, CPU */
    af_trainer *t = af_trainer_new(&net, &o);
    if (!t) {
        fprintf(stderr, "%s\n", af_error_message());
        return 1;
    }
    enum { B = 128 };
    float *x = malloc(sizeof(float) * B * 784), *y = malloc(sizeof(float) * B * 10);
    int64_t idx[B], n = af_dataset_count(train);
    af_step_info info;
    for (int64_t s = 0; s + B <= n; s += B) { /* one epoch in file order */
        for (int i = 0; i < B; i++) idx[i] = s + i;
        if (af_dataset_batch(train, B, idx, x, y) || af_trainer_step(t, x, y, &info)) {
            fprintf(stderr, "%s\n", af_error_message());
            return 1;
        }
        if (info.step % 100 == 0) printf("step %lld loss %.4f\n", (long long)info.step, info.loss);
    }
    /* Test accuracy through the separate evaluation program. */
    int64_t nt = af_dataset_count(test), correct = 0;
    float *xt = malloc(sizeof(float) * (size_t)nt * 784), *out = malloc(sizeof(float) * (size_t)nt * 10);
    int64_t *all = malloc(sizeof(int64_t) * (size_t)nt);
    for (int64_t i = 0; i < nt; i++) all[i] = i;
    if (af_dataset_batch(test, (int)nt, all, xt, NULL) || af_trainer_predict(t, nt, xt, out)) {
        fprintf(stderr, "%s\n", af_error_message());
        return 1;
    }
    for (int64_t i = 0; i < nt; i++) {
        int best = 0;
        for (int c = 1; c < 10; c++) best = out[i * 10 + c] > out[i * 10 + best] ? c : best;
        correct += best == af_dataset_labels(test)[i];
    }
    printf("%s test accuracy after one epoch: %.2f%%\n", cnn ? "cnn" : "mlp", 100.0 * (double)correct / (double)nt);
    free(x); free(y); free(xt); free(out); free(all);
    af_trainer_free(t);
    af_dataset_free(train);
    af_dataset_free(test);
    return 0;
}
