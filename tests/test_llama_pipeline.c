/* The pipeline plan (seed 002's kernels, src/train/llama_pipeline.c) against independent
 * references:
 *  - gradients: one SGD step of the pipeline on the CPU in fp32 moves every parameter
 *    exactly as the host plan's (af_backward through af_llama) does, tied and untied
 *    classifier, grouped KV heads;
 *  - forward kernels: the pipeline's logits equal the fp32 KV-cache forward of
 *    src/llama/forward.c (af_llama_gen) position by position, and fwdAttn's six outputs
 *    equal double loops of the attention block;
 *  - training: after the same steps on ane-sim (A13, A16), the pipeline and the resident
 *    plan reach the CPU fp32 run's validation loss to fp16 tolerance, also with a
 *    vocabulary over A13's 16384 (the classifier and the resident tables in two blocks);
 *  - programs: a fixed count (pipeline 8, resident 1 step program) whatever the number of steps, 6 per layer + 2 per
 *    classifier block dispatches per step, the vocab split in blocks within A13's 16384;
 *  - each kernel survives the MIL round trip (emit -> parse -> run equals direct);
 *  - a net that is not af_net_llama is refused with a message. */
#define _POSIX_C_SOURCE 200809L
#include "support/check.h"
#include "aneforge.h"
#include "aneforge_llama.h"
#include "mil/mil.h"
#include "nn/llama_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T = 16, B = 2 };
/* The fake Neural Engine framework the build makes on Linux (tests/fake_ane): its path
 * comes from CMake where it is built; the case that needs it is its own ctest case,
 * llama_pipeline_ane (`test_llama_pipeline ane`), reported skipped where there is none. */
#ifdef AF_FAKE_ANE
#define FAKE_ANE AF_FAKE_ANE
#else
#define FAKE_ANE "(no fake framework in this build)"
#endif

static af_llama_weights *weights(int dim, int hidden, int layers, int heads, int kv, int vocab, int shared, unsigned long long seed) {
    af_llama_config c = { dim, hidden, layers, heads, kv, vocab, T, shared };
    af_llama_weights *w = af_llama_weights_new(&c);
    CHECK(w != NULL, "weights: %s", af_error_message());
    if (!w) return NULL;
    test_rng r = { seed };
    float *d = af_llama_weights_data(w);
    for (int i = 0; i < af_llama_param_count(&c); i++) {
        int64_t off;
        af_shape s;
        af_llama_param_at(&c, i, &off, &s, NULL);
        for (int64_t j = 0; j < af_shape_count(s); j++)
            d[off + j] = s.rank == 1 ? 1.0f + 0.2f * (float)(test_uniform(&r) - 0.5) : 0.15f * (float)(test_uniform(&r) - 0.5);
    }
    return w;
}

/* Windows of a seeded Markov-like token stream: x [n, T] ids, y [n, T * V] one-hot. */
static void batch(test_rng *r, int n, int V, float *x, float *y) {
    memset(y, 0, sizeof(float) * (size_t)n * T * V);
    for (int b = 0; b < n; b++) {
        int tok = (int)(test_uniform(r) * V);
        for (int t = 0; t <= T; t++) {
            int next = (tok * 5 + 1 + (int)(test_uniform(r) * 3)) % V;
            if (t < T) x[b * T + t] = (float)tok;
            if (t < T) y[((int64_t)b * T + t) * V + next] = 1.0f;
            tok = next;
        }
    }
}

static af_train_opts opts(af_plan plan, af_target target, af_family_id fam, af_optimizer opt, int steps) {
    af_train_opts o = af_train_defaults();
    o.objective = AF_OBJ_CUSTOM;
    o.optimizer = opt;
    o.plan = plan;
    o.batch = B;
    o.eval_batch = B;
    o.lr = opt == AF_OPT_SGD ? 0.5f : 3e-3f;
    o.total_steps = steps;
    o.compile.target = target;
    o.compile.family = fam;
    o.compile.ane_framework = target == AF_TARGET_ANE ? FAKE_ANE : NULL;
    o.compile.threads = 1;
    o.loss_scale = target == AF_TARGET_CPU ? 1.0f : 128.0f;
    return o;
}

static af_trainer *trainer_with(const af_llama_weights *w, const af_train_opts *o) {
    af_net net = af_net_llama(w, T);
    af_trainer *t = af_trainer_new(&net, o);
    af_net_free(&net);
    CHECK(t != NULL, "trainer (%s): %s", af_plan_name(o->plan), af_error_message());
    return t;
}

static af_trainer *trainer(const af_llama_weights *w, af_plan plan, af_target target, af_family_id fam, af_optimizer opt, int steps) {
    af_train_opts o = opts(plan, target, fam, opt, steps);
    return trainer_with(w, &o);
}

/* Mean cross-entropy of the trainer's predictions on n windows. */
static double val_loss(af_trainer *t, int n, int V, const float *x, const float *y) {
    float *out = malloc(sizeof(float) * (size_t)n * T * V);
    double sum = 0;
    CHECK(af_trainer_predict(t, n, x, out) == AF_OK, "predict: %s", af_error_message());
    for (int64_t i = 0; i < (int64_t)n * T; i++) {
        const float *l = out + i * V;
        double mx = l[0], se = 0, ly = 0;
        for (int v = 0; v < V; v++) mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < V; v++) { se += exp(l[v] - mx); if (y[i * V + v] > 0.5f) ly = l[v]; }
        sum += mx + log(se) - ly;
    }
    free(out);
    return sum / (double)(n * T);
}

/* Trains `steps` steps on a seeded stream; returns the trainer. */
static af_trainer *train(const af_llama_weights *w, af_plan plan, af_target target, af_family_id fam, af_optimizer opt, int steps, af_stats *st) {
    int V = af_llama_weights_config(w)->vocab_size;
    af_trainer *t = trainer(w, plan, target, fam, opt, steps);
    if (!t) return NULL;
    float *x = malloc(sizeof(float) * B * T), *y = malloc(sizeof(float) * (size_t)B * T * V);
    test_rng r = { 77 };
    for (int s = 0; s < steps; s++) {
        batch(&r, B, V, x, y);
        af_step_info info;
        CHECK(af_trainer_step(t, x, y, &info) == AF_OK, "step: %s", af_error_message());
        CHECK(info.skipped_now == 0, "%s step %d skipped", af_plan_name(plan), s);
    }
    if (st) af_trainer_stats(t, st);
    free(x);
    free(y);
    return t;
}

/* Largest relative difference between the two trainers' parameters. */
static double param_diff(af_trainer *a, af_trainer *b) {
    double worst = 0;
    for (int i = 0; i < af_trainer_num_params(a); i++) {
        int64_t n = 1;
        af_shape s = af_tensor_shape(af_trainer_param(a, i));
        for (int k = 0; k < s.rank; k++) n *= s.dim[k];
        float *pa = malloc(sizeof(float) * (size_t)n), *pb = malloc(sizeof(float) * (size_t)n);
        af_trainer_read_param(a, i, pa);
        af_trainer_read_param(b, i, pb);
        double num = 0, den = 1e-12;
        for (int64_t j = 0; j < n; j++) { num = fmax(num, fabs((double)pa[j] - pb[j])); den = fmax(den, fabs((double)pb[j])); }
        worst = fmax(worst, num / den);
        free(pa);
        free(pb);
    }
    return worst;
}

static void gradients_match_autograd(int kv, int shared) {
    af_llama_weights *w = weights(32, 48, 2, 4, kv, 24, shared, 5 + kv + shared);
    if (!w) return;
    af_trainer *host = train(w, AF_PLAN_HOST, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_SGD, 1, NULL);
    af_trainer *pipe = train(w, AF_PLAN_PIPELINE, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_SGD, 1, NULL);
    af_trainer *w0 = trainer(w, AF_PLAN_HOST, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_SGD, 1); /* the start */
    if (host && pipe && w0) {
        double moved = param_diff(host, w0), diff = param_diff(pipe, host);
        CHECK(moved > 1e-3, "the SGD step moved the params (%g)", moved);
        CHECK(diff < 2e-5, "kv %d shared %d: pipeline step vs af_backward step, max relative difference %g", kv, shared, diff);
    }
    af_trainer_free(host);
    af_trainer_free(pipe);
    af_trainer_free(w0);
    af_llama_weights_free(w);
}

static void forward_matches_kv_cache(void) {
    af_llama_weights *w = weights(32, 48, 2, 4, 2, 24, 0, 9);
    af_trainer *t = w ? trainer(w, AF_PLAN_PIPELINE, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_ADAM, 1) : NULL;
    af_llama_gen *g = w ? af_llama_gen_new(w, 1) : NULL;
    if (t && g) {
        int V = 24;
        float x[B * T], out[B * T * 24];
        for (int i = 0; i < B * T; i++) x[i] = (float)((i * 7 + 3) % V);
        CHECK(af_trainer_predict(t, B, x, out) == AF_OK, "predict: %s", af_error_message());
        double worst = 0;
        for (int b = 0; b < B; b++) {
            af_llama_gen_reset(g);
            for (int s = 0; s < T; s++) {
                af_llama_gen_feed(g, (int)x[b * T + s]);
                const float *ref = af_llama_gen_logits(g);
                for (int v = 0; v < V; v++) worst = fmax(worst, fabs((double)ref[v] - out[(b * T + s) * V + v]));
            }
        }
        CHECK(worst < 1e-4, "pipeline logits vs the KV-cache forward: max difference %g", worst);
    }
    af_llama_gen_free(g);
    af_trainer_free(t);
    af_llama_weights_free(w);
}

/* On ane-sim both engine plans end where the CPU fp32 run does, to fp16 tolerance; the
 * pipeline compiles its 8 programs once, however many steps. */
static void engine_plans_match_cpu(af_family_id fam, int vocab) {
    af_llama_weights *w = weights(64, 96, 2, 4, 2, vocab, 1, 21);
    if (!w) return;
    int V = vocab, steps = 12, n = 4;
    float *x = malloc(sizeof(float) * n * T), *y = malloc(sizeof(float) * (size_t)n * T * V);
    test_rng r = { 1234 };
    batch(&r, n, V, x, y);
    af_stats s3, s12;
    af_trainer *cpu = train(w, AF_PLAN_HOST, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_ADAM, steps, NULL);
    af_trainer *p3 = train(w, AF_PLAN_PIPELINE, AF_TARGET_ANE_SIM, fam, AF_OPT_ADAM, 3, &s3);
    af_trainer *p12 = train(w, AF_PLAN_PIPELINE, AF_TARGET_ANE_SIM, fam, AF_OPT_ADAM, steps, &s12);
    af_trainer *w0 = trainer(w, AF_PLAN_HOST, AF_TARGET_CPU, AF_FAMILY_DEFAULT, AF_OPT_ADAM, steps);
    int blocks = fam == AF_FAMILY_A13 && V > 16384 ? 2 : 1;
    if (cpu && p3 && p12 && w0) {
        double v0 = val_loss(w0, n, V, x, y), vc = val_loss(cpu, n, V, x, y), vp = val_loss(p12, n, V, x, y);
        CHECK(V > 2048 || v0 - vc > 0.04, "the CPU run learned (%.4f -> %.4f)", v0, vc);
        CHECK(fabs(vp - vc) < 2e-3, "pipeline on ane-sim %s vocab %d: val loss %.5f vs CPU fp32 %.5f", af_family_name_of(fam), V, vp, vc);
        CHECK(s3.compiles == 8 && s12.compiles == 8, "programs compiled after 3 and 12 steps: %lld, %lld (want 8 both)",
              (long long)s3.compiles, (long long)s12.compiles);
        CHECK(s12.dispatches == (int64_t)steps * (6 * 2 + 2 * blocks), "dispatches %lld over %d steps, want %d per step",
              (long long)s12.dispatches, steps, 6 * 2 + 2 * blocks);
        CHECK(s12.host_flops > 0 && s12.engine_flops > 0 && s12.bytes_in > 0 && s12.bytes_out > 0, "accounting is filled");
        /* resident: one step program (and the prediction program, compiled on first use) */
        af_stats r3, r12;
        af_trainer *res3 = train(w, AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, fam, AF_OPT_ADAM, 3, &r3);
        af_trainer *res = train(w, AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, fam, AF_OPT_ADAM, steps, &r12);
        if (res && res3) {
            double vr = val_loss(res, n, V, x, y);
            CHECK(fabs(vr - vc) < 2e-3, "resident on ane-sim %s vocab %d: val loss %.5f vs CPU fp32 %.5f", af_family_name_of(fam), V, vr, vc);
            CHECK(r12.dispatches == steps && r12.host_flops > 0, "resident: one dispatch per step (%lld over %d)", (long long)r12.dispatches, steps);
            CHECK(r3.compiles == 1 && r12.compiles == 1, "resident compiled %lld and %lld step programs after 3 and 12 steps (want 1)",
                  (long long)r3.compiles, (long long)r12.compiles);
        }
        af_trainer_free(res3);
        af_trainer_free(res);
    }
    af_trainer_free(cpu);
    af_trainer_free(p3);
    af_trainer_free(p12);
    af_trainer_free(w0);
    free(x);
    free(y);
    af_llama_weights_free(w);
}

/* The pipeline plan with grad_accum 2 over batches of B windows trains as one batch of
 * 2B windows does (the same windows), and grad_clip reports the norm it clips. */
static void pipeline_accum_and_clip(void) {
    af_llama_weights *w = weights(64, 96, 2, 4, 2, 48, 1, 21);
    if (!w) return;
    int V = 48, steps = 3;
    af_train_opts oa = opts(AF_PLAN_PIPELINE, AF_TARGET_ANE_SIM, AF_FAMILY_A16, AF_OPT_ADAM, steps), ob = oa;
    oa.grad_accum = 2;
    oa.grad_clip = 1e9f; /* never reached: only reports the norm */
    ob.batch = ob.eval_batch = 2 * B;
    af_trainer *a = trainer_with(w, &oa), *b = trainer_with(w, &ob);
    float *x = malloc(sizeof(float) * 2 * B * T), *y = malloc(sizeof(float) * (size_t)2 * B * T * V);
    test_rng r = { 77 };
    for (int s = 0; a && b && s < steps; s++) {
        batch(&r, 2 * B, V, x, y);
        af_step_info ia, ib;
        CHECK(af_trainer_step(a, x, y, &ia) == AF_OK && af_trainer_step(b, x, y, &ib) == AF_OK, "steps: %s",
              af_error_message());
        CHECK(fabs(ia.loss - ib.loss) < 1e-3 * ib.loss, "loss of 2 x %d windows %.6f vs %d windows %.6f", B, ia.loss,
              2 * B, ib.loss);
        CHECK(ia.grad_norm > 0 && isfinite(ia.grad_norm), "grad_norm %g", (double)ia.grad_norm);
    }
    if (a && b) CHECK(param_diff(a, b) < 2e-3, "pipeline, accumulated vs one batch: params differ by %g", param_diff(a, b));
    af_trainer_free(a);
    af_trainer_free(b);
    free(x);
    free(y);
    af_llama_weights_free(w);
}

/* fwdAttn on the CPU in fp32 against double loops of llama2.c's attention block in the
 * channel-first layout: RMSNorm over channels, q/k/v projections, RoPE on pairs
 * (2i, 2i+1) by t * 10000^(-2i/hs), causal softmax with query head h reading KV head
 * h / (H / KV), the output projection. */
static void fwd_attn_matches_loops(void) {
    enum { D = 32, H = 4, KV = 2, HS = D / H, KVD = KV * HS, S = 8, NB = 2 };
    lk_shape sh = { D, 48, H, KV, S, NB, 1 };
    af_graph *g = af_graph_new();
    lk_program p;
    CHECK(lk_build(g, LK_FWD_ATTN, &sh, AF_F32, &p) == AF_OK, "%s", af_error_message());
    af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP32, .threads = 1 };
    af_model *m = af_compile(g, p.nin, p.in, p.nout, p.out, &o);
    CHECK(m != NULL, "%s", af_error_message());
    static float x[NB * D * S], rms[D], wq[D * D], wk[KVD * D], wv[KVD * D], wo[D * D], out[6][NB * D * S];
    test_rng r = { 8 };
    float *ins[6] = { x, rms, wq, wk, wv, wo };
    int counts[6] = { NB * D * S, D, D * D, KVD * D, KVD * D, D * D };
    af_buffer bi[6], bo[6];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < counts[i]; j++) ins[i][j] = (float)(i == 1 ? 0.8 + 0.4 * test_uniform(&r) : i == 0 ? test_uniform(&r) - 0.5 : 0.3 * (test_uniform(&r) - 0.5));
        bi[i] = AF_BUF_F32(ins[i], counts[i]);
    }
    int ocounts[6] = { NB * D * S, NB * D * S, NB * KVD * S, NB * KVD * S, NB * D * S, NB * D * S };
    for (int i = 0; i < 6; i++) bo[i] = AF_BUF_F32(out[i], ocounts[i]);
    CHECK(m && af_run(m, bi, bo) == AF_OK, "run: %s", af_error_message());
    double worst = 0;
    for (int b = 0; m && b < NB; b++) {
        static double xn[D][S], q[D][S], k[KVD][S], v[KVD][S], att[D][S];
        for (int t = 0; t < S; t++) {
            double ms = 0;
            for (int c = 0; c < D; c++) ms += (double)x[(b * D + c) * S + t] * x[(b * D + c) * S + t] / D;
            for (int c = 0; c < D; c++) xn[c][t] = x[(b * D + c) * S + t] / sqrt(ms + 1e-5) * rms[c];
        }
        for (int t = 0; t < S; t++) {
            for (int c = 0; c < D; c++) { q[c][t] = 0; for (int e = 0; e < D; e++) q[c][t] += wq[c * D + e] * xn[e][t]; }
            for (int c = 0; c < KVD; c++) {
                k[c][t] = v[c][t] = 0;
                for (int e = 0; e < D; e++) { k[c][t] += wk[c * D + e] * xn[e][t]; v[c][t] += wv[c * D + e] * xn[e][t]; }
            }
            for (int c = 0; c < D; c += 2) { /* RoPE: pair (c, c+1) of its head */
                double ang = t * pow(10000.0, -(double)(c % HS) / HS), cs = cos(ang), sn = sin(ang);
                double q0 = q[c][t], q1 = q[c + 1][t];
                q[c][t] = q0 * cs - q1 * sn, q[c + 1][t] = q0 * sn + q1 * cs;
                if (c < KVD) {
                    double k0 = k[c][t], k1 = k[c + 1][t];
                    k[c][t] = k0 * cs - k1 * sn, k[c + 1][t] = k0 * sn + k1 * cs;
                }
            }
        }
        for (int h = 0; h < H; h++) {
            int kv = h / (H / KV);
            for (int i = 0; i < S; i++) {
                double sc[S], mx = -1e30, se = 0;
                for (int j = 0; j <= i; j++) {
                    sc[j] = 0;
                    for (int e = 0; e < HS; e++) sc[j] += q[h * HS + e][i] * k[kv * HS + e][j];
                    sc[j] /= sqrt((double)HS);
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j <= i; j++) se += exp(sc[j] - mx);
                for (int e = 0; e < HS; e++) {
                    att[h * HS + e][i] = 0;
                    for (int j = 0; j <= i; j++) att[h * HS + e][i] += exp(sc[j] - mx) / se * v[kv * HS + e][j];
                }
            }
        }
        for (int c = 0; c < D; c++)
            for (int t = 0; t < S; t++) {
                double o1 = 0;
                for (int e = 0; e < D; e++) o1 += wo[c * D + e] * att[e][t];
                int64_t at = (b * D + c) * S + t;
                worst = fmax(worst, fabs(o1 - out[0][at]));
                worst = fmax(worst, fabs(q[c][t] - out[1][at]));
                worst = fmax(worst, fabs(att[c][t] - out[4][at]));
                worst = fmax(worst, fabs(xn[c][t] - out[5][at]));
                if (c < KVD) {
                    worst = fmax(worst, fabs(k[c][t] - out[2][(b * KVD + c) * S + t]));
                    worst = fmax(worst, fabs(v[c][t] - out[3][(b * KVD + c) * S + t]));
                }
            }
    }
    CHECK(worst < 1e-5, "fwdAttn vs double loops: max difference %g", worst);
    af_model_free(m);
    af_graph_free(g);
}

/* On the `ane` target (the darwin runtime over the fake framework, which runs what it
 * compiles as ane-sim models the engine, and binds at most 64 inputs and outputs per
 * program) both plans give ane-sim's result exactly. */
static void ane_target_matches_sim(void) {
    if (access(FAKE_ANE, R_OK) != 0) { /* a failure, not a skip: CMake registers this case only with it */
        CHECK(0, "the fake framework %s is missing", FAKE_ANE);
        return;
    }
    af_llama_weights *w = weights(64, 96, 2, 4, 2, 48, 1, 31);
    int n = 4, V = 48;
    float *x = malloc(sizeof(float) * n * T), *y = malloc(sizeof(float) * (size_t)n * T * V);
    test_rng r = { 99 };
    batch(&r, n, V, x, y);
    const af_plan plans[2] = { AF_PLAN_PIPELINE, AF_PLAN_RESIDENT };
    for (int k = 0; w && k < 2; k++) {
        af_trainer *sim = train(w, plans[k], AF_TARGET_ANE_SIM, AF_FAMILY_A13, AF_OPT_ADAM, 4, NULL);
        af_trainer *ane = train(w, plans[k], AF_TARGET_ANE, AF_FAMILY_A13, AF_OPT_ADAM, 4, NULL);
        if (sim && ane) {
            double a = val_loss(ane, n, V, x, y), b = val_loss(sim, n, V, x, y);
            CHECK(a == b, "%s on ane (fake framework) %.9f vs ane-sim %.9f", af_plan_name(plans[k]), a, b);
        }
        af_trainer_free(sim);
        af_trainer_free(ane);
    }
    free(x);
    free(y);
    af_llama_weights_free(w);
}

/* Every kernel emitted to MIL and parsed back computes what the graph computes. */
static void kernels_roundtrip_mil(void) {
    lk_shape sh = { 32, 48, 4, 2, 8, 2, 24 };
    for (int k = 0; k < LK_COUNT; k++) {
        af_graph *g = af_graph_new();
        lk_program p;
        mil_module m = { 0 };
        CHECK(lk_build(g, (lk_kind)k, &sh, AF_F16, &p) == AF_OK, "%s: %s", lk_names[k], af_error_message());
        CHECK(mil_roundtrip(g, p.nin, p.in, p.nout, p.out, &m) == AF_OK, "%s round trip: %s", lk_names[k], af_error_message());
        af_compile_opts o = { .target = AF_TARGET_CPU, .precision = AF_PRECISION_FP16, .threads = 1 };
        af_model *a = af_compile(g, p.nin, p.in, p.nout, p.out, &o), *b = m.g ? af_compile(m.g, m.nin, m.in, m.nout, m.out, &o) : NULL;
        CHECK(a && b, "%s compile: %s", lk_names[k], af_error_message());
        if (a && b) {
            af_buffer in[LK_MAXIO], oa[LK_MAXIO], ob[LK_MAXIO];
            float *data[LK_MAXIO], *ra[LK_MAXIO], *rb[LK_MAXIO];
            test_rng r = { 40 + (unsigned)k };
            for (int i = 0; i < p.nin; i++) {
                int64_t n = 1;
                af_shape s = af_tensor_shape(p.in[i]);
                for (int d = 0; d < s.rank; d++) n *= s.dim[d];
                data[i] = malloc(sizeof(float) * (size_t)n);
                /* probabilities for sdpaBwd2's probs, else centred values */
                for (int64_t j = 0; j < n; j++) data[i][j] = (float)(test_uniform(&r) - (k == LK_SDPA_BWD2 && i == 0 ? 0.0 : 0.5));
                in[i] = AF_BUF_F32(data[i], n);
            }
            for (int i = 0; i < p.nout; i++) {
                int64_t n = 1;
                af_shape s = af_tensor_shape(p.out[i]);
                for (int d = 0; d < s.rank; d++) n *= s.dim[d];
                ra[i] = malloc(sizeof(float) * (size_t)n);
                rb[i] = malloc(sizeof(float) * (size_t)n);
                oa[i] = AF_BUF_F32(ra[i], n);
                ob[i] = AF_BUF_F32(rb[i], n);
            }
            CHECK(af_run(a, in, oa) == AF_OK && af_run(b, in, ob) == AF_OK, "%s run: %s", lk_names[k], af_error_message());
            for (int i = 0; i < p.nout; i++) {
                CHECK(memcmp(ra[i], rb[i], sizeof(float) * (size_t)oa[i].count) == 0, "%s output %d differs after the MIL round trip", lk_names[k], i);
                free(ra[i]);
                free(rb[i]);
            }
            for (int i = 0; i < p.nin; i++) free(data[i]);
        }
        af_model_free(a);
        af_model_free(b);
        af_graph_free(m.g);
        af_graph_free(g);
    }
}

/* The resident plan's grouped state survives a checkpoint: a trainer loaded from it
 * reads back the same parameters and predicts the same logits. */
static void resident_checkpoint_round_trip(void) {
    af_llama_weights *w = weights(32, 48, 2, 4, 2, 24, 0, 17);
    af_trainer *a = w ? train(w, AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, AF_FAMILY_A13, AF_OPT_ADAM, 3, NULL) : NULL;
    af_trainer *b = w ? trainer(w, AF_PLAN_RESIDENT, AF_TARGET_ANE_SIM, AF_FAMILY_A13, AF_OPT_ADAM, 3) : NULL;
    char path[] = "/tmp/aneforge_llama_res_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    if (a && b && fd >= 0) {
        double before = param_diff(a, b);
        CHECK(af_trainer_save(a, path) == AF_OK && af_trainer_load(b, path) == AF_OK, "save/load: %s", af_error_message());
        CHECK(before > 1e-4 && param_diff(a, b) == 0, "params after load differ (%g before the load, %g after)", before, param_diff(a, b));
    }
    if (fd >= 0) remove(path);
    af_trainer_free(a);
    af_trainer_free(b);
    af_llama_weights_free(w);
}

static void refuses_other_nets(void) {
    af_net net = af_net_mlp(AF_SHAPE(4), 8, 3, 1);
    af_train_opts o = af_train_defaults();
    o.plan = AF_PLAN_PIPELINE;
    o.batch = 2;
    af_trainer *t = af_trainer_new(&net, &o);
    CHECK(t == NULL && strstr(af_error_message(), "af_net_llama"), "pipeline on an MLP: %s", t ? "accepted" : af_error_message());
    af_trainer_free(t);
    af_net_free(&net);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "ane")) {
        ane_target_matches_sim();
        return check_finish("llama_pipeline ane");
    }
    gradients_match_autograd(2, 1);
    gradients_match_autograd(4, 0);
    forward_matches_kv_cache();
    fwd_attn_matches_loops();
    engine_plans_match_cpu(AF_FAMILY_A16, 48);
    engine_plans_match_cpu(AF_FAMILY_A13, 48);
    engine_plans_match_cpu(AF_FAMILY_A13, 16400); /* two classifier blocks of 8200 rows */
    kernels_roundtrip_mil();
    resident_checkpoint_round_trip();
    refuses_other_nets();
    pipeline_accum_and_clip();
    return check_finish("llama_pipeline");
}
