/* The plans by name and by id (registry.c). */
#ifndef AF_TRAIN_REGISTRY_H
#define AF_TRAIN_REGISTRY_H
#include "train/plan.h"

/* The plan registered for id, or NULL. */
const tr_plan *tr_plan_for(af_plan id);
#endif
