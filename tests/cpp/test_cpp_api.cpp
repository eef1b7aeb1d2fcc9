// The public header from C++ (built with -std=c++11 -pedantic-errors -Werror, so a C-only
// construct in the header, such as a compound literal, fails the build): AF_SHAPE with
// C++ integer types, AF_BUF_F32, the option structs, and a small linear layer and its
// bias gradient checked against double loops; the data and llama headers too.
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static int passed = 0, failed = 0;

#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (cond) {                                                                \
            passed++;                                                              \
        } else {                                                                   \
            failed++;                                                              \
            std::fprintf(stderr, "%s:%d: EXPECT(%s) failed: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                     \
            std::fputc('\n', stderr);                                              \
        }                                                                          \
    } while (0)

// A seeded generator (splitmix64), so the numbers are the same on every run.
static double uniform(unsigned long long &s) {
    unsigned long long z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

static void shapes() {
    std::vector<float> v(7);
    size_t n = v.size();
    af_shape a = AF_SHAPE(2, n, (int64_t)3, 4u);
    EXPECT(a.rank == 4 && a.dim[0] == 2 && a.dim[1] == 7 && a.dim[2] == 3 && a.dim[3] == 4, "AF_SHAPE of mixed types");
    EXPECT(af_shape_count(a) == 168, "count %lld", (long long)af_shape_count(a));
    EXPECT(AF_SHAPE().rank == 0 && af_shape_count(AF_SHAPE()) == 1, "a scalar");
    EXPECT(AF_SHAPE(1, 2, 3, 4, 5, 6, 7).rank == -1, "more than AF_MAX_RANK dims");
    af_shape b = af_shape_of({ 5, 6 });
    EXPECT(b.rank == 2 && b.dim[1] == 6, "af_shape_of a list");
    EXPECT(af_shape_count(AF_SHAPE(4294967296LL, 4294967297LL)) == 0, "overflow is invalid");
}

// y = x w^T + b and d mean((y - t)^2) / db, on the CPU in fp32, against double loops.
static void linear_layer() {
    const int B = 4, K = 5, N = 3;
    unsigned long long seed = 2026;
    std::vector<float> x(B * K), w(N * K), b(N), t(B * N);
    for (float &f : x) f = (float)(uniform(seed) * 2 - 1);
    for (float &f : w) f = (float)(uniform(seed) * 2 - 1);
    for (float &f : b) f = (float)(uniform(seed) - 0.5);
    for (float &f : t) f = (float)(uniform(seed) * 2 - 1);

    af_graph *g = af_graph_new();
    af_tensor *xi = af_input(g, "x", AF_F32, AF_SHAPE(B, K));
    af_tensor *ti = af_input(g, "t", AF_F32, AF_SHAPE(B, N));
    af_tensor *wp = af_parameter(g, "w", AF_SHAPE(N, K), w.data());
    af_tensor *bp = af_parameter(g, "b", AF_SHAPE(N), b.data());
    af_tensor *y = af_linear(xi, wp, bp);
    af_loss *loss = af_mse(y, ti);
    af_tensor *params[1] = { bp }, *grads[1] = { nullptr };
    af_backward_opts bo = {};
    bo.loss_scale = 2.0f;
    EXPECT(af_backward(loss, 1, params, grads, &bo) == AF_OK, "backward: %s", af_error_message());

    af_tensor *in[4] = { xi, ti, wp, bp };
    af_tensor *out[2] = { y, grads[0] };
    af_compile_opts co = {};
    co.target = AF_TARGET_CPU;
    co.threads = 1;
    af_model *m = af_compile(g, 4, in, 2, out, &co);
    EXPECT(m != nullptr, "compile: %s", af_error_message());
    std::vector<float> yo(B * N), gb(N);
    af_buffer bi[4] = { AF_BUF_F32(x.data(), x.size()), AF_BUF_F32(t.data(), t.size()), AF_BUF_F32(w.data(), w.size()),
                        AF_BUF_F32(b.data(), b.size()) };
    af_buffer bout[2] = { AF_BUF_F32(yo.data(), yo.size()), AF_BUF_F32(gb.data(), gb.size()) };
    EXPECT(m && af_run(m, bi, bout) == AF_OK, "run: %s", af_error_message());

    double worst = 0, worst_g = 0;
    std::vector<double> dref(N, 0.0);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < N; j++) {
            double s = b[j];
            for (int k = 0; k < K; k++) s += (double)x[i * K + k] * w[j * K + k];
            worst = std::fmax(worst, std::fabs(s - yo[i * N + j]));
            dref[j] += 2.0 * 2.0 * (s - t[i * N + j]) / (B * N); // loss_scale * d mean(d^2)
        }
    for (int j = 0; j < N; j++) worst_g = std::fmax(worst_g, std::fabs(dref[j] - gb[j]));
    EXPECT(worst < 1e-5, "linear layer differs from the double loop by %g", worst);
    EXPECT(worst_g < 1e-5, "bias gradient differs from the double loop by %g", worst_g);
    EXPECT(std::fabs(yo[0]) > 0 && std::fabs(gb[0]) > 0, "non-trivial values");
    af_model_free(m);
    af_graph_free(g);
}

// The two application headers from C++: a llama preset's size by the layout's formula
// and a byte-level round trip, the returned arrays released with af_free.
static void app_headers() {
    af_llama_config c;
    EXPECT(af_llama_preset("tiny", 259, &c) == AF_OK, "preset: %s", af_error_message());
    long long kv = (long long)c.dim * c.n_kv_heads / c.n_heads, L = c.n_layers, d = c.dim, h = c.hidden_dim;
    long long want = 259 * d + L * (2 * d + 2 * d * d + 2 * kv * d + 3 * h * d) + d;
    EXPECT(af_llama_weight_count(&c) == want, "weights %lld, want %lld", (long long)af_llama_weight_count(&c), want);
    af_tokenizer *t = af_tokenizer_byte_level();
    int32_t *ids = nullptr;
    int64_t n = 0;
    EXPECT(t && af_tokenizer_encode(t, "hi", 2, AF_ENCODE_BOS | AF_ENCODE_NO_PREFIX, &ids, &n) == AF_OK, "encode");
    EXPECT(n == 3 && ids[0] == AF_TOKEN_BOS && ids[1] == 'h' + 3 && ids[2] == 'i' + 3, "ids of \"hi\"");
    af_free(ids);
    af_tokenizer_free(t);
}

int main() {
    shapes();
    app_headers();
    linear_layer();
    std::printf("cpp_api (%s, C++ %ld): %d passed, %d failed\n",
#if defined(__clang__)
                "clang++",
#elif defined(__GNUC__)
                "g++",
#else
                "c++",
#endif
                (long)__cplusplus, passed, failed);
    return failed || !passed ? 1 : 0;
}
