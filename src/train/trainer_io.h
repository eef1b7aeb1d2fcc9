/* Trainer state in and out of checkpoints (the CLI adds its data position and RNG). */
#ifndef AF_TRAIN_TRAINER_IO_H
#define AF_TRAIN_TRAINER_IO_H
#include "train/ckpt.h"

#include <stdbool.h>

af_status tr_export(af_trainer *t, ckpt *c);
af_status tr_import(af_trainer *t, const ckpt *c);
/* AF_OK when the n floats at p (any alignment) are finite, and >= 0 when nonneg; else
 * AF_ERR_CORRUPT naming where, the record, the element and what to do. */
af_status tr_check_floats(const char *where, const char *name, const void *p, int64_t n, bool nonneg);
#endif
