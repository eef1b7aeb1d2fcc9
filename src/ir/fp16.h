/* IEEE binary16 conversion (round to nearest even, overflow to +-inf, NaN kept quiet). */
#ifndef AF_FP16_H
#define AF_FP16_H
#include <stdint.h>
#include "aneforge.h"

/* Rounds every element of x to the nearest fp16 value, in place. */
void ir_round_f16_array(float *x, int64_t n);
void ir_f32_to_f16_array(const float *x, uint16_t *h, int64_t n);
void ir_f16_to_f32_array(const uint16_t *h, float *x, int64_t n);
#endif
