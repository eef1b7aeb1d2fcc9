/* Adding a plan is its own file plus one line in src/train/registry.c: this test is that
 * file (a plan "host-copy" made of the host plan's parts: the gradient programs and the
 * host optimizer) and adds the line through registry.c's TR_TEST_PLANS, compiling the
 * registry into this program in place of the library's. Then, with no other change:
 *  - af_plan_parse and af_plan_name know the new plan, and the list of plans in the
 *    unknown-name message names it;
 *  - it trains: 3 Adam steps of a small MLP give weights and losses bit-identical to the
 *    host plan's (the same programs and update in the same order);
 *  - a checkpoint saved under it resumes to the same weights. */
#define _POSIX_C_SOURCE 200809L
#include "train/grad_programs.h"
#include "train/host_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TEST_PLAN_ID = 40 };

static af_status copy_build(af_trainer *t) {
    tr_grad_programs *gp = tr_zalloc(1, sizeof *gp);
    if (!(t->ps = gp)) return AF_ERR_NOMEM;
    return tr_grad_programs_build(t, gp);
}

static af_status copy_grads(af_trainer *t, const float *x, const float *y, af_step_info *info) {
    return tr_grad_programs_run(t, t->ps, x, y, info);
}

static void copy_free(af_trainer *t) {
    if (t->ps) tr_grad_programs_free(t, t->ps);
    free(t->ps);
}

const tr_plan tr_plan_host_copy = {
    .name = "host-copy",
    .id = (af_plan)TEST_PLAN_ID,
    .caps = TR_HOST_OPTIMIZER | TR_HOST_METRICS,
    .build = copy_build,
    .step = tr_host_opt_step,
    .grads = copy_grads,
    .free = copy_free,
};

/* The registry line. */
#define TR_TEST_PLANS(X) X(host_copy)
#include "train/registry.c"

#include "support/check.h"
#include "support/clusters.h"

enum { D = CL_D, C = CL_C, B = CL_B, MAXW = 4096 };

static af_trainer *make(af_plan plan) {
    static clusters_ctx ctx = { 3 };
    af_net net = { .ctx = &ctx, .make_params = clusters_mlp_params, .forward = clusters_mlp_forward,
                   .sample = AF_SHAPE(D), .out_dim = C };
    af_train_opts o = af_train_defaults();
    o.plan = plan;
    o.batch = B;
    o.lr = 0.01f;
    o.eval_batch = 16;
    o.compile.precision = AF_PRECISION_FP32;
    o.compile.threads = 1;
    return af_trainer_new(&net, &o);
}

static int read_all(af_trainer *t, float *dst) {
    int n = 0;
    for (int i = 0; i < af_trainer_num_params(t); i++) {
        if (af_trainer_read_param(t, i, dst + n)) return -1;
        n += (int)af_shape_count(af_tensor_shape(af_trainer_param(t, i)));
    }
    return n;
}

int main(void) {
    af_plan p = AF_PLAN_HOST;
    CHECK(af_plan_parse("host-copy", &p) == AF_OK && p == (af_plan)TEST_PLAN_ID, "parse: %d", (int)p);
    CHECK(!strcmp(af_plan_name((af_plan)TEST_PLAN_ID), "host-copy"), "name: %s", af_plan_name((af_plan)TEST_PLAN_ID));
    CHECK(af_plan_parse("nope", &p) == AF_ERR_INVALID &&
              !strcmp(af_error_message(), "unknown plan 'nope'; the plans are host, device, resident, unrolled, pipeline or host-copy"),
          "message: %s", af_error_message());

    af_trainer *a = make((af_plan)TEST_PLAN_ID), *b = make(AF_PLAN_HOST);
    CHECK(a && b, "trainers: %s", af_error_message());
    if (a && b) {
        float x[B * D], y[B * C], wa[MAXW], wb[MAXW];
        for (int s = 0; s < 3; s++) {
            clusters_batch(s, 1, x, y);
            af_step_info ia, ib;
            CHECK(af_trainer_step(a, x, y, &ia) == AF_OK && af_trainer_step(b, x, y, &ib) == AF_OK, "step %d: %s", s,
                  af_error_message());
            CHECK(ia.loss == ib.loss && ia.accuracy == ib.accuracy, "step %d: loss %.9g vs %.9g", s, ia.loss, ib.loss);
        }
        int na = read_all(a, wa), nb = read_all(b, wb);
        CHECK(na > 0 && na == nb && !memcmp(wa, wb, sizeof(float) * (size_t)na), "weights bit-identical to the host plan's");
        char path[] = "/tmp/af_plan_registry_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "temp file");
        if (fd >= 0) {
            close(fd);
            CHECK(af_trainer_save(a, path) == AF_OK, "save: %s", af_error_message());
            af_trainer *c = make((af_plan)TEST_PLAN_ID);
            float wc[MAXW];
            CHECK(c && af_trainer_load(c, path) == AF_OK && read_all(c, wc) == na && !memcmp(wa, wc, sizeof(float) * (size_t)na),
                  "resume: %s", af_error_message());
            af_trainer_free(c);
            remove(path);
        }
    }
    af_trainer_free(a);
    af_trainer_free(b);
    return check_finish("plan_registry");
}
