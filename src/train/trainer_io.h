/* Trainer state in and out of checkpoints (the CLI adds its data position and RNG). */
#ifndef AF_TRAIN_TRAINER_IO_H
#define AF_TRAIN_TRAINER_IO_H
#include "train/ckpt.h"

af_status tr_export(af_trainer *t, ckpt *c);
af_status tr_import(af_trainer *t, const ckpt *c);
#endif
