/* The small fixed trainers the checkpoint-import fuzzer loads into, and its compact
 * record-list input form; shared with the seed generator. */
#ifndef AF_FUZZ_TRAINER_H
#define AF_FUZZ_TRAINER_H
#include "train/ckpt.h"
#include "aneforge.h"

#include <string.h>

enum { FT_TRAINERS = 2, FT_BATCH = 2, FT_IN = 4, FT_OUT = 2 };

/* 0: host plan with a dynamic loss scale; 1: resident plan (state in the backend). CPU, fp32. */
static inline af_trainer *ft_make_trainer(int which) {
    af_net net = af_net_mlp(AF_SHAPE(FT_IN), 3, FT_OUT, 7);
    af_train_opts o = af_train_defaults();
    o.compile.target = AF_TARGET_CPU;
    o.batch = FT_BATCH;
    o.eval_batch = FT_BATCH;
    o.plan = which ? AF_PLAN_RESIDENT : AF_PLAN_HOST;
    o.dynamic_loss_scale = !which;
    o.loss_scale = which ? 0 : 1024;
    af_trainer *t = af_trainer_new(&net, &o);
    af_net_free(&net);
    return t;
}

/* The compact form: records of [u8 name length][name][u16 LE payload length][payload]
 * until the input ends (a record cut short ends the list). */
static inline ckpt *ft_records_to_ckpt(const uint8_t *p, size_t n) {
    ckpt *c = ckpt_new();
    char name[256];
    for (size_t i = 0; c && i < n;) {
        size_t nl = p[i++];
        if (nl == 0 || nl > n - i) break;
        memcpy(name, p + i, nl), name[nl] = 0;
        i += nl;
        if (n - i < 2) break;
        size_t bl = (size_t)p[i] | (size_t)p[i + 1] << 8;
        i += 2;
        if (bl > n - i) break;
        if (strlen(name) == nl) ckpt_put(c, name, p + i, (int64_t)bl);
        i += bl;
    }
    return c;
}
#endif
