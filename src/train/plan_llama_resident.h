/* The resident plan's llama variant (plan_llama_resident.c), which the resident plan
 * (plan_resident.c) hands over to on a net that declares a llama config. */
#ifndef AF_TRAIN_PLAN_LLAMA_RESIDENT_H
#define AF_TRAIN_PLAN_LLAMA_RESIDENT_H
#include "train/core.h"

extern const tr_plan tr_plan_llama_resident;
#endif
