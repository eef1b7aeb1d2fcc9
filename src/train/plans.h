/* The plans (one file each, plan_*.c), as registry.c lists them. */
#ifndef AF_TRAIN_PLANS_H
#define AF_TRAIN_PLANS_H
#include "train/core.h"

extern const tr_plan tr_plan_host;          /* plan_host.c */
extern const tr_plan tr_plan_device;        /* plan_device.c */
extern const tr_plan tr_plan_resident;      /* plan_resident.c (on a llama: tr_plan_llama_resident) */
extern const tr_plan tr_plan_unrolled;      /* plan_resident.c */
extern const tr_plan tr_plan_pipeline;      /* plan_pipeline.c */
extern const tr_plan tr_plan_llama_resident;/* plan_llama_resident.c */
#endif
