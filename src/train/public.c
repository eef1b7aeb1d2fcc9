/* The trainer's checkpoints and timings as public calls (aneforge.h, "Checkpoints with
 * records of the caller's own"): af_checkpoint is the checkpoint container (ckpt.h)
 * under its public name, so the same object goes through both. */
#include "train/ckpt.h"
#include "train/trainer.h"
#include "train/trainer_io.h"
#include "ir/ir.h"

#include <string.h>

_Static_assert((int)AF_NPHASES == (int)TR_NPHASE && (int)AF_PHASE_STEP == (int)TR_PHASE_FWD_BWD &&
                   (int)AF_PHASE_OPTIMIZER == (int)TR_PHASE_OPTIMIZER && (int)AF_PHASE_COMPILE == (int)TR_PHASE_COMPILE,
               "the public phases are the trainer's");

#define CK(c) ((ckpt *)(void *)(c))
#define CCK(c) ((const ckpt *)(const void *)(c))

af_checkpoint *af_checkpoint_new(void) { return (af_checkpoint *)(void *)ckpt_new(); }
void af_checkpoint_free(af_checkpoint *c) { ckpt_free(CK(c)); }

af_status af_checkpoint_save(const af_checkpoint *c, const char *path) {
    if (!c || !path) return ir_fail(AF_ERR_INVALID, "af_checkpoint_save: checkpoint and path must not be NULL");
    return ckpt_save(CCK(c), path);
}

af_status af_checkpoint_load(const char *path, af_checkpoint **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "af_checkpoint_load: out must not be NULL");
    ckpt *c = NULL;
    af_status st = ckpt_load(path, &c);
    *out = (af_checkpoint *)(void *)c;
    return st;
}

af_status af_checkpoint_put(af_checkpoint *c, const char *name, const void *data, int64_t bytes) {
    return ckpt_put(CK(c), name, data, bytes);
}
af_status af_checkpoint_put_i64(af_checkpoint *c, const char *name, int64_t v) { return ckpt_put_i64(CK(c), name, v); }
af_status af_checkpoint_put_str(af_checkpoint *c, const char *name, const char *s) { return ckpt_put_str(CK(c), name, s); }

const void *af_checkpoint_get(const af_checkpoint *c, const char *name, int64_t *bytes) {
    return ckpt_get(CCK(c), name, bytes);
}
af_status af_checkpoint_get_i64(const af_checkpoint *c, const char *name, int64_t *v) {
    return ckpt_get_i64(CCK(c), name, v);
}
const char *af_checkpoint_get_str(const af_checkpoint *c, const char *name) { return ckpt_get_str(CCK(c), name); }

af_status af_trainer_export(af_trainer *t, af_checkpoint *c) {
    if (!t || !c) return ir_fail(AF_ERR_INVALID, "af_trainer_export: trainer and checkpoint must not be NULL");
    return tr_export(t, CK(c));
}
af_status af_trainer_import(af_trainer *t, const af_checkpoint *c) {
    if (!t || !c) return ir_fail(AF_ERR_INVALID, "af_trainer_import: trainer and checkpoint must not be NULL");
    return tr_import(t, CCK(c));
}

void af_trainer_phase_seconds(const af_trainer *t, double out[AF_NPHASES]) {
    if (!out) return;
    if (!t) {
        memset(out, 0, sizeof(double) * AF_NPHASES);
        return;
    }
    tr_phase_seconds(t, out);
}

float af_trainer_loss_scale(const af_trainer *t) { return t ? t->scale : 0.0f; }
af_metric_source af_trainer_metric_source(const af_trainer *t) { return t ? t->metric_source : AF_METRIC_HOST_FP32; }
