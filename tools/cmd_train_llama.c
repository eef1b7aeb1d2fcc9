/* aneforge train llama: trains llama2.c's architecture (af_net_llama) with the generic
 * trainer on a uint16 token file, in batches of random windows, reports train and
 * validation loss (nats per token) and exports a llama2.c version-0 model file. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "cli_args.h"
#include "llama_ckpt.h"
#include "llama_nll.h"
#include "train_opts.h"
#include "train_dist.h"
#include "train_progress.h"
#include "run_log.h"
#include "cli_out.h"
#include "train_watch.h"
#include "dash_term.h"
#include "train_sample.h"
#include "aneforge.h"
#include "aneforge_data.h"
#include "aneforge_llama.h"
#include "aneforge_hf.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *config, *init, *data, *val, *tokenizer, *save, *resume, *log, *export_path;
    long steps, seq, eval_every, stop_after, sample_every;
    int json, dashboard;
    uint64_t seed;
    af_train_opts o;
    train_dist dist;
} llama_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge train llama (--config NAME | --init model.bin) --data train.bin [options]\n\n"
            "Trains a llama2.c-architecture model on a token file (uint16 ids, llama2.c's .bin) in\n"
            "batches of random windows of --seq + 1 tokens, and reports the loss in nats per token.\n\n"
            "options:\n"
            "  --config NAME         tiny, stories15m, stories42m or stories110m (random weights, seeded)\n"
            "  --init PATH           start from a llama2.c model file or a Hugging Face folder instead (its\n"
            "                        config and vocab). A Llama-2-shaped folder trains as llama2.c's model (every\n"
            "                        option here); any other (Llama 3, SmolLM, Qwen2, Qwen3), or any folder with\n"
            "                        a LoRA option, trains as itself through 'aneforge hf train': --data, --steps,\n"
            "                        --seq, --seed and the train options (that command's defaults: 20 steps of\n"
            "                        4 x 32 tokens), --export DIR for the trained folder, and\n"
            "  --lora-rank R, --lora-alpha A, --lora-targets q,k,v,o,gate,up,down, --adapter ADIR, --merge\n"
            "                        LoRA adapters over the frozen folder (see 'aneforge hf --help'); --export DIR\n"
            "                        gets the PEFT adapter folder, or the merged model with --merge\n"
            "  --data PATH           training tokens\n"
            "  --val PATH            validation tokens: the mean loss over the file in windows of --seq\n"
            "  --tokenizer PATH      its vocab size sets the model's (else --init's, else max id + 1)\n"
            "  --steps N             optimizer steps (default 100)\n"
            "  --batch B             windows per step (default 8)\n"
            "  --seq T               tokens per window (default 64; at most the config's seq_len)\n"
            "  --lr X                peak learning rate (default 0.001)\n"
            "  --grad-clip X         clip the gradient's global L2 norm to X before each update (default 0 = off;\n"
            "                        llama2.c uses 1.0); host and pipeline plans\n"
            "  --grad-accum N        N batches of --batch windows per optimizer step, gradients averaged\n"
            "                        (default 1); host and pipeline plans\n"
            "  --optimizer, --schedule, --warmup, --weight-decay, --plan, --unroll, --precision,\n"
            "  --target, --loss-scale, --threads   as for 'aneforge train mlp'\n"
            "  --plan pipeline       seed 002's six kernels per layer, compiled once with weights as inputs (llama only);\n"
            "                        --plan resident keeps the whole step and Adam on the engine at any vocabulary\n"
            "  --seed N              weights and windows (default 1)\n"
            "  --eval-every K        validation loss every K steps (and at the end)\n"
            "  --save PATH           checkpoint at every evaluation, at the end and on Ctrl-C\n"
            "  --resume PATH         continue a saved run to --steps (bit-identical; same config and data)\n"
            "  --stop-after N        stop after N steps, saving as Ctrl-C would (the schedule still spans --steps)\n"
            "  --sample-every K      print (and log) a 64-token sample every K steps and at the end\n"
            "  --export PATH         write the trained model as a llama2.c version-0 file ('aneforge generate')\n"
            "  --log FILE            append JSON lines (every 10 steps and every evaluation)\n"
            "  --json                finish with one JSON line: train_loss, val_loss, tokens_per_s, ms_per_step\n"
            "                        (and steady_ms_per_step: the steps after the first)\n"
            "  --distributed         data-parallel over the MPI job (mpirun -np N ...): each rank trains on its shard\n"
            "                        of every global batch of N x B windows; host and pipeline plans: gradients\n"
            "                        averaged every step; resident: local SGD (--sync-every K, default 8)\n"
            "  --sync-every K, --dist-timeout S   as for 'train mlp' (see 'aneforge train --help')\n"
            "  --dashboard           watch the run in the terminal while it trains (q stops it, as Ctrl-C does);\n"
            "                        logs to --log, or to aneforge-llama.jsonl without one\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge train llama", fmt, a); }

static int parse_args(int argc, char **argv, llama_args *a) {
    a->o = af_train_defaults();
    a->o.objective = AF_OBJ_CUSTOM;
    a->o.batch = 8;
    a->o.lr = 1e-3f;
    a->o.schedule = AF_LR_COSINE;
    a->o.weight_decay = 0.0f;
    a->steps = 100;
    a->seq = 64;
    a->seed = 1;
    a->o.loss_scale = 0;
    train_opt_flags flags = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 1; }
        if (!strcmp(k, "--json")) { a->json = 1; continue; }
        if (!strcmp(k, "--dashboard")) { a->dashboard = 1; continue; }
        if (train_opt_flag(k, &a->o) || train_dist_flag(k, &a->dist)) continue;
        if (k[0] != '-') return bad("unexpected argument '%s'", k);
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        int r = train_opt_parse(k, v, &a->o, &flags, "aneforge train llama");
        if (!r) r = train_dist_parse(k, v, &a->dist, "aneforge train llama");
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(k, "--config")) a->config = v;
        else if (!strcmp(k, "--init")) a->init = v;
        else if (!strcmp(k, "--data")) a->data = v;
        else if (!strcmp(k, "--val")) a->val = v;
        else if (!strcmp(k, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(k, "--save")) a->save = v;
        else if (!strcmp(k, "--resume")) a->resume = v;
        else if (!strcmp(k, "--export")) a->export_path = v;
        else if (!strcmp(k, "--log")) a->log = v;
        else if (!strcmp(k, "--steps")) { if (cli_parse_long(v, 1, 100000000, &a->steps)) return bad("--steps wants a positive integer, not '%s'", v); }
        else if (!strcmp(k, "--seq")) { if (cli_parse_long(v, 1, 65536, &a->seq)) return bad("--seq wants an integer in 1..65536, not '%s'", v); }
        else if (!strcmp(k, "--sample-every")) { if (cli_parse_long(v, 1, 100000000, &a->sample_every)) return bad("--sample-every wants a positive integer, not '%s'", v); }
        else if (!strcmp(k, "--stop-after")) { if (cli_parse_long(v, 1, 100000000, &a->stop_after)) return bad("--stop-after wants a positive integer, not '%s'", v); }
        else if (!strcmp(k, "--eval-every")) { if (cli_parse_long(v, 1, 100000000, &a->eval_every)) return bad("--eval-every wants a positive integer, not '%s'", v); }
        else if (!strcmp(k, "--grad-clip")) { if (cli_parse_float(v, &a->o.grad_clip) || !(a->o.grad_clip >= 0)) return bad("--grad-clip wants a number >= 0 (0 = off), not '%s'", v); }
        else if (!strcmp(k, "--grad-accum")) { if (cli_parse_long(v, 1, 4096, &n)) return bad("--grad-accum wants an integer in 1..4096, not '%s'", v); a->o.grad_accum = (int)n; }
        else if (!strcmp(k, "--seed")) { if (cli_parse_long(v, 0, 0x7fffffffL, &n)) return bad("--seed wants a non-negative integer, not '%s'", v); a->seed = (uint64_t)n; }
        else return bad("unknown option '%s'", k);
    }
    if (!a->config && !a->init) return bad("%s", "give --config tiny|stories15m|stories42m|stories110m or --init model.bin");
    if (a->config && a->init) return bad("%s", "give --config or --init, not both (--init's file has its own config)");
    if (!a->data) return bad("%s", "--data is required: a token file (uint16 ids, see 'aneforge data tokenize')");
    if (train_opt_finish(&a->o, &flags, "aneforge train llama")) return 2;
    if ((a->o.grad_clip > 0 || a->o.grad_accum > 1) && !af_plan_host_optimizer(a->o.plan))
        return bad("--grad-clip and --grad-accum need --plan host or pipeline (the optimizer runs on the host there), "
                   "not '%s'", af_plan_name(a->o.plan));
    if (a->dashboard && !a->log) a->log = "aneforge-llama.jsonl";
    a->o.total_steps = a->steps;
    a->o.eval_batch = a->o.batch;
    return 0;
}

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }

/* model.py's initialisation: matrices N(0, 0.02), norms 1. */
static void init_random(af_llama_weights *w, uint64_t seed) {
    const af_llama_config *c = af_llama_weights_config(w);
    float *d = af_llama_weights_data(w);
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + 7;
    for (int i = 0; i < af_llama_param_count(c); i++) {
        int64_t off;
        af_shape sh;
        af_llama_param_at(c, i, &off, &sh, NULL);
        for (int64_t j = 0; j < af_shape_count(sh); j++) {
            double normal = sqrt(-2.0 * log(uniform01(&s))) * cos(6.283185307179586 * uniform01(&s));
            d[off + j] = sh.rank == 1 ? 1.0f : (float)(0.02 * normal);
        }
    }
}

/* The starting weights: --init's file, or the preset with the vocab from --tokenizer or the data. */
static af_llama_weights *make_weights(const llama_args *a, const int32_t *tokens, int64_t n) {
    int vocab = 0;
    if (a->tokenizer) {
        af_tokenizer *tk = af_tokenizer_load(a->tokenizer);
        if (!tk) { fprintf(stderr, "aneforge train llama: --tokenizer: %s\n", af_error_message()); return NULL; }
        vocab = af_tokenizer_vocab_size(tk);
        af_tokenizer_free(tk);
    } else if (!a->init)
        for (int64_t i = 0; i < n; i++) vocab = tokens[i] + 1 > vocab ? tokens[i] + 1 : vocab;
    if (a->init) {
        af_llama_weights *w = llama_model_load(a->init); /* a llama2.c file or a Hugging Face folder */
        if (!w) fprintf(stderr, "aneforge train llama: --init: %s\n", af_error_message());
        else if (vocab && af_llama_weights_config(w)->vocab_size != vocab) {
            fprintf(stderr, "aneforge train llama: %s has a vocab of %d but the tokenizer %d: give the model's own tokenizer\n",
                    a->init, af_llama_weights_config(w)->vocab_size, vocab);
            af_llama_weights_free(w);
            w = NULL;
        }
        return w;
    }
    af_llama_config c;
    if (af_llama_preset(a->config, vocab, &c)) { fprintf(stderr, "aneforge train llama: --config: %s\n", af_error_message()); return NULL; }
    af_llama_weights *w = af_llama_weights_new(&c);
    if (!w) { fprintf(stderr, "aneforge train llama: %s\n", af_error_message()); return NULL; }
    init_random(w, a->seed);
    return w;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Window starting at tokens[start]: inputs x[T], one-hot next tokens y[T * V]. y holds
 * the window this slot had before, whose targets are hot[T] (-1: none, y all zero): only
 * those entries are cleared, not the whole [T, V] array (32 MB a step at Stories110M's
 * vocabulary, 3 ms of memset). */
static void fill_window(const int32_t *tokens, int64_t start, int T, int V, float *x, float *y, int32_t *hot) {
    for (int i = 0; i < T; i++) {
        x[i] = (float)tokens[start + i];
        if (!y) continue;
        if (hot[i] >= 0) y[(int64_t)i * V + hot[i]] = 0.0f;
        hot[i] = tokens[start + i + 1];
        y[(int64_t)i * V + hot[i]] = 1.0f;
    }
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig; interrupted = 1; }

/* Mean nats per token over the file: windows of T+1 tokens at stride T, predicted in
 * batches, cross-entropy from the logits on the host in double. -1 on failure, -2 when a
 * signal stopped it (checked between batches: Ctrl-C does not wait for a long pass). */
static double val_loss(af_trainer *t, const int32_t *tokens, int64_t n, int T, int V, int B, float *x, float *out) {
    int64_t windows = (n - 1) / T;
    double sum = 0;
    int64_t count = 0;
    for (int64_t w0 = 0; w0 < windows; w0 += B) {
        if (interrupted) return -2;
        int m = (int)(windows - w0 < B ? windows - w0 : B);
        for (int b = 0; b < m; b++) fill_window(tokens, (w0 + b) * T, T, V, x + (int64_t)b * T, NULL, NULL);
        if (af_trainer_predict(t, m, x, out)) return -1;
        for (int b = 0; b < m; b++)
            for (int i = 0; i < T; i++) {
                sum += llama_nll(out + ((int64_t)b * T + i) * V, V, tokens[(w0 + b) * T + i + 1]);
                count++;
            }
    }
    return sum / (double)count;
}

/* The trained values as llama2.c weights (for a sample or the export), freed by the
 * caller; NULL with the error set. The run does not keep the initial weights once the
 * trainer holds them (a third copy of the model, 440 MB at stories110m), so each use
 * makes its own. */
static af_llama_weights *trained(af_trainer *t, const af_llama_config *c) {
    af_llama_weights *w = af_llama_weights_new(c);
    for (int i = 0; w && i < af_trainer_num_params(t); i++) {
        int64_t off;
        if (af_llama_param_at(c, i, &off, NULL, NULL) || af_trainer_read_param(t, i, af_llama_weights_data(w) + off)) {
            af_llama_weights_free(w);
            return NULL;
        }
    }
    return w;
}

static double recent_mean(const llama_run_pos *p) {
    int nr = p->calls < LLAMA_RECENT ? (int)p->calls : LLAMA_RECENT;
    double mean = 0;
    for (int i = 0; i < nr; i++) mean += p->recent[i] / nr;
    return mean;
}

/* One checkpoint save (counted for the test hook, cli_fault_begin); 0 when it worked. */
static int save(const llama_args *a, af_trainer *t, const af_llama_config *c, const llama_run_pos *pos) {
    static int saves;
    bool fault = cli_fault_begin(++saves);
    int rc = llama_ckpt_save(a->save, t, c, a->data, pos);
    cli_fault_end(fault);
    return rc;
}

/* Trains from *w, which it frees (and sets NULL) once the trainer holds the weights. */
static int run(const llama_args *a, af_llama_weights **w, const int32_t *train, int64_t ntrain, const int32_t *val,
               int64_t nval) {
    const af_llama_config cfg = *af_llama_weights_config(*w), *c = &cfg;
    const int T = (int)a->seq, V = c->vocab_size, B = a->o.batch;
    af_net net = af_net_llama(*w, T);
    af_trainer *t = net.ctx ? af_trainer_new(&net, &a->o) : NULL;
    af_net_free(&net);
    af_llama_weights_free(*w);
    *w = NULL;
    if (!t) { fprintf(stderr, "aneforge train llama: %s\n", af_error_message()); return 1; }
    int k = af_trainer_steps_per_call(t), rc = 0, accum = a->o.grad_accum > 1 ? a->o.grad_accum : 1;
    llama_run_pos pos = { .rng = a->seed * 0x9E3779B97F4A7C15ULL + 11 };
    if (a->resume && llama_ckpt_resume(a->resume, t, c, a->data, &pos)) rc = 1;
    train_dist *dist = (train_dist *)&a->dist;
    if (!rc && train_dist_trainer(dist, t, &a->o, "aneforge train llama")) rc = 1;
    cli_log logw = { 0 }, *logf = NULL;
    if (!rc && a->log) {
        if (cli_log_open(&logw, a->log, "aneforge train llama")) rc = 1;
        else logf = &logw;
    }
    af_tokenizer *tok = a->sample_every && a->tokenizer ? af_tokenizer_load(a->tokenizer) : NULL; /* checked by make_weights */
    int64_t per_call = (int64_t)B * af_trainer_batches_per_call(t);
    float *x = malloc((size_t)(per_call * T) * sizeof(float)), *y = calloc((size_t)(per_call * T * V), sizeof(float));
    float *out = malloc((size_t)((int64_t)B * T * V) * sizeof(float));
    int32_t *hot = malloc((size_t)(per_call * T) * sizeof(int32_t)); /* y's ones, per row (fill_window) */
    if (!rc && (!x || !y || !out || !hot)) { fprintf(stderr, "aneforge train llama: out of memory\n"); rc = 1; }
    for (int64_t i = 0; hot && i < per_call * T; i++) hot[i] = -1;
    af_train_opts shown = a->o; /* labelled with the family the trainer compiles for (the device's on ane) */
    shown.compile.family = af_trainer_family(t);
    progress pr;
    progress_init(&pr, &shown, 1, (a->steps + k - 1) / k * k, a->json);
    if (dist->rank) pr.quiet = true;
    run_log rl;
    run_log_begin(&rl, logf, t, &shown, (int64_t)B * T * accum, "tokens_per_s");
    if (!rc && logf) {
        char extra[1024], data[300], valq[300], name[80];
        json_quote(data, sizeof data, a->data, 200);
        json_quote(valq, sizeof valq, a->val ? a->val : "", 200);
        json_quote(name, sizeof name, a->config ? a->config : "init", 60);
        snprintf(extra, sizeof extra, ",\"config\":%s,\"data\":%s,\"val\":%s,\"vocab\":%d,\"dim\":%d,\"n_layers\":%d,"
                 "\"n_heads\":%d,\"seq\":%d,\"steps\":%ld,\"seed\":%llu,\"resumed\":%d", name, data, valq, V, c->dim,
                 c->n_layers, c->n_heads, T, a->steps, (unsigned long long)a->seed, a->resume != NULL);
        run_log_header(&rl, "llama", extra);
    }
    dash_live *dash = !rc && a->dashboard ? dash_train_start(a->log) : NULL;
    bool quit = false, plain_quiet = pr.quiet;
    if (dash) pr.quiet = true; /* the dashboard has the screen */
    int64_t stop = a->stop_after && a->stop_after < a->steps ? a->stop_after : a->steps, steps_here = 0;
    /* first_s: the first call's time (warm-up: arenas, caches); vl: the last validation loss (NAN: none yet) */
    double train_s = 0, first_s = 0, vl = NAN;
    int64_t first_steps = 0, saved_steps = -1; /* the steps in the last good save; -1: none this run */
    bool save_failed = false;
    train_watch watch = { 0 };
    /* Clipping is the cure where the plan has it. */
    const char *advice = a->o.grad_clip > 0 || !af_plan_host_optimizer(a->o.plan)
                             ? NULL : ", or clip the gradient with --grad-clip 1";
    af_step_info info = { 0 };
    interrupted = 0;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal); /* a closed terminal saves as Ctrl-C does */
    while (!rc && pos.steps < stop && !interrupted) {
        if (dist->size > 1) { /* every rank stops at the same step */
            int any = train_dist_any(dist, interrupted);
            if (any < 0) { fprintf(stderr, "\naneforge train llama: rank %d: %s\n", dist->rank, af_error_message()); rc = 1; break; }
            if (any) { interrupted = 1; break; }
        }
        double td = now_s();
        /* Every rank draws the whole global batch's windows (N x per_call) and fills its
         * own: rows [rank per_call, (rank + 1) per_call). */
        for (int64_t gb = 0; gb < per_call * dist->size; gb++) {
            int64_t start = (int64_t)(next_u64(&pos.rng) % (uint64_t)(ntrain - T)), b = gb - dist->rank * per_call;
            if (b >= 0 && b < per_call) fill_window(train, start, T, V, x + b * T, y + b * T * V, hot + b * T);
        }
        double t0 = now_s();
        run_log_data(&rl, t0 - td);
        if (af_trainer_step(t, x, y, &info)) { fprintf(stderr, "\naneforge train llama: step failed: %s\n", af_error_message()); rc = 1; break; }
        train_s += now_s() - t0;
        if (!first_steps) first_s = train_s, first_steps = k;
        pos.steps += k;
        steps_here += k;
        pos.recent[pos.calls++ % LLAMA_RECENT] = info.loss;
        double mean = recent_mean(&pos);
        progress_step(&pr, 0, pos.steps, &info, mean, 0, train_s / (double)steps_here);
        train_watch_step(&watch, "aneforge train llama", pos.steps, info.loss, a->o.lr, advice);
        if (logf && (pos.calls % 10 == 1 || pos.steps >= a->steps)) {
            char norm[48] = ""; /* the gradient's norm before clipping, when clipping */
            if (a->o.grad_clip > 0) snprintf(norm, sizeof norm, ",\"grad_norm\":%s", JNUM("%.6g", info.grad_norm));
            cli_log_printf(logf, "{\"step\":%lld,\"loss\":%s,\"loss_source\":\"%s\",\"lr\":%.6g,\"loss_scale\":%g,\"skipped\":%lld,"
                                 "\"ppl\":%s%s%s}\n",
                           (long long)info.step, JNUM("%.6f", info.loss), af_metric_source_name(info.metric_source), info.lr,
                           info.loss_scale, (long long)info.skipped, JNUM("%.4g", exp(info.loss)), norm,
                           run_log_step_fields(&rl, steps_here));
        }
        bool eval_now = pos.steps >= a->steps || (a->eval_every && pos.steps % a->eval_every < k);
        run_log_aside_begin(&rl);
        if (dist->size > 1 && (eval_now || (a->save && (pos.steps >= stop || interrupted))) && af_trainer_dist_sync(t)) {
            fprintf(stderr, "\naneforge train llama: %s\n", af_error_message());
            rc = 1;
            break;
        }
        if (eval_now && val) {
            double v = val_loss(t, val, nval, T, V, B, x, out);
            if (v == -1) { fprintf(stderr, "\naneforge train llama: validation: %s\n", af_error_message()); rc = 1; break; }
            if (v >= 0 || isnan(v)) { /* -2: interrupted, saved below */
                vl = v;
                if (!pr.quiet) fprintf(stderr, "step %lld: val loss %.4f, train loss %.4f\n", (long long)pos.steps, vl, mean);
                cli_log_printf(logf, "{\"step\":%lld,\"val_loss\":%s,\"train_loss\":%s,\"val_ppl\":%s}\n", (long long)pos.steps,
                               JNUM("%.6f", vl), JNUM("%.6f", mean), JNUM("%.4g", exp(vl)));
            }
        }
        if (a->sample_every && (pos.steps >= a->steps || pos.steps % a->sample_every < k)) {
            char text[1024];
            af_llama_weights *now = trained(t, c);
            int fail = !now || train_llama_sample(now, tok, 64, a->seed, text, sizeof text);
            af_llama_weights_free(now);
            if (fail) {
                fprintf(stderr, "\naneforge train llama: sample: %s\n", af_error_message());
                rc = 1;
                break;
            }
            if (!pr.quiet) fprintf(stderr, "step %lld sample: %s\n", (long long)pos.steps, text);
            run_log_sample(&rl, pos.steps, text);
        }
        if (dash && !quit) quit = dash_live_poll(dash, false);
        if (quit) interrupted = 1; /* q on the dashboard stops the run as Ctrl-C does */
        /* A failed save (disk full) does not stop the run: the last good checkpoint stays
         * (saves are atomic) and the next save tries again. */
        if (a->save && !dist->rank && (eval_now || pos.steps >= stop || interrupted)) {
            save_failed = save(a, t, c, &pos) != 0;
            if (!save_failed) saved_steps = pos.steps;
            else if (pos.steps < stop && !interrupted)
                fprintf(stderr, "aneforge train llama: training goes on; %s, the next save tries again\n",
                        saved_steps >= 0 ? "the checkpoint of the last good save is kept" : "no checkpoint is saved yet");
        }
        run_log_aside_end(&rl); /* evaluation, samples and checkpoints are not step time */
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    bool finished = !rc && pos.steps >= a->steps;
    if (!rc) {
        char extra[128];
        int n = snprintf(extra, sizeof extra, ",\"final_train_loss\":%s", JNUM("%.6f", recent_mean(&pos)));
        if (val) snprintf(extra + n, sizeof extra - (size_t)n, ",\"final_val_loss\":%s", JNUM("%.6f", vl));
        run_log_end(&rl, pos.steps, extra);
    }
    char dist_extra[400];
    if (!rc) train_dist_summary(dist, train_s, steps_here, true, dist_extra, sizeof dist_extra);
    else dist_extra[0] = 0;
    dash_train_finish(dash, quit || rc);
    pr.quiet = plain_quiet;
    int log_failed = cli_log_close(&logw); /* printed when it happened */
    if (!rc && !finished) {
        fprintf(stderr, "\naneforge train llama: %s after step %lld of %ld", interrupted ? "interrupted" : "stopped",
                (long long)pos.steps, a->steps);
        if (a->save && !save_failed) fprintf(stderr, "; saved %s (continue with --resume %s)", a->save, a->save);
        else if (a->save && saved_steps >= 0) fprintf(stderr, "; %s holds step %lld", a->save, (long long)saved_steps);
        fprintf(stderr, "\n");
        if (interrupted && !quit) rc = 130;
        else if (save_failed) rc = 1;
    }
    if (finished && a->export_path) {
        af_llama_weights *now = trained(t, c);
        if (!now || af_llama_save(now, a->export_path, 0)) {
            fprintf(stderr, "aneforge train llama: --export %s: %s\n", a->export_path, af_error_message());
            rc = 1;
        }
        af_llama_weights_free(now);
    }
    if (!rc) {
        af_stats total;
        af_trainer_stats(t, &total);
        progress_finish(&pr, t, &total, steps_here);
        double mean = recent_mean(&pos);
        if (a->json) {
            printf("{\"train_loss\":%s,\"loss_source\":\"%s\",\"val_loss\":%s,", JNUM("%.6f", mean),
                   af_metric_source_name(info.metric_source), JNUM("%.6f", vl));
            printf("\"vocab\":%d,\"steps\":%lld,\"tokens_per_s\":%.1f,\"ms_per_step\":%.4f,", V, (long long)pos.steps,
                   train_s > 0 ? (double)steps_here * B * T * accum * dist->size / train_s : 0.0, /* all ranks' tokens */ steps_here ? 1000.0 * train_s / (double)steps_here : 0.0);
            if (steps_here > first_steps) /* after the first call: what benchmarks compare */
                printf("\"steady_ms_per_step\":%.4f,", 1000.0 * (train_s - first_s) / (double)(steps_here - first_steps));
            printf("\"seconds\":%.2f%s%s}\n", train_s, progress_json_extra(&pr, t, &total, steps_here), dist_extra);
        } else if (!pr.quiet)
            fprintf(stderr, "done: %lld steps, train loss %.4f (ln vocab %.4f)\n", (long long)pos.steps, mean, log((double)V));
    }
    if (!rc && finished && save_failed) { /* the run finished, but its last save did not */
        if (saved_steps >= 0) fprintf(stderr, "aneforge train llama: the last save failed; %s holds step %lld\n", a->save, (long long)saved_steps);
        else fprintf(stderr, "aneforge train llama: no checkpoint could be saved to %s\n", a->save);
        rc = 1;
    }
    if (log_failed && !rc) rc = 1;
    af_tokenizer_free(tok);
    free(hot);
    free(x);
    free(y);
    free(out);
    af_trainer_free(t);
    return rc;
}

static int llama_main(llama_args *ap);

/* Options the hf route (train_hf) does not take, each refused by name. */
static const char *const LLAMA_ONLY[] = { "--config", "--val", "--tokenizer", "--save", "--resume", "--log", "--json",
                                          "--dashboard", "--distributed", "--sync-every", "--dist-timeout",
                                          "--sample-every", "--eval-every", "--stop-after", "--grad-clip", "--grad-accum" };
static const char *const LORA_FLAGS[] = { "--lora-rank", "--lora-alpha", "--lora-targets", "--adapter", "--merge" };

static bool in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

/* --init DIR of a Hugging Face model that llama2.c's layout cannot hold, or with LoRA:
 * the same run as `aneforge hf train DIR ...` (one code path), --export DIR as its -o. */
static int train_hf(int argc, char **argv, const char *dir) {
    char **av = calloc((size_t)argc + 3, sizeof *av);
    if (!av) return bad("%s", "out of memory");
    int n = 0;
    av[n++] = "hf", av[n++] = "train", av[n++] = (char *)dir;
    bool out = false;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--init")) { i++; continue; }
        if (in_list(k, LLAMA_ONLY, sizeof LLAMA_ONLY / sizeof *LLAMA_ONLY)) {
            free(av);
            fprintf(stderr, "aneforge train llama: %s is not available for --init %s: a Hugging Face model that is not "
                    "Llama-2-shaped, or trained with LoRA, trains through 'aneforge hf train' (--data, --steps, --seq, "
                    "--seed, the train options, --lora-*, --adapter, --merge, --export DIR); drop %s\n", k, dir, k);
            return 2;
        }
        if (!strcmp(k, "--export")) { av[n++] = "-o"; out = true; continue; }
        av[n++] = argv[i];
    }
    if (!out) {
        free(av);
        return bad("--init %s is a Hugging Face model trained as itself: give --export DIR, where the trained folder (or "
                   "the LoRA adapter) goes", dir);
    }
    int rc = cmd_hf(n, av);
    free(av);
    return rc;
}

/* Whether --init names a Hugging Face folder that trains through train_hf: asked for
 * LoRA, or not expressible in llama2.c's layout (af_hf_check_llama). */
static bool wants_hf_route(int argc, char **argv, const char **dir) {
    *dir = NULL;
    bool lora = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--init") && i + 1 < argc) *dir = argv[i + 1];
        lora |= in_list(argv[i], LORA_FLAGS, sizeof LORA_FLAGS / sizeof *LORA_FLAGS);
    }
    if (!*dir || !llama_is_hf_folder(*dir)) return false;
    /* config.json alone decides; a folder that cannot be read goes the llama way, which says why */
    return lora || af_hf_check_llama(*dir) == AF_ERR_UNSUPPORTED;
}

int cmd_train_llama(int argc, char **argv) {
    const char *hf_dir;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
    if (wants_hf_route(argc, argv, &hf_dir)) return train_hf(argc, argv, hf_dir);
    llama_args a = { 0 };
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    if (train_dist_begin(&a.dist, "aneforge train llama")) return 1;
    if (a.dist.rank) { /* rank 0 speaks for the job and writes its files */
        a.json = 0, a.dashboard = 0, a.sample_every = 0;
        a.log = NULL, a.export_path = NULL;
    }
    rc = llama_main(&a);
    if (rc && rc != 130 && a.dist.size > 1) train_dist_fail(&a.dist, rc); /* 130: every rank stopped together */
    train_dist_end(&a.dist);
    return rc;
}

static int llama_main(llama_args *ap) {
    llama_args a = *ap;
    int rc = 0;
    /* Before any work: a run must not end unable to write what it was asked for. */
    const char *cmd = "aneforge train llama";
    if (cli_check_output(a.save, "--save", cmd) || cli_check_output(a.export_path, "--export", cmd) ||
        cli_check_append(a.log, "--log", cmd))
        return 1;
    int32_t *train = NULL, *val = NULL;
    int64_t ntrain = 0, nval = 0;
    if (af_tokens_read(a.data, 0, &train, &ntrain)) {
        fprintf(stderr, "aneforge train llama: --data: %s\n", af_error_message());
        return 2;
    }
    if (a.val && af_tokens_read(a.val, 0, &val, &nval)) {
        fprintf(stderr, "aneforge train llama: --val: %s\n", af_error_message());
        af_free(train);
        return 2;
    }
    /* Sizes first: an empty file has no vocab to derive. */
    if (ntrain < a.seq + 2 || (val && nval < a.seq + 1)) {
        bool t = ntrain < a.seq + 2;
        fprintf(stderr, "aneforge train llama: %s has %lld tokens, too few for one window of --seq %ld + 1; lower --seq\n",
                t ? a.data : a.val, (long long)(t ? ntrain : nval), a.seq);
        af_free(train);
        af_free(val);
        return 2;
    }
    af_llama_weights *w = make_weights(&a, train, ntrain);
    rc = w ? 0 : 2;
    const af_llama_config *c = w ? af_llama_weights_config(w) : NULL;
    int64_t maxid = -1;
    for (int64_t i = 0; c && i < ntrain; i++) maxid = train[i] > maxid ? train[i] : maxid;
    for (int64_t i = 0; c && i < nval; i++) maxid = val[i] > maxid ? val[i] : maxid;
    if (!rc && maxid >= c->vocab_size) {
        fprintf(stderr, "aneforge train llama: the data holds id %lld but the model's vocab is %d: give the tokenizer that made it\n",
                (long long)maxid, c->vocab_size);
        rc = 2;
    }
    if (!rc && a.seq > c->seq_len) {
        fprintf(stderr, "aneforge train llama: --seq %ld is longer than the model's seq_len %d\n", a.seq, c->seq_len);
        rc = 2;
    }
    if (!rc) rc = run(&a, &w, train, ntrain, val, nval);
    af_llama_weights_free(w);
    af_free(train);
    af_free(val);
    return rc;
}
