/* The llama2.c attention pieces (src/nn/transformer.c) against independent references:
 *   af_rope: a double transcription of llama2.c's rotation loop (pairs (2i, 2i+1), angle
 *     pos * theta^(-2i/head_size)), and bit for bit its float arithmetic; a KV-cache step (one position, its offset) equal bit
 *     for bit to that row of the whole sequence; its gradient equal to the rotation of
 *     the upstream gradient by the negative angle. Both as the chain of ordinary ops and
 *     as the native rope node of graphs targeted at the CPU.
 *   af_causal_mask: softmax of the masked scores equal to a softmax over the visible
 *     prefix only (llama2.c's loop), masked weights exactly 0, at fp32 and fp16.
 *   af_repeat_kv_heads: head h equal to kv head h / n_rep; its gradient the sum over
 *     each group of query heads.
 *   af_causal_attention: native node and op chain against a double loop, gradients equal. */
#include "aneforge.h"
#include "support/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Runs out = f(in) compiled for the CPU. */
static bool run1(af_graph *g, af_tensor *in, const float *x, af_tensor *out, float *y, bool fp16) {
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = fp16 ? AF_PRECISION_FP16 : AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, in ? 1 : 0, &in, 1, &out, &o);
    CHECK(m != NULL, "compile failed: %s", af_error_message());
    if (!m) return false;
    af_buffer bi = AF_BUF_F32(x, in ? af_shape_count(af_tensor_shape(in)) : 0), bo = AF_BUF_F32(y, af_shape_count(af_tensor_shape(out)));
    af_status st = af_run(m, &bi, &bo);
    CHECK(st == AF_OK, "run failed: %s", af_error_message());
    af_model_free(m);
    return st == AF_OK;
}

/* llama2.c's rotation of one head vector at position pos, in double; sign -1 turns back. */
static void rope_ref(const float *x, double *y, int hs, long pos, double theta, double sign) {
    for (int i = 0; i < hs; i += 2) {
        double a = sign * (double)pos * pow(theta, -(double)i / hs), c = cos(a), s = sin(a);
        y[i] = x[i] * c - x[i + 1] * s;
        y[i + 1] = x[i] * s + x[i + 1] * c;
    }
}

enum { B = 2, T = 5, H = 3, HS = 8, N = B * T * H * HS };

/* Each check on a plain graph (af_rope's mul/sub/add chain) and on one targeted at the
 * CPU (the native rope node, and its gradient node): the same bits either way. */
static af_graph *rope_graph(bool native) {
    af_graph *g = af_graph_new();
    if (native) af_graph_set_target(g, AF_TARGET_CPU);
    return g;
}

static void test_rope_on(bool native) {
    test_rng r = { 11 };
    float x[N], y[N], step[B * H * HS], rg[N], gx[N];
    test_fill_uniform(&r, x, N, -1, 1);
    const long off = 7;
    af_graph *g = rope_graph(native);
    af_tensor *in = af_input(g, "x", AF_F32, AF_SHAPE(B, T, H, HS));
    af_tensor *out = af_rope(in, off, 10000.0f);
    if (!run1(g, in, x, out, y, false)) { af_graph_free(g); return; }
    double worst = 0, want[HS];
    for (int v = 0; v < N / HS; v++) {
        rope_ref(x + v * HS, want, HS, off + (v / H) % T, 10000.0, 1.0);
        for (int i = 0; i < HS; i++) worst = fmax(worst, fabs(y[v * HS + i] - want[i]));
    }
    CHECK(worst < 2e-6, "rope (native %d): off the double llama2.c rotation by %.3g", native, worst);
    /* run.c's own float arithmetic (freq, angle, cosf/sinf, the two products): the same bits. */
    int diff = 0;
    for (int v = 0; v < N / HS; v++)
        for (int i = 0; i < HS; i += 2) {
            float freq = 1.0f / powf(10000.0f, (float)i / (float)HS), val = (float)(off + (v / H) % T) * freq;
            float fcr = cosf(val), fci = sinf(val), v0 = x[v * HS + i], v1 = x[v * HS + i + 1];
            float p0 = v0 * fcr, p1 = v1 * fci, p2 = v0 * fci, p3 = v1 * fcr; /* rounded one by one, as C11 does */
            diff += y[v * HS + i] != p0 - p1;
            diff += y[v * HS + i + 1] != p2 + p3;
        }
    CHECK(diff == 0, "rope (native %d): %d values differ from run.c's float rotation", native, diff);
    af_graph_free(g);

    /* A KV-cache step: position off + t alone, with that offset. */
    for (int t = 0; t < T; t += 2) {
        float xs[B * H * HS];
        for (int b = 0; b < B; b++) memcpy(xs + b * H * HS, x + ((b * T + t) * H) * HS, sizeof(float) * H * HS);
        g = rope_graph(native);
        in = af_input(g, "x", AF_F32, AF_SHAPE(B, 1, H, HS));
        out = af_rope(in, off + t, 10000.0f);
        if (run1(g, in, xs, out, step, false))
            for (int b = 0; b < B; b++)
                CHECK(!memcmp(step + b * H * HS, y + ((b * T + t) * H) * HS, sizeof(float) * H * HS),
                      "rope: the one-position step at %d differs from the whole sequence's row", t);
        af_graph_free(g);
    }

    /* d/dx sum(rope(x) * R) = rope^-1(R): the rotation by the negative angle. */
    test_fill_uniform(&r, rg, N, -1, 1);
    g = rope_graph(native);
    af_tensor *p = af_parameter(g, "x", AF_SHAPE(B, T, H, HS), x);
    af_tensor *prod = af_mul(af_rope(p, off, 10000.0f), af_const(g, "R", AF_SHAPE(B, T, H, HS), rg));
    int axes[4] = { 0, 1, 2, 3 }, nz = 0;
    af_tensor *grad = NULL;
    CHECK(af_backward(af_loss_scalar(af_reduce_sum(prod, 4, axes, 0)), 1, &p, &grad, NULL) == AF_OK, "rope backward: %s",
          af_error_message());
    if (grad && run1(g, p, x, grad, gx, false)) {
        worst = 0;
        for (int v = 0; v < N / HS; v++) {
            rope_ref(rg + v * HS, want, HS, off + (v / H) % T, 10000.0, -1.0);
            for (int i = 0; i < HS; i++) { worst = fmax(worst, fabs(gx[v * HS + i] - want[i])); nz += want[i] != 0; }
        }
        CHECK(nz > 0 && worst < 2e-6, "rope gradient (native %d): off the rotation by the negative angle by %.3g", native, worst);
    }
    af_graph_free(g);

    g = rope_graph(native);
    CHECK(af_rope(af_input(g, "odd", AF_F32, AF_SHAPE(2, 3, 5)), 0, 10000.0f) == NULL && strstr(af_graph_error(g), "even"),
          "rope: an odd head_size must be refused with a message");
    af_graph_free(g);
}

static void test_rope(void) {
    test_rope_on(false);
    test_rope_on(true);
}

static void test_causal_mask(void) {
    enum { TQ = 3, TK = 6, OFF = 2, NS = 2 * TQ * TK };
    test_rng r = { 5 };
    float s[NS], y[NS];
    test_fill_uniform(&r, s, NS, -3, 3);
    for (int prec = 0; prec < 2; prec++) {
        af_graph *g = af_graph_new();
        af_tensor *in = af_input(g, "s", AF_F32, AF_SHAPE(2, TQ, TK));
        af_tensor *out = af_softmax(af_causal_mask(in, OFF), -1);
        if (run1(g, in, s, out, y, prec == 1)) {
            double worst = 0;
            bool zeros = true;
            for (int row = 0; row < 2 * TQ; row++) {
                int vis = OFF + row % TQ + 1; /* keys 0 .. OFF + i */
                const float *sr = s + row * TK;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < vis; j++) mx = fmax(mx, sr[j]);
                for (int j = 0; j < vis; j++) sum += exp(sr[j] - mx);
                for (int j = 0; j < TK; j++) {
                    if (j >= vis) { zeros &= y[row * TK + j] == 0.0f; continue; }
                    worst = fmax(worst, fabs(y[row * TK + j] - exp(sr[j] - mx) / sum));
                }
            }
            CHECK(zeros, "causal mask (%s): a masked weight is not exactly 0", prec ? "fp16" : "fp32");
            CHECK(worst < (prec ? 2e-3 : 1e-6), "causal mask (%s): off the visible-prefix softmax by %.3g", prec ? "fp16" : "fp32", worst);
        }
        af_graph_free(g);
    }
    af_graph *g = af_graph_new();
    CHECK(!af_causal_mask(af_input(g, "s", AF_F32, AF_SHAPE(4, 3)), 1) && strstr(af_graph_error(g), "within"),
          "causal mask: more queries than keys past the offset must be refused");
    af_graph_free(g);
}

static void test_repeat_kv(void) {
    enum { KV = 2, REP = 3, D = 4, NX = 2 * 5 * KV * D, NY = NX * REP };
    test_rng r = { 9 };
    float x[NX], y[NY], up[NY], gx[NX];
    test_fill_uniform(&r, x, NX, -1, 1);
    test_fill_uniform(&r, up, NY, -1, 1);
    af_graph *g = af_graph_new();
    af_tensor *p = af_parameter(g, "k", AF_SHAPE(2, 5, KV, D), x);
    af_tensor *out = af_repeat_kv_heads(p, REP);
    af_shape os = out ? af_tensor_shape(out) : (af_shape){ 0 };
    CHECK(os.rank == 4 && os.dim[2] == KV * REP, "repeat_kv: wrong shape");
    if (out && run1(g, p, x, out, y, false)) {
        bool same = true;
        for (int bt = 0; bt < 10; bt++)
            for (int h = 0; h < KV * REP; h++)
                same &= !memcmp(y + (bt * KV * REP + h) * D, x + (bt * KV + h / REP) * D, sizeof(float) * D);
        CHECK(same, "repeat_kv: query head h is not a copy of kv head h / n_rep");
    }
    af_tensor *prod = af_mul(out, af_const(g, "U", os, up)), *grad = NULL;
    int axes[4] = { 0, 1, 2, 3 };
    CHECK(af_backward(af_loss_scalar(af_reduce_sum(prod, 4, axes, 0)), 1, &p, &grad, NULL) == AF_OK, "repeat_kv backward: %s",
          af_error_message());
    if (grad && run1(g, p, x, grad, gx, false)) {
        double worst = 0;
        for (int bt = 0; bt < 10; bt++)
            for (int kv = 0; kv < KV; kv++)
                for (int d = 0; d < D; d++) {
                    double want = 0;
                    for (int k = 0; k < REP; k++) want += up[(bt * KV * REP + kv * REP + k) * D + d];
                    worst = fmax(worst, fabs(gx[(bt * KV + kv) * D + d] - want));
                }
        CHECK(worst < 1e-6, "repeat_kv gradient: off the per-group sum by %.3g", worst);
    }
    af_graph_free(g);
}

/* af_causal_attention: on a CPU-targeted graph (the native node) and a plain one (matmul,
 * mask, softmax) against a double loop over each query's visible prefix (llama2.c's);
 * the two graphs' gradients of sum(y * R) for q, k, v agree; bad shapes get a message.
 * Shapes: a short one, and seq 350 with head size 64, where the native kernel's blocks
 * see more keys than one K block of the GEMM holds and the heads' packed keys and
 * values span several slivers with a ragged end. */
static void attention_ref(int BH, int T, int D, const float *q, const float *k, const float *v, double *y) {
    double *w = malloc((size_t)T * sizeof *w);
    for (int bh = 0; bh < BH && w; bh++)
        for (int i = 0; i < T; i++) {
            double mx = -INFINITY, z = 0;
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)q[((size_t)bh * T + i) * D + d] * k[((size_t)bh * T + j) * D + d];
                w[j] = s / sqrt((double)D);
                mx = fmax(mx, w[j]);
            }
            for (int j = 0; j <= i; j++) z += (w[j] = exp(w[j] - mx));
            for (int d = 0; d < D; d++) {
                double acc = 0;
                for (int j = 0; j <= i; j++) acc += w[j] / z * v[((size_t)bh * T + j) * D + d];
                y[((size_t)bh * T + i) * D + d] = acc;
            }
        }
    free(w);
}

static void causal_attention_case(int B, int H, int T, int D) {
    const int64_t n = (int64_t)B * H * T * D;
    float *buf = malloc((size_t)n * 12 * sizeof *buf);
    double *want = malloc((size_t)n * sizeof *want);
    if (!buf || !want) {
        CHECK(0, "alloc");
        free(buf), free(want);
        return;
    }
    float *qkv[3] = { buf, buf + n, buf + 2 * n }, *r = buf + 3 * n, *y[2] = { buf + 4 * n, buf + 5 * n };
    float *grads[2][3] = { { buf + 6 * n, buf + 7 * n, buf + 8 * n }, { buf + 9 * n, buf + 10 * n, buf + 11 * n } };
    test_rng rng = { 23 };
    for (int i = 0; i < 3; i++) test_fill_uniform(&rng, qkv[i], n, -2, 2);
    test_fill_uniform(&rng, r, n, -1, 1);
    attention_ref(B * H, T, D, qkv[0], qkv[1], qkv[2], want);
    for (int native = 0; native < 2; native++) {
        af_graph *g = af_graph_new();
        if (native) af_graph_set_target(g, AF_TARGET_CPU);
        af_tensor *p[3];
        for (int i = 0; i < 3; i++) p[i] = af_parameter(g, i == 0 ? "q" : i == 1 ? "k" : "v", AF_SHAPE(B, H, T, D), qkv[i]);
        af_tensor *att = af_causal_attention(p[0], p[1], p[2], 0);
        af_tensor *loss_in = af_mul(att, af_const(g, "R", AF_SHAPE(B, H, T, D), r));
        int axes[4] = { 0, 1, 2, 3 };
        af_tensor *gr[3] = { NULL, NULL, NULL };
        CHECK(af_backward(af_loss_scalar(af_reduce_sum(loss_in, 4, axes, 0)), 3, p, gr, NULL) == AF_OK, "backward: %s",
              af_error_message());
        af_tensor *outs[4] = { att, gr[0], gr[1], gr[2] };
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 2 };
        af_model *m = af_compile(g, 3, p, 4, outs, &o);
        CHECK(m != NULL, "compile (native %d, seq %d): %s", native, T, af_error_message());
        af_buffer ob[4] = { AF_BUF_F32(y[native], n), AF_BUF_F32(grads[native][0], n), AF_BUF_F32(grads[native][1], n),
                            AF_BUF_F32(grads[native][2], n) };
        af_buffer ib[3] = { AF_BUF_F32(qkv[0], n), AF_BUF_F32(qkv[1], n), AF_BUF_F32(qkv[2], n) };
        CHECK(m && af_run(m, ib, ob) == AF_OK, "run (native %d, seq %d): %s", native, T, af_error_message());
        double worst = 0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[native][i] - want[i]));
        CHECK(worst < 2e-6 * sqrt(D / 8.0), "causal attention (native %d, seq %d, head %d): off the double loop by %.3g",
              native, T, D, worst);
        af_model_free(m);
        af_graph_free(g);
    }
    for (int s = 0; s < 3; s++) {
        double worst = 0, scale = 1e-30;
        for (int64_t i = 0; i < n; i++) {
            worst = fmax(worst, fabs(grads[1][s][i] - grads[0][s][i]));
            scale = fmax(scale, fabs(grads[0][s][i]));
        }
        CHECK(worst <= 2e-5 * scale, "causal attention (seq %d): the native gradient of %c is off the chain's by %.3g (scale %.3g)",
              T, "qkv"[s], worst, scale);
    }
    free(buf);
    free(want);
}

static void test_causal_attention(void) {
    causal_attention_case(2, 3, 40, 8);
    causal_attention_case(1, 2, 350, 64);
    af_graph *g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *q = af_input(g, "q", AF_F32, AF_SHAPE(1, 4, 6, 8)), *k = af_input(g, "k", AF_F32, AF_SHAPE(1, 2, 6, 8));
    CHECK(af_causal_attention(q, k, k, 0) == NULL && strstr(af_graph_error(g), "af_repeat_kv_heads"),
          "causal attention: k with fewer heads must be refused, naming af_repeat_kv_heads: %s", af_graph_error(g));
    CHECK(af_causal_attention(NULL, k, k, 0) == NULL && strstr(af_error_message(), "NULL"),
          "causal attention: a NULL q must be refused with a message");
    af_graph_free(g);
    /* the layout attribute by name: 1 ([B, seq, heads, d]) keeps q's shape; 2 is refused
     * with a message naming both layouts */
    g = af_graph_new();
    af_graph_set_target(g, AF_TARGET_CPU);
    af_tensor *x = af_input(g, "x", AF_F32, AF_SHAPE(1, 6, 4, 8)), *src[3] = { x, x, x }, *node = NULL;
    int op = af_op_find("causal_attention"), bad = 0;
    const char *one[1] = { "layout=1" }, *two[1] = { "layout=2" };
    CHECK(af_op_build(op, 3, src, 1, one, &node, &bad) == AF_OK && node && af_tensor_shape(node).dim[1] == 6,
          "causal_attention layout=1: %s", af_error_message());
    CHECK(af_op_build(op, 3, src, 1, two, &node, &bad) == AF_ERR_INVALID && !node && strstr(af_error_message(), "layout 2") &&
              strstr(af_error_message(), "[batch, seq, heads, d]"),
          "causal_attention layout=2 must be refused naming the layouts: %s", af_error_message());
    af_graph_free(g);
}

int main(void) {
    test_rope();
    test_causal_attention();
    test_causal_mask();
    test_repeat_kv();
    return check_finish("transformer_ops");
}
