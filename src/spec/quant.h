/* ggml's block quantizers (quant.c), shared by the reference and the
 * library (weights quantized when a layer is loaded). */
#ifndef VKA_QUANT_H
#define VKA_QUANT_H

#include "spec/dtype.h"

#include <stdint.h>

/* The largest |x| whose block scale f16 holds (q8_0: 65504 * 127; q4_0:
 * 65504 * 8; q5_0: 65504 * 16; iq4_nl: 65504 * 18; q4_1, q5_1: 65504, the
 * minimum being stored). */
float vka_quant_max_abs(vkattn_dtype dtype);

/* One block of VKA_QUANT_BLOCK finite values (|x| at most
 * vka_quant_max_abs) into vka_quant_block_bytes(dtype) bytes at `out`, as
 * ggml's quantize_row_<dtype>_ref do; any quantized dtype. */
void vka_quantize_block(vkattn_dtype dtype, const float *x, uint8_t *out);

/* One block back to its VKA_QUANT_BLOCK values, in f32 as the kernels read
 * them (d * q, d * q + m, d * T[q]). */
void vka_dequantize_block(vkattn_dtype dtype, const uint8_t *in, float *y);

#endif
