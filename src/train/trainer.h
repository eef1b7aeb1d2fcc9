/* The trainer, a thin driver over its plan (plan.h): trainer.c runs steps and
 * predictions, trainer_io.c creates and frees trainers and moves their state in and out
 * of checkpoints. The state itself and what plans share are in core.h. */
#ifndef AF_TRAIN_TRAINER_H
#define AF_TRAIN_TRAINER_H
#include "train/core.h"

/* The evaluation forward (its own weight inputs), built without compiling it; nothing
 * for plans with their own predict. */
af_status tr_build_eval_graph(af_trainer *t);
#endif
