/* ggml's nibble block formats on the CPU (quant_formats.c): q4_0, q4_1,
 * q5_0, q5_1 and iq4_nl; quant.h's vka_quantize_block /
 * vka_dequantize_block call these for those dtypes. */
#ifndef VKA_QUANT_FORMATS_H
#define VKA_QUANT_FORMATS_H

#include "spec/dtype.h"

#include <stdint.h>

/* 32 finite values into one block at `out`, as ggml's reference quantizer
 * of the format (q4_0, q4_1, q5_0, q5_1 or iq4_nl). */
void vka_quantize_block_format(vkattn_dtype format, const float *x, uint8_t *out);

/* One block of q4_0, q4_1, q5_0, q5_1 or iq4_nl back to its 32 values. */
void vka_dequantize_block_format(vkattn_dtype format, const uint8_t *in, float *y);

#endif
