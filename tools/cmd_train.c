/* aneforge train: trains the built-in MLP or CNN on MNIST, Fashion-MNIST or CIFAR-10
 * with a live progress display, JSON-lines logs, evaluation every epoch and atomic
 * checkpoints that resume bit-identically. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "cli_args.h"
#include "cli_env.h"
#include "data_find.h"
#include "train_opts.h"
#include "train_dist.h"
#include "train_progress.h"
#include "run_log.h"
#include "cli_out.h"
#include "train_watch.h"
#include "dash_term.h"
#include "aneforge.h"
#include "aneforge_data.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *model, *data, *save, *resume, *log;
    int epochs, json, limit, dashboard;
    uint64_t seed;
    af_train_opts o;
    train_dist dist;
} train_args;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig; interrupted = 1; }

static void usage(FILE *f) {
    fprintf(f,
            "usage: aneforge train {mlp|cnn} --data {mnist|fashion|cifar10} [options]\n"
            "       aneforge train llama --config tiny --data train.bin [options]   (see 'train llama --help')\n\n"
            "Trains a built-in model, evaluating on the test split after every epoch.\n\n"
            "options:\n"
            "  --epochs N            passes over the training set (default 5)\n"
            "  --batch B             minibatch size (default 64)\n"
            "  --lr X                peak learning rate (default 0.003)\n"
            "  --optimizer adam|sgd  (default adam)\n"
            "  --schedule constant|cosine   learning-rate schedule (default cosine)\n"
            "  --warmup N            warmup steps for the cosine schedule (default 0)\n"
            "  --weight-decay X      decoupled weight decay (default 0.05)\n"
            "  --plan host|device|resident|unrolled   where the optimizer runs (default host)\n"
            "  --unroll K            steps per program for --plan unrolled (default 8)\n"
            "  --shuttle-state       unrolled plan: feed params and Adam moments in and read them\n"
            "                        back around every K-step program instead of keeping them resident\n"
            "  --precision fp32|fp16|bf16 numerics (default fp32 on cpu, fp16 on ane-sim; bf16: cpu matmuls/convs,\n"
            "                        on a CPU with AMX-BF16 or AVX512-BF16)\n"
            "  --target cpu|ane-sim[:m1|m2|m3|m4|m5]|ane[:FAM]   backend (default cpu); ane loads\n"
            "                           $ANEFORGE_ANE_FRAMEWORK (the fake framework on Linux) or Apple's\n"
            "  --loss-scale S        gradients are computed scaled by S (default 1; 128 in fp16)\n"
            "  --dynamic-loss-scale  halve the scale on overflow, double it after 1000 clean steps\n"
            "  --seed N              weights and data order (default 1)\n"
            "  --threads N           CPU threads (default: all cores)\n"
            "  --limit N             use only the first N training samples\n"
            "  --save PATH           write a checkpoint after every epoch and on Ctrl-C\n"
            "  --resume PATH         continue from a checkpoint (bit-identical in fp32)\n"
            "  --log FILE            append one JSON line per logging interval\n"
            "  --json                finish with one JSON line of results\n"
            "  --distributed         data-parallel over the MPI job (mpirun -np N aneforge train ...): each rank\n"
            "                        trains on its shard of every global batch of N x B; host plan: gradients\n"
            "                        averaged every step; device/resident/unrolled: local SGD (--sync-every)\n"
            "  --sync-every K        in-program plans: average parameters and moments every K steps (default 8)\n"
            "  --dist-timeout S      a rank silent for S seconds stops the others (default 120)\n"
            "  --dashboard           watch the run in the terminal while it trains ('aneforge dashboard');\n"
            "                        logs to --log, or to aneforge-MODEL.jsonl without one\n\n"
            "Training loss and accuracy come from the host in fp32 (host and device plans, from\n"
            "the logits) or from inside the step program (resident and unrolled plans, in the\n"
            "program's precision); --json and --log say which in \"loss_source\". Test accuracy\n"
            "is always computed on the host from the evaluation program's logits.\n\n"
            "Data comes from $ANEFORGE_DATA or ./data; get it with 'aneforge data fetch mnist'.\n");
}

static int bad(const char *fmt, const char *a) { return cli_usage_error("aneforge train", fmt, a); }

static int parse_args(int argc, char **argv, train_args *a) {
    a->o = af_train_defaults();
    /* Tuned on MNIST's MLP (98.1-98.3% in 5 epochs over seeds); see README. */
    a->o.batch = 64;
    a->o.lr = 3e-3f;
    a->o.schedule = AF_LR_COSINE;
    a->o.weight_decay = 0.05f;
    a->epochs = 5;
    a->seed = 1;
    a->o.loss_scale = 0;
    train_opt_flags flags = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); return 1; }
        if (k[0] != '-') {
            if (a->model) return bad("unexpected argument '%s'", k);
            a->model = k;
            continue;
        }
        if (!strcmp(k, "--json")) { a->json = 1; continue; }
        if (!strcmp(k, "--dashboard")) { a->dashboard = 1; continue; }
        if (train_opt_flag(k, &a->o) || train_dist_flag(k, &a->dist)) continue;
        if (!v) return bad("%s", cli_missing_value_message(usage, k));
        i++;
        int r = train_opt_parse(k, v, &a->o, &flags, "aneforge train");
        if (!r) r = train_dist_parse(k, v, &a->dist, "aneforge train");
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(k, "--data")) a->data = v;
        else if (!strcmp(k, "--epochs")) { if (cli_parse_long(v, 1, 100000, &n)) return bad("--epochs wants a positive integer, not '%s'", v); a->epochs = (int)n; }
        else if (!strcmp(k, "--limit")) { if (cli_parse_long(v, 1, 100000000, &n)) return bad("--limit wants a positive integer, not '%s'", v); a->limit = (int)n; }
        else if (!strcmp(k, "--seed")) { if (cli_parse_long(v, 0, 0x7fffffffL, &n)) return bad("--seed wants a non-negative integer, not '%s'", v); a->seed = (uint64_t)n; }
        else if (!strcmp(k, "--save")) a->save = v;
        else if (!strcmp(k, "--resume")) a->resume = v;
        else if (!strcmp(k, "--log")) a->log = v;
        else return bad("unknown option '%s'", k);
    }
    if (!a->model) return bad("%s", "name a model: mlp or cnn");
    if (strcmp(a->model, "mlp") && strcmp(a->model, "cnn")) return bad("the model is mlp or cnn, not '%s'", a->model);
    if (!a->data) return bad("%s", "--data is required: mnist, fashion or cifar10");
    if (train_opt_finish(&a->o, &flags, "aneforge train")) return 2;
    if (a->dashboard && !a->log) a->log = !strcmp(a->model, "mlp") ? "aneforge-mlp.jsonl" : "aneforge-cnn.jsonl";
    return 0;
}

/* splitmix64 for the data order; its state goes into checkpoints. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void shuffle(int64_t *perm, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(next_u64(rng) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Test accuracy, and the mean cross-entropy of the test set (nats) into *loss; -1 on
 * failure, -2 when a signal stopped it. */
static double evaluate(af_trainer *t, const af_dataset *d, float *x, float *out, int64_t chunk, double *loss) {
    int64_t n = af_dataset_count(d), correct = 0;
    double ce = 0;
    int c, h, w, k = af_dataset_classes(d);
    af_dataset_sample_shape(d, &c, &h, &w);
    const uint8_t *labels = af_dataset_labels(d);
    int64_t *idx = malloc((size_t)chunk * sizeof *idx);
    for (int64_t b = 0; b < n && idx; b += chunk) {
        int64_t m = n - b < chunk ? n - b : chunk;
        for (int64_t i = 0; i < m; i++) idx[i] = b + i;
        if (interrupted) { free(idx); return -2; } /* Ctrl-C does not wait for the whole test set */
        if (af_dataset_batch(d, (int)m, idx, x, NULL) || af_trainer_predict(t, m, x, out)) { free(idx); return -1; }
        for (int64_t i = 0; i < m; i++) {
            int am = 0;
            for (int j = 1; j < k; j++) am = out[i * k + j] > out[i * k + am] ? j : am;
            correct += am == labels[b + i];
            double se = 0;
            for (int j = 0; j < k; j++) se += exp((double)out[i * k + j] - out[i * k + am]);
            ce += log(se) + out[i * k + am] - out[i * k + labels[b + i]];
        }
    }
    free(idx);
    *loss = ce / (double)n;
    return (double)correct / (double)n;
}

typedef struct {
    int64_t epoch, pos;     /* where the run is: epoch and batch-call index within it */
    uint64_t rng_epoch;     /* generator state at the start of the epoch (regenerates its order) */
    int64_t global_batch;   /* samples per call over all ranks (pos counts these) */
} run_pos;

static int saves; /* counted for the test hook (cli_fault_begin) */

static int save_ckpt(const char *path, af_trainer *t, const train_args *a, run_pos p) {
    bool fault = cli_fault_begin(++saves);
    af_checkpoint *c = af_checkpoint_new();
    af_status st = c ? af_trainer_export(t, c) : AF_ERR_NOMEM;
    if (!st) st = af_checkpoint_put_str(c, "cli.model", a->model);
    if (!st) st = af_checkpoint_put_str(c, "cli.data", a->data);
    if (!st) st = af_checkpoint_put_i64(c, "cli.epoch", p.epoch);
    if (!st) st = af_checkpoint_put_i64(c, "cli.pos", p.pos);
    if (!st) st = af_checkpoint_put(c, "cli.rng_epoch", &p.rng_epoch, sizeof p.rng_epoch);
    if (!st) st = af_checkpoint_put_i64(c, "cli.global_batch", p.global_batch);
    if (!st) st = af_checkpoint_save(c, path);
    af_checkpoint_free(c);
    cli_fault_end(fault);
    if (st) fprintf(stderr, "\naneforge train: could not save %s: %s\n", path, af_error_message());
    return st ? 1 : 0;
}

static int load_ckpt(const char *path, af_trainer *t, const train_args *a, run_pos *p) {
    af_checkpoint *c = NULL;
    af_status st = af_checkpoint_load(path, &c);
    const char *model = c ? af_checkpoint_get_str(c, "cli.model") : NULL, *data = c ? af_checkpoint_get_str(c, "cli.data") : NULL;
    if (!st && (!model || strcmp(model, a->model) || !data || strcmp(data, a->data)))
        st = af_fail(AF_ERR_INVALID, "%s was saved by 'train %s --data %s'; resume it with the same model and data", path,
                     model ? model : "?", data ? data : "?");
    int64_t bytes = 0;
    const void *r = c ? af_checkpoint_get(c, "cli.rng_epoch", &bytes) : NULL;
    if (!st && (!r || bytes != sizeof p->rng_epoch)) st = af_fail(AF_ERR_CORRUPT, "%s: record cli.rng_epoch is missing", path);
    if (!st) memcpy(&p->rng_epoch, r, sizeof p->rng_epoch);
    if (!st) st = af_checkpoint_get_i64(c, "cli.epoch", &p->epoch);
    if (!st) st = af_checkpoint_get_i64(c, "cli.pos", &p->pos);
    /* Saved by another number of ranks: the same place in the epoch, in this run's calls
     * (a checkpoint without the record was one process's). */
    int64_t saved_gb = 0;
    if (!st && (af_checkpoint_get_i64(c, "cli.global_batch", &saved_gb) || saved_gb < 1)) saved_gb = p->global_batch;
    if (!st && saved_gb != p->global_batch && p->pos >= 0) p->pos = p->pos * saved_gb / p->global_batch;
    /* pos indexes the epoch's permutation: a negative one would read before it. */
    if (!st && (p->epoch < 0 || p->pos < 0))
        st = af_fail(AF_ERR_CORRUPT, "%s: records cli.epoch %lld and cli.pos %lld must be >= 0", path,
                     (long long)p->epoch, (long long)p->pos);
    if (!st) st = af_trainer_import(t, c);
    af_checkpoint_free(c);
    if (st) fprintf(stderr, "aneforge train: cannot resume: %s\n", af_error_message());
    return st ? 1 : 0;
}

static int cmd_train_run(train_args *ap);

int cmd_train(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "llama")) return cmd_train_llama(argc - 1, argv + 1);
    train_args a = { 0 };
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    if (train_dist_begin(&a.dist, "aneforge train")) return 1;
    train_dist *dist = &a.dist;
    if (dist->rank) { /* rank 0 speaks for the job */
        a.json = 0;
        a.log = NULL;
        a.dashboard = 0;
    }
    rc = cmd_train_run(&a);
    if (rc && rc != 130 && dist->size > 1) train_dist_fail(dist, rc); /* 130: every rank stopped together */
    train_dist_end(dist);
    return rc;
}

static int cmd_train_run(train_args *ap) {
    train_args a = *ap;
    train_dist *dist = &ap->dist;
    int rc = 0;
    /* Before any work: a run must not end unable to write what it was asked for. */
    if (cli_check_output(a.save, "--save", "aneforge train") || cli_check_append(a.log, "--log", "aneforge train")) return 1;
    af_dataset_kind kind = !strcmp(a.data, "mnist") ? AF_DATA_MNIST : !strcmp(a.data, "fashion") ? AF_DATA_FASHION : AF_DATA_CIFAR10;
    if (strcmp(a.data, "mnist") && strcmp(a.data, "fashion") && strcmp(a.data, "cifar10")) return bad("--data is mnist, fashion or cifar10, not '%s'", a.data);
    const char *ddir = data_dir_for(kind, cli_data_dir()); /* the shipped MNIST when the data dir lacks it */
    af_dataset *train = af_dataset_load(kind, ddir, 1), *test = train ? af_dataset_load(kind, ddir, 0) : NULL;
    if (!train || !test) {
        fprintf(stderr, "aneforge train: %s\n", af_error_message());
        af_dataset_free(train);
        return 1;
    }
    int c, h, w, classes = af_dataset_classes(train);
    af_dataset_sample_shape(train, &c, &h, &w);
    af_shape sample = AF_SHAPE(c, h, w);
    af_net net = !strcmp(a.model, "mlp") ? af_net_mlp(sample, 128, classes, a.seed) : af_net_cnn(sample, classes, a.seed);
    /* Per-dataset pixel statistics (all channels pooled), applied inside the graph. */
    af_net_set_input_norm(&net, kind == AF_DATA_MNIST ? 0.1307f : kind == AF_DATA_FASHION ? 0.2860f : 0.4734f,
                          kind == AF_DATA_MNIST ? 0.3081f : kind == AF_DATA_FASHION ? 0.3530f : 0.2516f);
    int64_t ntrain = af_dataset_count(train);
    if (a.limit && a.limit < ntrain) ntrain = a.limit;
    int k = af_plan_steps_per_call(&a.o);
    int64_t per_call = (int64_t)a.o.batch * k, calls = ntrain / (per_call * dist->size);
    if (calls < 1) {
        fprintf(stderr, "aneforge train: %lld training samples cannot fill one step of %lld (batch %d x %d x %d ranks); lower --batch\n",
                (long long)ntrain, (long long)per_call * dist->size, a.o.batch, k, dist->size);
        return 2;
    }
    a.o.total_steps = calls * k * a.epochs;
    af_trainer *t = af_trainer_new(&net, &a.o);
    if (!t) {
        fprintf(stderr, "aneforge train: %s\n", af_error_message());
        af_net_free(&net);
        af_dataset_free(train);
        af_dataset_free(test);
        return 1;
    }
    run_pos pos = { 0, 0, a.seed * 0x2545F4914F6CDD1DULL + 1, per_call * dist->size };
    if (a.resume && load_ckpt(a.resume, t, &a, &pos)) rc = 1;
    if (!rc && train_dist_trainer(dist, t, &a.o, "aneforge train")) rc = 1;
    cli_log logw = { 0 }, *logf = NULL;
    if (!rc && a.log) {
        if (cli_log_open(&logw, a.log, "aneforge train")) rc = 1;
        else logf = &logw;
    }
    int64_t xs = (int64_t)c * h * w;
    float *x = malloc((size_t)(per_call * xs) * sizeof(float)), *y = malloc((size_t)(per_call * classes) * sizeof(float));
    int64_t *perm = malloc((size_t)ntrain * sizeof *perm);
    int64_t eval_chunk = a.o.eval_batch * 4;
    float *ex = malloc((size_t)(eval_chunk * xs) * sizeof(float)), *eo = malloc((size_t)(eval_chunk * classes) * sizeof(float));
    if (!rc && (!x || !y || !perm || !ex || !eo)) { fprintf(stderr, "aneforge train: out of memory\n"); rc = 1; }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal); /* a closed terminal saves as Ctrl-C does */
    progress pr;
    progress_init(&pr, &a.o, a.epochs, calls * k, a.json);
    if (dist->rank) pr.quiet = true;
    run_log rl;
    run_log_begin(&rl, logf, t, &a.o, a.o.batch, "samples_per_s");
    if (!rc && logf) {
        char extra[512];
        snprintf(extra, sizeof extra, ",\"data\":\"%s\",\"epochs\":%d,\"steps_per_epoch\":%lld,\"train_samples\":%lld,"
                 "\"seed\":%llu,\"resumed\":%d", a.data, a.epochs, (long long)(calls * k), (long long)ntrain,
                 (unsigned long long)a.seed, a.resume != NULL);
        run_log_header(&rl, a.model, extra);
    }
    dash_live *dash = !rc && a.dashboard ? dash_train_start(a.log) : NULL;
    bool plain_quiet = pr.quiet;
    if (dash) pr.quiet = true; /* the dashboard has the screen */
    double train_s = 0, loss_ema = 0, acc_ema = 0, test_acc = NAN, test_loss = NAN; /* null in --json until evaluated */
    int64_t steps_run = 0, saved_epoch = -1; /* the epoch of the last good save; -1: none this run */
    bool save_failed = false;
    train_watch watch = { 0 };
    af_step_info info = { 0 };
    for (; !rc && pos.epoch < a.epochs && !interrupted; pos.epoch++) {
        uint64_t rng = pos.rng_epoch;
        shuffle(perm, ntrain, &rng);
        for (; pos.pos < calls && !interrupted; pos.pos++) {
            if (dist->size > 1) { /* every rank stops at the same step */
                int any = train_dist_any(dist, interrupted);
                if (any < 0) { fprintf(stderr, "\naneforge train: rank %d: %s\n", dist->rank, af_error_message()); rc = 1; break; }
                if (any) { interrupted = 1; break; }
            }
            double td = now_s();
            /* This rank's shard of the call's global batch: rows [rank B, (rank + 1) B). */
            if (af_dataset_batch(train, (int)per_call, perm + (pos.pos * dist->size + dist->rank) * per_call, x, y)) {
                fprintf(stderr, "\naneforge train: %s\n", af_error_message());
                rc = 1;
                break;
            }
            double t0 = now_s();
            run_log_data(&rl, t0 - td);
            if (af_trainer_step(t, x, y, &info)) {
                if (dist->size > 1) fprintf(stderr, "\naneforge train: rank %d: step failed: %s\n", dist->rank, af_error_message());
                else fprintf(stderr, "\naneforge train: step failed: %s\n", af_error_message());
                rc = 1;
                break;
            }
            train_s += now_s() - t0;
            steps_run += k;
            /* Smoothed over about 20 steps, whatever the steps per call. */
            double keep = pow(0.95, k);
            loss_ema = steps_run == k ? info.loss : keep * loss_ema + (1 - keep) * info.loss;
            acc_ema = steps_run == k ? info.accuracy : keep * acc_ema + (1 - keep) * info.accuracy;
            progress_step(&pr, pos.epoch, (pos.pos + 1) * k, &info, loss_ema, acc_ema, train_s / (double)steps_run);
            train_watch_step(&watch, "aneforge train", info.step, info.loss, a.o.lr, NULL);
            if (logf && (pos.pos % 50 == 0 || pos.pos + 1 == calls)) /* flushed: a dashboard may follow it */
                cli_log_printf(logf,
                               "{\"epoch\":%lld,\"step\":%lld,\"loss\":%s,\"accuracy\":%s,\"loss_source\":\"%s\",\"lr\":%.6g,"
                               "\"loss_scale\":%g,\"skipped\":%lld,\"skipped_consecutive\":%lld%s}\n",
                               (long long)pos.epoch + 1, (long long)info.step, JNUM("%.6f", info.loss), JNUM("%.4f", info.accuracy),
                               af_metric_source_name(info.metric_source), info.lr, info.loss_scale, (long long)info.skipped,
                               (long long)info.skipped_consecutive, run_log_step_fields(&rl, steps_run));
            if (dash && dash_live_poll(dash, false)) interrupted = 1; /* q or Ctrl-C: as Ctrl-C without one */
        }
        if (rc || interrupted) break;
        run_log_aside_begin(&rl);
        if (dist->size > 1 && af_trainer_dist_sync(t)) { fprintf(stderr, "\naneforge train: %s\n", af_error_message()); rc = 1; break; }
        double acc = evaluate(t, test, ex, eo, eval_chunk, &test_loss);
        if (acc == -2) break; /* interrupted: saved below at the end of this epoch, before its evaluation */
        if (acc < 0) { fprintf(stderr, "\naneforge train: evaluation: %s\n", af_error_message()); rc = 1; break; }
        test_acc = acc;
        progress_epoch(&pr, pos.epoch, test_acc, loss_ema);
        cli_log_printf(logf, "{\"epoch\":%lld,\"test_acc\":%s,\"test_acc_source\":\"host_fp32\",\"train_loss\":%s,\"loss_source\":\"%s\","
                             "\"step\":%lld,\"test_loss\":%s}\n",
                       (long long)pos.epoch + 1, JNUM("%.4f", test_acc), JNUM("%.6f", loss_ema), af_metric_source_name(info.metric_source),
                       (long long)info.step, JNUM("%.6f", test_loss));
        pos.pos = 0;
        pos.rng_epoch = rng;
        /* A failed save (disk full) does not stop the run: the last good checkpoint stays
         * (saves are atomic) and the next epoch's save tries again. */
        if (a.save && !dist->rank) {
            save_failed = save_ckpt(a.save, t, &a, (run_pos){ pos.epoch + 1, 0, pos.rng_epoch, pos.global_batch }) != 0;
            if (!save_failed) saved_epoch = pos.epoch + 1;
            else if (pos.epoch + 1 < a.epochs)
                fprintf(stderr, "aneforge train: training goes on; %s, the next epoch's save tries again\n",
                        saved_epoch >= 0 ? "the checkpoint of the last good save is kept" : "no checkpoint is saved yet");
        }
        run_log_aside_end(&rl); /* evaluation and checkpoint are not step time */
    }
    if (dash && (interrupted || rc)) { /* the terminal back before the messages */
        dash_train_finish(dash, true);
        dash = NULL;
    }
    if (interrupted && !rc) {
        fprintf(stderr, "\naneforge train: interrupted");
        if (dist->size > 1 && af_trainer_dist_sync(t)) a.save = NULL; /* the last good checkpoint stays */
        if (a.save && !dist->rank && !save_ckpt(a.save, t, &a, pos)) fprintf(stderr, "; saved %s (resume with --resume %s)", a.save, a.save);
        fprintf(stderr, "\n");
        rc = 130;
    }
    if (!rc) {
        af_stats total;
        af_trainer_stats(t, &total);
        char extra[160];
        snprintf(extra, sizeof extra, ",\"final_test_acc\":%s,\"final_test_loss\":%s,\"final_train_loss\":%s", JNUM("%.4f", test_acc),
                 JNUM("%.6f", test_loss), JNUM("%.6f", loss_ema));
        char dist_extra[400];
        train_dist_summary(dist, train_s, steps_run, true, dist_extra, sizeof dist_extra);
        run_log_end(&rl, steps_run, extra);
        if (dash) { /* shows the end until q, then the usual closing lines */
            dash_train_finish(dash, false);
            dash = NULL;
            pr.quiet = plain_quiet;
        }
        progress_finish(&pr, t, &total, steps_run);
        if (a.json)
            printf("{\"test_acc\":%s,\"test_acc_source\":\"host_fp32\",\"train_loss\":%s,\"loss_source\":\"%s\",\"ms_per_step\":%.4f,"
                   "\"steps\":%lld,\"seconds\":%.2f,\"skipped\":%lld,\"skipped_consecutive\":%lld%s%s}\n",
                   JNUM("%.4f", test_acc), JNUM("%.6f", loss_ema), af_metric_source_name(info.metric_source), steps_run ? 1000.0 * train_s / (double)steps_run : 0.0,
                   (long long)steps_run, train_s, (long long)info.skipped, (long long)info.skipped_consecutive,
                   progress_json_extra(&pr, t, &total, steps_run), dist_extra);
    }
    if (!rc && save_failed && !interrupted) { /* the run finished, but its last save did not */
        if (saved_epoch >= 0) fprintf(stderr, "aneforge train: the last save failed; %s holds epoch %lld\n", a.save, (long long)saved_epoch);
        else fprintf(stderr, "aneforge train: no checkpoint could be saved to %s\n", a.save);
        rc = 1;
    }
    if (cli_log_close(&logw) && !rc) rc = 1; /* the failure was printed when it happened */
    free(x);
    free(y);
    free(perm);
    free(ex);
    free(eo);
    af_trainer_free(t);
    af_net_free(&net);
    af_dataset_free(train);
    af_dataset_free(test);
    return rc;
}
