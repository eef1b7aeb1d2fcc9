/* ane-sim's model of the A13/A14 crop-DMA ceiling on conv weight gradients (seed 000);
 * wgrad.c says where it applies and why. */
#ifndef AF_ANE_SIM_WGRAD_H
#define AF_ANE_SIM_WGRAD_H
#include "ir/ir.h"

/* For a matmul that computes a conv weight gradient from an im2col patch matrix with
 * width-offset windows (af_conv2d with kW > 1): which operand (0 or 1) is the patch
 * matrix. -1 for every other node. */
int ane_wgrad_operand(const af_tensor *t);
/* Recomputes the width-offset rows of such a matmul t (its result in out, its sources
 * ins) with its loss-scaled dy saturated past AF_ANE_CROP_MAX. */
void ane_wgrad_crop(const af_tensor *t, float *out, const float *const *ins);
#endif
